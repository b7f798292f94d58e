/* Emulated aclnnLayerNorm (libopapi.so / libopapi_nn.so): normalization of input
 * over its trailing normalizedShape dimensions, times weight plus bias (either
 * may be NULL), with the mean and the reciprocal standard deviation (biased
 * variance) of each row when meanOutOptional / rstdOutOptional are given. These
 * two are shaped like input with the normalized dimensions set to 1; CANN's
 * header does not state their type, so the emulator takes input's type or FLOAT.
 * Statistics in double, each output rounded once.
 */
#include "ops_common.h"

#include "../aclnnop/aclnn_layer_norm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char k_name[] = "aclnnLayerNorm";

enum { LN_INPUT, LN_OUT, LN_WEIGHT, LN_BIAS, LN_MEAN, LN_RSTD, LN_VIEWS };

typedef struct {
    emu_multi_exec m; /* views: input, out, then weight, bias, mean, rstd (data NULL when absent) */
    int k; /* normalized dimensions */
    double eps;
    int has[LN_VIEWS];
} ln_exec;

static int is_ln_dtype(aclDataType t) { return t == ACL_FLOAT || t == ACL_FLOAT16 || t == ACL_BF16; }

static aclnnStatus check_optional(const char *api, const char *arg, const aclTensor *t)
{
    return t == NULL ? ACLNN_SUCCESS : emu_check_tensor(api, arg, t);
}

