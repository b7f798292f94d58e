/* Helpers shared by the emulated operator libraries (linked into each one,
 * hidden): element access through view strides, fp16/bf16 conversions,
 * pooling parameters, and the two-phase executor protocol. */
#ifndef PYACLNN_EMU_OPS_COMMON_H
#define PYACLNN_EMU_OPS_COMMON_H

#include "emu.h"

/* What phase 2 needs of a tensor: a copy taken at phase 1, so the
 * descriptor may be destroyed in between. */
typedef struct {
    char *data;
    aclDataType dtype;
    size_t itemsize;
    int ndim;
    int64_t dims[EMU_MAX_DIMS];
    int64_t strides[EMU_MAX_DIMS];
    int64_t offset;
    aclFormat format;
    size_t storage_bytes;
} emu_view;

/* fp16 / bf16 <-> fp32, round to nearest even. */
float emu_half_to_float(uint16_t h);
uint16_t emu_float_to_half(float f);
float emu_bf16_to_float(uint16_t b);
uint16_t emu_float_to_bf16(float f);

const char *emu_dtype_name(aclDataType dtype);
void emu_snapshot(emu_view *v, const aclTensor *t);
int64_t emu_numel(const emu_view *v);

/* Element at `elem` elements past the view's offset (floats widened
 * exactly; for float16/bfloat16/float32 the result is a float value). */
double emu_load(const emu_view *v, int64_t elem);
/* Store: float16/bfloat16/float32 round (float)value once; double as is. */
void emu_store(const emu_view *v, int64_t elem, double value);
int64_t emu_load_index(const emu_view *v, int64_t elem);
void emu_store_index(const emu_view *v, int64_t elem, int64_t value);
/* Integer and bool elements exactly (floats truncated toward zero); a store
 * into a narrower integer wraps, into bool stores value != 0. */
int64_t emu_load_i64(const emu_view *v, int64_t elem);
void emu_store_i64(const emu_view *v, int64_t elem, int64_t value);
int64_t emu_double_to_i64(double value);
int emu_is_int_dtype(aclDataType dtype); /* the integer types and bool */
int emu_is_float_dtype(aclDataType dtype);
/* The value of a scalar descriptor, as double or exactly as an integer. */
double emu_scalar_f64(const aclScalar *s);
int64_t emu_scalar_i64(const aclScalar *s);

/* Shapes. emu_walk: element offset of the `linear`-th index of a row-major
 * walk over dims with the given strides. emu_broadcast_shape: the broadcast
 * shape of a and b (-1 if they do not broadcast). emu_broadcasts_to: whether
 * t broadcasts to dims. emu_bcast_strides: v's strides aligned to the right
 * of dims, 0 on broadcast axes. */
int64_t emu_walk(int ndim, const int64_t *dims, const int64_t *strides, int64_t linear);
int emu_broadcast_shape(const aclTensor *a, const aclTensor *b, int *ndim, int64_t dims[EMU_MAX_DIMS]);
int emu_broadcasts_to(const aclTensor *t, int ndim, const int64_t *dims);
void emu_bcast_strides(const emu_view *v, int ndim, const int64_t *dims, int64_t strides[EMU_MAX_DIMS]);
int64_t emu_tensor_numel(const aclTensor *t);

/* The data types the math operators take: FLOAT, FLOAT16, BF16, DOUBLE,
 * INT8, UINT8, INT16, INT32, INT64, BOOL. */
int emu_is_basic_dtype(aclDataType dtype);
/* torch's result type of two tensors (bool < integers < floating). */
aclDataType emu_promote(aclDataType a, aclDataType b);
/* Whether a result of type `from` may be written to an out of type `to`
 * (torch's can_cast: no floating -> integer, no number -> bool). */
int emu_can_cast(aclDataType from, aclDataType to);
/* dst[doff] = src[soff] converted (integers exactly, floats rounded once). */
void emu_convert(const emu_view *src, int64_t soff, const emu_view *dst, int64_t doff);
/* A live list (161001 NULL, 161002 not live) whose elements are all live tensors
 * (161002 naming arg[i]). */
