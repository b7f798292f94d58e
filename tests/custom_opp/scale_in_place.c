/* ScaleInPlace of the custom operator package fixture: x = x * scale, float32. The
 * operator writes the tensor it declares as its only input (op_proto.h has .INPUT(x)
 * and .ATTR(scale, Float, ...), no output), so neither its header nor its prototype
 * marks x as written.
 */
#include "cust_common.h"

#include "aclnn_scale_in_place.h"

static const char k_name[] = "aclnnScaleInPlace";

typedef struct {
    emu_multi_exec m; /* views: x */
    double scale;
} scale_exec;

aclnnStatus aclnnScaleInPlaceGetWorkspaceSize(const aclTensor *x, double scale, uint64_t *workspaceSize,
                                              aclOpExecutor **executor)
{
    static const char api[] = "aclnnScaleInPlaceGetWorkspaceSize";
    const char *const names[] = {"x"};
    const aclTensor *const tensors[] = {x};
    const void *const ptrs[] = {x};
    const int kinds[] = {EMU_TENSOR};
    aclnnStatus rc = emu_check_args(api, 1, names, ptrs, kinds);
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_outputs(api, workspaceSize, executor);
    }
    if (rc == ACLNN_SUCCESS) {
        rc = cust_check_float(api, "x", x);
    }
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    if (emu_tensor_numel(x) == 0) {
        return ACLNN_SUCCESS;
    }
    scale_exec *ex = (scale_exec *)cust_new(api, k_name, 1, names, tensors, sizeof(scale_exec));
    if (ex == NULL) {
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    ex->scale = scale;
    return emu_executor_publish(api, &ex->m.base, executor);
}

static void scale_kernel(aclOpExecutor *base, emu_task *task)
{
    (void)task;
    const scale_exec *ex = (const scale_exec *)base;
    const emu_view *x = &ex->m.views[0];
    int64_t n = emu_numel(x);
    for (int64_t i = 0; i < n; i++) {
        int64_t at = emu_walk(x->ndim, x->dims, x->strides, i);
        emu_store(x, at, (float)emu_load(x, at) * (float)ex->scale);
    }
}

aclnnStatus aclnnScaleInPlace(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                              const aclrtStream stream)
{
    return emu_phase2_launch(k_name, k_name, workspace, workspaceSize, executor, stream, emu_multi_views,
                             scale_kernel);
}
