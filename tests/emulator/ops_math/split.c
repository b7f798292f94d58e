/* Emulated aclnnSplitTensor (libopapi.so / libopapi_math.so): self cut along dim
 * into chunks of splitSections (the last one may be smaller), one per tensor of
 * out; out must hold exactly that many tensors, each of self's type and of its
 * chunk's shape.
 */
#include "ops_common.h"

#include "../aclnnop/aclnn_split_tensor.h"

#include <stdio.h>
#include <stdlib.h>

static const char k_name[] = "aclnnSplitTensor";

typedef struct {
    emu_multi_exec m; /* views: self, then the outs */
    int dim;
    int64_t sections;
} split_exec;

aclnnStatus aclnnSplitTensorGetWorkspaceSize(const aclTensor *self, uint64_t splitSections, int64_t dim,
                                             aclTensorList *out, uint64_t *workspaceSize, aclOpExecutor **executor)
{
    static const char api[] = "aclnnSplitTensorGetWorkspaceSize";
    if (self == NULL || out == NULL) {
        pyaclnnEmuSetError("%s: %s is NULL", api, self == NULL ? "self" : "out");
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    aclnnStatus rc = emu_check_tensor(api, "self", self);
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_tensor_list(api, "out", out);
    }
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_outputs(api, workspaceSize, executor);
    }
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    if (!emu_is_basic_dtype(self->dtype)) {
        pyaclnnEmuSetError("%s: self has dtype %s, which is not supported", api, emu_dtype_name(self->dtype));
        return ACLNN_ERR_PARAM_INVALID;
    }
    int rank = self->ndim;
    if (rank == 0 || dim < -rank || dim >= rank) {
        pyaclnnEmuSetError("%s: dim %lld is out of range for self of rank %d", api, (long long)dim, rank);
        return ACLNN_ERR_PARAM_INVALID;
    }
    int d = (int)(dim < 0 ? dim + rank : dim);
    int64_t size = self->dims[d];
    if (splitSections == 0 && size > 0) {
        pyaclnnEmuSetError("%s: splitSections is 0; it must be positive", api);
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (splitSections > (uint64_t)INT64_MAX) {
        pyaclnnEmuSetError("%s: splitSections %llu is too large", api, (unsigned long long)splitSections);
        return ACLNN_ERR_PARAM_INVALID;
    }
    int64_t sections = (int64_t)splitSections;
    int64_t chunks = size == 0 ? 1 : (size + sections - 1) / sections;
    if ((int64_t)out->size != chunks) {
        pyaclnnEmuSetError("%s: out holds %llu tensors; splitting size %lld into chunks of %lld gives %lld", api,
                           (unsigned long long)out->size, (long long)size, (long long)sections, (long long)chunks);
        return ACLNN_ERR_PARAM_INVALID;
    }
    int64_t total = 0;
    for (int64_t i = 0; i < chunks; i++) {
        const aclTensor *t = out->values[i];
        int64_t want = size - i * sections < sections ? size - i * sections : sections;
        if (t->dtype != self->dtype) {
            pyaclnnEmuSetError("%s: out[%lld] has dtype %s; it must equal self's dtype %s", api, (long long)i,
                               emu_dtype_name(t->dtype), emu_dtype_name(self->dtype));
            return ACLNN_ERR_PARAM_INVALID;
        }
        int ok = t->ndim == rank;
        for (int k = 0; ok && k < rank; k++) {
            ok = t->dims[k] == (k == d ? want : self->dims[k]);
        }
        if (!ok) {
            char a[128];
            emu_shape_str(t, a, sizeof a);
            pyaclnnEmuSetError("%s: out[%lld] has shape %s; chunk %lld of self has %lld at dim %d and self's sizes "
                               "elsewhere",
                               api, (long long)i, a, (long long)i, (long long)want, d);
            return ACLNN_ERR_PARAM_INVALID;
        }
        total += emu_tensor_numel(t);
    }
    if (total == 0) {
        return ACLNN_SUCCESS;
    }
    split_exec *ex = (split_exec *)emu_multi_new(api, k_name, sizeof(split_exec), (int)chunks + 1);
    if (ex == NULL) {
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    ex->dim = d;
    ex->sections = sections;
    ex->m.names[0] = "self";
    emu_snapshot(&ex->m.views[0], self);
    for (int64_t i = 0; i < chunks; i++) {
        ex->m.names[i + 1] = "out";
        emu_snapshot(&ex->m.views[i + 1], out->values[i]);
    }
    return emu_executor_publish(api, &ex->m.base, executor);
}

static void split_kernel(aclOpExecutor *base, emu_task *task)
{
    (void)task;
    const split_exec *ex = (const split_exec *)base;
    const emu_view *self = &ex->m.views[0];
    for (int j = 1; j < ex->m.nviews; j++) {
        const emu_view *o = &ex->m.views[j];
        int64_t shift = (int64_t)(j - 1) * ex->sections * self->strides[ex->dim];
        int64_t n = emu_numel(o);
        for (int64_t i = 0; i < n; i++) {
            emu_convert(self, shift + emu_walk(o->ndim, o->dims, self->strides, i), o,
                        emu_walk(o->ndim, o->dims, o->strides, i));
        }
    }
}

aclnnStatus aclnnSplitTensor(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream)
{
    return emu_phase2_launch(k_name, k_name, workspace, workspaceSize, executor, stream, emu_multi_views,
                             split_kernel);
}
