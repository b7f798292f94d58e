/* Types and enum values of the CANN subset pyaclnn uses.
 *
 * This file is read verbatim by cffi's cdef() (ABI mode) and included by the
 * C/C++ wrappers in include/acl and include/aclnnop, so it holds plain
 * declarations only: no #include, no guards, explicit enum values.
 * Source of every value: CANN's acl/acl_base.h and acl/acl_rt.h (hicann/runtime
 * include/external/acl/acl_base_rt.h and acl_rt.h) and aclnn/acl_meta.h (hicann/opbase
 * include/nnopbase/aclnn/acl_meta.h).
 */

typedef int aclError;
typedef int32_t aclnnStatus;
typedef void *aclrtStream;
typedef void *aclrtContext;
typedef void *aclrtEvent;
/* acl/acl_mdl.h (8.1.RC1; current CANN moves it to acl/acl_rt.h): a model runtime instance, the
 * graph aclmdlRICaptureEnd returns. */
typedef void *aclmdlRI;
typedef uint16_t aclFloat16;

typedef struct aclOpExecutor aclOpExecutor;
typedef struct aclTensor aclTensor;
typedef struct aclScalar aclScalar;
typedef struct aclIntArray aclIntArray;
typedef struct aclFloatArray aclFloatArray;
typedef struct aclBoolArray aclBoolArray;
typedef struct aclTensorList aclTensorList;
typedef struct aclScalarList aclScalarList;

typedef enum {
    ACL_DT_UNDEFINED = -1,
    ACL_FLOAT = 0,
    ACL_FLOAT16 = 1,
    ACL_INT8 = 2,
    ACL_INT32 = 3,
    ACL_UINT8 = 4,
    ACL_INT16 = 6,
    ACL_UINT16 = 7,
    ACL_UINT32 = 8,
    ACL_INT64 = 9,
    ACL_UINT64 = 10,
    ACL_DOUBLE = 11,
    ACL_BOOL = 12,
    ACL_STRING = 13,
    ACL_COMPLEX64 = 16,
    ACL_COMPLEX128 = 17,
    ACL_BF16 = 27,
    ACL_INT4 = 29,
    ACL_UINT1 = 30,
    ACL_COMPLEX32 = 33
} aclDataType;

typedef enum {
    ACL_FORMAT_UNDEFINED = -1,
    ACL_FORMAT_NCHW = 0,
    ACL_FORMAT_NHWC = 1,
    ACL_FORMAT_ND = 2,
    ACL_FORMAT_NC1HWC0 = 3,
    ACL_FORMAT_FRACTAL_Z = 4,
    ACL_FORMAT_NC1HWC0_C04 = 12,
    ACL_FORMAT_HWCN = 16,
    ACL_FORMAT_NDHWC = 27,
    ACL_FORMAT_FRACTAL_NZ = 29,
    ACL_FORMAT_NCDHW = 30,
    ACL_FORMAT_NDC1HWC0 = 32,
    ACL_FRACTAL_Z_3D = 33,
    ACL_FORMAT_NC = 35,
    ACL_FORMAT_NCL = 47
} aclFormat;

typedef enum {
    ACL_MEM_MALLOC_HUGE_FIRST = 0,
    ACL_MEM_MALLOC_HUGE_ONLY = 1,
    ACL_MEM_MALLOC_NORMAL_ONLY = 2,
    ACL_MEM_MALLOC_HUGE_FIRST_P2P = 3,
    ACL_MEM_MALLOC_HUGE_ONLY_P2P = 4,
    ACL_MEM_MALLOC_NORMAL_ONLY_P2P = 5,
    ACL_MEM_MALLOC_HUGE1G_ONLY = 6,
    ACL_MEM_MALLOC_HUGE1G_ONLY_P2P = 7
} aclrtMemMallocPolicy;

/* aclrtHostRegister (acl_rt.h, 8.1.RC1 and current): the one type CANN declares. */
typedef enum {
    ACL_HOST_REGISTER_MAPPED = 0
} aclrtHostRegisterType;

