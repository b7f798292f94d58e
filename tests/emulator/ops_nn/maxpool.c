/* Emulated aclnnMaxPool3dWithArgmax and aclnnMaxPool3dWithArgmaxBackward
 * (libopapi.so / libopapi_nn.so). Checks follow docs/operator-semantics.md (Pooling
 * parameters, MaxPool3dWithArgmax and MaxPool3dWithArgmaxBackward: check order) in
 * order, with the codes given there; the math is plain loops.
 *
 * Device rules: Atlas A2/A3 by default (int32 indices only; forward
 * dilation 1; D*H*W <= INT32_MAX), 950 with PYACLNN_EMU_SOC=950 (int64
 * indices, dilation > 1, no size limit). Documented choices: the forward rejects NDHWC storage (not emulated; A2/A3
 * reject it too); the backward rejects an output-size mismatch at phase 1
 * with 161002; an index outside its (n, c) plane is found by the kernel
 * task, which then writes nothing and leaves the device error 507035 on its
 * stream (reported by the next synchronization); it asks for a 32-byte
 * workspace.
 */
#include "ops_common.h"

#include "../aclnnop/aclnn_max_pool3d_with_argmax.h"
#include "../aclnnop/aclnn_max_pool3d_with_argmax_backward.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int k_identity[5] = {0, 1, 2, 3, 4};

static int is_pool_dtype(aclDataType t) { return t == ACL_FLOAT || t == ACL_FLOAT16 || t == ACL_BF16; }
static int is_index_dtype(aclDataType t) { return t == ACL_INT32 || (t == ACL_INT64 && pyaclnnEmuIs950()); }

static const char *index_rule(void)
{
    return pyaclnnEmuIs950() ? "INT32 or INT64" : "INT32 (Atlas A2/A3; INT64 only on 950: PYACLNN_EMU_SOC=950)";
}

static int64_t volume(const aclTensor *t)
{
    return t->dims[t->ndim - 3] * t->dims[t->ndim - 2] * t->dims[t->ndim - 1];
}

static int64_t tensor_numel(const aclTensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        n *= t->dims[i];
    }
    return n;
}

static int shape_exact(const aclTensor *t, const int64_t *want, int rank)
{
    if (t->ndim != rank) {
        return 0;
    }
    for (int i = 0; i < rank; i++) {
        if (t->dims[i] != want[i]) {
            return 0;
        }
    }
    return 1;
}

/* Shape check of step 7 (forward) and step 8 (backward): equal, or both
 * holding exactly one element. */
static int shape_matches(const aclTensor *t, const int64_t *want, int rank)
{
    int64_t want_numel = 1;
    for (int i = 0; i < rank; i++) {
        want_numel *= want[i];
    }
    if (shape_exact(t, want, rank)) {
        return 1;
    }
    return want_numel == 1 && tensor_numel(t) == 1;
}

static void want_str(const int64_t *want, int rank, char *buf, size_t n)
{
    if (rank == 5) {
        snprintf(buf, n, "(%lld, %lld, %lld, %lld, %lld)", (long long)want[0], (long long)want[1],
                 (long long)want[2], (long long)want[3], (long long)want[4]);
    } else {
        snprintf(buf, n, "(%lld, %lld, %lld, %lld)", (long long)want[0], (long long)want[1], (long long)want[2],
                 (long long)want[3]);
    }
}

/* ---- forward ------------------------------------------------------------ */

typedef struct {
    aclOpExecutor base;
    emu_view self, out, indices;
    int64_t in_dims[5], in_s[5], out_dims[5], out_s[5], idx_s[5];
    emu_pool_params pp;
} mp_forward;

static const char k_fwd_name[] = "aclnnMaxPool3dWithArgmax";

static void release_plain(aclOpExecutor *ex) { pyaclnnEmuFree(ex); }

