/* Shared helpers of the emulated operators; see ops_common.h. */
#include "ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- fp16 / bf16 ------------------------------------------------------- */

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float emu_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;
    if (exp == 0x1F) {
        return bits_float(sign | 0x7F800000u | (mant << 13));
    }
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24, exact in float */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t emu_float_to_half(float f)
{
    uint32_t x = float_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7FFFFFFFu;
    if (ax >= 0x7F800000u) { /* inf or NaN (NaN stays quiet NaN) */
        return (uint16_t)(sign | (ax > 0x7F800000u ? 0x7E00u : 0x7C00u));
    }
    if (ax >= 0x477FF000u) { /* >= 65520 rounds to infinity */
        return (uint16_t)(sign | 0x7C00u);
    }
    if (ax < 0x38800000u) { /* below 2^-14: subnormal half; the product is exact */
        float scaled = bits_float(ax) * 0x1p24f;
        return (uint16_t)(sign | (uint16_t)nearbyintf(scaled));
    }
    /* normal: add the rounding bias (ties to even), then rebias the exponent */
    ax += 0xFFFu + ((ax >> 13) & 1u);
    return (uint16_t)(sign | ((ax - 0x38000000u) >> 13));
}

float emu_bf16_to_float(uint16_t b) { return bits_float((uint32_t)b << 16); }

uint16_t emu_float_to_bf16(float f)
{
    uint32_t x = float_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) {
        return (uint16_t)((x >> 16) | 0x0040u); /* quiet NaN */
    }
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* ---- views -------------------------------------------------------------- */

const char *emu_dtype_name(aclDataType dtype)
{
    switch (dtype) {
    case ACL_FLOAT: return "FLOAT";
    case ACL_FLOAT16: return "FLOAT16";
    case ACL_BF16: return "BF16";
    case ACL_DOUBLE: return "DOUBLE";
    case ACL_INT32: return "INT32";
    case ACL_INT64: return "INT64";
    case ACL_INT8: return "INT8";
    case ACL_UINT8: return "UINT8";
    case ACL_INT16: return "INT16";
    case ACL_UINT16: return "UINT16";
    case ACL_UINT32: return "UINT32";
    case ACL_UINT64: return "UINT64";
    case ACL_BOOL: return "BOOL";
    default: return "another type";
    }
}

void emu_snapshot(emu_view *v, const aclTensor *t)
{
    memset(v, 0, sizeof *v);
    v->data = t->data;
    v->dtype = t->dtype;
    v->itemsize = aclDataTypeSize(t->dtype);
    v->ndim = t->ndim;
    memcpy(v->dims, t->dims, sizeof v->dims);
    memcpy(v->strides, t->strides, sizeof v->strides);
    v->offset = t->offset;
    v->format = t->format;
    size_t elems = 1;
    for (int i = 0; i < t->storage_ndim; i++) {
        elems *= (size_t)t->storage_dims[i];
    }
    v->storage_bytes = elems * v->itemsize;
}

int64_t emu_numel(const emu_view *v)
{
    int64_t n = 1;
    for (int i = 0; i < v->ndim; i++) {
        n *= v->dims[i];
    }
    return n;
}

