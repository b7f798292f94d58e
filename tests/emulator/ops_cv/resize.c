/* Emulated aclnnResize (libopapi.so / libopapi_cv.so), mode "nearest" only
 * (another mode: 161002): a 4-D NCHW self resized to out's H and W, out[n, c, y, x]
 * = self[n, c, min(floor(y * H_in / H_out), H_in - 1), likewise for x], the scale
 * computed in fp32 as torch's nearest does. scales must hold 4 values; as in
 * CANN's nearest resize, the output size comes from out, not from scales.
 */
#include "ops_common.h"

#include "../aclnnop/level2/aclnn_resize.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char k_name[] = "aclnnResize";

static int is_resize_dtype(aclDataType t) { return t == ACL_FLOAT || t == ACL_FLOAT16 || t == ACL_BF16; }

aclnnStatus aclnnResizeGetWorkspaceSize(const aclTensor *self, const aclFloatArray *scales, const char *mode,
                                        aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor)
{
    static const char api[] = "aclnnResizeGetWorkspaceSize";
    if (mode == NULL) {
        pyaclnnEmuSetError("%s: mode is NULL; expected \"nearest\"", api);
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    const char *const names[] = {"self", "scales", "out"};
    const void *const ptrs[] = {self, scales, out};
    const int kinds[] = {EMU_TENSOR, EMU_FLOAT_ARRAY, EMU_TENSOR};
    aclnnStatus rc = emu_check_args(api, 3, names, ptrs, kinds);
    if (rc == ACLNN_SUCCESS) {
        rc = emu_check_outputs(api, workspaceSize, executor);
    }
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    if (strcmp(mode, "nearest") != 0) {
        pyaclnnEmuSetError("%s: mode \"%.32s\" is not supported; the emulator takes \"nearest\"", api, mode);
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (!is_resize_dtype(self->dtype)) {
        pyaclnnEmuSetError("%s: self has dtype %s; expected FLOAT, FLOAT16 or BF16", api, emu_dtype_name(self->dtype));
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (out->dtype != self->dtype) {
        pyaclnnEmuSetError("%s: out has dtype %s; it must equal self's dtype %s", api, emu_dtype_name(out->dtype),
                           emu_dtype_name(self->dtype));
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (self->ndim != 4 || out->ndim != 4) {
        pyaclnnEmuSetError("%s: %s has rank %d; expected 4 (N, C, H, W)", api, self->ndim != 4 ? "self" : "out",
                           self->ndim != 4 ? self->ndim : out->ndim);
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (scales->size != 4) {
        pyaclnnEmuSetError("%s: scales has %llu values; expected 4 (one per dimension of self)", api,
                           (unsigned long long)scales->size);
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (out->dims[0] != self->dims[0] || out->dims[1] != self->dims[1]) {
        char a[128], b[128];
        emu_shape_str(out, a, sizeof a);
        emu_shape_str(self, b, sizeof b);
        pyaclnnEmuSetError("%s: out has shape %s; its N and C must equal self's %s", api, a, b);
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (emu_tensor_numel(out) == 0) {
        return ACLNN_SUCCESS;
    }
    if (emu_tensor_numel(self) == 0) {
        pyaclnnEmuSetError("%s: self is empty but out is not; there is nothing to sample", api);
        return ACLNN_ERR_PARAM_INVALID;
    }
    emu_multi_exec *ex = emu_multi_new(api, k_name, sizeof *ex, 2);
    if (ex == NULL) {
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    ex->names[0] = "self";
    ex->names[1] = "out";
    emu_snapshot(&ex->views[0], self);
    emu_snapshot(&ex->views[1], out);
    return emu_executor_publish(api, &ex->base, executor);
}

static int64_t nearest(int64_t dst, int64_t in, int64_t out)
{
    float scale = (float)in / (float)out;
    int64_t src = (int64_t)floorf((float)dst * scale);
    return src < in - 1 ? src : in - 1;
}

static void resize_kernel(aclOpExecutor *base, emu_task *task)
{
    (void)task;
    const emu_multi_exec *ex = (const emu_multi_exec *)base;
    const emu_view *in = &ex->views[0], *out = &ex->views[1];
    const int64_t *id = in->dims, *od = out->dims, *is = in->strides, *os = out->strides;
    for (int64_t n = 0; n < od[0]; n++) {
        for (int64_t c = 0; c < od[1]; c++) {
            for (int64_t y = 0; y < od[2]; y++) {
                int64_t sy = nearest(y, id[2], od[2]);
                for (int64_t x = 0; x < od[3]; x++) {
                    int64_t sx = nearest(x, id[3], od[3]);
                    emu_store(out, n * os[0] + c * os[1] + y * os[2] + x * os[3],
                              emu_load(in, n * is[0] + c * is[1] + sy * is[2] + sx * is[3]));
                }
            }
        }
    }
}

aclnnStatus aclnnResize(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream)
{
    return emu_phase2_launch(k_name, k_name, workspace, workspaceSize, executor, stream, emu_multi_views,
                             resize_kernel);
}
