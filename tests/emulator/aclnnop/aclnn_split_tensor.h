/* aclnn_split_tensor.h: Split of a tensor into chunks of splitSections along dim.
 * CANN-form header of the host emulator (tests/emulator): the same file name,
 * prototypes and macros as CANN 8.1.RC1's aclnnop/aclnn_split_tensor.h; the comments are the
 * emulator's own. Only the functions the emulator implements are declared.
 */
#ifndef PYACLNN_EMU_ACLNNOP_SPLIT_TENSOR_H_
#define PYACLNN_EMU_ACLNNOP_SPLIT_TENSOR_H_

#include "aclnn/acl_meta.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief First phase of aclnnSplitTensor: checks the arguments and returns the workspace size
 * and an executor for the second phase.
 */
ACLNN_API aclnnStatus aclnnSplitTensorGetWorkspaceSize(const aclTensor* self, uint64_t splitSections, int64_t dim,
                                                       aclTensorList* out, uint64_t* workspaceSize,
                                                       aclOpExecutor** executor);

/**
 * @brief Second phase of aclnnSplitTensor: runs the computation on the stream.
 */
ACLNN_API aclnnStatus aclnnSplitTensor(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                       aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
