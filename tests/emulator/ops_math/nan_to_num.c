/* Emulated aclnnNanToNum (libopapi.so / libopapi_math.so): NaN, +inf and -inf of
 * a floating self replaced by nan, posinf and neginf (rounded once to self's
 * type); integer and bool tensors are copied unchanged. out: self's type and shape.
 */
#include "ops_common.h"

#include "../aclnnop/aclnn_nan_to_num.h"

#include <math.h>

static const char k_name[] = "aclnnNanToNum";

typedef struct {
    emu_multi_exec m; /* views: self, out */
    float nan, posinf, neginf;
} ntn_exec;

aclnnStatus aclnnNanToNumGetWorkspaceSize(const aclTensor *self, float nan, float posinf, float neginf,
                                          aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor)
{
    static const char api[] = "aclnnNanToNumGetWorkspaceSize";
    const char *const names[] = {"self", "out"};
    const void *const ptrs[] = {self, out};
    const int kinds[] = {EMU_TENSOR, EMU_TENSOR};
    aclnnStatus rc = emu_check_args(api, 2, names, ptrs, kinds);
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_outputs(api, workspaceSize, executor);
    }
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    if (!emu_is_basic_dtype(self->dtype) || self->dtype == ACL_DOUBLE) {
        pyaclnnEmuSetError("%s: self has dtype %s; expected FLOAT, FLOAT16, BF16, INT8, UINT8, INT16, INT32, INT64 "
                           "or BOOL",
                           api, emu_dtype_name(self->dtype));
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (out->dtype != self->dtype) {
        pyaclnnEmuSetError("%s: out has dtype %s; it must equal self's dtype %s", api, emu_dtype_name(out->dtype),
                           emu_dtype_name(self->dtype));
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (!emu_same_shape(self, out)) {
        char a[128], b[128];
        emu_shape_str(out, a, sizeof a);
        emu_shape_str(self, b, sizeof b);
        pyaclnnEmuSetError("%s: out has shape %s; it must equal self's shape %s", api, a, b);
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (emu_tensor_numel(out) == 0) {
        return ACLNN_SUCCESS;
    }
    ntn_exec *ex = (ntn_exec *)emu_multi_new(api, k_name, sizeof(ntn_exec), 2);
    if (ex == NULL) {
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    ex->m.names[0] = "self";
    ex->m.names[1] = "out";
    emu_snapshot(&ex->m.views[0], self);
    emu_snapshot(&ex->m.views[1], out);
    ex->nan = nan;
    ex->posinf = posinf;
    ex->neginf = neginf;
    return emu_executor_publish(api, &ex->m.base, executor);
}

static void ntn_kernel(aclOpExecutor *base, emu_task *task)
{
    (void)task;
    const ntn_exec *ex = (const ntn_exec *)base;
    const emu_view *self = &ex->m.views[0], *out = &ex->m.views[1];
    int64_t n = emu_numel(out);
    int floating = emu_is_float_dtype(self->dtype);
    for (int64_t i = 0; i < n; i++) {
        int64_t si = emu_walk(self->ndim, self->dims, self->strides, i);
        int64_t oi = emu_walk(out->ndim, out->dims, out->strides, i);
        if (!floating) {
            emu_store_i64(out, oi, emu_load_i64(self, si));
            continue;
        }
        double v = emu_load(self, si);
        if (isnan(v)) {
            v = ex->nan;
        } else if (isinf(v)) {
            v = v > 0 ? ex->posinf : ex->neginf;
        }
        emu_store(out, oi, v);
    }
}

aclnnStatus aclnnNanToNum(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream)
{
    return emu_phase2_launch(k_name, k_name, workspace, workspaceSize, executor, stream, emu_multi_views, ntn_kernel);
}
