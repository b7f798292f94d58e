/* aclnn_util.h: the ACLNN_API macro of the operator headers, as CANN 8.1.RC1's
 * aclnnop/aclnn_util.h defines it (kept if already defined). */
#ifndef PYACLNN_EMU_ACLNNOP_UTIL_H_
#define PYACLNN_EMU_ACLNNOP_UTIL_H_

#ifndef ACLNN_API
#define ACLNN_API __attribute__((visibility("default")))
#endif

#endif
