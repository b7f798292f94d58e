/* SelfRef of the custom operator package fixture: x = x + y, float32, one shape. Its
 * prototype declares x both as .INPUT(x) and .OUTPUT(x), so the generated header lists
 * it once, as `aclTensor *xRef` (not const), before the other input y.
 */
#include "cust_common.h"

#include "aclnn_self_ref.h"

static const char k_name[] = "aclnnSelfRef";

aclnnStatus aclnnSelfRefGetWorkspaceSize(aclTensor *xRef, const aclTensor *y, uint64_t *workspaceSize,
                                         aclOpExecutor **executor)
{
    static const char api[] = "aclnnSelfRefGetWorkspaceSize";
    const char *const names[] = {"xRef", "y"};
    const aclTensor *const tensors[] = {xRef, y};
    const void *const ptrs[] = {xRef, y};
    const int kinds[] = {EMU_TENSOR, EMU_TENSOR};
    aclnnStatus rc = emu_check_args(api, 2, names, ptrs, kinds);
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_outputs(api, workspaceSize, executor);
    }
    for (int i = 0; rc == ACLNN_SUCCESS && i < 2; i++) {
        rc = cust_check_float(api, names[i], tensors[i]);
    }
    if (rc == ACLNN_SUCCESS) {
        rc = cust_check_shape(api, "y", y, "xRef", xRef);
    }
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    if (emu_tensor_numel(xRef) == 0) {
        return ACLNN_SUCCESS;
    }
    emu_multi_exec *ex = cust_new(api, k_name, 2, names, tensors, sizeof(emu_multi_exec));
    if (ex == NULL) {
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    return emu_executor_publish(api, &ex->base, executor);
}

static void self_ref_kernel(aclOpExecutor *base, emu_task *task)
{
    (void)task;
    const emu_multi_exec *ex = (const emu_multi_exec *)base;
    const emu_view *x = &ex->views[0], *y = &ex->views[1];
    int64_t n = emu_numel(x);
    for (int64_t i = 0; i < n; i++) {
        int64_t xi = emu_walk(x->ndim, x->dims, x->strides, i);
        int64_t yi = emu_walk(y->ndim, y->dims, y->strides, i);
        emu_store(x, xi, (float)emu_load(x, xi) + (float)emu_load(y, yi));
    }
}

aclnnStatus aclnnSelfRef(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream)
{
    return emu_phase2_launch(k_name, k_name, workspace, workspaceSize, executor, stream, emu_multi_views,
                             self_ref_kernel);
}
