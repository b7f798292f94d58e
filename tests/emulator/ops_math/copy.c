/* Emulated aclnnInplaceCopy (libopapi.so / libopapi_math.so): selfRef = src, src
 * broadcast to selfRef's shape and converted to its type as aclnnCast converts;
 * either may be a strided view.
 */
#include "ops_common.h"

#include "../aclnnop/aclnn_copy.h"

#include <stdlib.h>
#include <string.h>

static const char k_name[] = "aclnnInplaceCopy";

typedef struct {
    emu_multi_exec m; /* views: src, selfRef */
    int64_t s_src[EMU_MAX_DIMS];
} copy_exec;

aclnnStatus aclnnInplaceCopyGetWorkspaceSize(aclTensor *selfRef, const aclTensor *src, uint64_t *workspaceSize,
                                             aclOpExecutor **executor)
{
    static const char api[] = "aclnnInplaceCopyGetWorkspaceSize";
    const char *const names[] = {"selfRef", "src"};
    const void *const ptrs[] = {selfRef, src};
    const int kinds[] = {EMU_TENSOR, EMU_TENSOR};
    aclnnStatus rc = emu_check_args(api, 2, names, ptrs, kinds);
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_outputs(api, workspaceSize, executor);
    }
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    const aclTensor *typed[2] = {selfRef, src};
    for (int i = 0; i < 2; i++) {
        if (!emu_is_basic_dtype(typed[i]->dtype)) {
            pyaclnnEmuSetError("%s: %s has dtype %s; expected FLOAT, FLOAT16, BF16, DOUBLE, INT8, UINT8, INT16, "
                               "INT32, INT64 or BOOL",
                               api, names[i], emu_dtype_name(typed[i]->dtype));
            return ACLNN_ERR_PARAM_INVALID;
        }
    }
    if (!emu_broadcasts_to(src, selfRef->ndim, selfRef->dims)) {
        char a[128], b[128];
        emu_shape_str(src, a, sizeof a);
        emu_shape_str(selfRef, b, sizeof b);
        pyaclnnEmuSetError("%s: src has shape %s, which does not broadcast to selfRef's shape %s", api, a, b);
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (emu_tensor_numel(selfRef) == 0) {
        return ACLNN_SUCCESS;
    }
    copy_exec *ex = (copy_exec *)emu_multi_new(api, k_name, sizeof(copy_exec), 2);
    if (ex == NULL) {
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    ex->m.names[0] = "src";
    ex->m.names[1] = "selfRef";
    emu_snapshot(&ex->m.views[0], src);
    emu_snapshot(&ex->m.views[1], selfRef);
    emu_bcast_strides(&ex->m.views[0], selfRef->ndim, selfRef->dims, ex->s_src);
    return emu_executor_publish(api, &ex->m.base, executor);
}

static void copy_kernel(aclOpExecutor *base, emu_task *task)
{
    (void)task;
    const copy_exec *ex = (const copy_exec *)base;
    const emu_view *src = &ex->m.views[0], *dst = &ex->m.views[1];
    int64_t n = emu_numel(dst);
    /* Through a temporary: src may overlap selfRef (a shifted view of the same storage). */
    emu_view tmp = *dst;
    tmp.offset = 0;
    tmp.ndim = 1;
    tmp.dims[0] = n;
    tmp.strides[0] = 1;
    tmp.data = malloc((size_t)n * dst->itemsize + 1);
    if (tmp.data == NULL) {
        pyaclnnEmuTaskFail(task, ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k_name);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        emu_convert(src, emu_walk(dst->ndim, dst->dims, ex->s_src, i), &tmp, i);
    }
    for (int64_t i = 0; i < n; i++) {
        memcpy(dst->data + (dst->offset + emu_walk(dst->ndim, dst->dims, dst->strides, i)) * (int64_t)dst->itemsize,
               tmp.data + i * (int64_t)dst->itemsize, dst->itemsize);
    }
    pyaclnnEmuFree(tmp.data);
}

aclnnStatus aclnnInplaceCopy(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                             const aclrtStream stream)
{
    return emu_phase2_launch(k_name, k_name, workspace, workspaceSize, executor, stream, emu_multi_views,
                             copy_kernel);
}
