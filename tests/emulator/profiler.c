/* CANN's profiler calls (acl/acl_prof.h), the emulator's libmsprofiler.so: the six aclprof*
 * calls with the rules and codes of hicann/runtime's msprof (src/dfx/msprof/collector/dvvp) as
 * they were before its commit 18799fa3, where aclprofInit still had to come first; README.md
 * ("Profiler") lists them with their sources, and pyaclnn/backends/numpy/_profiler.py implements
 * the same, with the same messages.
 *
 * What this library keeps: the result path (set from aclprofInit to aclprofFinalize), the
 * dataTypeConfig of the running aclprofStart, and the live configs, under its own lock. The
 * records themselves are the runtime's (streams.c: its workers write them), reached through
 * pyaclnnEmuProfRecordStart / Stop / Write; aclprofFinalize appends them to
 * <path>/pyaclnn_emulated_device.jsonl.
 */
#define _GNU_SOURCE
#include "emu.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROF_PATH_MAX 4096u   /* aclProfPathMaxLen: a length must be below it */
#define PROF_MAX_DEVICES 64u  /* PROF_MAX_DEV_NUM */
#define PROF_AICPU_MODEL 0x4000000000000000ULL
#define PROF_AICORE_SHAPE 0x800000000ULL
/* PROF_SWITCH_SUPPORT of a release build (msprofiler/prof_api_common.h), in acl_prof.h's names */
#define PROF_SUPPORTED                                                                                            \
    (ACL_PROF_ACL_API | ACL_PROF_TASK_TIME | ACL_PROF_TASK_TIME_L0 | ACL_PROF_AICORE_METRICS | ACL_PROF_AICPU  \
     | ACL_PROF_L2CACHE | ACL_PROF_HCCL_TRACE | ACL_PROF_TRAINING_TRACE | ACL_PROF_MSPROFTX                     \
     | ACL_PROF_RUNTIME_API | ACL_PROF_TASK_MEMORY | ACL_PROF_GE_API_L0 | ACL_PROF_GE_API_L1                    \
     | ACL_PROF_TASK_TIME_L2 | ACL_PROF_OP_ATTR | ACL_PROF_TASK_TIME_L3 | ACL_PROF_API_STATS | PROF_AICORE_SHAPE \
     | PROF_AICPU_MODEL)
#define PROF_TASK_TIME (ACL_PROF_TASK_TIME | ACL_PROF_TASK_TIME_L0)
#define PROF_FILE "pyaclnn_emulated_device.jsonl"

