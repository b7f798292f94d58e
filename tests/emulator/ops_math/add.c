/* Emulated aclnnAdd and aclnnInplaceAdd (libopapi.so / libopapi_math.so):
 * out = self + alpha * other with broadcasting, and selfRef = selfRef + alpha * other with
 * other broadcast to selfRef's shape. The result type is torch's promotion of the two
 * tensors; it must be castable to out's (selfRef's) type. Floating types compute in fp32
 * (one fused multiply-add, rounded once into out); integers exactly in int64 (wrapping),
 * with an integral alpha only, as torch requires. The in-place form goes through a
 * temporary, so other may be selfRef itself (torch's x.add_(x)) or overlap it.
 */
#include "ops_common.h"

#include "../aclnnop/aclnn_add.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char k_name[] = "aclnnAdd";
static const char k_inplace_name[] = "aclnnInplaceAdd";

static int is_add_dtype(aclDataType t)
{
    return t == ACL_FLOAT || t == ACL_FLOAT16 || t == ACL_BF16 || t == ACL_INT32 || t == ACL_INT64 || t == ACL_INT8
           || t == ACL_UINT8 || t == ACL_INT16 || t == ACL_BOOL || t == ACL_DOUBLE;
}

typedef struct {
    emu_multi_exec m; /* views: self, other, out (in place: selfRef, other; selfRef is out) */
    int inplace;
    int ndim;
    int64_t dims[EMU_MAX_DIMS];
    int64_t s_self[EMU_MAX_DIMS], s_other[EMU_MAX_DIMS];
    int integral; /* compute in int64 */
    double alpha;
    int64_t alpha_i;
} add_exec;

/* Both first phases: api names the caller, self_name the first tensor's C parameter; out is
 * NULL for the in-place form (selfRef is then written). */
static aclnnStatus add_prepare(const char *api, const char *self_name, const aclTensor *self,
                               const aclTensor *other, const aclScalar *alpha, const aclTensor *out,
                               uint64_t *workspaceSize, aclOpExecutor **executor)
{
    int inplace = out == NULL;
    const char *const names[] = {self_name, "other", "alpha", "out"};
    const void *const ptrs[] = {self, other, alpha, out};
    const int kinds[] = {EMU_TENSOR, EMU_TENSOR, EMU_SCALAR, EMU_TENSOR};
    aclnnStatus rc = emu_check_args(api, inplace ? 3 : 4, names, ptrs, kinds);
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_outputs(api, workspaceSize, executor);
    }
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    const char *out_name = inplace ? self_name : "out";
    if (inplace) {
        out = self;
    }
    const aclTensor *typed[3] = {self, other, out};
    for (int i = 0; i < (inplace ? 2 : 3); i++) {
        if (!is_add_dtype(typed[i]->dtype)) {
            pyaclnnEmuSetError("%s: %s has dtype %s; expected FLOAT, FLOAT16, BF16, DOUBLE, INT8, UINT8, INT16, "
                               "INT32, INT64 or BOOL",
                               api, names[i == 2 ? 3 : i], emu_dtype_name(typed[i]->dtype));
            return ACLNN_ERR_PARAM_INVALID;
        }
    }
    aclDataType result = emu_promote(self->dtype, other->dtype);
    if (!emu_can_cast(result, out->dtype)) {
        pyaclnnEmuSetError("%s: %s has dtype %s; the result type of %s (%s) and other (%s) is %s, which cannot "
                           "be cast to it",
                           api, out_name, emu_dtype_name(out->dtype), self_name, emu_dtype_name(self->dtype),
                           emu_dtype_name(other->dtype), emu_dtype_name(result));
        return ACLNN_ERR_PARAM_INVALID;
    }
    int integral = !emu_is_float_dtype(result);
    if (integral && emu_is_float_dtype(alpha->dtype)) {
        pyaclnnEmuSetError("%s: alpha has dtype %s; for integral %s and other alpha must be an integer", api,
                           emu_dtype_name(alpha->dtype), self_name);
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (result == ACL_BOOL && alpha->dtype != ACL_BOOL && emu_scalar_i64(alpha) != 1) {
        pyaclnnEmuSetError("%s: alpha must be a boolean (or 1) when %s and other are BOOL", api, self_name);
        return ACLNN_ERR_PARAM_INVALID;
    }
    int ndim;
    int64_t dims[EMU_MAX_DIMS];
    char a[128], b[128];
    if (inplace) {
        if (!emu_broadcasts_to(other, self->ndim, self->dims)) {
            emu_shape_str(other, b, sizeof b);
            emu_shape_str(self, a, sizeof a);
            pyaclnnEmuSetError("%s: other has shape %s, which does not broadcast to selfRef's shape %s", api, b, a);
            return ACLNN_ERR_PARAM_INVALID;
        }
        ndim = self->ndim;
        memcpy(dims, self->dims, sizeof dims);
    } else if (emu_broadcast_shape(self, other, &ndim, dims) != 0) {
        emu_shape_str(self, a, sizeof a);
        emu_shape_str(other, b, sizeof b);
        pyaclnnEmuSetError("%s: other has shape %s, which does not broadcast with self's shape %s", api, b, a);
        return ACLNN_ERR_PARAM_INVALID;
    }
    int same = out->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) {
        same = out->dims[i] == dims[i];
    }
    if (!same) {
        emu_shape_str(out, a, sizeof a);
        pyaclnnEmuSetError("%s: out has shape %s; it must be the broadcast shape of self and other", api, a);
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (emu_tensor_numel(out) == 0) {
        return ACLNN_SUCCESS; /* empty: no executor */
    }
    int nviews = inplace ? 2 : 3;
    add_exec *ex = (add_exec *)emu_multi_new(api, inplace ? k_inplace_name : k_name, sizeof(add_exec), nviews);
    if (ex == NULL) {
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    const char *const views[] = {self_name, "other", "out"};
    for (int i = 0; i < nviews; i++) {
        ex->m.names[i] = views[i];
        emu_snapshot(&ex->m.views[i], typed[i]);
    }
    ex->inplace = inplace;
    ex->ndim = ndim;
    memcpy(ex->dims, dims, sizeof dims);
    emu_bcast_strides(&ex->m.views[0], ndim, dims, ex->s_self);
    emu_bcast_strides(&ex->m.views[1], ndim, dims, ex->s_other);
    ex->integral = integral;
    ex->alpha = emu_scalar_f64(alpha);
    ex->alpha_i = emu_scalar_i64(alpha);
    return emu_executor_publish(api, &ex->m.base, executor);
}

aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor *self, const aclTensor *other, const aclScalar *alpha,
                                     aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor)
{
    return add_prepare("aclnnAddGetWorkspaceSize", "self", self, other, alpha, out, workspaceSize, executor);
}

