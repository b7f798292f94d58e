/* Internal header of the host emulator of the CANN C ABI.
 *
 * The emulator is three (split layout: four) shared libraries shaped like
 * CANN's: the runtime (libascendcl / libacl_rt) owns every piece of state
 * that more than one library needs (handle registry, allocation table, live
 * counters, the per-thread recent error message) and exports it through the
 * pyaclnnEmu* helpers below; libnnopbase and the operator libraries keep no
 * shared state of their own.
 *
 * Everything declared between the visibility pragmas is exported by the
 * library that defines it; all other symbols are hidden (-fvisibility=hidden).
 */
#ifndef PYACLNN_EMU_H
#define PYACLNN_EMU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(default)
#include "acl/acl.h"
#include "aclnnop/aclnn_ops.h"
#include "decl/emulator.h"

/* Kinds of tracked objects. The first seven, then EMU_MAPPED_ALLOC, EMU_GRAPH, EMU_SCALAR,
 * EMU_FLOAT_ARRAY, EMU_TENSOR_LIST and EMU_SCALAR_LIST are the order of pyaclnnEmuLiveCounts;
 * allocations are counted from the allocation table. */
enum {
    EMU_DEVICE_ALLOC = 0,
    EMU_HOST_ALLOC = 1,
    EMU_TENSOR = 2,
    EMU_INT_ARRAY = 3,
    EMU_BOOL_ARRAY = 4,
    EMU_EXECUTOR = 5,
    EMU_STREAM = 6,
    EMU_SCALAR = 7,
    EMU_FLOAT_ARRAY = 8,
    EMU_EVENT = 9,
    EMU_MAPPED_ALLOC = 10, /* host memory mapped with aclrtHostRegister: the caller's, never freed here */
    EMU_GRAPH = 11,        /* aclmdlRI, from aclmdlRICaptureBegin until aclmdlRIDestroy */
    EMU_TENSOR_LIST = 12,
    EMU_SCALAR_LIST = 13,
    EMU_KIND_COUNT = 14
};

