/* The profiler calls of CANN's acl/acl_prof.h that pyaclnn uses (libmsprofiler.so).
 *
 * Prototypes, types and values as CANN 8.1.RC1's acl/acl_prof.h declares them
 * (Ascend/ascend-toolkit/8.1.RC1/aarch64-linux/include/acl/acl_prof.h) and as current CANN
 * does (hicann/runtime include/external/acl/acl_prof.h): the six calls are the same in both,
 * aicoreEvents included (const aclprofAicoreEvents *; headers older than 8.x had no const).
 * CANN writes aclprofFinalize() with an empty list, which is (void) in C++; it is written
 * (void) here so that C reads it the same. The data-type bits are current CANN's; 8.1.RC1 lacks
 * ACL_PROF_GE_API_L0, ACL_PROF_GE_API_L1, ACL_PROF_TASK_TIME_L2, ACL_PROF_TASK_TIME_L3 and
 * ACL_PROF_API_STATS. libmsprofiler.so exports the calls (hicann/runtime
 * src/dfx/msprof/collector/dvvp/msprofiler/CMakeLists.txt: target msprofiler_fwk_share, output
 * name msprofiler); the npu backend opens it as an optional library.
 * Read by cffi's cdef() and by the C/C++ wrapper include/acl/acl.h.
 */

#define ACL_PROF_ACL_API 0x0001ULL
#define ACL_PROF_TASK_TIME 0x0002ULL
#define ACL_PROF_AICORE_METRICS 0x0004ULL
#define ACL_PROF_AICPU 0x0008ULL
#define ACL_PROF_L2CACHE 0x0010ULL
#define ACL_PROF_HCCL_TRACE 0x0020ULL
#define ACL_PROF_TRAINING_TRACE 0x0040ULL
#define ACL_PROF_MSPROFTX 0x0080ULL
#define ACL_PROF_RUNTIME_API 0x0100ULL
#define ACL_PROF_GE_API_L0 0x0200ULL
#define ACL_PROF_TASK_TIME_L0 0x0800ULL
#define ACL_PROF_TASK_MEMORY 0x1000ULL
#define ACL_PROF_GE_API_L1 0x01000000ULL
#define ACL_PROF_TASK_TIME_L2 0x2000ULL
#define ACL_PROF_OP_ATTR 0x4000ULL
#define ACL_PROF_TASK_TIME_L3 0x8000ULL
#define ACL_PROF_API_STATS 0x400000000ULL

typedef enum {
    ACL_AICORE_ARITHMETIC_UTILIZATION = 0,
    ACL_AICORE_PIPE_UTILIZATION = 1,
    ACL_AICORE_MEMORY_BANDWIDTH = 2,
    ACL_AICORE_L0B_AND_WIDTH = 3,
    ACL_AICORE_RESOURCE_CONFLICT_RATIO = 4,
    ACL_AICORE_MEMORY_UB = 5,
    ACL_AICORE_L2_CACHE = 6,
    ACL_AICORE_PIPE_EXECUTE_UTILIZATION = 7,
    ACL_AICORE_MEMORY_ACCESS = 8,
    ACL_AICORE_NONE = 0xFF
} aclprofAicoreMetrics;

typedef struct aclprofConfig aclprofConfig;
typedef struct aclprofAicoreEvents aclprofAicoreEvents;

aclError aclprofInit(const char *profilerResultPath, size_t length);
aclError aclprofFinalize(void);
aclError aclprofStart(const aclprofConfig *profilerConfig);
aclprofConfig *aclprofCreateConfig(uint32_t *deviceIdList, uint32_t deviceNums, aclprofAicoreMetrics aicoreMetrics, const aclprofAicoreEvents *aicoreEvents, uint64_t dataTypeConfig);
aclError aclprofDestroyConfig(const aclprofConfig *profilerConfig);
aclError aclprofStop(const aclprofConfig *profilerConfig);
