/* Emulated aclnnReduceSum (libopapi.so / libopapi_math.so): the sum of self over
 * dims (empty dims: every dimension), kept as size-1 dimensions with keepDims,
 * written as dtype (out's type must be dtype). Integer and bool inputs sum
 * exactly in int64 (wrapping); floating ones in double, rounded once into out.
 * An empty reduction gives 0.
 */
#include "ops_common.h"

#include "../aclnnop/aclnn_reduce_sum.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char k_name[] = "aclnnReduceSum";

typedef struct {
    emu_multi_exec m; /* views: self, out */
    int64_t acc_strides[EMU_MAX_DIMS]; /* self axis -> step in the row-major result; 0 on reduced axes */
    int64_t out_numel;
} sum_exec;

aclnnStatus aclnnReduceSumGetWorkspaceSize(const aclTensor *self, const aclIntArray *dims, bool keepDims,
                                           aclDataType dtype, aclTensor *out, uint64_t *workspaceSize,
                                           aclOpExecutor **executor)
{
    static const char api[] = "aclnnReduceSumGetWorkspaceSize";
    const char *const names[] = {"self", "dims", "out"};
    const void *const ptrs[] = {self, dims, out};
    const int kinds[] = {EMU_TENSOR, EMU_INT_ARRAY, EMU_TENSOR};
    aclnnStatus rc = emu_check_args(api, 3, names, ptrs, kinds);
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
    if (!emu_is_basic_dtype(dtype)) {
        pyaclnnEmuSetError("%s: dtype %d (%s) is not a supported result type", api, (int)dtype, emu_dtype_name(dtype));
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (out->dtype != dtype) {
        pyaclnnEmuSetError("%s: out has dtype %s; it must be dtype (%s)", api, emu_dtype_name(out->dtype),
                           emu_dtype_name(dtype));
        return ACLNN_ERR_PARAM_INVALID;
    }
    int rank = self->ndim;
    int reduced[EMU_MAX_DIMS] = {0};
    for (uint64_t i = 0; i < dims->size; i++) {
        int64_t v = dims->values[i];
        int64_t lim = rank > 0 ? rank : 1; /* a 0-d tensor takes 0 and -1 */
        if (v < -lim || v >= lim) {
            pyaclnnEmuSetError("%s: dims[%llu] = %lld is out of range for self of rank %d", api, (unsigned long long)i,
                               (long long)v, rank);
            return ACLNN_ERR_PARAM_INVALID;
        }
        int k = (int)(v < 0 ? v + lim : v);
        if (rank > 0 && reduced[k]) {
            pyaclnnEmuSetError("%s: dims names dimension %d twice", api, k);
            return ACLNN_ERR_PARAM_INVALID;
        }
        if (rank > 0) {
            reduced[k] = 1;
        }
    }
    if (dims->size == 0) {
        for (int k = 0; k < rank; k++) {
            reduced[k] = 1;
        }
    }
    int64_t want[EMU_MAX_DIMS];
    int want_rank = 0;
    for (int k = 0; k < rank; k++) {
        if (!reduced[k]) {
            want[want_rank++] = self->dims[k];
        } else if (keepDims) {
            want[want_rank++] = 1;
        }
    }
    int ok = out->ndim == want_rank;
    for (int k = 0; ok && k < want_rank; k++) {
        ok = out->dims[k] == want[k];
    }
    if (!ok) {
        char a[128];
        emu_shape_str(out, a, sizeof a);
        pyaclnnEmuSetError("%s: out has shape %s; reducing self over dims%s gives rank %d with other sizes", api, a,
                           keepDims ? " with keepDims" : "", want_rank);
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (emu_tensor_numel(out) == 0) {
        return ACLNN_SUCCESS;
    }
    sum_exec *ex = (sum_exec *)emu_multi_new(api, k_name, sizeof(sum_exec), 2);
    if (ex == NULL) {
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    ex->m.names[0] = "self";
    ex->m.names[1] = "out";
    emu_snapshot(&ex->m.views[0], self);
    emu_snapshot(&ex->m.views[1], out);
    int64_t step = 1;
    for (int k = rank - 1; k >= 0; k--) {
        ex->acc_strides[k] = reduced[k] ? 0 : step;
        step *= reduced[k] ? 1 : self->dims[k];
    }
    ex->out_numel = emu_tensor_numel(out);
    return emu_executor_publish(api, &ex->m.base, executor);
}

static void sum_kernel(aclOpExecutor *base, emu_task *task)
{
    const sum_exec *ex = (const sum_exec *)base;
    const emu_view *self = &ex->m.views[0], *out = &ex->m.views[1];
    int integral = emu_is_int_dtype(self->dtype);
    size_t cells = (size_t)ex->out_numel;
    double *facc = integral ? NULL : calloc(cells, sizeof *facc);
    int64_t *iacc = integral ? calloc(cells, sizeof *iacc) : NULL;
    if (facc == NULL && iacc == NULL) {
        pyaclnnEmuTaskFail(task, ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k_name);
        return;
    }
    int64_t n = emu_numel(self);
    for (int64_t i = 0; i < n; i++) {
        int64_t si = emu_walk(self->ndim, self->dims, self->strides, i);
        int64_t cell = emu_walk(self->ndim, self->dims, ex->acc_strides, i);
        if (integral) {
            iacc[cell] = (int64_t)((uint64_t)iacc[cell] + (uint64_t)emu_load_i64(self, si));
        } else {
            facc[cell] += emu_load(self, si);
        }
    }
    for (int64_t c = 0; c < ex->out_numel; c++) {
        int64_t oi = emu_walk(out->ndim, out->dims, out->strides, c);
        if (!integral) {
            emu_store(out, oi, facc[c]);
        } else if (emu_is_int_dtype(out->dtype)) {
            emu_store_i64(out, oi, iacc[c]);
        } else {
            emu_store(out, oi, (double)iacc[c]);
        }
    }
    pyaclnnEmuFree(facc);
    pyaclnnEmuFree(iacc);
}

aclnnStatus aclnnReduceSum(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream)
{
    return emu_phase2_launch(k_name, k_name, workspace, workspaceSize, executor, stream, emu_multi_views, sum_kernel);
}