double emu_load(const emu_view *v, int64_t elem)
{
    const char *p = v->data + (v->offset + elem) * (int64_t)v->itemsize;
    switch (v->dtype) {
    case ACL_FLOAT: {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    case ACL_FLOAT16: {
        uint16_t h;
        memcpy(&h, p, sizeof h);
        return emu_half_to_float(h);
    }
    case ACL_BF16: {
        uint16_t b;
        memcpy(&b, p, sizeof b);
        return emu_bf16_to_float(b);
    }
    case ACL_DOUBLE: {
        double d;
        memcpy(&d, p, sizeof d);
        return d;
    }
    default:
        return (double)emu_load_i64(v, elem);
    }
}

void emu_store(const emu_view *v, int64_t elem, double value)
{
    char *p = v->data + (v->offset + elem) * (int64_t)v->itemsize;
    switch (v->dtype) {
    case ACL_FLOAT: {
        float f = (float)value;
        memcpy(p, &f, sizeof f);
        break;
    }
    case ACL_FLOAT16: {
        uint16_t h = emu_float_to_half((float)value);
        memcpy(p, &h, sizeof h);
        break;
    }
    case ACL_BF16: {
        uint16_t b = emu_float_to_bf16((float)value);
        memcpy(p, &b, sizeof b);
        break;
    }
    case ACL_DOUBLE:
        memcpy(p, &value, sizeof value);
        break;
    default:
        if (v->dtype == ACL_BOOL) {
            emu_store_i64(v, elem, value != 0); /* NaN is true, as torch casts it */
        } else {
            emu_store_i64(v, elem, emu_double_to_i64(value));
        }
        break;
    }
}

int emu_is_int_dtype(aclDataType dtype)
{
    switch (dtype) {
    case ACL_INT8:
    case ACL_UINT8:
    case ACL_INT16:
    case ACL_UINT16:
    case ACL_INT32:
    case ACL_UINT32:
    case ACL_INT64:
    case ACL_UINT64:
    case ACL_BOOL:
        return 1;
    default:
        return 0;
    }
}

int emu_is_float_dtype(aclDataType dtype)
{
    return dtype == ACL_FLOAT || dtype == ACL_FLOAT16 || dtype == ACL_BF16 || dtype == ACL_DOUBLE;
}

int64_t emu_double_to_i64(double value)
{
    /* Truncation toward zero; NaN gives 0 and values out of range saturate (C leaves both undefined). */
    if (isnan(value)) {
        return 0;
    }
    if (value >= 9223372036854775807.0) {
        return INT64_MAX;
    }
    if (value <= -9223372036854775808.0) {
        return INT64_MIN;
    }
    return (int64_t)value;
}

int64_t emu_load_i64(const emu_view *v, int64_t elem)
{
    const char *p = v->data + (v->offset + elem) * (int64_t)v->itemsize;
    switch (v->dtype) {
    case ACL_INT8: return *(const int8_t *)p;
    case ACL_UINT8: return *(const uint8_t *)p;
    case ACL_BOOL: return *(const uint8_t *)p != 0;
    case ACL_INT16: {
        int16_t x;
        memcpy(&x, p, sizeof x);
        return x;
    }
    case ACL_UINT16: {
        uint16_t x;
        memcpy(&x, p, sizeof x);
        return x;
    }
    case ACL_INT32: {
        int32_t x;
        memcpy(&x, p, sizeof x);
        return x;
    }
    case ACL_UINT32: {
        uint32_t x;
        memcpy(&x, p, sizeof x);
        return x;
    }
    case ACL_INT64:
    case ACL_UINT64: {
        int64_t x;
        memcpy(&x, p, sizeof x);
        return x;
    }
    default:
        return emu_is_float_dtype(v->dtype) ? emu_double_to_i64(emu_load(v, elem)) : 0;
    }
}

void emu_store_i64(const emu_view *v, int64_t elem, int64_t value)
{
    char *p = v->data + (v->offset + elem) * (int64_t)v->itemsize;
    /* Narrower integers wrap (two's complement), as torch's casts do. */
    uint64_t u = (uint64_t)value;
    switch (v->dtype) {
    case ACL_INT8:
    case ACL_UINT8:
        *(uint8_t *)p = (uint8_t)u;
        break;
    case ACL_BOOL:
        *(uint8_t *)p = value != 0;
        break;
    case ACL_INT16:
    case ACL_UINT16: {
        uint16_t x = (uint16_t)u;
        memcpy(p, &x, sizeof x);
        break;
    }
    case ACL_INT32:
    case ACL_UINT32: {
        uint32_t x = (uint32_t)u;
        memcpy(p, &x, sizeof x);
        break;
    }
    case ACL_INT64:
    case ACL_UINT64:
        memcpy(p, &value, sizeof value);
        break;
    default:
        if (emu_is_float_dtype(v->dtype)) {
            emu_store(v, elem, (double)value);
        }
        break;
    }
}

/* ---- shapes, broadcasting, walks ----------------------------------------- */

int64_t emu_walk(int ndim, const int64_t *dims, const int64_t *strides, int64_t linear)
{
    int64_t at = 0;
    for (int i = ndim - 1; i >= 0; i--) {
        if (dims[i] > 0) {
            at += (linear % dims[i]) * strides[i];
            linear /= dims[i];
        }
    }
    return at;
}

int emu_broadcast_shape(const aclTensor *a, const aclTensor *b, int *ndim, int64_t dims[EMU_MAX_DIMS])
{
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < n; i++) {
        int ia = a->ndim - n + i, ib = b->ndim - n + i;
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            return -1;
        }
        dims[i] = da == 1 ? db : da;
    }
    *ndim = n;
    return 0;
}