aclnnStatus emu_check_tensor_list(const char *api, const char *arg, const aclTensorList *list);
/* Executors of the math operators: a flat array of snapshotted views. */
typedef struct {
    aclOpExecutor base;
    int nviews;
    emu_view *views;
    const char **names;
} emu_multi_exec;
/* calloc'ed executor of `size` bytes (>= sizeof(emu_multi_exec)) with room for n views;
 * NULL (message set) when out of memory. release frees views, names and the struct. */
emu_multi_exec *emu_multi_new(const char *api, const char *op_name, size_t size, int n);
int emu_multi_views(const aclOpExecutor *ex, const char *names[], const emu_view *views[]);

/* Phase-1 helpers; each sets the recent error message on failure. */
/* NULL checks of all n arguments first (161001), then liveness of each
 * (161002); kinds[i] is an EMU_* handle kind (tensor, arrays, scalar, lists). */
aclnnStatus emu_check_args(const char *api, int n, const char *const names[], const void *const ptrs[],
                           const int kinds[]);
/* 161001 if workspaceSize or executor is NULL; otherwise zeroes both. */
aclnnStatus emu_check_outputs(const char *api, uint64_t *workspace_size, aclOpExecutor **executor);
/* Canonical (n, c, d, h, w) dims and element strides of a 4-D (C,D,H,W)
 * or 5-D view; perm maps canonical axes to view axes (5-D only). */
void emu_canon5(const emu_view *v, const int perm[5], int64_t dims[5], int64_t strides[5]);
aclnnStatus emu_check_tensor(const char *api, const char *arg, const aclTensor *t);
aclnnStatus emu_check_int_array(const char *api, const char *arg, const aclIntArray *a);
int emu_same_shape(const aclTensor *a, const aclTensor *b);
void emu_shape_str(const aclTensor *t, char *buf, size_t n);
int emu_is_private_format(aclFormat format);

typedef struct {
    int64_t k[3], s[3], p[3], d[3];
} emu_pool_params;

/* docs/operator-semantics.md, Pooling parameters: lengths and values. */
aclnnStatus emu_pool_params_parse(const char *api, const aclIntArray *kernel, const aclIntArray *stride,
                                  const aclIntArray *padding, const aclIntArray *dilation, emu_pool_params *out);
int64_t emu_pool_out_size(int64_t len, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode);

/* Register a freshly built executor (first member of the op's snapshot). */
aclnnStatus emu_executor_publish(const char *api, aclOpExecutor *ex, aclOpExecutor **out);

/* Phase-2 prologue. Returns ACLNN_SUCCESS with *run = 1 when the op must
 * compute (then *owned says whether the executor is consumed by this call),
 * ACLNN_SUCCESS with *run = 0 for the no-op of an empty phase 1, or an
 * error status (a non-repeatable executor is then already released). */
aclnnStatus emu_phase2_begin(const char *api, const char *op_name, void *workspace, uint64_t workspace_size,
                             aclOpExecutor *ex, aclrtStream stream, int *run, int *owned);

/* An op's list of the views its executor snapshotted (name as the C
 * argument, view); returns how many. With names NULL it only counts. */
typedef int (*emu_views_fn)(const aclOpExecutor *ex, const char *names[], const emu_view *views[]);
/* An op's kernel: runs on the stream's worker; device errors go to
 * pyaclnnEmuTaskFail(task, ...). */
typedef void (*emu_kernel_fn)(aclOpExecutor *ex, emu_task *task);
/* Helper of emu_views_fn implementations: copies n names and views out. */
int emu_views(int n, const char *const names_in[], const emu_view *const views_in[], const char *names[],
              const emu_view *views[]);

/* The whole phase 2: emu_phase2_begin's checks, then the launch-time memory
 * checks (a view's memory freed since phase 1: 361001), then the kernel is
 * queued on the stream and the call returns. The queued launch holds the
 * executor (a consumed one is freed after it ran). */
aclnnStatus emu_phase2_launch(const char *api, const char *op_name, void *workspace, uint64_t workspace_size,
                              aclOpExecutor *ex, aclrtStream stream, emu_views_fn views, emu_kernel_fn kernel);

#endif
