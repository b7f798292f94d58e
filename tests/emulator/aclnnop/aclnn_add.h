/* aclnn_add.h: Elementwise addition: out = self + alpha * other, with broadcasting, and its
 * in-place form selfRef += alpha * other.
 * CANN-form header of the host emulator (tests/emulator): the same file name,
 * prototypes and macros as CANN 8.1.RC1's aclnnop/aclnn_add.h; the comments are the
 * emulator's own. Only the functions the emulator implements are declared.
 */
#ifndef PYACLNN_EMU_ACLNNOP_ADD_H_
#define PYACLNN_EMU_ACLNNOP_ADD_H_

#include "aclnn/acl_meta.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief First phase of aclnnAdd: checks the arguments and returns the workspace size
 * and an executor for the second phase.
 */
ACLNN_API aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor* self, const aclTensor* other, const aclScalar* alpha,
                                               aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor);

/**
 * @brief Second phase of aclnnAdd: runs the computation on the stream.
 */
ACLNN_API aclnnStatus aclnnAdd(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream);

/**
 * @brief First phase of aclnnInplaceAdd: selfRef = selfRef + alpha * other, other broadcast to
 * selfRef's shape and the result cast to selfRef's type. other may be selfRef itself.
 */
ACLNN_API aclnnStatus aclnnInplaceAddGetWorkspaceSize(const aclTensor* selfRef, const aclTensor* other,
                                                      const aclScalar* alpha, uint64_t* workspaceSize,
                                                      aclOpExecutor** executor);

/**
 * @brief Second phase of aclnnInplaceAdd: runs the computation on the stream.
 */
ACLNN_API aclnnStatus aclnnInplaceAdd(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                      aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