int emu_broadcasts_to(const aclTensor *t, int ndim, const int64_t *dims)
{
    if (t->ndim > ndim) {
        return 0;
    }
    for (int i = 0; i < t->ndim; i++) {
        int64_t d = t->dims[i], want = dims[ndim - t->ndim + i];
        if (d != want && d != 1) {
            return 0;
        }
    }
    return 1;
}

void emu_bcast_strides(const emu_view *v, int ndim, const int64_t *dims, int64_t strides[EMU_MAX_DIMS])
{
    for (int i = 0; i < ndim; i++) {
        int iv = v->ndim - ndim + i;
        strides[i] = (iv < 0 || (v->dims[iv] == 1 && dims[i] != 1)) ? 0 : v->strides[iv];
    }
}

int64_t emu_tensor_numel(const aclTensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        n *= t->dims[i];
    }
    return n;
}

double emu_scalar_f64(const aclScalar *s)
{
    emu_view v;
    memset(&v, 0, sizeof v);
    v.data = (char *)s->value;
    v.dtype = s->dtype;
    v.itemsize = aclDataTypeSize(s->dtype);
    return emu_load(&v, 0);
}

int64_t emu_scalar_i64(const aclScalar *s)
{
    emu_view v;
    memset(&v, 0, sizeof v);
    v.data = (char *)s->value;
    v.dtype = s->dtype;
    v.itemsize = aclDataTypeSize(s->dtype);
    return emu_load_i64(&v, 0);
}

int64_t emu_load_index(const emu_view *v, int64_t elem)
{
    const char *p = v->data + (v->offset + elem) * (int64_t)v->itemsize;
    if (v->dtype == ACL_INT64) {
        int64_t i;
        memcpy(&i, p, sizeof i);
        return i;
    }
    int32_t i;
    memcpy(&i, p, sizeof i);
    return i;
}

void emu_store_index(const emu_view *v, int64_t elem, int64_t value)
{
    char *p = v->data + (v->offset + elem) * (int64_t)v->itemsize;
    if (v->dtype == ACL_INT64) {
        memcpy(p, &value, sizeof value);
    } else {
        int32_t i = (int32_t)value;
        memcpy(p, &i, sizeof i);
    }
}

/* ---- phase-1 checks ----------------------------------------------------- */

static const char *kind_name(int kind)
{
    switch (kind) {
    case EMU_TENSOR: return "aclTensor";
    case EMU_INT_ARRAY: return "aclIntArray";
    case EMU_BOOL_ARRAY: return "aclBoolArray";
    case EMU_FLOAT_ARRAY: return "aclFloatArray";
    case EMU_SCALAR: return "aclScalar";
    case EMU_TENSOR_LIST: return "aclTensorList";
    case EMU_SCALAR_LIST: return "aclScalarList";
    default: return "handle";
    }
}

