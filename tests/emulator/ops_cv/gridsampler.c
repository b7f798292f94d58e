/* Emulated aclnnGridSampler3D and aclnnGridSampler3DBackward (libopapi.so /
 * libopapi_cv.so). Checks follow docs/operator-semantics.md (GridSampler3D and
 * GridSampler3DBackward: check order) in order, with
 * the codes given there (161002 where the document leaves it unconfirmed);
 * the math is gs_impl.h, in float for float32/float16/bfloat16 data and in
 * double for double data, rounded once on store.
 *
 * Layout: NDHWC when input's storage format is ACL_FORMAT_NDHWC (then
 * input, out / gradOutput and inputGrad are viewed as (N, D, H, W, C)),
 * otherwise NCDHW. grid and gridGrad are always (N, Do, Ho, Wo, 3).
 * The backward asks for a 32-byte workspace.
 */
#include "ops_common.h"

#include "../aclnnop/aclnn_grid_sampler3d.h"
#include "../aclnnop/aclnn_grid_sampler3d_backward.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    aclOpExecutor base;
    emu_view input, grid, out, grad_output, input_grad, grid_grad;
    int64_t in_dims[5], in_s[5];   /* input, canonical (N, C, D, H, W) */
    int64_t out_dims[5], go_s[5];  /* out or gradOutput, canonical */
    int64_t ig_s[5];               /* inputGrad, canonical */
    int64_t grid_s[5], gg_s[5];    /* grid / gridGrad, (N, Do, Ho, Wo, 3) */
    int interp, pad, align, mask[2];
} gs_exec;

#define GS_T float
#define GS_SUFFIX f
#include "gs_impl.h"
#undef GS_T
#undef GS_SUFFIX
#define GS_T double
#define GS_SUFFIX d
#include "gs_impl.h"
#undef GS_T
#undef GS_SUFFIX

static const int k_ncdhw[5] = {0, 1, 2, 3, 4};
static const int k_ndhwc[5] = {0, 4, 1, 2, 3};
static const char k_fwd_name[] = "aclnnGridSampler3D";
static const char k_bwd_name[] = "aclnnGridSampler3DBackward";
#define GS_BACKWARD_WORKSPACE 32

static void release_plain(aclOpExecutor *ex) { pyaclnnEmuFree(ex); }

static int is_gs_dtype(aclDataType t)
{
    return t == ACL_FLOAT || t == ACL_FLOAT16 || t == ACL_BF16 || t == ACL_DOUBLE;
}

static int64_t numel(const aclTensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        n *= t->dims[i];
    }
    return n;
}

static aclnnStatus check_same_dtype(const char *api, const aclTensor *input, int n, const char *const names[],
                                    const aclTensor *const tensors[])
{
    for (int i = 0; i < n; i++) {
        if (tensors[i]->dtype != input->dtype) {
            pyaclnnEmuSetError("%s: %s has dtype %s; it must equal input's dtype %s", api, names[i],
                               emu_dtype_name(tensors[i]->dtype), emu_dtype_name(input->dtype));
            return ACLNN_ERR_PARAM_INVALID;
        }
    }
    if (!is_gs_dtype(input->dtype)) {
        pyaclnnEmuSetError("%s: input has dtype %s; expected FLOAT, FLOAT16, BF16 or DOUBLE", api,
                           emu_dtype_name(input->dtype));
        return ACLNN_ERR_PARAM_INVALID;
    }
    return ACLNN_SUCCESS;
}