/* Record the calling thread's recent error message (printf-style). */
void pyaclnnEmuSetError(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Registry of live handles. Add: 0 ok, -1 out of memory. Remove: 1 removed,
 * 0 not live. IsLive: 1 or 0. SetPersistent: marks a live handle so that
 * Acquire keeps it (1 ok, 0 not live). Acquire: -1 not live, 0 removed from
 * the registry (the caller now owns it), 1 live and persistent (kept). */
int pyaclnnEmuHandleAdd(int kind, const void *handle);
int pyaclnnEmuHandleRemove(int kind, const void *handle);
int pyaclnnEmuHandleIsLive(int kind, const void *handle);
/* The first of the n handles that is not a live one of its kind (handles[i] of kinds[i]),
 * or -1 when all are: one look at the registry for all of them. */
int pyaclnnEmuHandlesLive(int n, const int kinds[], const void *const handles[]);
int pyaclnnEmuHandleSetPersistent(int kind, const void *handle);
int pyaclnnEmuHandleAcquire(int kind, const void *handle);

/* 1 if [ptr, ptr + nbytes) lies inside one live aclrtMalloc allocation or
 * one aclrtHostRegister mapping: memory an operator may use. */
int pyaclnnEmuDeviceRange(const void *ptr, size_t nbytes);

/* 1 when the emulated device follows the 950 rules (environment variable
 * PYACLNN_EMU_SOC contains "950"), 0 for the Atlas A2/A3 rules (default). */
int pyaclnnEmuIs950(void);

/* 1 if the stream is NULL (default stream) or a live aclrtCreateStream one. */
int pyaclnnEmuStreamIsValid(aclrtStream stream);

/* What the runtime checks before it accepts a task on `stream` (a kernel
 * launch, an async copy or memset, an event record or wait), with the
 * recent error message set, naming `api`, on failure:
 * ACL_ERROR_RT_CONTEXT_NULL (107002) when the calling thread has no current
 * device; ACL_ERROR_INVALID_PARAM when the stream is not live;
 * ACL_ERROR_RT_STREAM_CONTEXT (107003) when it belongs to another device
 * than the current one (hicann/runtime: COND_RETURN_AND_MSG_INVALID_CONTEXT_
 * STREAM_WITH_FUNC_DESC, src/runtime/core/inc/common/error_message_manage.hpp).
 * NULL is the current device's default stream. */
aclError pyaclnnEmuStreamCheck(const char *api, aclrtStream stream);

/* Tasks: work queued on a stream and run by the stream's worker thread in
 * submission order (operator kernels; the runtime's own copies, memsets and
 * event markers use the same queue). */
typedef struct emu_task emu_task;
/* A kernel launch that runs run(ctx, task) and then release(ctx) (may be
 * NULL) on the worker; it first sleeps PYACLNN_EMU_KERNEL_US, read now.
 * NULL when out of host memory (release(ctx) is then already done). */
emu_task *pyaclnnEmuKernelNew(const char *api, void (*run)(void *ctx, emu_task *task), void (*release)(void *ctx),
                              void *ctx);
/* Record that the task reads or writes [ptr, ptr + nbytes) of device memory,
 * so freeing it before the task finished is a hazard. 1 done, 0 the range
 * is not inside one live aclrtMalloc allocation, -1 out of host memory. */
int pyaclnnEmuTaskUse(emu_task *task, const void *ptr, size_t nbytes);
/* pyaclnnEmuTaskUse of the n ranges [ptrs[i], ptrs[i] + sizes[i]) with sizes[i] > 0, in one
 * taking of the runtime's lock: 1 done, 0 when range *failed is not inside one live
 * allocation (the ones before it are used), -1 out of host memory. */
int pyaclnnEmuTaskUseAll(emu_task *task, int n, const void *const ptrs[], const size_t sizes[], int *failed);
/* Enqueue (ACL_SUCCESS) or, for a stream that is not live, discard the task
 * and return ACL_ERROR_INVALID_PARAM with the message set. */
aclError pyaclnnEmuTaskSubmit(emu_task *task, aclrtStream stream);
/* Drop a task that was never submitted (its release runs). */
void pyaclnnEmuTaskDiscard(emu_task *task);
/* From a running task: a device error. The stream keeps the first one
 * (sticky) with the message plus " (device error of a launch on stream
 * 0x...)" until the next synchronization of it reports it. */
void pyaclnnEmuTaskFail(emu_task *task, aclError status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* free(ptr) (nothing for NULL). On a stream's worker thread the memory is given back later,
 * by the next other thread that frees some: a worker mostly frees what the launching host
 * thread allocated (tasks, executors), and freeing it into that thread's malloc arena makes
 * the two threads take turns at the arena's lock on every launch. Every free of the
 * emulator goes through here. */
void pyaclnnEmuFree(void *ptr);

/* Executors shared by queued launches. Hold: one more launch needs it.
 * Unhold: a launch has finished with it. Dispose: its owner gives it up
 * (api NULL: phase 2 consuming a non-repeatable one; otherwise the caller's
 * aclDestroyAclOpExecutor, a hazard while launches still hold it). The
 * executor is released when disposed and no longer held. */
void pyaclnnEmuExecutorHold(aclOpExecutor *ex);
void pyaclnnEmuExecutorUnhold(aclOpExecutor *ex);
void pyaclnnEmuExecutorDispose(aclOpExecutor *ex, const char *api);

/* The profiler's records (libmsprofiler.so's aclprofStart / Stop / Finalize; streams.c keeps
 * them). Start: from now on every task that finishes on a stream of one of the `count` devices
 * is recorded (0 ok). Stop: no more records; those made are kept. Write: append them to `file`
 * as JSON lines and forget them (0 ok, -1 the file could not be written). */
int pyaclnnEmuProfRecordStart(const uint32_t *devices, uint32_t count);
void pyaclnnEmuProfRecordStop(void);
int pyaclnnEmuProfRecordWrite(const char *file);
#pragma GCC visibility pop

#define EMU_MAX_DIMS 8

struct aclTensor {
    int ndim;
    int64_t dims[EMU_MAX_DIMS];
    int64_t strides[EMU_MAX_DIMS]; /* elements */
    int64_t offset;                /* elements */
    aclDataType dtype;
    aclFormat format;
    int storage_ndim;
    int64_t storage_dims[EMU_MAX_DIMS];
    void *data; /* storage base */
};

struct aclIntArray {
    uint64_t size;
    int64_t *values;
};

struct aclBoolArray {
    uint64_t size;
    bool *values;
};

struct aclFloatArray {
    uint64_t size;
    float *values;
};

struct aclScalar {
    aclDataType dtype;
    unsigned char value[16];
};

/* Lists hold the handles they were given (not copies); destroying a list
 * destroys them, as CANN's aclDestroyTensorList / aclDestroyScalarList do. */
struct aclTensorList {
    uint64_t size;
    const aclTensor **values;
};

struct aclScalarList {
    uint64_t size;
    const aclScalar **values;
};

/* An operator's executor: each op embeds this as the first member of its
 * own snapshot struct. release frees the whole snapshot, once no queued
 * launch holds it (pyaclnnEmuExecutorDispose / Unhold). */
struct aclOpExecutor {
    const char *op_name;
    uint64_t workspace;
    void (*release)(aclOpExecutor *self);
    int holds;    /* queued launches using it (atomic: pyaclnnEmuExecutorHold and Unhold) */
    int disposed; /* its owner gave it up (1), its release was claimed (2); atomic */
};

#endif
