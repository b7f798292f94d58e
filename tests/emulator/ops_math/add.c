/* Emulated aclnnAdd (libopapi.so / libopapi_math.so): out = self + alpha * other
 * with broadcasting. The result type is torch's promotion of self and other; it
 * must be castable to out's type. Floating types compute in fp32 (one fused
 * multiply-add, rounded once into out); integers exactly in int64 (wrapping),
 * with an integral alpha only, as torch requires.
 */
#include "ops_common.h"

#include "../aclnnop/aclnn_add.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char k_name[] = "aclnnAdd";

static int is_add_dtype(aclDataType t)
{
    return t == ACL_FLOAT || t == ACL_FLOAT16 || t == ACL_BF16 || t == ACL_INT32 || t == ACL_INT64 || t == ACL_INT8
           || t == ACL_UINT8 || t == ACL_INT16 || t == ACL_BOOL || t == ACL_DOUBLE;
}

typedef struct {
    emu_multi_exec m; /* views: self, other, out */
    int ndim;
    int64_t dims[EMU_MAX_DIMS];
    int64_t s_self[EMU_MAX_DIMS], s_other[EMU_MAX_DIMS];
    int integral; /* compute in int64 */
    double alpha;
    int64_t alpha_i;
} add_exec;

aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor *self, const aclTensor *other, const aclScalar *alpha,
                                     aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor)
{
    static const char api[] = "aclnnAddGetWorkspaceSize";
    const char *const names[] = {"self", "other", "alpha", "out"};
    const void *const ptrs[] = {self, other, alpha, out};
    const int kinds[] = {EMU_TENSOR, EMU_TENSOR, EMU_SCALAR, EMU_TENSOR};
    aclnnStatus rc = emu_check_args(api, 4, names, ptrs, kinds);
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_outputs(api, workspaceSize, executor);
    }
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    const aclTensor *typed[3] = {self, other, out};
    for (int i = 0; i < 3; i++) {
        if (!is_add_dtype(typed[i]->dtype)) {
            pyaclnnEmuSetError("%s: %s has dtype %s; expected FLOAT, FLOAT16, BF16, DOUBLE, INT8, UINT8, INT16, "
                               "INT32, INT64 or BOOL",
                               api, names[i == 2 ? 3 : i], emu_dtype_name(typed[i]->dtype));
            return ACLNN_ERR_PARAM_INVALID;
        }
    }
    aclDataType result = emu_promote(self->dtype, other->dtype);
    if (!emu_can_cast(result, out->dtype)) {
        pyaclnnEmuSetError("%s: out has dtype %s; the result type of self (%s) and other (%s) is %s, which cannot "
                           "be cast to it",
                           api, emu_dtype_name(out->dtype), emu_dtype_name(self->dtype), emu_dtype_name(other->dtype),
                           emu_dtype_name(result));
        return ACLNN_ERR_PARAM_INVALID;
    }
    int integral = !emu_is_float_dtype(result);
    if (integral && emu_is_float_dtype(alpha->dtype)) {
        pyaclnnEmuSetError("%s: alpha has dtype %s; for integral self and other alpha must be an integer", api,
                           emu_dtype_name(alpha->dtype));
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (result == ACL_BOOL && alpha->dtype != ACL_BOOL && emu_scalar_i64(alpha) != 1) {
        pyaclnnEmuSetError("%s: alpha must be a boolean (or 1) when self and other are BOOL", api);
        return ACLNN_ERR_PARAM_INVALID;
    }
    int ndim;
    int64_t dims[EMU_MAX_DIMS];
    char a[128], b[128];
    if (emu_broadcast_shape(self, other, &ndim, dims) != 0) {
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
    add_exec *ex = (add_exec *)emu_multi_new(api, k_name, sizeof(add_exec), 3);
    if (ex == NULL) {
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    static const char *const k_views[] = {"self", "other", "out"};
    for (int i = 0; i < 3; i++) {
        ex->m.names[i] = k_views[i];
        emu_snapshot(&ex->m.views[i], typed[i]);
    }
    ex->ndim = ndim;
    memcpy(ex->dims, dims, sizeof dims);
    emu_bcast_strides(&ex->m.views[0], ndim, dims, ex->s_self);
    emu_bcast_strides(&ex->m.views[1], ndim, dims, ex->s_other);
    ex->integral = integral;
    ex->alpha = emu_scalar_f64(alpha);
    ex->alpha_i = emu_scalar_i64(alpha);
    return emu_executor_publish(api, &ex->m.base, executor);
}

static void add_kernel(aclOpExecutor *base, emu_task *task)
{
    (void)task;
    const add_exec *ex = (const add_exec *)base;
    const emu_view *self = &ex->m.views[0], *other = &ex->m.views[1], *out = &ex->m.views[2];
    int64_t n = emu_numel(out);
    for (int64_t i = 0; i < n; i++) {
        int64_t si = emu_walk(ex->ndim, ex->dims, ex->s_self, i);
        int64_t oi = emu_walk(ex->ndim, ex->dims, ex->s_other, i);
        int64_t di = emu_walk(out->ndim, out->dims, out->strides, i);
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
}

aclnnStatus aclnnAdd(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream)
{
    return emu_phase2_launch(k_name, k_name, workspace, workspaceSize, executor, stream, emu_multi_views, add_kernel);
}