typedef enum {
    ACL_MEMCPY_HOST_TO_HOST = 0,
    ACL_MEMCPY_HOST_TO_DEVICE = 1,
    ACL_MEMCPY_DEVICE_TO_HOST = 2,
    ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
    ACL_MEMCPY_DEFAULT = 4,
    ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE = 5,
    ACL_MEMCPY_INNER_DEVICE_TO_DEVICE = 6,
    ACL_MEMCPY_INTER_DEVICE_TO_DEVICE = 7
} aclrtMemcpyKind;

typedef enum {
    ACL_DDR_MEM = 0,
    ACL_HBM_MEM = 1,
    ACL_DDR_MEM_HUGE = 2,
    ACL_DDR_MEM_NORMAL = 3,
    ACL_HBM_MEM_HUGE = 4,
    ACL_HBM_MEM_NORMAL = 5,
    ACL_DDR_MEM_P2P_HUGE = 6,
    ACL_DDR_MEM_P2P_NORMAL = 7,
    ACL_HBM_MEM_P2P_HUGE = 8,
    ACL_HBM_MEM_P2P_NORMAL = 9,
    ACL_HBM_MEM_HUGE1G = 10,
    ACL_HBM_MEM_P2P_HUGE1G = 11
} aclrtMemAttr;

typedef enum {
    ACL_OPT_DETERMINISTIC = 0,
    ACL_OPT_ENABLE_DEBUG_KERNEL = 1,
    ACL_OPT_STRONG_CONSISTENCY = 2,
    ACL_OPT_ENABLE_KERNEL_EARLY_START = 3
} aclSysParamOpt;

/* aclrtQueryEventStatus (acl_rt.h). Not the deprecated aclrtEventStatus of
 * aclrtQueryEvent, which numbers COMPLETE 0 / NOT_READY 1 the other way round. */
typedef enum {
    ACL_EVENT_RECORDED_STATUS_NOT_READY = 0,
    ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
} aclrtEventRecordedStatus;

/* aclrtStreamQuery (acl/acl_rt.h of 8.1.RC1, which also tags the enum aclrtStreamStatus):
 * COMPLETE is 0 here, unlike the event status above. */
typedef enum {
    ACL_STREAM_STATUS_COMPLETE = 0,
    ACL_STREAM_STATUS_NOT_READY = 1,
    ACL_STREAM_STATUS_RESERVED = 0xFFFF
} aclrtStreamStatus;

/* aclrtCreateStreamWithConfig's flag and aclrtSetStreamFailureMode's mode (acl/acl_rt.h
 * writes them 0x00000001u ...): after a failed task, a stream in STOP_ON_FAILURE mode runs
 * none of the tasks queued after it. */
#define ACL_STREAM_FAST_LAUNCH 1
#define ACL_STREAM_FAST_SYNC 2
#define ACL_CONTINUE_ON_FAILURE 0
#define ACL_STOP_ON_FAILURE 1

/* Flags of aclrtCreateEventWithFlag (acl_rt.h writes them in hex with a U
 * suffix: 0x00000001U, 0x00000002U, 0x00000008U, 0x00000010U, 0x00000020U).
 * Without ACL_EVENT_SYNC an event cannot be waited on by aclrtStreamWaitEvent. */
#define ACL_EVENT_SYNC 1
#define ACL_EVENT_CAPTURE_STREAM_PROGRESS 2
#define ACL_EVENT_TIME_LINE 8
#define ACL_EVENT_DEVICE_USE_ONLY 16
#define ACL_EVENT_EXTERNAL 32

/* Stream capture (acl/acl_mdl.h of 8.1.RC1, which numbers them implicitly from 0; current CANN
 * declares the same values in acl/acl_rt.h). The mode limits the calls that are not safe during a
 * capture: aclrtMemcpy, aclrtMemset and async copies of pageable host memory. */
typedef enum {
    ACL_MODEL_RI_CAPTURE_MODE_GLOBAL = 0,
    ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL = 1,
    ACL_MODEL_RI_CAPTURE_MODE_RELAXED = 2
} aclmdlRICaptureMode;

typedef enum {
    ACL_MODEL_RI_CAPTURE_STATUS_NONE = 0,
    ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE = 1,
    ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED = 2
} aclmdlRICaptureStatus;
