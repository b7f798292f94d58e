/* aclnn_grid_sampler3d.h: 3-D grid sampling of input at the grid's coordinates.
 * CANN-form header of the host emulator (tests/emulator): the same file name,
 * prototypes and macros as CANN 8.1.RC1's aclnnop/aclnn_grid_sampler3d.h; the comments are the
 * emulator's own. Only the functions the emulator implements are declared.
 */
#ifndef PYACLNN_EMU_ACLNNOP_GRID_SAMPLER3D_H_
#define PYACLNN_EMU_ACLNNOP_GRID_SAMPLER3D_H_

#include "aclnn/acl_meta.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief First phase of aclnnGridSampler3D: checks the arguments and returns the workspace size
 * and an executor for the second phase.
 */
ACLNN_API aclnnStatus aclnnGridSampler3DGetWorkspaceSize(const aclTensor* input, const aclTensor* grid,
                                                         int64_t interpolationMode, int64_t paddingMode,
                                                         bool alignCorners, aclTensor* out, uint64_t* workspaceSize,
                                                         aclOpExecutor** executor);

/**
 * @brief Second phase of aclnnGridSampler3D: runs the computation on the stream.
 */
ACLNN_API aclnnStatus aclnnGridSampler3D(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                         aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
