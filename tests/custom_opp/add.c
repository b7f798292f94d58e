/* Add of the custom operator package fixture: a custom operator of the same name and
 * signature as CANN's built-in aclnnAdd (so a vendor's library shadows it), computing
 * out = self + alpha * other + CUSTOM_ADD_TAG in float32, self and other broadcast to
 * out's shape. The tag, a float constant given at build time (-DCUSTOM_ADD_TAG=...),
 * tells which vendor's Add ran. Its executors are not the built-in's: each phase 2
 * refuses the other's.
 */
#include "cust_common.h"

#include "aclnn_add.h"

#include <string.h>

#ifndef CUSTOM_ADD_TAG
#error "build with -DCUSTOM_ADD_TAG=<float>"
#endif

static const char k_name[] = "aclnnAdd";
/* The executor's operator name: not "aclnnAdd", so that the built-in's phase 2 refuses it. */
static const char k_exec_name[] = "aclnnAdd (custom)";

typedef struct {
    emu_multi_exec m; /* views: self, other, out */
    int ndim;
    int64_t dims[EMU_MAX_DIMS];
    int64_t s_self[EMU_MAX_DIMS], s_other[EMU_MAX_DIMS];
    float alpha;
    float tag;
} cust_add_exec;

aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor *self, const aclTensor *other, const aclScalar *alpha,
                                     aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor)
{
    static const char api[] = "aclnnAddGetWorkspaceSize";
    const char *const names[] = {"self", "other", "alpha", "out"};
    const void *const ptrs[] = {self, other, alpha, out};
    const int kinds[] = {EMU_TENSOR, EMU_TENSOR, EMU_SCALAR, EMU_TENSOR};
    aclnnStatus rc = emu_check_args(api, 4, names, ptrs, kinds);
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_outputs(api, workspaceSize, executor);
    }
    const char *const tnames[] = {"self", "other", "out"};
    const aclTensor *const tensors[] = {self, other, out};
    for (int i = 0; rc == ACLNN_SUCCESS && i < 3; i++) {
        rc = cust_check_float(api, tnames[i], tensors[i]);
    }
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    int ndim;
    int64_t dims[EMU_MAX_DIMS];
    char a[128], b[128];
    if (emu_broadcast_shape(self, other, &ndim, dims) != 0) {
        emu_shape_str(other, a, sizeof a);
        emu_shape_str(self, b, sizeof b);
        pyaclnnEmuSetError("%s: other has shape %s, which does not broadcast with self's shape %s", api, a, b);
        return ACLNN_ERR_PARAM_INVALID;
    }
    int same = out->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) {
        same = out->dims[i] == dims[i];
    }
    if (!same) {
        emu_shape_str(out, a, sizeof a);
        pyaclnnEmuSetError("%s: out has shape %s; it must be the broadcast shape of self and other", api, a);
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (emu_tensor_numel(out) == 0) {
        return ACLNN_SUCCESS; /* empty: no executor */
    }
    cust_add_exec *ex = (cust_add_exec *)cust_new(api, k_exec_name, 3, tnames, tensors, sizeof(cust_add_exec));
    if (ex == NULL) {
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    ex->ndim = ndim;
    memcpy(ex->dims, dims, sizeof dims);
    emu_bcast_strides(&ex->m.views[0], ndim, dims, ex->s_self);
    emu_bcast_strides(&ex->m.views[1], ndim, dims, ex->s_other);
    ex->alpha = (float)emu_scalar_f64(alpha); /* any scalar type, read as the emulator reads scalars */
    ex->tag = (float)(CUSTOM_ADD_TAG);
    return emu_executor_publish(api, &ex->m.base, executor);
}

static void cust_add_kernel(aclOpExecutor *base, emu_task *task)
{
    (void)task;
    const cust_add_exec *ex = (const cust_add_exec *)base;
    const emu_view *self = &ex->m.views[0], *other = &ex->m.views[1], *out = &ex->m.views[2];
    int64_t n = emu_numel(out);
    for (int64_t i = 0; i < n; i++) {
        float s = (float)emu_load(self, emu_walk(ex->ndim, ex->dims, ex->s_self, i));
        float o = (float)emu_load(other, emu_walk(ex->ndim, ex->dims, ex->s_other, i));
        float sum = s + ex->alpha * o;
        emu_store(out, emu_walk(out->ndim, out->dims, out->strides, i), sum + ex->tag);
    }
}

aclnnStatus aclnnAdd(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream)
{
    return emu_phase2_launch(k_name, k_exec_name, workspace, workspaceSize, executor, stream, emu_multi_views,
                             cust_add_kernel);
}
