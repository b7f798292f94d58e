// aclnnMaxPool3dWithArgmaxBackward: the operator document's example, written
// for pyaclnn. It sends the gradient 0.4757 of a 2x2x2 max pool back to the
// window's maximum (flat index 6) and prints gradInput line by line, exactly
// as samples/max_pool3d_with_argmax_backward.py does.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_max_pool3d_with_argmax_backward.h"
#include "sample_util.h"

namespace {

using sample::Cleanup;

aclIntArray *CreateIntArray(const std::vector<int64_t> &values, Cleanup &cleanup)
{
    aclIntArray *array = aclCreateIntArray(values.data(), values.size());
    if (array != nullptr) {
        cleanup.Push("aclDestroyIntArray", [array] { return static_cast<int>(aclDestroyIntArray(array)); });
    }
    return array;
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

    // 2. Tensors and parameter arrays.
    const std::vector<int64_t> gradOutShape = {1, 1, 1, 1, 1};
    const std::vector<int64_t> selfShape = {1, 1, 2, 2, 2};
    const std::vector<int64_t> indicesShape = {1, 1, 1, 1, 1};
    const std::vector<int64_t> gradInShape = {1, 1, 2, 2, 2};
    const std::vector<float> gradOutHostData = {0.4757f};
    const std::vector<float> selfHostData = {0.0850f, -0.5147f, -0.0212f, -0.5654f,
                                             -0.3222f, 0.5847f, 1.7510f, 0.9954f};
    const std::vector<int32_t> indicesHostData = {6};
    const std::vector<float> gradInHostData(8, 0.0f);

    void *gradOutAddr = nullptr;
    void *selfAddr = nullptr;
    void *indicesAddr = nullptr;
    void *gradInAddr = nullptr;
    aclTensor *gradOut = nullptr;
    aclTensor *self = nullptr;
    aclTensor *indices = nullptr;
    aclTensor *gradIn = nullptr;
    ret = sample::CreateDeviceTensor(gradOutHostData, gradOutShape, ACL_FLOAT, cleanup, &gradOutAddr, &gradOut);
    if (ret != ACL_SUCCESS) {
        return ret;
    }
    ret = sample::CreateDeviceTensor(selfHostData, selfShape, ACL_FLOAT, cleanup, &selfAddr, &self);
    if (ret != ACL_SUCCESS) {
        return ret;
    }
    ret = sample::CreateDeviceTensor(indicesHostData, indicesShape, ACL_INT32, cleanup, &indicesAddr, &indices);
    if (ret != ACL_SUCCESS) {
        return ret;
    }
    ret = sample::CreateDeviceTensor(gradInHostData, gradInShape, ACL_FLOAT, cleanup, &gradInAddr, &gradIn);
    if (ret != ACL_SUCCESS) {
        return ret;
    }

    aclIntArray *kernelSize = CreateIntArray({2, 2, 2}, cleanup);
    SAMPLE_CHECK_CREATED(kernelSize, "aclCreateIntArray(kernelSize)");
    aclIntArray *stride = CreateIntArray({2, 2, 2}, cleanup);
    SAMPLE_CHECK_CREATED(stride, "aclCreateIntArray(stride)");
    aclIntArray *padding = CreateIntArray({0, 0, 0}, cleanup);
    SAMPLE_CHECK_CREATED(padding, "aclCreateIntArray(padding)");
    aclIntArray *dilation = CreateIntArray({1, 1, 1}, cleanup);
    SAMPLE_CHECK_CREATED(dilation, "aclCreateIntArray(dilation)");
    const bool ceilMode = false;

    // 3. Phase 1 checks the arguments and sizes the workspace; phase 2 runs.
    uint64_t workspaceSize = 0;
    aclOpExecutor *executor = nullptr;
    SAMPLE_CHECK(aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize(
        gradOut, self, indices, kernelSize, stride, padding, dilation, ceilMode, gradIn, &workspaceSize, &executor));
    void *workspace = nullptr;
    if (workspaceSize > 0) {
        SAMPLE_CHECK(aclrtMalloc(&workspace, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST));
        cleanup.Push("aclrtFree(workspace)", [workspace] { return static_cast<int>(aclrtFree(workspace)); });
    }
    SAMPLE_CHECK(aclnnMaxPool3dWithArgmaxBackward(workspace, workspaceSize, executor, stream));

    // 4. Wait for the stream, 5. copy gradInput back and print it.
    SAMPLE_CHECK(aclrtSynchronizeStream(stream));
    std::vector<float> result;
    ret = sample::CopyToHost(gradInAddr, gradInShape, &result);
    if (ret != ACL_SUCCESS) {
        return ret;
    }
    for (size_t i = 0; i < result.size(); ++i) {
        std::printf("result[%ld] is: %f\n", static_cast<long>(i), result[i]);
    }
    return ACL_SUCCESS;
}

}  // namespace

int main()
{
    Cleanup cleanup;
    const int ret = Run(cleanup);
    // 6./7. Destroy the arrays and tensors, free the memory, destroy the
    // stream, reset the device, finalize: in reverse order of creation.
    const int released = cleanup.Run();
    return ret != ACL_SUCCESS ? ret : released;
}