aclnnStatus emu_check_args(const char *api, int n, const char *const names[], const void *const ptrs[],
                           const int kinds[])
{
    for (int i = 0; i < n; i++) {
        if (ptrs[i] == NULL) {
            pyaclnnEmuSetError("%s: %s is NULL; expected an %s", api, names[i], kind_name(kinds[i]));
            return ACLNN_ERR_PARAM_NULLPTR;
        }
    }
    int i = pyaclnnEmuHandlesLive(n, kinds, ptrs);
    if (i >= 0) {
        pyaclnnEmuSetError("%s: %s %p is not a live %s (destroyed, or never created)", api, names[i], ptrs[i],
                           kind_name(kinds[i]));
        return ACLNN_ERR_PARAM_INVALID;
    }
    return ACLNN_SUCCESS;
}

aclnnStatus emu_check_outputs(const char *api, uint64_t *workspace_size, aclOpExecutor **executor)
{
    if (workspace_size == NULL || executor == NULL) {
        pyaclnnEmuSetError("%s: %s is NULL", api, workspace_size == NULL ? "workspaceSize" : "executor");
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    *workspace_size = 0;
    *executor = NULL;
    return ACLNN_SUCCESS;
}

void emu_canon5(const emu_view *v, const int perm[5], int64_t dims[5], int64_t strides[5])
{
    if (v->ndim == 4) { /* (C, D, H, W): a batch of one */
        dims[0] = 1;
        strides[0] = 0;
        for (int i = 0; i < 4; i++) {
            dims[i + 1] = v->dims[i];
            strides[i + 1] = v->strides[i];
        }
        return;
    }
    for (int i = 0; i < 5; i++) {
        dims[i] = v->dims[perm[i]];
        strides[i] = v->strides[perm[i]];
    }
}

aclnnStatus emu_check_tensor(const char *api, const char *arg, const aclTensor *t)
{
    if (t == NULL) {
        pyaclnnEmuSetError("%s: %s is NULL; expected an aclTensor", api, arg);
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    if (!pyaclnnEmuHandleIsLive(EMU_TENSOR, t)) {
        pyaclnnEmuSetError("%s: %s %p is not a live aclTensor (destroyed, or never created)", api, arg,
                           (const void *)t);
        return ACLNN_ERR_PARAM_INVALID;
    }
    return ACLNN_SUCCESS;
}

aclnnStatus emu_check_int_array(const char *api, const char *arg, const aclIntArray *a)
{
    if (a == NULL) {
        pyaclnnEmuSetError("%s: %s is NULL; expected an aclIntArray", api, arg);
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    if (!pyaclnnEmuHandleIsLive(EMU_INT_ARRAY, a)) {
        pyaclnnEmuSetError("%s: %s %p is not a live aclIntArray (destroyed, or never created)", api, arg,
                           (const void *)a);
        return ACLNN_ERR_PARAM_INVALID;
    }
    return ACLNN_SUCCESS;
}

int emu_same_shape(const aclTensor *a, const aclTensor *b)
{
    if (a->ndim != b->ndim) {
        return 0;
    }
    for (int i = 0; i < a->ndim; i++) {
        if (a->dims[i] != b->dims[i]) {
            return 0;
        }
    }
    return 1;
}

void emu_shape_str(const aclTensor *t, char *buf, size_t n)
{
    size_t used = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < t->ndim && used < n; i++) {
        used += (size_t)snprintf(buf + used, n - used, i ? ", %lld" : "%lld", (long long)t->dims[i]);
    }
    if (used < n) {
        snprintf(buf + used, n - used, ")");
    }
}

int emu_is_private_format(aclFormat format)
{
    switch (format) {
    case ACL_FORMAT_NC1HWC0:
    case ACL_FORMAT_FRACTAL_Z:
    case ACL_FORMAT_NC1HWC0_C04:
    case ACL_FORMAT_FRACTAL_NZ:
    case ACL_FORMAT_NDC1HWC0:
    case ACL_FRACTAL_Z_3D:
        return 1;
    default:
        return 0;
    }
}

static aclnnStatus expand3(const char *api, const char *arg, const aclIntArray *a, int allow_empty,
                           const int64_t *if_empty, int64_t min_value, int64_t out[3])
{
    if (a->size == 0 && allow_empty) {
        memcpy(out, if_empty, 3 * sizeof *out);
        return ACLNN_SUCCESS;
    }
    if (a->size != 1 && a->size != 3) {
        pyaclnnEmuSetError("%s: %s has %llu values; it must have %s", api, arg, (unsigned long long)a->size,
                           allow_empty ? "0, 1 or 3" : "1 or 3");
        return ACLNN_ERR_PARAM_INVALID;
    }
    for (int i = 0; i < 3; i++) {
        out[i] = a->values[a->size == 1 ? 0 : i];
        if (out[i] < min_value) {
            pyaclnnEmuSetError("%s: %s[%d] = %lld; every value must be %s", api, arg, a->size == 1 ? 0 : i,
                               (long long)out[i], min_value > 0 ? "> 0" : ">= 0");
            return ACLNN_ERR_PARAM_INVALID;
        }
    }
    return ACLNN_SUCCESS;
}

aclnnStatus emu_pool_params_parse(const char *api, const aclIntArray *kernel, const aclIntArray *stride,
                                  const aclIntArray *padding, const aclIntArray *dilation, emu_pool_params *out)
{
    aclnnStatus rc = expand3(api, "kernelSize", kernel, 0, NULL, 1, out->k);
    if (rc == ACLNN_SUCCESS) {
        rc = expand3(api, "stride", stride, 1, out->k, 1, out->s); /* empty stride = kernel */
    }
    if (rc == ACLNN_SUCCESS) {
        rc = expand3(api, "padding", padding, 0, NULL, 0, out->p);
    }
    for (int i = 0; rc == ACLNN_SUCCESS && i < 3; i++) {
        if (out->p[i] > out->k[i] / 2) {
            pyaclnnEmuSetError("%s: padding[%d] = %lld exceeds kernelSize[%d] / 2 = %lld", api, i,
                               (long long)out->p[i], i, (long long)(out->k[i] / 2));
            rc = ACLNN_ERR_PARAM_INVALID;
        }
    }
    if (rc == ACLNN_SUCCESS) {
        rc = expand3(api, "dilation", dilation, 0, NULL, 1, out->d);
    }
    return rc;
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

int64_t emu_pool_out_size(int64_t len, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode)
{
    int64_t out = floor_div(len + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0), s) + 1;
    if (ceil_mode && (out - 1) * s >= len + p) {
        out--; /* a window may not start inside the right padding */
    }
    return out;
}

/* ---- executors ---------------------------------------------------------- */

aclnnStatus emu_executor_publish(const char *api, aclOpExecutor *ex, aclOpExecutor **out)
{
    if (pyaclnnEmuHandleAdd(EMU_EXECUTOR, ex) != 0) {
        ex->release(ex);
        pyaclnnEmuSetError("%s: out of host memory for the executor", api);
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    *out = ex;
    return ACLNN_SUCCESS;
}

aclnnStatus emu_phase2_begin(const char *api, const char *op_name, void *workspace, uint64_t workspace_size,
                             aclOpExecutor *ex, aclrtStream stream, int *run, int *owned)
{
    *run = 0;
    *owned = 0;
    if (ex == NULL) {
        if (workspace_size == 0) {
            return ACLNN_SUCCESS; /* phase 1 found nothing to do */
        }
        pyaclnnEmuSetError("%s: executor is NULL but workspaceSize is %llu", api,
                           (unsigned long long)workspace_size);
        return ACLNN_ERR_INNER_NULLPTR;
    }
    if (!pyaclnnEmuHandleIsLive(EMU_EXECUTOR, ex)) {
        pyaclnnEmuSetError("%s: executor %p is not live (a non-repeatable executor is consumed by its first "
                           "second-phase call; destroyed; or never created)",
                           api, (void *)ex);
        return ACLNN_ERR_INNER_NULLPTR;
    }
    if (strcmp(ex->op_name, op_name) != 0) {
        pyaclnnEmuSetError("%s: executor %p was made by %sGetWorkspaceSize, not by %sGetWorkspaceSize", api,
                           (void *)ex, ex->op_name, op_name);
        return ACLNN_ERR_PARAM_INVALID;
    }
    int acquired = pyaclnnEmuHandleAcquire(EMU_EXECUTOR, ex);
    if (acquired < 0) {
        pyaclnnEmuSetError("%s: executor %p was consumed concurrently", api, (void *)ex);
        return ACLNN_ERR_INNER_NULLPTR;
    }
    int own = acquired == 0;
    aclnnStatus rc = ACLNN_SUCCESS;
    /* The runtime's checks of the stream (no current device: ACL_ERROR_RT_CONTEXT_NULL; another
     * device's stream: ACL_ERROR_RT_STREAM_CONTEXT; the message names the code): 361001, as
     * CANN's aclnn returns ACLNN_ERR_RUNTIME_ERROR for a failed launch. */
    if (pyaclnnEmuStreamCheck(api, stream) != ACL_SUCCESS) {
        rc = ACLNN_ERR_RUNTIME_ERROR;
    } else if (ex->workspace > 0 && (workspace == NULL || workspace_size < ex->workspace)) {
        pyaclnnEmuSetError("%s: workspace %p of %llu bytes given; phase 1 asked for %llu bytes", api, workspace,
                           (unsigned long long)workspace_size, (unsigned long long)ex->workspace);
        rc = ACLNN_ERR_PARAM_INVALID;
    } else if (ex->workspace > 0 && !pyaclnnEmuDeviceRange(workspace, (size_t)ex->workspace)) {
        pyaclnnEmuSetError("%s: workspace %p (%llu bytes needed) is not inside one live aclrtMalloc allocation",
                           api, workspace, (unsigned long long)ex->workspace);
        rc = ACLNN_ERR_PARAM_INVALID;
    }
    if (rc != ACLNN_SUCCESS) {
        if (own) {
            ex->release(ex); /* the second phase frees a non-repeatable executor, also when it fails */
        }
        return rc;
    }
    *run = 1;
    *owned = own;
    return ACLNN_SUCCESS;
}

int emu_views(int n, const char *const names_in[], const emu_view *const views_in[], const char *names[],
              const emu_view *views[])
{
    if (names == NULL) {
        return n; /* the count only */
    }
    for (int i = 0; i < n; i++) {
        names[i] = names_in[i];
        views[i] = views_in[i];
    }
    return n;
}

/* What a queued launch runs: the op's kernel on its executor. */
typedef struct {
    aclOpExecutor *ex;
    emu_kernel_fn kernel;
} emu_launch;

static void run_launch(void *ctx, emu_task *task)
{
    emu_launch *launch = ctx;
    launch->kernel(launch->ex, task);
}

static void release_launch(void *ctx)
{
    emu_launch *launch = ctx;
    pyaclnnEmuExecutorUnhold(launch->ex);
    pyaclnnEmuFree(launch);
}

/* The launch-time memory checks: every snapshotted view and the workspace
 * must still be allocated; the task then uses them (freeing them before it
 * ran is a hazard). */
static aclnnStatus use_memory(const char *api, emu_task *task, const aclOpExecutor *ex, emu_views_fn list,
                              void *workspace)
{
    /* On the stack for the usual few views (no allocation per launch); lists may need more, in
     * one allocation for the four arrays (all of pointer size). */
    const char *names_here[16];
    const emu_view *views_here[16];
    const void *ptrs_here[16];
    size_t sizes_here[16];
    const char **names = names_here;
    const emu_view **views = views_here;
    const void **ptrs = ptrs_here;
    size_t *sizes = sizes_here;
    int n = list(ex, NULL, NULL);
    void *heap = NULL;
    if (n > 16) {
        heap = malloc((size_t)n * (sizeof *names + sizeof *views + sizeof *ptrs + sizeof *sizes));
        if (heap == NULL) {
            pyaclnnEmuSetError("%s: out of host memory for the launch", api);
            return ACLNN_ERR_INNER;
        }
        names = heap;
        views = (const emu_view **)(names + n);
        ptrs = (const void **)(views + n);
        sizes = (size_t *)(ptrs + n);
    }
    list(ex, names, views);
    for (int i = 0; i < n; i++) {
        ptrs[i] = views[i]->data;
        sizes[i] = views[i]->storage_bytes;
    }
    int failed = 0;
    int used = pyaclnnEmuTaskUseAll(task, n, ptrs, sizes, &failed); /* (one taking of the lock) */
    if (used == 0) {
        pyaclnnEmuSetError("%s: the memory of %s (%p) was freed after phase 1", api, names[failed],
                           (void *)views[failed]->data);
    }
    pyaclnnEmuFree(heap);
    if (used == 0) {
        return ACLNN_ERR_RUNTIME_ERROR;
    }
    if (used == 1 && ex->workspace > 0) {
        used = pyaclnnEmuTaskUse(task, workspace, (size_t)ex->workspace);
        if (used == 0) {
            pyaclnnEmuSetError("%s: workspace %p is not inside one live aclrtMalloc allocation", api, workspace);
            return ACLNN_ERR_PARAM_INVALID;
        }
    }
    if (used < 0) {
        pyaclnnEmuSetError("%s: out of host memory for the launch", api);
        return ACLNN_ERR_INNER;
    }
    return ACLNN_SUCCESS;
}

aclnnStatus emu_phase2_launch(const char *api, const char *op_name, void *workspace, uint64_t workspace_size,
                              aclOpExecutor *ex, aclrtStream stream, emu_views_fn views, emu_kernel_fn kernel)
{
    int run, owned;
    aclnnStatus rc = emu_phase2_begin(api, op_name, workspace, workspace_size, ex, stream, &run, &owned);
    if (rc != ACLNN_SUCCESS || !run) {
        return rc;
    }
    emu_launch *launch = malloc(sizeof *launch);
    if (launch == NULL) {
        if (owned) {
            ex->release(ex);
        }
        pyaclnnEmuSetError("%s: out of host memory for the launch", api);
        return ACLNN_ERR_INNER;
    }
    *launch = (emu_launch){ex, kernel};
    pyaclnnEmuExecutorHold(ex);
    if (owned) {
        pyaclnnEmuExecutorDispose(ex, NULL); /* consumed: freed once the launch has run (or is dropped) */
    }
    emu_task *task = pyaclnnEmuKernelNew(api, run_launch, release_launch, launch);
    if (task == NULL) {
        pyaclnnEmuSetError("%s: out of host memory for the launch", api);
        return ACLNN_ERR_INNER;
    }
    rc = use_memory(api, task, ex, views, workspace);
    if (rc != ACLNN_SUCCESS) {
        pyaclnnEmuTaskDiscard(task);
        return rc;
    }
    /* The stream was live in emu_phase2_begin; it may have gone since. */
    return pyaclnnEmuTaskSubmit(task, stream) == ACL_SUCCESS ? ACLNN_SUCCESS : ACLNN_ERR_RUNTIME_ERROR;
}

/* ---- the math operators' shared rules ------------------------------------ */

int emu_is_basic_dtype(aclDataType dtype)
{
    switch (dtype) {
    case ACL_FLOAT:
    case ACL_FLOAT16:
    case ACL_BF16:
    case ACL_DOUBLE:
    case ACL_INT8:
    case ACL_UINT8:
    case ACL_INT16:
    case ACL_INT32:
    case ACL_INT64:
    case ACL_BOOL:
        return 1;
    default:
        return 0;
    }
}

/* Rank in torch's promotion lattice within one category. */
static int int_rank(aclDataType t)
{
    switch (t) {
    case ACL_BOOL: return 0;
    case ACL_UINT8: return 1;
    case ACL_INT8: return 1;
    case ACL_INT16: return 2;
    case ACL_INT32: return 3;
    default: return 4; /* INT64 */
    }
}

aclDataType emu_promote(aclDataType a, aclDataType b)
{
    if (a == b) {
        return a;
    }
    int fa = emu_is_float_dtype(a), fb = emu_is_float_dtype(b);
    if (fa && !fb) {
        return a;
    }
    if (fb && !fa) {
        return b;
    }
    if (fa && fb) {
        if (a == ACL_DOUBLE || b == ACL_DOUBLE) {
            return ACL_DOUBLE;
        }
        return ACL_FLOAT; /* FLOAT with anything, or FLOAT16 with BF16 */
    }
    if ((a == ACL_UINT8 && b == ACL_INT8) || (a == ACL_INT8 && b == ACL_UINT8)) {
        return ACL_INT16;
    }
    return int_rank(a) >= int_rank(b) ? a : b;
}

int emu_can_cast(aclDataType from, aclDataType to)
{
    if (emu_is_float_dtype(from) && !emu_is_float_dtype(to)) {
        return 0;
    }
    if (from != ACL_BOOL && to == ACL_BOOL) {
        return 0;
    }
    return 1;
}

void emu_convert(const emu_view *src, int64_t soff, const emu_view *dst, int64_t doff)
{
    if (emu_is_int_dtype(src->dtype)) {
        int64_t i = emu_load_i64(src, soff);
        if (emu_is_int_dtype(dst->dtype)) {
            emu_store_i64(dst, doff, i);
        } else {
            emu_store(dst, doff, (double)i);
        }
        return;
    }
    emu_store(dst, doff, emu_load(src, soff));
}

aclnnStatus emu_check_tensor_list(const char *api, const char *arg, const aclTensorList *list)
{
    if (list == NULL) {
        pyaclnnEmuSetError("%s: %s is NULL; expected an aclTensorList", api, arg);
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    if (!pyaclnnEmuHandleIsLive(EMU_TENSOR_LIST, list)) {
        pyaclnnEmuSetError("%s: %s %p is not a live aclTensorList (destroyed, or never created)", api, arg,
                           (const void *)list);
        return ACLNN_ERR_PARAM_INVALID;
    }
    for (uint64_t i = 0; i < list->size; i++) {
        if (!pyaclnnEmuHandleIsLive(EMU_TENSOR, list->values[i])) {
            pyaclnnEmuSetError("%s: %s[%llu] %p is not a live aclTensor (destroyed, or never created)", api, arg,
                               (unsigned long long)i, (const void *)list->values[i]);
            return ACLNN_ERR_PARAM_INVALID;
        }
    }
    return ACLNN_SUCCESS;
}

static void release_multi(aclOpExecutor *base)
{
    emu_multi_exec *ex = (emu_multi_exec *)base;
    pyaclnnEmuFree(ex->views);
    pyaclnnEmuFree(ex->names);
    pyaclnnEmuFree(ex);
}

emu_multi_exec *emu_multi_new(const char *api, const char *op_name, size_t size, int n)
{
    emu_multi_exec *ex = calloc(1, size);
    emu_view *views = calloc((size_t)n + 1, sizeof *views);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    if (ex == NULL || views == NULL || names == NULL) {
        pyaclnnEmuFree(ex);
        pyaclnnEmuFree(views);
        pyaclnnEmuFree(names);
        pyaclnnEmuSetError("%s: out of host memory", api);
        return NULL;
    }
    ex->base = (aclOpExecutor){op_name, 0, release_multi, 0, 0};
    ex->nviews = n;
    ex->views = views;
    ex->names = names;
    return ex;
}

int emu_multi_views(const aclOpExecutor *base, const char *names[], const emu_view *views[])
{
    const emu_multi_exec *ex = (const emu_multi_exec *)base;
    if (names != NULL) {
        for (int i = 0; i < ex->nviews; i++) {
            names[i] = ex->names[i];
            views[i] = &ex->views[i];
        }
    }
    return ex->nviews;
}
