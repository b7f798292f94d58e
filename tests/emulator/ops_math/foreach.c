/* Emulated aclnnForeachAddScalarList (libopapi.so / libopapi_math.so):
 * out[i] = x[i] + scalars[i] for every tensor of x. x, scalars and out have the
 * same length; every x[i] has x[0]'s type (FLOAT, FLOAT16, BF16, INT32 or INT64)
 * and out[i] x[i]'s type and shape. Floating tensors add in fp32 (rounded once),
 * integer tensors exactly and take integer scalars only.
 */
#include "ops_common.h"

#include "../aclnnop/aclnn_foreach_add_scalar_list.h"

#include <stdio.h>
#include <stdlib.h>

static const char k_name[] = "aclnnForeachAddScalarList";

typedef struct {
    emu_multi_exec m; /* views: x[i], out[i] pairs of the non-empty tensors */
    double *fvalues;
    int64_t *ivalues;
} foreach_exec;

static void release_foreach(aclOpExecutor *base)
{
    foreach_exec *ex = (foreach_exec *)base;
    pyaclnnEmuFree(ex->fvalues);
    pyaclnnEmuFree(ex->ivalues);
    pyaclnnEmuFree(ex->m.views);
    pyaclnnEmuFree(ex->m.names);
    pyaclnnEmuFree(ex);
}