aclnnStatus aclnnInplaceAddGetWorkspaceSize(const aclTensor *selfRef, const aclTensor *other,
                                            const aclScalar *alpha, uint64_t *workspaceSize,
                                            aclOpExecutor **executor)
{
    return add_prepare("aclnnInplaceAddGetWorkspaceSize", "selfRef", selfRef, other, alpha, NULL, workspaceSize,
                       executor);
}

static void add_kernel(aclOpExecutor *base, emu_task *task)
{
    const add_exec *ex = (const add_exec *)base;
    const emu_view *self = &ex->m.views[0], *other = &ex->m.views[1];
    const emu_view *dst = ex->inplace ? self : &ex->m.views[2];
    int64_t n = emu_numel(dst);
    /* In place, results go to a contiguous temporary first and are copied into selfRef
     * afterwards: other may be selfRef, or another view of its memory. */
    emu_view tmp = *dst;
    if (ex->inplace) {
        tmp.offset = 0;
        tmp.ndim = 1;
        tmp.dims[0] = n;
        tmp.strides[0] = 1;
        tmp.data = malloc((size_t)n * dst->itemsize + 1);
        if (tmp.data == NULL) {
            pyaclnnEmuTaskFail(task, ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k_inplace_name);
            return;
        }
    }
    const emu_view *out = &tmp;
    for (int64_t i = 0; i < n; i++) {
        int64_t si = emu_walk(ex->ndim, ex->dims, ex->s_self, i);
        int64_t oi = emu_walk(ex->ndim, ex->dims, ex->s_other, i);
        int64_t di = ex->inplace ? i : emu_walk(out->ndim, out->dims, out->strides, i);
        if (ex->integral) {
            uint64_t r = (uint64_t)emu_load_i64(self, si)
                         + (uint64_t)ex->alpha_i * (uint64_t)emu_load_i64(other, oi); /* wraps, no UB */
            if (out->dtype == ACL_BOOL || (self->dtype == ACL_BOOL && other->dtype == ACL_BOOL)) {
                emu_store_i64(out, di, r != 0);
            } else if (emu_is_int_dtype(out->dtype)) {
                emu_store_i64(out, di, (int64_t)r);
            } else {
                emu_store(out, di, (double)(int64_t)r);
            }
        } else if (self->dtype == ACL_DOUBLE || other->dtype == ACL_DOUBLE) {
            emu_store(out, di, fma(ex->alpha, emu_load(other, oi), emu_load(self, si)));
        } else {
            emu_store(out, di, fmaf((float)ex->alpha, (float)emu_load(other, oi), (float)emu_load(self, si)));
        }
    }
    if (ex->inplace) {
        int64_t item = (int64_t)dst->itemsize;
        for (int64_t i = 0; i < n; i++) {
            memcpy(dst->data + (dst->offset + emu_walk(dst->ndim, dst->dims, dst->strides, i)) * item,
                   tmp.data + i * item, dst->itemsize);
        }
        pyaclnnEmuFree(tmp.data);
    }
}

aclnnStatus aclnnAdd(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream)
{
    return emu_phase2_launch(k_name, k_name, workspace, workspaceSize, executor, stream, emu_multi_views, add_kernel);
}

aclnnStatus aclnnInplaceAdd(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream)
{
    return emu_phase2_launch(k_inplace_name, k_inplace_name, workspace, workspaceSize, executor, stream,
                             emu_multi_views, add_kernel);
}
