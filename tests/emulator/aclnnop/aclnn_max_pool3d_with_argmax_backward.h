/* aclnn_max_pool3d_with_argmax_backward.h: Gradient of aclnnMaxPool3dWithArgmax: gradOutput scattered to the argmax positions.
 * CANN-form header of the host emulator (tests/emulator): the same file name,
 * prototypes and macros as CANN 8.1.RC1's aclnnop/aclnn_max_pool3d_with_argmax_backward.h; the comments are the
 * emulator's own. Only the functions the emulator implements are declared.
 */
#ifndef PYACLNN_EMU_ACLNNOP_MAX_POOL3D_WITH_ARGMAX_BACKWARD_H_
#define PYACLNN_EMU_ACLNNOP_MAX_POOL3D_WITH_ARGMAX_BACKWARD_H_

#include "aclnn/acl_meta.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief First phase of aclnnMaxPool3dWithArgmaxBackward: checks the arguments and returns the workspace size
 * and an executor for the second phase.
 */
ACLNN_API aclnnStatus aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize(const aclTensor* gradOutput,
                                                                       const aclTensor* self,
                                                                       const aclTensor* indices,
                                                                       const aclIntArray* kernelSize,
                                                                       const aclIntArray* stride,
                                                                       const aclIntArray* padding,
                                                                       const aclIntArray* dilation, bool ceilMode,
                                                                       aclTensor* gradInput, uint64_t* workspaceSize,
                                                                       aclOpExecutor** executor);

/**
 * @brief Second phase of aclnnMaxPool3dWithArgmaxBackward: runs the computation on the stream.
 */
ACLNN_API aclnnStatus aclnnMaxPool3dWithArgmaxBackward(void* workspace, uint64_t workspaceSize,
                                                       aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
