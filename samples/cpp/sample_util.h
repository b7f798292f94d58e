// Helpers shared by the two C++ samples: status checks that report and return,
// and a cleanup stack that releases every resource in reverse order of
// creation, on the normal path and on every early return.
#ifndef PYACLNN_SAMPLES_SAMPLE_UTIL_H
#define PYACLNN_SAMPLES_SAMPLE_UTIL_H

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "acl/acl.h"

namespace sample {

// Prints the failing call, its status and the runtime's own explanation.
inline int Report(const char *what, int status)
{
    const char *detail = aclGetRecentErrMsg();
    std::fprintf(stderr, "%s failed. ERROR: %d%s%s\n", what, status, detail != nullptr ? ": " : "",
                 detail != nullptr ? detail : "");
    return status;
}

// Evaluates an aclError/aclnnStatus expression; on failure reports it and
// returns the status from the enclosing function (whose cleanup stack then
// releases whatever was created so far).
#define SAMPLE_CHECK(expr)                                   \
    do {                                                     \
        const int sampleStatus_ = static_cast<int>(expr);    \
        if (sampleStatus_ != ACL_SUCCESS) {                  \
            return ::sample::Report(#expr, sampleStatus_);   \
        }                                                    \
    } while (0)

// aclCreate* functions return NULL instead of a status; the sample then
// exits with this code (the reason is in aclGetRecentErrMsg()).
constexpr int kCreateFailed = 1;

// A pointer returned by a create function; NULL means failure.
#define SAMPLE_CHECK_CREATED(ptr, what)                              \
    do {                                                             \
        if ((ptr) == nullptr) {                                      \
            return ::sample::Report(what, ::sample::kCreateFailed);  \
        }                                                            \
    } while (0)

// Release actions, run last-in first-out by Run() or by the destructor.
class Cleanup {
public:
    Cleanup() = default;
    Cleanup(const Cleanup &) = delete;
    Cleanup &operator=(const Cleanup &) = delete;
    ~Cleanup() { Run(); }

    void Push(std::string what, std::function<int()> release)
    {
        actions_.emplace_back(std::move(what), std::move(release));
    }

    // Runs every pending action (all of them, even after a failure) and
    // returns the first failing status, or ACL_SUCCESS.
    int Run()
    {
        int first = ACL_SUCCESS;
        while (!actions_.empty()) {
            auto action = std::move(actions_.back());
            actions_.pop_back();
            const int status = action.second();
            if (status != ACL_SUCCESS) {
                Report(action.first.c_str(), status);
                if (first == ACL_SUCCESS) {
                    first = status;
                }
            }
        }
        return first;
    }

private:
    std::vector<std::pair<std::string, std::function<int()>>> actions_;
};

inline int64_t ShapeSize(const std::vector<int64_t> &shape)
{
    int64_t size = 1;
    for (int64_t dim : shape) {
        size *= dim;
    }
    return size;
}

// aclInit, aclrtSetDevice, aclrtCreateStream; their releases go on `cleanup`.
inline int InitDevice(int32_t deviceId, aclrtStream *stream, Cleanup &cleanup)
{
    SAMPLE_CHECK(aclInit(nullptr));
    cleanup.Push("aclFinalize", [] { return static_cast<int>(aclFinalize()); });
    SAMPLE_CHECK(aclrtSetDevice(deviceId));
    cleanup.Push("aclrtResetDevice", [deviceId] { return static_cast<int>(aclrtResetDevice(deviceId)); });
    SAMPLE_CHECK(aclrtCreateStream(stream));
    aclrtStream created = *stream;
    cleanup.Push("aclrtDestroyStream", [created] { return static_cast<int>(aclrtDestroyStream(created)); });
    return ACL_SUCCESS;
}

// Device memory holding `hostData` and a contiguous ND aclTensor over it; the
// tensor and the memory are released through `cleanup`.
template <typename T>
int CreateDeviceTensor(const std::vector<T> &hostData, const std::vector<int64_t> &shape, aclDataType dataType,
                       Cleanup &cleanup, void **deviceAddr, aclTensor **tensor)
{
    const size_t bytes = static_cast<size_t>(ShapeSize(shape)) * sizeof(T);
    SAMPLE_CHECK(aclrtMalloc(deviceAddr, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    void *memory = *deviceAddr;
    cleanup.Push("aclrtFree", [memory] { return static_cast<int>(aclrtFree(memory)); });
    SAMPLE_CHECK(aclrtMemcpy(*deviceAddr, bytes, hostData.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));

    std::vector<int64_t> strides(shape.size(), 1);  // in elements, last axis fastest
    for (size_t i = shape.size(); i-- > 1;) {
        strides[i - 1] = strides[i] * shape[i];
    }
    *tensor = aclCreateTensor(shape.data(), shape.size(), dataType, strides.data(), 0, ACL_FORMAT_ND, shape.data(),
                              shape.size(), *deviceAddr);
    SAMPLE_CHECK_CREATED(*tensor, "aclCreateTensor");
    aclTensor *created = *tensor;
    cleanup.Push("aclDestroyTensor", [created] { return static_cast<int>(aclDestroyTensor(created)); });
    return ACL_SUCCESS;
}

// Copies a float tensor back from the device.
inline int CopyToHost(const void *deviceAddr, const std::vector<int64_t> &shape, std::vector<float> *host)
{
    host->assign(static_cast<size_t>(ShapeSize(shape)), 0.0f);
    const size_t bytes = host->size() * sizeof(float);
    SAMPLE_CHECK(aclrtMemcpy(host->data(), bytes, deviceAddr, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    return ACL_SUCCESS;
}

}  // namespace sample

#endif  // PYACLNN_SAMPLES_SAMPLE_UTIL_H
