/* aclnn_grid_sampler3d_backward.h: Gradients of aclnnGridSampler3D with respect to input and grid.
 * CANN-form header of the host emulator (tests/emulator): the same file name,
 * prototypes and macros as CANN 8.1.RC1's aclnnop/aclnn_grid_sampler3d_backward.h; the comments are the
 * emulator's own. Only the functions the emulator implements are declared.
 */
#ifndef PYACLNN_EMU_ACLNNOP_GRID_SAMPLER3D_BACKWARD_H_
#define PYACLNN_EMU_ACLNNOP_GRID_SAMPLER3D_BACKWARD_H_

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* aclnnGridSampler3DBackwardGetWorkspaceSize: phase 1 (checks; workspace size and executor out)
 */
__attribute__((visibility("default")))
aclnnStatus aclnnGridSampler3DBackwardGetWorkspaceSize(
    const aclTensor *gradOutput,
    const aclTensor *input,
    const aclTensor *grid,
    int64_t interpolationMode,
    int64_t paddingMode,
    bool alignCorners,
    const aclBoolArray *outputMask,
    aclTensor *inputGrad,
    aclTensor *gridGrad,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/* aclnnGridSampler3DBackward: phase 2 (the launch on stream)
 */
__attribute__((visibility("default")))
aclnnStatus aclnnGridSampler3DBackward(
    void *workspace,
    uint64_t workspaceSize,
    aclOpExecutor *executor,
    aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
