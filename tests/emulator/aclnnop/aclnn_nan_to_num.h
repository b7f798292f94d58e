/* aclnn_nan_to_num.h: Replacement of NaN, +inf and -inf by the given values.
 * CANN-form header of the host emulator (tests/emulator): the same file name,
 * prototypes and macros as CANN 8.1.RC1's aclnnop/aclnn_nan_to_num.h; the comments are the
 * emulator's own. Only the functions the emulator implements are declared.
 */
#ifndef PYACLNN_EMU_ACLNNOP_NAN_TO_NUM_H_
#define PYACLNN_EMU_ACLNNOP_NAN_TO_NUM_H_

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* aclnnNanToNumGetWorkspaceSize: phase 1 (checks; workspace size and executor out)
 */
__attribute__((visibility("default")))
aclnnStatus aclnnNanToNumGetWorkspaceSize(
    const aclTensor *self,
    float nan,
    float posinf,
    float neginf,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/* aclnnNanToNum: phase 2 (the launch on stream)
 */
__attribute__((visibility("default")))
aclnnStatus aclnnNanToNum(
    void *workspace,
    uint64_t workspaceSize,
    aclOpExecutor *executor,
    aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