static aclnnStatus check_modes(const char *api, int64_t interpolationMode, int64_t paddingMode)
{
    if (paddingMode < 0 || paddingMode > 2) {
        pyaclnnEmuSetError("%s: paddingMode %lld is invalid; expected 0 (zeros), 1 (border) or 2 (reflection)", api,
                           (long long)paddingMode);
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (interpolationMode < 0 || interpolationMode > 1) {
        pyaclnnEmuSetError("%s: interpolationMode %lld is invalid; expected 0 (bilinear) or 1 (nearest)", api,
                           (long long)interpolationMode);
        return ACLNN_ERR_PARAM_INVALID;
    }
    return ACLNN_SUCCESS;
}

static aclnnStatus check_rank5(const char *api, const char *name, const aclTensor *t)
{
    if (t->ndim != 5) {
        pyaclnnEmuSetError("%s: %s has rank %d; expected 5", api, name, t->ndim);
        return ACLNN_ERR_PARAM_INVALID;
    }
    return ACLNN_SUCCESS;
}

/* Shape rules shared by both ops: `data` is out (forward) or gradOutput
 * (backward), read in the layout chosen by input's format. */
static aclnnStatus check_shapes(const char *api, const aclTensor *input, const aclTensor *grid, const aclTensor *data,
                                const char *data_name, int ndhwc)
{
    int c_axis = ndhwc ? 4 : 1, sp = ndhwc ? 1 : 2;
    /* Each message names the tensor that differs first (the one to change): input gives N and
     * C, the grid the sampled Do, Ho, Wo. */
    if (grid->dims[0] != input->dims[0] || data->dims[0] != input->dims[0]) {
        int grid_bad = grid->dims[0] != input->dims[0];
        pyaclnnEmuSetError("%s: batch sizes differ: %s N = %lld, input N = %lld", api, grid_bad ? "grid" : data_name,
                           (long long)(grid_bad ? grid : data)->dims[0], (long long)input->dims[0]);
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (input->dims[c_axis] != data->dims[c_axis]) {
        pyaclnnEmuSetError("%s: channels differ: %s C = %lld, input C = %lld (dim %d, %s layout)", api, data_name,
                           (long long)data->dims[c_axis], (long long)input->dims[c_axis], c_axis,
                           ndhwc ? "NDHWC" : "NCDHW");
        return ACLNN_ERR_PARAM_INVALID;
    }
    for (int i = 0; i < 3; i++) {
        if (grid->dims[1 + i] != data->dims[sp + i]) {
            char g[128], o[128];
            emu_shape_str(grid, g, sizeof g);
            emu_shape_str(data, o, sizeof o);
            pyaclnnEmuSetError("%s: %s %s must have the Do, Ho, Wo of grid (N, Do, Ho, Wo, 3) = %s", api, data_name, o,
                               g);
            return ACLNN_ERR_PARAM_INVALID;
        }
    }
    return ACLNN_SUCCESS;
}

static aclnnStatus check_grid_last(const char *api, const aclTensor *grid)
{
    if (grid->dims[4] != 3) {
        pyaclnnEmuSetError("%s: grid's last dim is %lld; it must be 3 (x, y, z)", api, (long long)grid->dims[4]);
        return ACLNN_ERR_PARAM_INVALID;
    }
    return ACLNN_SUCCESS;
}

static gs_exec *new_exec(const char *api, const char *name, uint64_t workspace, const aclTensor *input,
                         const aclTensor *grid, const aclTensor *data, int64_t interp, int64_t pad, bool align)
{
    gs_exec *e = calloc(1, sizeof *e);
    if (e == NULL) {
        pyaclnnEmuSetError("%s: out of host memory", api);
        return NULL;
    }
    e->base = (aclOpExecutor){name, workspace, release_plain, 0, 0};
    const int *perm = input->format == ACL_FORMAT_NDHWC ? k_ndhwc : k_ncdhw;
    emu_snapshot(&e->input, input);
    emu_snapshot(&e->grid, grid);
    emu_view data_view;
    emu_snapshot(&data_view, data);
    emu_canon5(&e->input, perm, e->in_dims, e->in_s);
    emu_canon5(&data_view, perm, e->out_dims, e->go_s);
    for (int i = 0; i < 5; i++) {
        e->grid_s[i] = grid->strides[i];
    }
    e->interp = (int)interp;
    e->pad = (int)pad;
    e->align = align;
    if (name == k_fwd_name) {
        e->out = data_view;
    } else {
        e->grad_output = data_view;
    }
    return e;
}

/* ---- forward ------------------------------------------------------------ */

aclnnStatus aclnnGridSampler3DGetWorkspaceSize(const aclTensor *input, const aclTensor *grid, int64_t interpolationMode,
                                               int64_t paddingMode, bool alignCorners, aclTensor *out,
                                               uint64_t *workspaceSize, aclOpExecutor **executor)
{
    static const char api[] = "aclnnGridSampler3DGetWorkspaceSize";
    /* 1. nulls */
    const char *const names[] = {"input", "grid", "out"};
    const void *const ptrs[] = {input, grid, out};
    const int kinds[] = {EMU_TENSOR, EMU_TENSOR, EMU_TENSOR};
    aclnnStatus rc = emu_check_args(api, 3, names, ptrs, kinds);
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_outputs(api, workspaceSize, executor);
    }
    /* 2. dtypes */
    if (rc == ACLNN_SUCCESS) {
        const char *const same_names[] = {"grid", "out"};
        const aclTensor *const same[] = {grid, out};
        rc = check_same_dtype(api, input, 2, same_names, same);
    }
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    /* 3. formats */
    const aclTensor *formatted[2] = {input, out};
    for (int i = 0; i < 2; i++) {
        aclFormat f = formatted[i]->format;
        if (f != ACL_FORMAT_NCDHW && f != ACL_FORMAT_NDHWC && f != ACL_FORMAT_ND) {
            pyaclnnEmuSetError("%s: %s has storage format %d; expected NCDHW (30), NDHWC (27) or ND (2)", api,
                               i == 0 ? "input" : "out", (int)f);
            return ACLNN_ERR_PARAM_INVALID;
        }
    }
    /* 4. modes */
    rc = check_modes(api, interpolationMode, paddingMode);
    /* 5. shapes */
    if (rc == ACLNN_SUCCESS) {
        rc = check_rank5(api, "input", input);
    }
    if (rc == ACLNN_SUCCESS) {
        rc = check_rank5(api, "grid", grid);
    }
    if (rc == ACLNN_SUCCESS) {
        rc = check_rank5(api, "out", out);
    }
    int ndhwc = input->format == ACL_FORMAT_NDHWC;
    if (rc == ACLNN_SUCCESS) {
        rc = check_shapes(api, input, grid, out, "out", ndhwc);
    }
    if (rc == ACLNN_SUCCESS && (input->dims[3] == 0 || input->dims[4] == 0)) {
        pyaclnnEmuSetError("%s: input dims 3 and 4 must not be 0; input dims are (%lld, %lld, %lld, %lld, %lld)", api,
                           (long long)input->dims[0], (long long)input->dims[1], (long long)input->dims[2],
                           (long long)input->dims[3], (long long)input->dims[4]);
        rc = ACLNN_ERR_PARAM_INVALID;
    }
    if (rc == ACLNN_SUCCESS) {
        rc = check_grid_last(api, grid);
    }
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    /* 6. empty */
    if (numel(input) == 0 || numel(grid) == 0) {
        return ACLNN_SUCCESS;
    }
    gs_exec *e = new_exec(api, k_fwd_name, 0, input, grid, out, interpolationMode, paddingMode, alignCorners);
    if (e == NULL) {
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    return emu_executor_publish(api, &e->base, executor);
}

static int gs_forward_views(const aclOpExecutor *base, const char *names[], const emu_view *views[])
{
    const gs_exec *e = (const gs_exec *)base;
    static const char *const k_names[] = {"input", "grid", "out"};
    const emu_view *const mine[] = {&e->input, &e->grid, &e->out};
    return emu_views(3, k_names, mine, names, views);
}

static void gs_forward_kernel(aclOpExecutor *base, emu_task *task)
{
    (void)task;
    const gs_exec *e = (const gs_exec *)base;
    if (e->input.dtype == ACL_DOUBLE) {
        gs_forward_d(e);
    } else {
        gs_forward_f(e);
    }
}

aclnnStatus aclnnGridSampler3D(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream)
{
    return emu_phase2_launch(k_fwd_name, k_fwd_name, workspace, workspaceSize, executor, stream, gs_forward_views,
                             gs_forward_kernel);
}

/* ---- backward ----------------------------------------------------------- */

aclnnStatus aclnnGridSampler3DBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *input,
                                                       const aclTensor *grid, int64_t interpolationMode,
                                                       int64_t paddingMode, bool alignCorners,
                                                       const aclBoolArray *outputMask, aclTensor *inputGrad,
                                                       aclTensor *gridGrad, uint64_t *workspaceSize,
                                                       aclOpExecutor **executor)
{
    static const char api[] = "aclnnGridSampler3DBackwardGetWorkspaceSize";
    /* 0. workspaceSize / executor */
    aclnnStatus rc = emu_check_outputs(api, workspaceSize, executor);
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    /* 1. no mask: nothing to compute, nothing else checked */
    if (outputMask == NULL) {
        return ACLNN_SUCCESS;
    }
    /* 2. nulls */
    const char *const names[] = {"gradOutput", "input", "grid", "inputGrad", "gridGrad", "outputMask"};
    const void *const ptrs[] = {gradOutput, input, grid, inputGrad, gridGrad, outputMask};
    const int kinds[] = {EMU_TENSOR, EMU_TENSOR, EMU_TENSOR, EMU_TENSOR, EMU_TENSOR, EMU_BOOL_ARRAY};
    rc = emu_check_args(api, 6, names, ptrs, kinds);
    /* 3. dtypes */
    if (rc == ACLNN_SUCCESS) {
        const char *const same_names[] = {"gradOutput", "grid", "inputGrad", "gridGrad"};
        const aclTensor *const same[] = {gradOutput, grid, inputGrad, gridGrad};
        rc = check_same_dtype(api, input, 4, same_names, same);
    }
    /* 4. modes */
    if (rc == ACLNN_SUCCESS) {
        rc = check_modes(api, interpolationMode, paddingMode);
    }
    /* 5. shapes */
    if (rc == ACLNN_SUCCESS) {
        rc = check_rank5(api, "input", input);
    }
    if (rc == ACLNN_SUCCESS) {
        rc = check_rank5(api, "grid", grid);
    }
    if (rc == ACLNN_SUCCESS) {
        rc = check_rank5(api, "gradOutput", gradOutput);
    }
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    int ndhwc = input->format == ACL_FORMAT_NDHWC;
    rc = check_shapes(api, input, grid, gradOutput, "gradOutput", ndhwc);
    if (rc == ACLNN_SUCCESS) {
        rc = check_grid_last(api, grid);
    }
    const aclTensor *results[2] = {inputGrad, gridGrad}, *sources[2] = {input, grid};
    for (int i = 0; rc == ACLNN_SUCCESS && i < 2; i++) {
        if (!emu_same_shape(results[i], sources[i])) {
            char got[128], want[128];
            emu_shape_str(results[i], got, sizeof got);
            emu_shape_str(sources[i], want, sizeof want);
            pyaclnnEmuSetError("%s: %s has shape %s; it must equal %s's shape %s", api, i ? "gridGrad" : "inputGrad",
                               got, i ? "grid" : "input", want);
            rc = ACLNN_ERR_PARAM_INVALID;
        }
    }
    /* 6. mask length */
    if (rc == ACLNN_SUCCESS && outputMask->size != 2) {
        pyaclnnEmuSetError("%s: outputMask has %llu values; it must have 2 (inputGrad, gridGrad)", api,
                           (unsigned long long)outputMask->size);
        rc = ACLNN_ERR_PARAM_INVALID;
    }
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    /* 7. empty, or nothing requested: success, neither output written */
    if (numel(gradOutput) == 0 || numel(input) == 0 || numel(grid) == 0
        || (!outputMask->values[0] && !outputMask->values[1])) {
        return ACLNN_SUCCESS;
    }
    gs_exec *e = new_exec(api, k_bwd_name, GS_BACKWARD_WORKSPACE, input, grid, gradOutput, interpolationMode,
                          paddingMode, alignCorners);
    if (e == NULL) {
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    const int *perm = ndhwc ? k_ndhwc : k_ncdhw;
    int64_t scratch[5];
    emu_snapshot(&e->input_grad, inputGrad);
    emu_snapshot(&e->grid_grad, gridGrad);
    emu_canon5(&e->input_grad, perm, scratch, e->ig_s);
    for (int i = 0; i < 5; i++) {
        e->gg_s[i] = gridGrad->strides[i];
    }
    /* 8. a partial mask leaves the other output untouched */
    e->mask[0] = outputMask->values[0];
    e->mask[1] = outputMask->values[1];
    *workspaceSize = GS_BACKWARD_WORKSPACE;
    return emu_executor_publish(api, &e->base, executor);
}

static void store_input_grad(const gs_exec *e, const void *acc, int is_double)
{
    const int64_t *in = e->in_dims, *s = e->ig_s;
    int64_t k = 0;
    for (int64_t n = 0; n < in[0]; n++) {
        for (int64_t c = 0; c < in[1]; c++) {
            for (int64_t d = 0; d < in[2]; d++) {
                for (int64_t h = 0; h < in[3]; h++) {
                    for (int64_t w = 0; w < in[4]; w++, k++) {
                        double v = is_double ? ((const double *)acc)[k] : (double)((const float *)acc)[k];
                        emu_store(&e->input_grad, n * s[0] + c * s[1] + d * s[2] + h * s[3] + w * s[4], v);
                    }
                }
            }
        }
    }
}

static int gs_backward_views(const aclOpExecutor *base, const char *names[], const emu_view *views[])
{
    const gs_exec *e = (const gs_exec *)base;
    static const char *const k_names[] = {"gradOutput", "input", "grid", "inputGrad", "gridGrad"};
    const emu_view *const mine[] = {&e->grad_output, &e->input, &e->grid, &e->input_grad, &e->grid_grad};
    return emu_views(5, k_names, mine, names, views);
}

static void gs_backward_kernel(aclOpExecutor *base, emu_task *task)
{
    const gs_exec *e = (const gs_exec *)base;
    int is_double = e->input.dtype == ACL_DOUBLE;
    void *acc = NULL;
    if (e->mask[0]) {
        size_t count = 1;
        for (int i = 0; i < 5; i++) {
            count *= (size_t)e->in_dims[i];
        }
        acc = calloc(count, is_double ? sizeof(double) : sizeof(float));
        if (acc == NULL) {
            pyaclnnEmuTaskFail(task, ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory for the inputGrad "
                               "accumulator", k_bwd_name);
            return;
        }
    }
    if (is_double) {
        gs_backward_d(e, acc);
    } else {
        gs_backward_f(e, acc);
    }
    if (acc != NULL) {
        store_input_grad(e, acc, is_double);
    }
    pyaclnnEmuFree(acc);
}

aclnnStatus aclnnGridSampler3DBackward(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                       aclrtStream stream)
{
    return emu_phase2_launch(k_bwd_name, k_bwd_name, workspace, workspaceSize, executor, stream, gs_backward_views,
                             gs_backward_kernel);
}
