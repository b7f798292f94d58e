/* Checks shared by the operators of the custom operator package fixture
 * (tests/custom_package.py builds them into <vendor>/op_api/lib/libcust_opapi.so).
 * They take float32 tensors only; each failing check sets the recent error
 * message, naming the function and the C parameter, and returns 161002.
 */
#ifndef PYACLNN_CUST_COMMON_H
#define PYACLNN_CUST_COMMON_H

#include "ops_common.h"

#include <stdio.h>

static inline aclnnStatus cust_check_float(const char *api, const char *name, const aclTensor *t)
{
    if (t->dtype != ACL_FLOAT) {
        pyaclnnEmuSetError("%s: %s has dtype %s; this custom operator takes FLOAT only", api, name,
                           emu_dtype_name(t->dtype));
        return ACLNN_ERR_PARAM_INVALID;
    }
    return ACLNN_SUCCESS;
}

/* t must have ref's shape (no broadcasting). */
static inline aclnnStatus cust_check_shape(const char *api, const char *name, const aclTensor *t,
                                           const char *ref_name, const aclTensor *ref)
{
    if (!emu_same_shape(t, ref)) {
        char a[128], b[128];
        emu_shape_str(t, a, sizeof a);
        emu_shape_str(ref, b, sizeof b);
        pyaclnnEmuSetError("%s: %s has shape %s; it must have %s's shape %s", api, name, a, ref_name, b);
        return ACLNN_ERR_PARAM_INVALID;
    }
    return ACLNN_SUCCESS;
}

/* A new executor of the operator holding snapshots of n tensors (views named as the C
 * parameters); NULL (message set) when out of host memory. The caller fills in its own
 * fields, then publishes it with emu_executor_publish. */
static inline emu_multi_exec *cust_new(const char *api, const char *op_name, int n, const char *const names[],
                                       const aclTensor *const tensors[], size_t size)
{
    emu_multi_exec *ex = emu_multi_new(api, op_name, size, n);
    if (ex != NULL) {
        for (int i = 0; i < n; i++) {
            ex->names[i] = names[i];
            emu_snapshot(&ex->views[i], tensors[i]);
        }
    }
    return ex;
}

#endif