/* The dtype rules the forward and the backward share: self pools, indices index. */
static aclnnStatus check_self_and_indices_dtypes(const char *api, const aclTensor *self,
                                                 const aclTensor *indices)
{
    if (!is_pool_dtype(self->dtype)) {
        pyaclnnEmuSetError("%s: self has dtype %s; expected FLOAT, FLOAT16 or BF16", api,
                           emu_dtype_name(self->dtype));
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (!is_index_dtype(indices->dtype)) {
        pyaclnnEmuSetError("%s: indices has dtype %s; expected %s", api, emu_dtype_name(indices->dtype),
                           index_rule());
        return ACLNN_ERR_PARAM_INVALID;
    }
    return ACLNN_SUCCESS;
}

aclnnStatus aclnnMaxPool3dWithArgmaxGetWorkspaceSize(const aclTensor *self, const aclIntArray *kernelSize,
                                                     const aclIntArray *stride, const aclIntArray *padding,
                                                     const aclIntArray *dilation, bool ceilMode, aclTensor *out,
                                                     aclTensor *indices, uint64_t *workspaceSize,
                                                     aclOpExecutor **executor)
{
    static const char api[] = "aclnnMaxPool3dWithArgmaxGetWorkspaceSize";
    /* 1. platform: the emulator is 950-like, always supported. 2. nulls. */
    const char *const names[] = {"self", "kernelSize", "stride", "padding", "dilation", "out", "indices"};
    const void *const ptrs[] = {self, kernelSize, stride, padding, dilation, out, indices};
    const int kinds[] = {EMU_TENSOR, EMU_INT_ARRAY, EMU_INT_ARRAY, EMU_INT_ARRAY, EMU_INT_ARRAY, EMU_TENSOR,
                         EMU_TENSOR};
    aclnnStatus rc = emu_check_args(api, 7, names, ptrs, kinds);
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_outputs(api, workspaceSize, executor);
    }
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    /* 3. dtypes */
    rc = check_self_and_indices_dtypes(api, self, indices);
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    if (out->dtype != self->dtype) {
        pyaclnnEmuSetError("%s: out has dtype %s; it must equal self's dtype %s", api, emu_dtype_name(out->dtype),
                           emu_dtype_name(self->dtype));
        return ACLNN_ERR_PARAM_INVALID;
    }
    /* 4. formats and rank */
    if (out->format != self->format || indices->format != self->format) {
        /* the tensor that differs from self is named first: it is the one to change */
        const aclTensor *bad = out->format != self->format ? out : indices;
        pyaclnnEmuSetError("%s: %s has storage format %d; self, out and indices must share one (self has %d)", api,
                           bad == out ? "out" : "indices", (int)bad->format, (int)self->format);
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (self->ndim != 4 && self->ndim != 5) {
        pyaclnnEmuSetError("%s: self has rank %d; expected 4 (C, D, H, W) or 5 (N, C, D, H, W)", api, self->ndim);
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (self->format != ACL_FORMAT_ND && self->format != ACL_FORMAT_NCDHW && self->format != ACL_FORMAT_NCHW) {
        pyaclnnEmuSetError("%s: self has storage format %d; the emulator accepts ND (2), NCHW (0) and NCDHW (30) "
                           "(NDHWC is not emulated)",
                           api, (int)self->format);
        return ACLNN_ERR_PARAM_INVALID;
    }
    /* 5. pooling parameters; dilation > 1 only on 950 */
    emu_pool_params pp;
    rc = emu_pool_params_parse(api, kernelSize, stride, padding, dilation, &pp);
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    if (!pyaclnnEmuIs950() && (pp.d[0] != 1 || pp.d[1] != 1 || pp.d[2] != 1)) {
        pyaclnnEmuSetError("%s: dilation (%lld, %lld, %lld) must be 1 on Atlas A2/A3 (> 1 only on 950)", api,
                           (long long)pp.d[0], (long long)pp.d[1], (long long)pp.d[2]);
        return ACLNN_ERR_PARAM_INVALID;
    }
    /* 6. empty: nothing to do */
    if (tensor_numel(self) == 0 || tensor_numel(out) == 0) {
        return ACLNN_SUCCESS;
    }
    /* 7. output shape */
    int rank = self->ndim, lead = rank - 3;
    int64_t want[5];
    for (int i = 0; i < lead; i++) {
        want[i] = self->dims[i];
    }
    for (int a = 0; a < 3; a++) {
        want[lead + a] = emu_pool_out_size(self->dims[lead + a], pp.k[a], pp.s[a], pp.p[a], pp.d[a], ceilMode);
        if (want[lead + a] <= 0) {
            pyaclnnEmuSetError("%s: the pooled size of spatial axis %d is %lld; the window does not fit the input",
                               api, a, (long long)want[lead + a]);
            return ACLNN_ERR_PARAM_INVALID;
        }
    }
    const aclTensor *checked[2] = {out, indices};
    const char *checked_names[2] = {"out", "indices"};
    for (int i = 0; i < 2; i++) {
        if (!shape_matches(checked[i], want, rank)) {
            char got[128], expected[128];
            emu_shape_str(checked[i], got, sizeof got);
            want_str(want, rank, expected, sizeof expected);
            pyaclnnEmuSetError("%s: %s has shape %s; the pooled shape is %s", api, checked_names[i], got, expected);
            return ACLNN_ERR_PARAM_INVALID;
        }
    }
    /* 8. A2/A3: the L0 op gives up on volumes above INT32_MAX */
    if (!pyaclnnEmuIs950() && volume(self) > INT32_MAX) {
        pyaclnnEmuSetError("%s: self's D*H*W = %lld exceeds INT32_MAX on Atlas A2/A3", api, (long long)volume(self));
        return ACLNN_ERR_INNER_NULLPTR;
    }
    mp_forward *ex = calloc(1, sizeof *ex);
    if (ex == NULL) {
        pyaclnnEmuSetError("%s: out of host memory", api);
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    ex->base = (aclOpExecutor){k_fwd_name, 0, release_plain, 0, 0};
    emu_snapshot(&ex->self, self);
    emu_snapshot(&ex->out, out);
    emu_snapshot(&ex->indices, indices);
    ex->pp = pp;
    emu_canon5(&ex->self, k_identity, ex->in_dims, ex->in_s);
    int64_t scratch[5];
    emu_canon5(&ex->out, k_identity, scratch, ex->out_s);
    emu_canon5(&ex->indices, k_identity, scratch, ex->idx_s);
    ex->out_dims[0] = 1;
    for (int i = 0; i < rank; i++) {
        ex->out_dims[5 - rank + i] = want[i];
    }
    /* An out or indices that passed step 7 with another shape holds exactly
     * one element: address it at offset 0. */
    if (!shape_exact(out, want, rank)) {
        memset(ex->out_s, 0, sizeof ex->out_s);
    }
    if (!shape_exact(indices, want, rank)) {
        memset(ex->idx_s, 0, sizeof ex->idx_s);
    }
    return emu_executor_publish(api, &ex->base, executor);
}

static void mp_forward_run(const mp_forward *ex)
{
    const int64_t D = ex->in_dims[2], H = ex->in_dims[3], W = ex->in_dims[4];
    const int64_t *is = ex->in_s, *os = ex->out_s, *xs = ex->idx_s;
    const emu_pool_params *pp = &ex->pp;
    for (int64_t n = 0; n < ex->out_dims[0]; n++) {
        for (int64_t c = 0; c < ex->out_dims[1]; c++) {
            const int64_t plane = n * is[0] + c * is[1];
            for (int64_t od = 0; od < ex->out_dims[2]; od++) {
                for (int64_t oh = 0; oh < ex->out_dims[3]; oh++) {
                    for (int64_t ow = 0; ow < ex->out_dims[4]; ow++) {
                        /* Scan in d, h, w order: a strictly greater value or any
                         * NaN replaces the best, so ties keep the first maximum
                         * and the last NaN wins. */
                        float best = -INFINITY;
                        int64_t best_index = -1;
                        for (int64_t kd = 0; kd < pp->k[0]; kd++) {
                            int64_t id = od * pp->s[0] - pp->p[0] + kd * pp->d[0];
                            if (id < 0 || id >= D) {
                                continue;
                            }
                            for (int64_t kh = 0; kh < pp->k[1]; kh++) {
                                int64_t ih = oh * pp->s[1] - pp->p[1] + kh * pp->d[1];
                                if (ih < 0 || ih >= H) {
                                    continue;
                                }
                                for (int64_t kw = 0; kw < pp->k[2]; kw++) {
                                    int64_t iw = ow * pp->s[2] - pp->p[2] + kw * pp->d[2];
                                    if (iw < 0 || iw >= W) {
                                        continue;
                                    }
                                    float v = (float)emu_load(&ex->self, plane + id * is[2] + ih * is[3] + iw * is[4]);
                                    int64_t flat = (id * H + ih) * W + iw;
                                    if (best_index < 0) {
                                        best_index = flat; /* first in-bounds cell */
                                    }
                                    if (v > best || isnan(v)) {
                                        best = v;
                                        best_index = flat;
                                    }
                                }
                            }
                        }
                        if (best_index < 0) {
                            best_index = 0; /* unreachable with the size rules; keep the output defined */
                        }
                        emu_store(&ex->out, n * os[0] + c * os[1] + od * os[2] + oh * os[3] + ow * os[4], best);
                        emu_store_index(&ex->indices, n * xs[0] + c * xs[1] + od * xs[2] + oh * xs[3] + ow * xs[4],
                                        best_index);
                    }
                }
            }
        }
    }
}

static int mp_forward_views(const aclOpExecutor *base, const char *names[], const emu_view *views[])
{
    const mp_forward *ex = (const mp_forward *)base;
    static const char *const k_names[] = {"self", "out", "indices"};
    const emu_view *const mine[] = {&ex->self, &ex->out, &ex->indices};
    return emu_views(3, k_names, mine, names, views);
}

static void mp_forward_kernel(aclOpExecutor *base, emu_task *task)
{
    (void)task;
    mp_forward_run((const mp_forward *)base);
}

aclnnStatus aclnnMaxPool3dWithArgmax(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                     aclrtStream stream)
{
    return emu_phase2_launch("aclnnMaxPool3dWithArgmax", k_fwd_name, workspace, workspaceSize, executor, stream,
                             mp_forward_views, mp_forward_kernel);
}

/* ---- backward ----------------------------------------------------------- */

typedef struct {
    aclOpExecutor base;
    emu_view grad_output, indices, grad_input;
    int64_t in_dims[5], gi_s[5], out_dims[5], go_s[5], idx_s[5];
} mp_backward;

static const char k_bwd_name[] = "aclnnMaxPool3dWithArgmaxBackward";
#define MP_BACKWARD_WORKSPACE 32

aclnnStatus aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self,
                                                             const aclTensor *indices, const aclIntArray *kernelSize,
                                                             const aclIntArray *stride, const aclIntArray *padding,
                                                             const aclIntArray *dilation, bool ceilMode,
                                                             aclTensor *gradInput, uint64_t *workspaceSize,
                                                             aclOpExecutor **executor)
{
    static const char api[] = "aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize";
    /* 1. nulls */
    const char *const names[] = {"gradOutput", "self", "indices", "kernelSize", "stride", "padding", "dilation",
                                 "gradInput"};
    const void *const ptrs[] = {gradOutput, self, indices, kernelSize, stride, padding, dilation, gradInput};
    const int kinds[] = {EMU_TENSOR,    EMU_TENSOR,    EMU_TENSOR,    EMU_INT_ARRAY,
                         EMU_INT_ARRAY, EMU_INT_ARRAY, EMU_INT_ARRAY, EMU_TENSOR};
    aclnnStatus rc = emu_check_args(api, 8, names, ptrs, kinds);
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_outputs(api, workspaceSize, executor);
    }
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    /* 2. dtypes */
    rc = check_self_and_indices_dtypes(api, self, indices);
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    if (gradOutput->dtype != self->dtype || gradInput->dtype != self->dtype) {
        const aclTensor *bad = gradOutput->dtype != self->dtype ? gradOutput : gradInput;
        pyaclnnEmuSetError("%s: %s has dtype %s; it must equal self's dtype %s", api,
                           bad == gradOutput ? "gradOutput" : "gradInput", emu_dtype_name(bad->dtype),
                           emu_dtype_name(self->dtype));
        return ACLNN_ERR_PARAM_INVALID;
    }
    /* 3. formats and ranks */
    if (gradOutput->format != self->format || gradInput->format != self->format) {
        /* the tensor that differs from self is named first: it is the one to change */
        const aclTensor *bad = gradOutput->format != self->format ? gradOutput : gradInput;
        pyaclnnEmuSetError("%s: %s has storage format %d; self, gradOutput and gradInput must share one "
                           "(self has %d)",
                           api, bad == gradOutput ? "gradOutput" : "gradInput", (int)bad->format, (int)self->format);
        return ACLNN_ERR_PARAM_INVALID;
    }
    const aclTensor *ranked[4] = {gradOutput, gradInput, indices, self};
    const char *ranked_names[4] = {"gradOutput", "gradInput", "indices", "self"};
    for (int i = 0; i < 4; i++) {
        if (emu_is_private_format(ranked[i]->format)) {
            pyaclnnEmuSetError("%s: %s has the private storage format %d; use ND, NCHW or NCDHW", api,
                               ranked_names[i], (int)ranked[i]->format);
            return ACLNN_ERR_PARAM_INVALID;
        }
    }
    for (int i = 0; i < 4; i++) {
        if (ranked[i]->ndim != 4 && ranked[i]->ndim != 5) {
            pyaclnnEmuSetError("%s: %s has rank %d; expected 4 or 5", api, ranked_names[i], ranked[i]->ndim);
            return ACLNN_ERR_PARAM_INVALID;
        }
    }
    /* 4. pooling parameters (dilation > 1 accepted, as the L2 code does) */
    emu_pool_params pp;
    rc = emu_pool_params_parse(api, kernelSize, stride, padding, dilation, &pp);
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    /* 5. A2/A3: D*H*W of self <= INT32_MAX (no limit on 950) */
    if (!pyaclnnEmuIs950() && volume(self) > INT32_MAX) {
        pyaclnnEmuSetError("%s: self's D*H*W = %lld exceeds INT32_MAX on Atlas A2/A3", api, (long long)volume(self));
        return ACLNN_ERR_PARAM_INVALID;
    }
    /* 6. exact shapes */
    char got[128], expected[128];
    if (!emu_same_shape(indices, gradOutput)) {
        emu_shape_str(indices, got, sizeof got);
        emu_shape_str(gradOutput, expected, sizeof expected);
        pyaclnnEmuSetError("%s: indices has shape %s; it must equal gradOutput's shape %s", api, got, expected);
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (!emu_same_shape(gradInput, self)) {
        emu_shape_str(gradInput, got, sizeof got);
        emu_shape_str(self, expected, sizeof expected);
        pyaclnnEmuSetError("%s: gradInput has shape %s; it must equal self's shape %s", api, got, expected);
        return ACLNN_ERR_PARAM_INVALID;
    }
    /* 7. empty: success, gradInput untouched */
    if (tensor_numel(gradOutput) == 0 || tensor_numel(self) == 0 || tensor_numel(indices) == 0) {
        return ACLNN_SUCCESS;
    }
    /* 8. the device tiling's output-size rule, reported here as 161002 */
    int rank = self->ndim, lead = rank - 3;
    int64_t want[5];
    for (int i = 0; i < lead; i++) {
        want[i] = self->dims[i];
    }
    for (int a = 0; a < 3; a++) {
        want[lead + a] = emu_pool_out_size(self->dims[lead + a], pp.k[a], pp.s[a], pp.p[a], pp.d[a], ceilMode);
    }
    if (gradOutput->ndim != rank || !shape_matches(gradOutput, want, rank)) {
        emu_shape_str(gradOutput, got, sizeof got);
        want_str(want, rank, expected, sizeof expected);
        pyaclnnEmuSetError("%s: gradOutput has shape %s; pooling self with these parameters gives %s", api, got,
                           expected);
        return ACLNN_ERR_PARAM_INVALID;
    }
    mp_backward *ex = calloc(1, sizeof *ex);
    if (ex == NULL) {
        pyaclnnEmuSetError("%s: out of host memory", api);
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    ex->base = (aclOpExecutor){k_bwd_name, MP_BACKWARD_WORKSPACE, release_plain, 0, 0};
    emu_snapshot(&ex->grad_output, gradOutput);
    emu_snapshot(&ex->indices, indices);
    emu_snapshot(&ex->grad_input, gradInput);
    emu_canon5(&ex->grad_input, k_identity, ex->in_dims, ex->gi_s);
    emu_canon5(&ex->grad_output, k_identity, ex->out_dims, ex->go_s);
    int64_t scratch[5];
    emu_canon5(&ex->indices, k_identity, scratch, ex->idx_s);
    *workspaceSize = MP_BACKWARD_WORKSPACE;
    return emu_executor_publish(api, &ex->base, executor);
}

static int mp_backward_views(const aclOpExecutor *base, const char *names[], const emu_view *views[])
{
    const mp_backward *ex = (const mp_backward *)base;
    static const char *const k_names[] = {"gradOutput", "indices", "gradInput"};
    const emu_view *const mine[] = {&ex->grad_output, &ex->indices, &ex->grad_input};
    return emu_views(3, k_names, mine, names, views);
}

/* The device's index guard: every index must lie in its (n, c) plane. The
 * first one that does not becomes the stream's device error; 0 if none. */
static int mp_backward_bad_index(const mp_backward *ex, emu_task *task)
{
    const int64_t *od = ex->out_dims, *xs = ex->idx_s, *id = ex->in_dims;
    const int64_t plane = id[2] * id[3] * id[4];
    for (int64_t n = 0; n < od[0]; n++) {
        for (int64_t c = 0; c < od[1]; c++) {
            for (int64_t d = 0; d < od[2]; d++) {
                for (int64_t h = 0; h < od[3]; h++) {
                    for (int64_t w = 0; w < od[4]; w++) {
                        int64_t v = emu_load_index(&ex->indices, n * xs[0] + c * xs[1] + d * xs[2] + h * xs[3] + w * xs[4]);
                        if (v < 0 || v >= plane) {
                            pyaclnnEmuTaskFail(task, ACL_ERROR_RT_VECTOR_CORE_EXCEPTION,
                                               "%s: indices[%lld, %lld, %lld, %lld, %lld] = %lld lies outside its "
                                               "(n, c) plane of %lld elements",
                                               k_bwd_name, (long long)n, (long long)c, (long long)d, (long long)h,
                                               (long long)w, (long long)v, (long long)plane);
                            return 1;
                        }
                    }
                }
            }
        }
    }
    return 0;
}

static void mp_backward_kernel(aclOpExecutor *base, emu_task *task)
{
    const mp_backward *ex = (const mp_backward *)base;
    const int64_t *od = ex->out_dims, *xs = ex->idx_s, *gs = ex->go_s, *id = ex->in_dims, *is = ex->gi_s;
    const int64_t plane = id[2] * id[3] * id[4];
    if (mp_backward_bad_index(ex, task)) {
        return; /* nothing written */
    }
    float *acc = calloc((size_t)(id[0] * id[1] * plane), sizeof *acc);
    if (acc == NULL) {
        pyaclnnEmuTaskFail(task, ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory for the fp32 accumulator",
                           k_bwd_name);
        return;
    }
    /* gradInput = zeros, then scatter-add in fp32; round once at the end. */
    for (int64_t n = 0; n < od[0]; n++) {
        for (int64_t c = 0; c < od[1]; c++) {
            float *dst = acc + (n * id[1] + c) * plane;
            for (int64_t d = 0; d < od[2]; d++) {
                for (int64_t h = 0; h < od[3]; h++) {
                    for (int64_t w = 0; w < od[4]; w++) {
                        int64_t where = emu_load_index(&ex->indices, n * xs[0] + c * xs[1] + d * xs[2] + h * xs[3] + w * xs[4]);
                        dst[where] += (float)emu_load(&ex->grad_output, n * gs[0] + c * gs[1] + d * gs[2] + h * gs[3] + w * gs[4]);
                    }
                }
            }
        }
    }
    const float *src = acc;
    for (int64_t n = 0; n < id[0]; n++) {
        for (int64_t c = 0; c < id[1]; c++) {
            for (int64_t d = 0; d < id[2]; d++) {
                for (int64_t h = 0; h < id[3]; h++) {
                    for (int64_t w = 0; w < id[4]; w++) {
                        emu_store(&ex->grad_input, n * is[0] + c * is[1] + d * is[2] + h * is[3] + w * is[4], *src++);
                    }
                }
            }
        }
    }
    pyaclnnEmuFree(acc);
}

aclnnStatus aclnnMaxPool3dWithArgmaxBackward(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                             aclrtStream stream)
{
    return emu_phase2_launch(k_bwd_name, k_bwd_name, workspace, workspaceSize, executor, stream, mp_backward_views,
                             mp_backward_kernel);
}
