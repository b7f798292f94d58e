/* Emulated aclnnCast (libopapi.so / libopapi_math.so): out = self converted to
 * dtype. Integers convert exactly (narrower types wrap), floating to integer
 * truncates toward zero (NaN gives 0), anything to BOOL is value != 0, and
 * FLOAT16/BF16 are rounded once to nearest even.
 */
#include "ops_common.h"

#include "../aclnnop/aclnn_cast.h"

#include <string.h>

static const char k_name[] = "aclnnCast";

static void elementwise_kernel(aclOpExecutor *base, emu_task *task)
{
    (void)task;
    const emu_multi_exec *ex = (const emu_multi_exec *)base;
    const emu_view *src = &ex->views[0], *dst = &ex->views[1];
    int64_t n = emu_numel(dst);
    for (int64_t i = 0; i < n; i++) {
        emu_convert(src, emu_walk(src->ndim, src->dims, src->strides, i), dst,
                    emu_walk(dst->ndim, dst->dims, dst->strides, i));
    }
}

aclnnStatus aclnnCastGetWorkspaceSize(const aclTensor *self, const aclDataType dtype, aclTensor *out,
                                      uint64_t *workspaceSize, aclOpExecutor **executor)
{
    static const char api[] = "aclnnCastGetWorkspaceSize";
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
    if (!emu_is_basic_dtype(self->dtype)) {
        pyaclnnEmuSetError("%s: self has dtype %s; expected FLOAT, FLOAT16, BF16, DOUBLE, INT8, UINT8, INT16, INT32, "
                           "INT64 or BOOL",
                           api, emu_dtype_name(self->dtype));
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (!emu_is_basic_dtype(dtype)) {
        pyaclnnEmuSetError("%s: dtype %d (%s) is not a supported target type", api, (int)dtype,
                           emu_dtype_name(dtype));
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (out->dtype != dtype) {
        pyaclnnEmuSetError("%s: out has dtype %s; it must be dtype (%s)", api, emu_dtype_name(out->dtype),
                           emu_dtype_name(dtype));
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
    emu_multi_exec *ex = emu_multi_new(api, k_name, sizeof *ex, 2);
    if (ex == NULL) {
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    ex->names[0] = "self";
    ex->names[1] = "out";
    emu_snapshot(&ex->views[0], self);
    emu_snapshot(&ex->views[1], out);
    return emu_executor_publish(api, &ex->base, executor);
}

aclnnStatus aclnnCast(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream)
{
    return emu_phase2_launch(k_name, k_name, workspace, workspaceSize, executor, stream, emu_multi_views,
                             elementwise_kernel);
}
