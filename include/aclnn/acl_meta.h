/* The aclnn meta API, as CANN's include/aclnn/acl_meta.h provides it. */
#ifndef PYACLNN_ACLNN_ACL_META_H
#define PYACLNN_ACLNN_ACL_META_H
#include "../acl/acl.h"
#endif
