/* Internal header of the emulated runtime library: what runtime.c (memory,
 * handles, device) and streams.c (streams, tasks, events) share. Nothing
 * here is exported (-fvisibility=hidden); the other libraries reach this
 * state through the pyaclnnEmu* functions of emu.h only. */
#ifndef PYACLNN_EMU_RUNTIME_INTERNAL_H
#define PYACLNN_EMU_RUNTIME_INTERNAL_H

#include "emu.h"

#include <pthread.h>

#define EMU_MSG_LEN 1024
#define EMU_MAX_DEVICES 16

/* The one lock of the runtime: handle registry, allocation table, stream
 * queues, events, executor hold counts. */
extern pthread_mutex_t emu_lock;

/* One aclrtMalloc / aclrtMallocHost allocation. Queued tasks that use it
 * count as users; aclrtFree of a block with users removes it from the
 * table at once (later lookups fail) but keeps the memory until the last
 * user has finished: the block is then "quarantined". */
typedef struct {
    char *base;
    size_t size;
    int kind; /* EMU_DEVICE_ALLOC, EMU_HOST_ALLOC or EMU_MAPPED_ALLOC (base is the caller's) */
    int device;
    int users;
    int freed;
} emu_block;

/* Caller holds emu_lock. The live block of `kind` holding [ptr, ptr + n)
 * (n may be 0: ptr itself must be inside), or NULL. */
emu_block *emu_block_find(int kind, const void *ptr, size_t n);
/* Caller holds emu_lock. The live aclrtMalloc block or aclrtHostRegister
 * mapping holding [ptr, ptr + n): memory an operator may use. */
emu_block *emu_operand_block_find(const void *ptr, size_t n);
/* Caller holds emu_lock. One user fewer; frees a quarantined block whose
 * last user this was. */
void emu_block_unuse(emu_block *b);

/* Caller holds emu_lock. 1 if `handle` of `kind` is registered. */
int emu_handle_live_locked(int kind, const void *handle);

/* Print "pyaclnn emulator HAZARD: <what>" to stderr and count it. */
void emu_hazard(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A microsecond setting from the environment, read at every call: 0 when
 * unset or not a non-negative number. */
long emu_env_us(const char *name);
/* PYACLNN_* switches (1, on, true, yes; else off), as pyaclnn/_env.py reads them. */
int emu_env_flag(const char *name);
/* Sleep for `us` microseconds (nothing for us <= 0). */
void emu_sleep_us(long us);

/* The calling thread's current device: -1 until aclrtSetDevice in this
 * thread (CANN keeps the current context in thread-local storage,
 * src/runtime/core/inc/common/inner_thread_local.hpp, so a new thread has
 * none), and the number of emulated devices (PYACLNN_EMU_DEVICES). */
int emu_current_device(void);
int emu_device_count(void);
/* The current device, or -1 with the recent error message set (naming
 * `api`): the caller then returns ACL_ERROR_RT_CONTEXT_NULL, as CANN's
 * CHECK_CONTEXT_VALID_WITH_RETURN(curCtx, RT_ERROR_CONTEXT_NULL) does
 * (src/runtime/api/impl/api_impl.cc, e.g. ApiImpl::DevMalloc). */
int emu_context_device(const char *api);

/* ---- tasks (streams.c) --------------------------------------------------- */

/* Caller holds emu_lock. Makes `b` a user of the task (so freeing it is a
 * hazard until the task finished). 0 ok, -1 out of memory. */
int emu_task_use_block(emu_task *task, emu_block *b);
/* A task that runs `run(ctx, task)` on the stream's worker after sleeping
 * `sleep_us`, then `release(ctx)` (release may be NULL). NULL when out of
 * host memory (release is then already called). */
emu_task *emu_task_new(const char *api, void (*run)(void *ctx, emu_task *task), void (*release)(void *ctx),
                       void *ctx, long sleep_us);
/* Enqueue on `stream` (NULL: the current device's default stream). On
 * failure the task is discarded and the message set: no current device
 * (ACL_ERROR_RT_CONTEXT_NULL), stream not live (ACL_ERROR_INVALID_PARAM),
 * stream of another device than the current one (ACL_ERROR_RT_STREAM_CONTEXT). *ticket (may be NULL) identifies it for
 * emu_stream_wait. */
aclError emu_task_submit(emu_task *task, aclrtStream stream, uint64_t *ticket);
/* The text the profiler's record appends to the task's api (a copy's " H2D"); static storage. */
void emu_task_set_detail(emu_task *task, const char *detail);
/* Wait until the task `ticket` of `stream` has finished. */
void emu_stream_wait(aclrtStream stream, uint64_t ticket);
/* Caller holds emu_lock. Live aclrtCreateStream streams of `device`. */
int64_t emu_stream_count_locked(int device);

/* ---- stream capture (streams.c) ------------------------------------------ */

/* aclrtMemcpy / aclrtMemset of the calling thread on `device`: ACL_SUCCESS,
 * or ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT with the message set when a
 * capture's mode forbids them now (CANN's Context::IsCaptureModeSupport). */
aclError emu_capture_unsafe_check(const char *api, int device);
/* An async copy of pageable host memory on `stream`: as above, and on a
 * capturing stream refused in every mode, invalidating the capture. */
aclError emu_capture_pageable_check(const char *api, aclrtStream stream);
/* Caller holds emu_lock. Live graphs (aclmdlRI) of `device`. */
int64_t emu_graph_count_locked(int device);

#endif
