/* Emulated aclnnCat (libopapi.so / libopapi_math.so): the tensors of the list
 * joined along dim into out. As torch: a 1-D tensor of size 0 is skipped; the
 * others must have out's rank and its sizes off dim; the result type is the
 * promotion of all inputs and must be castable to out's type.
 */
#include "ops_common.h"

#include "../aclnnop/aclnn_cat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char k_name[] = "aclnnCat";

typedef struct {
    emu_multi_exec m; /* views: the used inputs, then out */
    int dim;
    int64_t *starts; /* each input's first index along dim */
} cat_exec;

static void release_cat(aclOpExecutor *base)
{
    cat_exec *ex = (cat_exec *)base;
    pyaclnnEmuFree(ex->starts);
    pyaclnnEmuFree(ex->m.views);
    pyaclnnEmuFree(ex->m.names);
    pyaclnnEmuFree(ex);
}

static int skipped(const aclTensor *t) { return t->ndim == 1 && t->dims[0] == 0; }

aclnnStatus aclnnCatGetWorkspaceSize(const aclTensorList *tensors, int64_t dim, aclTensor *out,
                                     uint64_t *workspaceSize, aclOpExecutor **executor)
{
    static const char api[] = "aclnnCatGetWorkspaceSize";
    if (tensors == NULL || out == NULL) {
        pyaclnnEmuSetError("%s: %s is NULL", api, tensors == NULL ? "tensors" : "out");
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    aclnnStatus rc = emu_check_tensor_list(api, "tensors", tensors);
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_tensor(api, "out", out);
    }
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_outputs(api, workspaceSize, executor);
    }
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    if (tensors->size == 0) {
        pyaclnnEmuSetError("%s: tensors is empty; expected at least one tensor", api);
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (!emu_is_basic_dtype(out->dtype)) {
        pyaclnnEmuSetError("%s: out has dtype %s, which is not supported", api, emu_dtype_name(out->dtype));
        return ACLNN_ERR_PARAM_INVALID;
    }
    aclDataType result = ACL_BOOL;
    int first = 1;
    for (uint64_t i = 0; i < tensors->size; i++) {
        const aclTensor *t = tensors->values[i];
        if (!emu_is_basic_dtype(t->dtype)) {
            pyaclnnEmuSetError("%s: tensors[%llu] has dtype %s, which is not supported", api, (unsigned long long)i,
                               emu_dtype_name(t->dtype));
            return ACLNN_ERR_PARAM_INVALID;
        }
        result = first ? t->dtype : emu_promote(result, t->dtype);
        first = 0;
    }
    if (!emu_can_cast(result, out->dtype)) {
        pyaclnnEmuSetError("%s: out has dtype %s; the result type of tensors is %s, which cannot be cast to it", api,
                           emu_dtype_name(out->dtype), emu_dtype_name(result));
        return ACLNN_ERR_PARAM_INVALID;
    }
    int rank = out->ndim;
    if (rank == 0 || dim < -rank || dim >= rank) {
        pyaclnnEmuSetError("%s: dim %lld is out of range for out of rank %d", api, (long long)dim, rank);
        return ACLNN_ERR_PARAM_INVALID;
    }
    int d = (int)(dim < 0 ? dim + rank : dim);
    int64_t total = 0;
    int used = 0;
    char a[128], b[128];
    for (uint64_t i = 0; i < tensors->size; i++) {
        const aclTensor *t = tensors->values[i];
        if (skipped(t)) {
            continue;
        }
        int ok = t->ndim == rank;
        for (int k = 0; ok && k < rank; k++) {
            ok = k == d || t->dims[k] == out->dims[k];
        }
        if (!ok) {
            emu_shape_str(t, a, sizeof a);
            emu_shape_str(out, b, sizeof b);
            pyaclnnEmuSetError("%s: tensors[%llu] has shape %s; it must match out's shape %s except at dim %d", api,
                               (unsigned long long)i, a, b, d);
            return ACLNN_ERR_PARAM_INVALID;
        }
        total += t->dims[d];
        used++;
    }
    if (total != out->dims[d]) {
        emu_shape_str(out, a, sizeof a);
        pyaclnnEmuSetError("%s: out has shape %s; its size at dim %d must be the sum of the inputs' sizes, %lld", api,
                           a, d, (long long)total);
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (emu_tensor_numel(out) == 0) {
        return ACLNN_SUCCESS;
    }
    cat_exec *ex = (cat_exec *)emu_multi_new(api, k_name, sizeof(cat_exec), used + 1);
    if (ex == NULL) {
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    ex->m.base.release = release_cat;
    ex->starts = calloc((size_t)used + 1, sizeof *ex->starts);
    if (ex->starts == NULL) {
        release_cat(&ex->m.base);
        pyaclnnEmuSetError("%s: out of host memory", api);
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    ex->dim = d;
    int j = 0;
    int64_t start = 0;
    for (uint64_t i = 0; i < tensors->size; i++) {
        const aclTensor *t = tensors->values[i];
        if (skipped(t)) {
            continue;
        }
        ex->m.names[j] = "tensors";
        emu_snapshot(&ex->m.views[j], t);
        ex->starts[j++] = start;
        start += t->dims[d];
    }
    ex->m.names[j] = "out";
    emu_snapshot(&ex->m.views[j], out);
    return emu_executor_publish(api, &ex->m.base, executor);
}

static void cat_kernel(aclOpExecutor *base, emu_task *task)
{
    (void)task;
    const cat_exec *ex = (const cat_exec *)base;
    int n_in = ex->m.nviews - 1;
    const emu_view *out = &ex->m.views[n_in];
    for (int j = 0; j < n_in; j++) {
        const emu_view *in = &ex->m.views[j];
        int64_t n = emu_numel(in);
        int64_t shift = ex->starts[j] * out->strides[ex->dim];
        for (int64_t i = 0; i < n; i++) {
            emu_convert(in, emu_walk(in->ndim, in->dims, in->strides, i), out,
                        shift + emu_walk(in->ndim, in->dims, out->strides, i));
        }
    }
}

aclnnStatus aclnnCat(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, const aclrtStream stream)
{
    return emu_phase2_launch(k_name, k_name, workspace, workspaceSize, executor, stream, emu_multi_views, cat_kernel);
}
