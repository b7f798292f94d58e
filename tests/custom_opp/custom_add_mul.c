/* CustomAddMul of the custom operator package fixture: y1 = x1 + x2 and y2 = x1 * x2,
 * float32, all four of one shape. Its generated header declares the two outputs
 * `const aclTensor *` like the inputs and keeps their names: only op_proto.h tells
 * that y1 and y2 are outputs.
 */
#include "cust_common.h"

#include "aclnn_custom_add_mul.h"

static const char k_name[] = "aclnnCustomAddMul";

aclnnStatus aclnnCustomAddMulGetWorkspaceSize(const aclTensor *x1, const aclTensor *x2, const aclTensor *y1,
                                              const aclTensor *y2, uint64_t *workspaceSize,
                                              aclOpExecutor **executor)
{
    static const char api[] = "aclnnCustomAddMulGetWorkspaceSize";
    const char *const names[] = {"x1", "x2", "y1", "y2"};
    const aclTensor *const tensors[] = {x1, x2, y1, y2};
    const void *const ptrs[] = {x1, x2, y1, y2};
    const int kinds[] = {EMU_TENSOR, EMU_TENSOR, EMU_TENSOR, EMU_TENSOR};
    aclnnStatus rc = emu_check_args(api, 4, names, ptrs, kinds);
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_outputs(api, workspaceSize, executor);
    }
    for (int i = 0; rc == ACLNN_SUCCESS && i < 4; i++) {
        rc = cust_check_float(api, names[i], tensors[i]);
    }
    for (int i = 1; rc == ACLNN_SUCCESS && i < 4; i++) {
        rc = cust_check_shape(api, names[i], tensors[i], "x1", x1);
    }
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    if (emu_tensor_numel(x1) == 0) {
        return ACLNN_SUCCESS; /* empty: no executor */
    }
    emu_multi_exec *ex = cust_new(api, k_name, 4, names, tensors, sizeof(emu_multi_exec));
    if (ex == NULL) {
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    return emu_executor_publish(api, &ex->base, executor);
}

static void add_mul_kernel(aclOpExecutor *base, emu_task *task)
{
    (void)task;
    const emu_multi_exec *ex = (const emu_multi_exec *)base;
    const emu_view *v = ex->views;
    int64_t n = emu_numel(&v[0]);
    for (int64_t i = 0; i < n; i++) {
        int64_t at[4];
        for (int k = 0; k < 4; k++) {
            at[k] = emu_walk(v[k].ndim, v[k].dims, v[k].strides, i);
        }
        float a = (float)emu_load(&v[0], at[0]), b = (float)emu_load(&v[1], at[1]);
        emu_store(&v[2], at[2], a + b);
        emu_store(&v[3], at[3], a * b);
    }
}

aclnnStatus aclnnCustomAddMul(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                              const aclrtStream stream)
{
    return emu_phase2_launch(k_name, k_name, workspace, workspaceSize, executor, stream, emu_multi_views,
                             add_mul_kernel);
}
