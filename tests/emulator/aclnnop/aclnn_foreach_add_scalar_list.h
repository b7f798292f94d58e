/* aclnn_foreach_add_scalar_list.h: out[i] = x[i] + scalars[i] for every tensor of the list.
 * CANN-form header of the host emulator (tests/emulator): the same file name,
 * prototypes and macros as CANN 8.1.RC1's aclnnop/aclnn_foreach_add_scalar_list.h; the comments are the
 * emulator's own. Only the functions the emulator implements are declared.
 */
#ifndef PYACLNN_EMU_ACLNNOP_FOREACH_ADD_SCALAR_LIST_H_
#define PYACLNN_EMU_ACLNNOP_FOREACH_ADD_SCALAR_LIST_H_

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* aclnnForeachAddScalarListGetWorkspaceSize: phase 1 (checks; workspace size and executor out)
 */
__attribute__((visibility("default")))
aclnnStatus aclnnForeachAddScalarListGetWorkspaceSize(
    const aclTensorList *x,
    const aclScalarList *scalars,
    const aclTensorList *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/* aclnnForeachAddScalarList: phase 2 (the launch on stream)
 */
__attribute__((visibility("default")))
aclnnStatus aclnnForeachAddScalarList(
    void *workspace,
    uint64_t workspaceSize,
    aclOpExecutor *executor,
    aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
