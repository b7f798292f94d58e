// aclnnGridSampler3DBackward: the operator document's example, written for
// pyaclnn. Bilinear sampling with zeros padding and align_corners=false of a
// 1x1x1x3x3 volume at 2x2 points; prints inputGrad and gridGrad line by line,
// exactly as samples/grid_sampler3d_backward.py does.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_grid_sampler3d_backward.h"
#include "sample_util.h"

namespace {

using sample::Cleanup;

int PrintTensor(const char *name, const void *deviceAddr, const std::vector<int64_t> &shape)
{
    std::vector<float> values;
    const int ret = sample::CopyToHost(deviceAddr, shape, &values);
    if (ret != ACL_SUCCESS) {
        return ret;
    }
    for (size_t i = 0; i < values.size(); ++i) {
        std::printf("%s[%ld] is: %f\n", name, static_cast<long>(i), values[i]);
    }
    return ACL_SUCCESS;
}

int Run(Cleanup &cleanup)
{
    // 1. Runtime, device 0 and a stream.
    const int32_t deviceId = 0;
    aclrtStream stream = nullptr;
    int ret = sample::InitDevice(deviceId, &stream, cleanup);
    if (ret != ACL_SUCCESS) {
        return ret;
    }

    // 2. Modes, tensors and the output mask.
    const int64_t interpolationMode = 0;  // bilinear
    const int64_t paddingMode = 0;        // zeros
    const bool alignCorners = false;
    const std::vector<int64_t> gradOutputShape = {1, 1, 1, 2, 2};
    const std::vector<int64_t> inputShape = {1, 1, 1, 3, 3};
    const std::vector<int64_t> gridShape = {1, 1, 2, 2, 3};
    const std::vector<int64_t> inputGradShape = {1, 1, 1, 3, 3};
    const std::vector<int64_t> gridGradShape = {1, 1, 2, 2, 3};
    const std::vector<float> gradOutputHostData = {1, 1, 1, 1};
    const std::vector<float> inputHostData = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const std::vector<float> gridHostData = {-1, -1, 0, -1, 1, -1, -1, 0, 0, 0, 1, 0};
    const std::vector<float> inputGradHostData(9, 0.0f);
    const std::vector<float> gridGradHostData(12, 0.0f);

    const bool maskValues[2] = {true, true};
    aclBoolArray *outputMask = aclCreateBoolArray(maskValues, 2);
    SAMPLE_CHECK_CREATED(outputMask, "aclCreateBoolArray(outputMask)");
    cleanup.Push("aclDestroyBoolArray", [outputMask] { return static_cast<int>(aclDestroyBoolArray(outputMask)); });

    void *gradOutputAddr = nullptr;
    void *inputAddr = nullptr;
    void *gridAddr = nullptr;
    void *inputGradAddr = nullptr;
    void *gridGradAddr = nullptr;
    aclTensor *gradOutput = nullptr;
    aclTensor *input = nullptr;
    aclTensor *grid = nullptr;
    aclTensor *inputGrad = nullptr;
    aclTensor *gridGrad = nullptr;
    ret = sample::CreateDeviceTensor(gradOutputHostData, gradOutputShape, ACL_FLOAT, cleanup, &gradOutputAddr,
                                     &gradOutput);
    if (ret != ACL_SUCCESS) {
        return ret;
    }
    ret = sample::CreateDeviceTensor(inputHostData, inputShape, ACL_FLOAT, cleanup, &inputAddr, &input);
    if (ret != ACL_SUCCESS) {
        return ret;
    }
    ret = sample::CreateDeviceTensor(gridHostData, gridShape, ACL_FLOAT, cleanup, &gridAddr, &grid);
    if (ret != ACL_SUCCESS) {
        return ret;
    }
    ret = sample::CreateDeviceTensor(inputGradHostData, inputGradShape, ACL_FLOAT, cleanup, &inputGradAddr,
                                     &inputGrad);
    if (ret != ACL_SUCCESS) {
        return ret;
    }
    ret = sample::CreateDeviceTensor(gridGradHostData, gridGradShape, ACL_FLOAT, cleanup, &gridGradAddr, &gridGrad);
    if (ret != ACL_SUCCESS) {
        return ret;
    }

    // 3. Phase 1 checks the arguments and sizes the workspace; phase 2 runs.
    uint64_t workspaceSize = 0;
    aclOpExecutor *executor = nullptr;
    SAMPLE_CHECK(aclnnGridSampler3DBackwardGetWorkspaceSize(gradOutput, input, grid, interpolationMode, paddingMode,
                                                            alignCorners, outputMask, inputGrad, gridGrad,
                                                            &workspaceSize, &executor));
    void *workspace = nullptr;
    if (workspaceSize > 0) {
        SAMPLE_CHECK(aclrtMalloc(&workspace, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST));
        cleanup.Push("aclrtFree(workspace)", [workspace] { return static_cast<int>(aclrtFree(workspace)); });
    }
    SAMPLE_CHECK(aclnnGridSampler3DBackward(workspace, workspaceSize, executor, stream));

    // 4. Wait for the stream, 5. copy both gradients back and print them.
    SAMPLE_CHECK(aclrtSynchronizeStream(stream));
    ret = PrintTensor("inputGradResultData", inputGradAddr, inputGradShape);
    if (ret != ACL_SUCCESS) {
        return ret;
    }
    return PrintTensor("gridGradResultData", gridGradAddr, gridGradShape);
}

}  // namespace

int main()
{
    Cleanup cleanup;
    const int ret = Run(cleanup);
    // 6./7. Destroy the mask and tensors, free the memory, destroy the stream,
    // reset the device, finalize: in reverse order of creation.
    const int released = cleanup.Run();
    return ret != ACL_SUCCESS ? ret : released;
}