aclnnStatus aclnnForeachAddScalarListGetWorkspaceSize(const aclTensorList *x, const aclScalarList *scalars,
                                                      const aclTensorList *out, uint64_t *workspaceSize,
                                                      aclOpExecutor **executor)
{
    static const char api[] = "aclnnForeachAddScalarListGetWorkspaceSize";
    const char *const names[] = {"x", "scalars", "out"};
    const void *const ptrs[] = {x, scalars, out};
    const int kinds[] = {EMU_TENSOR_LIST, EMU_SCALAR_LIST, EMU_TENSOR_LIST};
    aclnnStatus rc = emu_check_args(api, 3, names, ptrs, kinds);
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_tensor_list(api, "x", x);
    }
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_tensor_list(api, "out", out);
    }
    for (uint64_t i = 0; rc == ACLNN_SUCCESS && i < scalars->size; i++) {
        if (!pyaclnnEmuHandleIsLive(EMU_SCALAR, scalars->values[i])) {
            pyaclnnEmuSetError("%s: scalars[%llu] is not a live aclScalar", api, (unsigned long long)i);
            rc = ACLNN_ERR_PARAM_INVALID;
        }
    }
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_outputs(api, workspaceSize, executor);
    }
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    if (x->size == 0) {
        pyaclnnEmuSetError("%s: x is empty; expected at least one tensor", api);
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (scalars->size != x->size || out->size != x->size) {
        int bad_scalars = scalars->size != x->size;
        pyaclnnEmuSetError("%s: %s holds %llu elements; x holds %llu", api, bad_scalars ? "scalars" : "out",
                           (unsigned long long)(bad_scalars ? scalars->size : out->size),
                           (unsigned long long)x->size);
        return ACLNN_ERR_PARAM_INVALID;
    }
    aclDataType dt = x->values[0]->dtype;
    if (dt != ACL_FLOAT && dt != ACL_FLOAT16 && dt != ACL_BF16 && dt != ACL_INT32 && dt != ACL_INT64) {
        pyaclnnEmuSetError("%s: x[0] has dtype %s; expected FLOAT, FLOAT16, BF16, INT32 or INT64", api,
                           emu_dtype_name(dt));
        return ACLNN_ERR_PARAM_INVALID;
    }
    int integral = emu_is_int_dtype(dt);
    int used = 0;
    for (uint64_t i = 0; i < x->size; i++) {
        const aclTensor *xi = x->values[i], *oi = out->values[i];
        if (xi->dtype != dt) {
            pyaclnnEmuSetError("%s: x[%llu] has dtype %s; every tensor of x must have x[0]'s dtype %s", api,
                               (unsigned long long)i, emu_dtype_name(xi->dtype), emu_dtype_name(dt));
            return ACLNN_ERR_PARAM_INVALID;
        }
        if (oi->dtype != dt) {
            pyaclnnEmuSetError("%s: out[%llu] has dtype %s; it must equal x[%llu]'s dtype %s", api,
                               (unsigned long long)i, emu_dtype_name(oi->dtype), (unsigned long long)i,
                               emu_dtype_name(dt));
            return ACLNN_ERR_PARAM_INVALID;
        }
        if (!emu_same_shape(xi, oi)) {
            char a[128], b[128];
            emu_shape_str(oi, a, sizeof a);
            emu_shape_str(xi, b, sizeof b);
            pyaclnnEmuSetError("%s: out[%llu] has shape %s; it must equal x[%llu]'s shape %s", api,
                               (unsigned long long)i, a, (unsigned long long)i, b);
            return ACLNN_ERR_PARAM_INVALID;
        }
        if (integral && emu_is_float_dtype(scalars->values[i]->dtype)) {
            pyaclnnEmuSetError("%s: scalars[%llu] has dtype %s; integer tensors take integer scalars", api,
                               (unsigned long long)i, emu_dtype_name(scalars->values[i]->dtype));
            return ACLNN_ERR_PARAM_INVALID;
        }
        used += emu_tensor_numel(xi) > 0;
    }
    if (used == 0) {
        return ACLNN_SUCCESS;
    }
    foreach_exec *ex = (foreach_exec *)emu_multi_new(api, k_name, sizeof(foreach_exec), 2 * used);
    if (ex == NULL) {
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    ex->m.base.release = release_foreach;
    ex->fvalues = calloc((size_t)used, sizeof *ex->fvalues);
    ex->ivalues = calloc((size_t)used, sizeof *ex->ivalues);
    if (ex->fvalues == NULL || ex->ivalues == NULL) {
        release_foreach(&ex->m.base);
        pyaclnnEmuSetError("%s: out of host memory", api);
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    int j = 0;
    for (uint64_t i = 0; i < x->size; i++) {
        if (emu_tensor_numel(x->values[i]) == 0) {
            continue;
        }
        ex->m.names[2 * j] = "x";
        ex->m.names[2 * j + 1] = "out";
        emu_snapshot(&ex->m.views[2 * j], x->values[i]);
        emu_snapshot(&ex->m.views[2 * j + 1], out->values[i]);
        ex->fvalues[j] = emu_scalar_f64(scalars->values[i]);
        ex->ivalues[j] = emu_scalar_i64(scalars->values[i]);
        j++;
    }
    return emu_executor_publish(api, &ex->m.base, executor);
}

static void foreach_kernel(aclOpExecutor *base, emu_task *task)
{
    (void)task;
    const foreach_exec *ex = (const foreach_exec *)base;
    for (int j = 0; j < ex->m.nviews / 2; j++) {
        const emu_view *in = &ex->m.views[2 * j], *out = &ex->m.views[2 * j + 1];
        int integral = emu_is_int_dtype(in->dtype);
        int64_t n = emu_numel(in);
        for (int64_t i = 0; i < n; i++) {
            int64_t si = emu_walk(in->ndim, in->dims, in->strides, i);
            int64_t oi = emu_walk(out->ndim, out->dims, out->strides, i);
            if (integral) {
                emu_store_i64(out, oi, (int64_t)((uint64_t)emu_load_i64(in, si) + (uint64_t)ex->ivalues[j]));
            } else {
                emu_store(out, oi, (float)emu_load(in, si) + (float)ex->fvalues[j]);
            }
        }
    }
}

aclnnStatus aclnnForeachAddScalarList(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                      aclrtStream stream)
{
    return emu_phase2_launch(k_name, k_name, workspace, workspaceSize, executor, stream, emu_multi_views,
                             foreach_kernel);
}