aclnnStatus aclnnLayerNormGetWorkspaceSize(const aclTensor *input, const aclIntArray *normalizedShape,
                                           const aclTensor *weightOptional, const aclTensor *biasOptional, double eps,
                                           aclTensor *out, aclTensor *meanOutOptional, aclTensor *rstdOutOptional,
                                           uint64_t *workspaceSize, aclOpExecutor **executor)
{
    static const char api[] = "aclnnLayerNormGetWorkspaceSize";
    const char *const names[] = {"input", "normalizedShape", "out"};
    const void *const ptrs[] = {input, normalizedShape, out};
    const int kinds[] = {EMU_TENSOR, EMU_INT_ARRAY, EMU_TENSOR};
    aclnnStatus rc = emu_check_args(api, 3, names, ptrs, kinds);
    const aclTensor *opt[4] = {weightOptional, biasOptional, meanOutOptional, rstdOutOptional};
    static const char *const opt_names[4] = {"weightOptional", "biasOptional", "meanOutOptional", "rstdOutOptional"};
    for (int i = 0; rc == ACLNN_SUCCESS && i < 4; i++) {
        rc = check_optional(api, opt_names[i], opt[i]);
    }
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_outputs(api, workspaceSize, executor);
    }
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    if (!is_ln_dtype(input->dtype)) {
        pyaclnnEmuSetError("%s: input has dtype %s; expected FLOAT, FLOAT16 or BF16", api,
                           emu_dtype_name(input->dtype));
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (out->dtype != input->dtype) {
        pyaclnnEmuSetError("%s: out has dtype %s; it must equal input's dtype %s", api, emu_dtype_name(out->dtype),
                           emu_dtype_name(input->dtype));
        return ACLNN_ERR_PARAM_INVALID;
    }
    for (int i = 0; i < 4; i++) {
        if (opt[i] != NULL && opt[i]->dtype != input->dtype && opt[i]->dtype != ACL_FLOAT) {
            pyaclnnEmuSetError("%s: %s has dtype %s; expected input's dtype %s or FLOAT", api, opt_names[i],
                               emu_dtype_name(opt[i]->dtype), emu_dtype_name(input->dtype));
            return ACLNN_ERR_PARAM_INVALID;
        }
    }
    int rank = input->ndim;
    int k = (int)normalizedShape->size;
    if (k < 1 || k > rank) {
        pyaclnnEmuSetError("%s: normalizedShape has %d values; it must have 1 to input's rank (%d)", api, k, rank);
        return ACLNN_ERR_PARAM_INVALID;
    }
    for (int i = 0; i < k; i++) {
        if (normalizedShape->values[i] != input->dims[rank - k + i]) {
            pyaclnnEmuSetError("%s: normalizedShape[%d] = %lld; it must equal input's trailing size %lld", api, i,
                               (long long)normalizedShape->values[i], (long long)input->dims[rank - k + i]);
            return ACLNN_ERR_PARAM_INVALID;
        }
    }
    char a[128], b[128];
    if (!emu_same_shape(out, input)) {
        emu_shape_str(out, a, sizeof a);
        emu_shape_str(input, b, sizeof b);
        pyaclnnEmuSetError("%s: out has shape %s; it must equal input's shape %s", api, a, b);
        return ACLNN_ERR_PARAM_INVALID;
    }
    for (int i = 0; i < 2; i++) {
        if (opt[i] == NULL) {
            continue;
        }
        int ok = opt[i]->ndim == k;
        for (int j = 0; ok && j < k; j++) {
            ok = opt[i]->dims[j] == normalizedShape->values[j];
        }
        if (!ok) {
            emu_shape_str(opt[i], a, sizeof a);
            pyaclnnEmuSetError("%s: %s has shape %s; it must equal normalizedShape", api, opt_names[i], a);
            return ACLNN_ERR_PARAM_INVALID;
        }
    }
    for (int i = 2; i < 4; i++) {
        if (opt[i] == NULL) {
            continue;
        }
        int ok = opt[i]->ndim == rank;
        for (int j = 0; ok && j < rank; j++) {
            ok = opt[i]->dims[j] == (j < rank - k ? input->dims[j] : 1);
        }
        if (!ok) {
            emu_shape_str(opt[i], a, sizeof a);
            pyaclnnEmuSetError("%s: %s has shape %s; it must be input's shape with the normalized dimensions set to 1",
                               api, opt_names[i], a);
            return ACLNN_ERR_PARAM_INVALID;
        }
    }
    if (emu_tensor_numel(input) == 0) {
        return ACLNN_SUCCESS;
    }
    ln_exec *ex = (ln_exec *)emu_multi_new(api, k_name, sizeof(ln_exec), LN_VIEWS);
    if (ex == NULL) {
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    static const char *const view_names[LN_VIEWS] = {"input",        "out", "weightOptional", "biasOptional",
                                                     "meanOutOptional", "rstdOutOptional"};
    const aclTensor *all[LN_VIEWS] = {input, out, weightOptional, biasOptional, meanOutOptional, rstdOutOptional};
    for (int i = 0; i < LN_VIEWS; i++) {
        ex->m.names[i] = view_names[i];
        ex->has[i] = all[i] != NULL;
        if (all[i] != NULL) {
            emu_snapshot(&ex->m.views[i], all[i]); /* absent ones stay zeroed: no memory to check */
        }
    }
    ex->k = k;
    ex->eps = eps;
    return emu_executor_publish(api, &ex->m.base, executor);
}

static void ln_kernel(aclOpExecutor *base, emu_task *task)
{
    (void)task;
    const ln_exec *ex = (const ln_exec *)base;
    const emu_view *v = ex->m.views;
    const emu_view *in = &v[LN_INPUT];
    int rank = in->ndim, lead = rank - ex->k;
    int64_t rows = 1, cols = 1;
    for (int i = 0; i < rank; i++) {
        *(i < lead ? &rows : &cols) *= in->dims[i];
    }
    const int64_t *ndims = in->dims + lead; /* the normalized dimensions */
    for (int64_t r = 0; r < rows; r++) {
        int64_t in_row = emu_walk(lead, in->dims, in->strides, r);
        int64_t out_row = emu_walk(lead, v[LN_OUT].dims, v[LN_OUT].strides, r);
        double sum = 0;
        for (int64_t c = 0; c < cols; c++) {
            sum += emu_load(in, in_row + emu_walk(ex->k, ndims, in->strides + lead, c));
        }
        double mean = sum / (double)cols, sq = 0;
        for (int64_t c = 0; c < cols; c++) {
            double d = emu_load(in, in_row + emu_walk(ex->k, ndims, in->strides + lead, c)) - mean;
            sq += d * d;
        }
        double rstd = 1.0 / sqrt(sq / (double)cols + ex->eps);
        for (int64_t c = 0; c < cols; c++) {
            double y = (emu_load(in, in_row + emu_walk(ex->k, ndims, in->strides + lead, c)) - mean) * rstd;
            if (ex->has[LN_WEIGHT]) {
                y *= emu_load(&v[LN_WEIGHT], emu_walk(ex->k, ndims, v[LN_WEIGHT].strides, c));
            }
            if (ex->has[LN_BIAS]) {
                y += emu_load(&v[LN_BIAS], emu_walk(ex->k, ndims, v[LN_BIAS].strides, c));
            }
            emu_store(&v[LN_OUT], out_row + emu_walk(ex->k, ndims, v[LN_OUT].strides + lead, c), y);
        }
        if (ex->has[LN_MEAN]) {
            emu_store(&v[LN_MEAN], emu_walk(lead, v[LN_MEAN].dims, v[LN_MEAN].strides, r), mean);
        }
        if (ex->has[LN_RSTD]) {
            emu_store(&v[LN_RSTD], emu_walk(lead, v[LN_RSTD].dims, v[LN_RSTD].strides, r), rstd);
        }
    }
}

aclnnStatus aclnnLayerNorm(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream)
{
    return emu_phase2_launch(k_name, k_name, workspace, workspaceSize, executor, stream, emu_multi_views, ln_kernel);
}