struct aclprofConfig {
    struct aclprofConfig *next; /* the live configs */
    uint32_t devices[PROF_MAX_DEVICES];
    uint32_t count;
    aclprofAicoreMetrics metrics;
    uint64_t data_type_config; /* as stored: see stored_data_type_config */
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* CANN: g_profMutex */
static char *g_path;                                        /* NULL: not initialized */
static int g_running;                                       /* an aclprofStart runs */
static uint64_t g_running_config;                           /* its dataTypeConfig */
static aclprofConfig *g_configs;
static int64_t g_config_count;

#pragma GCC visibility push(default)
/* Emulator-only, for the tests: live aclprofConfigs (from Create until Destroy). */
int64_t pyaclnnEmuProfConfigCount(void);
#pragma GCC visibility pop

int64_t pyaclnnEmuProfConfigCount(void)
{
    pthread_mutex_lock(&g_lock);
    int64_t n = g_config_count;
    pthread_mutex_unlock(&g_lock);
    return n;
}

/* dataTypeConfig as aclprofCreateConfig stores it: PROF_AICPU_MODEL added, each level of task
 * time with the levels below it, training trace with task time; ACL_PROF_API_STATS alone with
 * ACL_PROF_ACL_API. */
static uint64_t stored_data_type_config(uint64_t requested)
{
    uint64_t stored = requested | PROF_AICPU_MODEL;
    if (requested & ACL_PROF_TASK_TIME) {
        stored |= ACL_PROF_TASK_TIME_L0;
    }
    if (requested & (ACL_PROF_TASK_TIME_L2 | ACL_PROF_OP_ATTR)) {
        stored |= ACL_PROF_TASK_TIME_L0 | ACL_PROF_TASK_TIME;
    }
    if (requested & ACL_PROF_TASK_TIME_L3) {
        stored |= ACL_PROF_TASK_TIME_L0 | ACL_PROF_TASK_TIME | ACL_PROF_TASK_TIME_L2;
    }
    if (stored & ACL_PROF_TASK_TIME_L0) {
        stored |= ACL_PROF_TRAINING_TRACE;
    }
    if (requested & ACL_PROF_API_STATS) {
        stored = ACL_PROF_ACL_API | ACL_PROF_API_STATS;
    }
    return stored;
}

/* mkdir -p; 0 ok, else errno. */
static int make_dirs(const char *path)
{
    char *copy = strdup(path);
    if (copy == NULL) {
        return ENOMEM;
    }
    int rc = 0;
    for (char *p = copy + 1; rc == 0; p++) {
        int last = *p == '\0';
        if (*p == '/' || last) {
            *p = '\0';
            if (mkdir(copy, 0750) != 0 && errno != EEXIST) {
                rc = errno;
            }
            if (last) {
                break;
            }
            *p = '/';
        }
    }
    struct stat st;
    if (rc == 0 && (stat(copy, &st) != 0 || !S_ISDIR(st.st_mode))) {
        rc = errno != 0 && stat(copy, &st) != 0 ? errno : ENOTDIR;
    }
    pyaclnnEmuFree(copy);
    return rc;
}

aclError aclprofInit(const char *profilerResultPath, size_t length)
{
    static const char api[] = "aclprofInit";
    if (profilerResultPath == NULL) {
        pyaclnnEmuSetError("%s: profilerResultPath is NULL", api);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (length == 0 || length >= PROF_PATH_MAX) {
        pyaclnnEmuSetError("%s: length %zu of profilerResultPath must be in [1, %u)", api, length, PROF_PATH_MAX);
        return ACL_ERROR_INVALID_PARAM;
    }
    size_t n = strlen(profilerResultPath);
    if (n != length) {
        pyaclnnEmuSetError("%s: length %zu is not the length of profilerResultPath (%zu bytes)", api, length, n);
        return ACL_ERROR_INVALID_PARAM;
    }
    pthread_mutex_lock(&g_lock);
    if (g_path != NULL) {
        pyaclnnEmuSetError("%s: profiling is already initialized (result path %s); call aclprofFinalize first "
                           "(ACL_ERROR_REPEAT_INITIALIZE)",
                           api, g_path);
        pthread_mutex_unlock(&g_lock);
        return ACL_ERROR_REPEAT_INITIALIZE;
    }
    char cwd[PATH_MAX] = "";
    if (profilerResultPath[0] != '/' && getcwd(cwd, sizeof cwd) == NULL) {
        cwd[0] = '\0';
    }
    size_t size = strlen(cwd) + 1 + length + 1;
    char *path = malloc(size);
    aclError rc = ACL_SUCCESS;
    if (path == NULL) {
        pyaclnnEmuSetError("%s: out of host memory", api);
        rc = ACL_ERROR_INVALID_FILE;
    } else {
        snprintf(path, size, "%s%s%s", cwd, cwd[0] != '\0' ? "/" : "", profilerResultPath);
        int err = make_dirs(path);
        if (err != 0) {
            pyaclnnEmuSetError("%s: profilerResultPath %s cannot be made: %s", api, path, strerror(err));
            rc = ACL_ERROR_INVALID_FILE;
        } else if (access(path, R_OK | W_OK | X_OK) != 0) {
            pyaclnnEmuSetError("%s: profilerResultPath %s is not accessible", api, path);
            rc = ACL_ERROR_INVALID_FILE;
        }
    }
    if (rc == ACL_SUCCESS) {
        g_path = path;
    } else {
        pyaclnnEmuFree(path);
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

static aclError prof_not_run(const char *api)
{
    pyaclnnEmuSetError("%s: profiling is not initialized; call aclprofInit first (ACL_ERROR_PROF_NOT_RUN)", api);
    return ACL_ERROR_PROF_NOT_RUN;
}

/* Caller holds g_lock. Stops what runs; its records stay for aclprofFinalize. */
static void stop_locked(void)
{
    if (g_running) {
        pyaclnnEmuProfRecordStop();
    }
    g_running = 0;
}

aclError aclprofFinalize(void)
{
    static const char api[] = "aclprofFinalize";
    pthread_mutex_lock(&g_lock);
    if (g_path == NULL) {
        pthread_mutex_unlock(&g_lock);
        return prof_not_run(api);
    }
    stop_locked();
    size_t size = strlen(g_path) + sizeof "/" PROF_FILE;
    char *file = malloc(size);
    aclError rc = ACL_SUCCESS;
    if (file == NULL || (snprintf(file, size, "%s/%s", g_path, PROF_FILE), pyaclnnEmuProfRecordWrite(file)) != 0) {
        pyaclnnEmuSetError("%s: %s/%s cannot be written", api, g_path, PROF_FILE);
        rc = ACL_ERROR_INVALID_FILE;
    }
    pyaclnnEmuFree(file);
    pyaclnnEmuFree(g_path);
    g_path = NULL;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

static aclprofConfig *no_config(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static aclprofConfig *no_config(const char *fmt, ...)
{
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    pyaclnnEmuSetError("%s", message);
    return NULL;
}

aclprofConfig *aclprofCreateConfig(uint32_t *deviceIdList, uint32_t deviceNums, aclprofAicoreMetrics aicoreMetrics,
                                   const aclprofAicoreEvents *aicoreEvents, uint64_t dataTypeConfig)
{
    static const char api[] = "aclprofCreateConfig";
    if (deviceNums != 0 && deviceIdList == NULL) {
        return no_config("%s: deviceIdList is NULL", api);
    }
    if (aicoreEvents != NULL) {
        return no_config("%s: aicoreEvents must be NULL", api);
    }
    if (deviceNums > PROF_MAX_DEVICES) {
        return no_config("%s: deviceNums %" PRIu32 " is above %u", api, deviceNums, PROF_MAX_DEVICES);
    }
    uint32_t count = 0;
    aclrtGetDeviceCount(&count);
    if (deviceNums > count) {
        return no_config("%s: deviceNums %" PRIu32 " is above the device count %" PRIu32, api, deviceNums, count);
    }
    for (uint32_t i = 0; i < deviceNums; i++) {
        if (deviceIdList[i] >= count) {
            return no_config("%s: deviceIdList[%" PRIu32 "] is %" PRIu32 "; a device id must be in [0, %" PRIu32 ")",
                             api, i, deviceIdList[i], count);
        }
        for (uint32_t j = 0; j < i; j++) {
            if (deviceIdList[j] == deviceIdList[i]) {
                return no_config("%s: deviceIdList[%" PRIu32 "]: device %" PRIu32 " is given twice", api, i,
                                 deviceIdList[i]);
            }
        }
    }
    if (deviceNums == 0 && (dataTypeConfig & ACL_PROF_MSPROFTX) == 0) {
        return no_config("%s: deviceNums is 0; it can be 0 only with ACL_PROF_MSPROFTX", api);
    }
    aclprofConfig *config = calloc(1, sizeof *config);
    if (config == NULL) {
        return no_config("%s: out of host memory", api);
    }
    if (deviceNums > 0) { /* deviceIdList may be NULL then */
        memcpy(config->devices, deviceIdList, deviceNums * sizeof *deviceIdList);
    }
    config->count = deviceNums;
    config->metrics = aicoreMetrics;
    config->data_type_config = stored_data_type_config(dataTypeConfig);
    pthread_mutex_lock(&g_lock);
    config->next = g_configs;
    g_configs = config;
    g_config_count++;
    pthread_mutex_unlock(&g_lock);
    return config;
}

/* Caller holds g_lock. Whether `config` is live; with `unlink`, it is taken off the list. */
static int config_live_locked(const aclprofConfig *config, int unlink)
{
    for (aclprofConfig **p = &g_configs; *p != NULL; p = &(*p)->next) {
        if (*p == config) {
            if (unlink) {
                *p = config->next;
                g_config_count--;
            }
            return 1;
        }
    }
    return 0;
}

/* CANN does not check this (a destroyed config is freed memory): the emulations' choice. */
static aclError dead_config(const char *api)
{
    pyaclnnEmuSetError("%s: profilerConfig is not a live aclprofConfig (destroyed, or not from aclprofCreateConfig)",
                       api);
    return ACL_ERROR_INVALID_PARAM;
}

aclError aclprofDestroyConfig(const aclprofConfig *profilerConfig)
{
    static const char api[] = "aclprofDestroyConfig";
    if (profilerConfig == NULL) {
        pyaclnnEmuSetError("%s: profilerConfig is NULL", api);
        return ACL_ERROR_INVALID_PARAM;
    }
    pthread_mutex_lock(&g_lock);
    int live = config_live_locked(profilerConfig, 1);
    pthread_mutex_unlock(&g_lock);
    if (!live) {
        return dead_config(api);
    }
    pyaclnnEmuFree((aclprofConfig *)profilerConfig);
    return ACL_SUCCESS;
}

/* Caller holds g_lock. preCheckProfConfig: a live config whose dataTypeConfig CANN supports. */
static aclError config_status_locked(const aclprofConfig *config, const char *api)
{
    if (config == NULL) {
        pyaclnnEmuSetError("%s: profilerConfig is NULL", api);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (!config_live_locked(config, 0)) {
        return dead_config(api);
    }
    uint64_t unsupported = config->data_type_config & ~(uint64_t)PROF_SUPPORTED;
    if (unsupported != 0) {
        pyaclnnEmuSetError("%s: dataTypeConfig 0x%" PRIx64 " has bits 0x%" PRIx64 " that are not supported "
                           "(supported: 0x%" PRIx64 ") (ACL_ERROR_PROF_MODULES_UNSUPPORTED)",
                           api, config->data_type_config, unsupported, (uint64_t)PROF_SUPPORTED);
        return ACL_ERROR_PROF_MODULES_UNSUPPORTED;
    }
    return ACL_SUCCESS;
}

/* Caller holds g_lock, something runs. CheckConfigConsistency: `config` asks for what runs. */
static aclError consistent_locked(const aclprofConfig *config, const char *api)
{
    if (config->data_type_config != g_running_config) {
        pyaclnnEmuSetError("%s: dataTypeConfig 0x%" PRIx64 " differs from that of the running aclprofStart "
                           "(0x%" PRIx64 ") (ACL_ERROR_INVALID_PROFILING_CONFIG)",
                           api, config->data_type_config, g_running_config);
        return ACL_ERROR_INVALID_PROFILING_CONFIG;
    }
    return ACL_SUCCESS;
}

aclError aclprofStart(const aclprofConfig *profilerConfig)
{
    static const char api[] = "aclprofStart";
    pthread_mutex_lock(&g_lock);
    aclError rc = config_status_locked(profilerConfig, api);
    if (rc == ACL_SUCCESS && g_running) {
        rc = consistent_locked(profilerConfig, api); /* the same again changes nothing */
    } else if (rc == ACL_SUCCESS && g_path == NULL) {
        rc = prof_not_run(api);
    } else if (rc == ACL_SUCCESS) {
        g_running = 1;
        g_running_config = profilerConfig->data_type_config;
        if (profilerConfig->data_type_config & PROF_TASK_TIME) {
            pyaclnnEmuProfRecordStart(profilerConfig->devices, profilerConfig->count);
        }
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

aclError aclprofStop(const aclprofConfig *profilerConfig)
{
    static const char api[] = "aclprofStop";
    pthread_mutex_lock(&g_lock);
    aclError rc = ACL_SUCCESS;
    if (profilerConfig == NULL) { /* CANN: the running configuration, success when none runs */
        stop_locked();
    } else {
        rc = config_status_locked(profilerConfig, api);
        if (rc == ACL_SUCCESS && g_path == NULL) {
            rc = prof_not_run(api);
        }
        if (rc == ACL_SUCCESS && g_running) {
            rc = consistent_locked(profilerConfig, api);
        }
        if (rc == ACL_SUCCESS) {
            stop_locked();
        }
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}
