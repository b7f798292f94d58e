/* MissingLaunch of the custom operator package fixture: its header declares both
 * phases, but this library defines phase 1 only, as a package whose build lost a
 * function would ship it. Phase 1 checks its arguments (x and out float32 of one
 * shape) and hands back no executor: there is nothing that could run it.
 */
#include "cust_common.h"

#include "aclnn_missing_launch.h"

aclnnStatus aclnnMissingLaunchGetWorkspaceSize(const aclTensor *x, const aclTensor *out, uint64_t *workspaceSize,
                                               aclOpExecutor **executor)
{
    static const char api[] = "aclnnMissingLaunchGetWorkspaceSize";
    const char *const names[] = {"x", "out"};
    const aclTensor *const tensors[] = {x, out};
    const void *const ptrs[] = {x, out};
    const int kinds[] = {EMU_TENSOR, EMU_TENSOR};
    aclnnStatus rc = emu_check_args(api, 2, names, ptrs, kinds);
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_outputs(api, workspaceSize, executor);
    }
    for (int i = 0; rc == ACLNN_SUCCESS && i < 2; i++) {
        rc = cust_check_float(api, names[i], tensors[i]);
    }
    if (rc == ACLNN_SUCCESS) {
        rc = cust_check_shape(api, "out", out, "x", x);
    }
    return rc;
}
