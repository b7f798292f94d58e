/* The four operators, two phases each (libopapi.so, or libopapi_nn.so for
 * max-pool and libopapi_cv.so for the grid sampler on CANN >= 8.5).
 * Prototypes as in CANN's aclnnop/ headers: aclnn_max_pool3d_with_argmax.h and
 * aclnn_max_pool3d_with_argmax_backward.h (hicann/ops-nn
 * pooling/max_pool3d_with_argmax_v2/op_api, pooling/max_pool3d_grad_with_argmax/op_api),
 * aclnn_grid_sampler3d.h and aclnn_grid_sampler3d_backward.h (hicann/ops-cv
 * image/grid_sample/op_api, image/grid_sampler3_d_grad/op_host/op_api).
 */

aclnnStatus aclnnMaxPool3dWithArgmaxGetWorkspaceSize(const aclTensor *self, const aclIntArray *kernelSize, const aclIntArray *stride, const aclIntArray *padding, const aclIntArray *dilation, bool ceilMode, aclTensor *out, aclTensor *indices, uint64_t *workspaceSize, aclOpExecutor **executor);
aclnnStatus aclnnMaxPool3dWithArgmax(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);
aclnnStatus aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclTensor *indices, const aclIntArray *kernelSize, const aclIntArray *stride, const aclIntArray *padding, const aclIntArray *dilation, bool ceilMode, aclTensor *gradInput, uint64_t *workspaceSize, aclOpExecutor **executor);
aclnnStatus aclnnMaxPool3dWithArgmaxBackward(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);
aclnnStatus aclnnGridSampler3DGetWorkspaceSize(const aclTensor *input, const aclTensor *grid, int64_t interpolationMode, int64_t paddingMode, bool alignCorners, aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor);
aclnnStatus aclnnGridSampler3D(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);
aclnnStatus aclnnGridSampler3DBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *input, const aclTensor *grid, int64_t interpolationMode, int64_t paddingMode, bool alignCorners, const aclBoolArray *outputMask, aclTensor *inputGrad, aclTensor *gridGrad, uint64_t *workspaceSize, aclOpExecutor **executor);
aclnnStatus aclnnGridSampler3DBackward(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);
