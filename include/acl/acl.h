/* C/C++ entry point to the CANN subset declared in include/decl, laid out
 * like CANN's own include/acl/acl.h so samples compile against either. */
#ifndef PYACLNN_ACL_ACL_H
#define PYACLNN_ACL_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "../decl/acl_types.h"
#include "../decl/acl_status.h"
#include "../decl/acl_runtime.h"
#include "../decl/acl_prof.h"
#include "../decl/aclnn_meta.h"

#ifdef __cplusplus
}
#endif

#endif
