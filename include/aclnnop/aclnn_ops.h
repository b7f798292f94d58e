/* The four operator prototypes; each per-operator header includes this. */
#ifndef PYACLNN_ACLNNOP_OPS_H
#define PYACLNN_ACLNNOP_OPS_H

#include "../acl/acl.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "../decl/aclnn_ops.h"

#ifdef __cplusplus
}
#endif

#endif
