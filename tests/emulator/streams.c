/* Streams, tasks and events of the emulated runtime (libascendcl.so /
 * libacl_rt.so), modelled on CANN's asynchronous device
 * (docs/zh/api_ref/06_stream_management.md, 07_event_management.md):
 *
 * - every stream, and each device's default stream (handle NULL), has a
 *   FIFO queue of tasks and a worker thread (started at its first task)
 *   that runs them one after another; different streams run concurrently;
 * - asynchronous calls (operator phase 2, aclrtMemcpyAsync, aclrtMemsetAsync,
 *   aclrtRecordEvent, aclrtStreamWaitEvent) enqueue a task and return;
 * - a task that fails records a sticky error on its stream, reported once by
 *   the next aclrtSynchronizeStream / aclrtSynchronizeDevice;
 * - on a stream that is capturing (aclmdlRICaptureBegin .. End) the tasks,
 *   event records and waits go to a graph instead of the queue, and
 *   aclmdlRIExecuteAsync queues one task that runs them again (the section at the end of this file);
 * - every task has a ticket (a global, increasing number). A stream has run
 *   everything up to ticket T when its running task and queue head (if any)
 *   have tickets above T, which is what the synchronizations wait for.
 *
 * Everything is guarded by emu_lock; g_progress is broadcast whenever a task
 * finishes, and waiters re-check their condition.
 *
 * Contexts and devices, as hicann/runtime 681ef76 checks them (paths of that
 * repository):
 * - streams and events belong to the device current when they were created;
 * - with no current device in the calling thread (no aclrtSetDevice there),
 *   aclrtCreateStream, aclrtDestroyStream, aclrtSynchronizeStream (even of a
 *   valid stream), aclrtSynchronizeDevice, aclrtCreateEvent(WithFlag),
 *   aclrtRecordEvent, aclrtStreamWaitEvent and every task submission return
 *   ACL_ERROR_RT_CONTEXT_NULL (ApiImpl::StreamCreate / StreamDestroy /
 *   StreamSynchronize / DeviceSynchronize / EventCreate / EventRecord /
 *   StreamWaitEvent, src/runtime/api/impl/api_impl.cc);
 * - a task submitted to a stream of another device than the current one
 *   (launch, async copy or memset, record, wait) and aclrtDestroyStream of
 *   one return ACL_ERROR_RT_STREAM_CONTEXT (COND_RETURN_AND_MSG_INVALID_
 *   CONTEXT_STREAM_WITH_FUNC_DESC, src/runtime/core/inc/common/
 *   error_message_manage.hpp); aclrtSynchronizeStream of one works (it
 *   switches context for the wait, ApiImpl::StreamSynchronize);
 * - aclrtRecordEvent of an event of device A on a stream of device B: the
 *   docs say it fails (docs/zh/dev_guide/05_multi_device_programming.md), no
 *   check or code is in the source; the emulator returns
 *   ACL_ERROR_RT_STREAM_CONTEXT, its own choice;
 * - aclrtStreamWaitEvent of a stream of the current device on an event of
 *   another device is accepted and waits (Event::Wait's CrossDeviceEventWait,
 *   src/runtime/core/src/event/event.cc, on Atlas A2/A3);
 * - aclrtSynchronizeEvent, aclrtQueryEventStatus, aclrtDestroyEvent and
 *   aclrtEventElapsedTime need only the handle, from any thread.
 */
#define _GNU_SOURCE
#include "runtime_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct emu_task {
    emu_task *next;
    const char *api;
    void (*run)(void *ctx, emu_task *task);
    void (*release)(void *ctx);
    void *ctx;
    long sleep_us;
    uint64_t queued_ns; /* when it was submitted: its device time starts no earlier */
    uint64_t device_ns; /* its end in the stream's device time, once it runs */
    emu_block **blocks; /* memory it uses: freeing it meanwhile is a hazard */
    size_t nblocks, cap;
    struct emu_stream *stream;
    aclrtStream handle; /* as the caller named the stream (NULL: default) */
    uint64_t ticket;
    /* For the profiler's records: appended to api (a copy's direction), the event of a record
     * or wait, the graph whose replay queued it (NULL: none). */
    const char *detail;
    const void *event;
    const void *graph;
};

typedef struct emu_stream {
    int device;
    int initialized;
    int started;
    int stop;
    pthread_t thread;
    pthread_cond_t work; /* a task was queued, or stop was set */
    uint64_t device_clock_ns; /* when the last kernel ends in simulated device time */
    uint64_t prof_end_ns;     /* the end of its latest profiler record: the next starts no earlier */
    emu_task *head, *tail, *running;
    int syncers; /* threads waiting on it; destroy waits for them */
    int stop_on_failure; /* aclrtSetStreamFailureMode(ACL_STOP_ON_FAILURE): skip tasks while error is set */
    aclError error;
    char error_msg[EMU_MSG_LEN];
    struct emu_stream *next; /* list of created streams */
    /* Stream capture (aclmdlRICaptureBegin .. End): the status
     * (ACL_MODEL_RI_CAPTURE_STATUS_*), mode and thread of the capture, and
     * the graph its tasks go to instead of the queue. */
    int capture_status;
    int capture_mode;
    pthread_t capture_thread;
    struct emu_graph *capture;
} emu_stream;

struct emu_graph;
/* Caller holds emu_lock. Appends a recorded task, or an event record (record
 * 1) or wait (record 0), to the graph. 0 ok, -1 out of memory. */
static int graph_add_locked(struct emu_graph *g, emu_task *task, void *event, int record);

static pthread_cond_t g_progress = PTHREAD_COND_INITIALIZER;
static uint64_t g_ticket;
static emu_stream g_default[EMU_MAX_DEVICES];
static emu_stream *g_streams;

/* ---- tasks ----------------------------------------------------------------- */

emu_task *emu_task_new(const char *api, void (*run)(void *ctx, emu_task *task), void (*release)(void *ctx),
                       void *ctx, long sleep_us)
{
    emu_task *t = calloc(1, sizeof *t);
    if (t == NULL) {
        if (release != NULL) {
            release(ctx);
        }
        return NULL;
    }
    t->api = api;
    t->run = run;
    t->release = release;
    t->ctx = ctx;
    t->sleep_us = sleep_us;
    return t;
}

emu_task *pyaclnnEmuKernelNew(const char *api, void (*run)(void *ctx, emu_task *task), void (*release)(void *ctx),
                              void *ctx)
{
    return emu_task_new(api, run, release, ctx, emu_env_us("PYACLNN_EMU_KERNEL_US"));
}

int emu_task_use_block(emu_task *task, emu_block *b)
{
    if (task->nblocks == task->cap) {
        size_t cap = task->cap ? 2 * task->cap : 8;
        emu_block **grown = realloc(task->blocks, cap * sizeof *grown);
        if (grown == NULL) {
            return -1;
        }
        task->blocks = grown;
        task->cap = cap;
    }
    task->blocks[task->nblocks++] = b;
    b->users++;
    return 0;
}

int pyaclnnEmuTaskUse(emu_task *task, const void *ptr, size_t nbytes)
{
    pthread_mutex_lock(&emu_lock);
    emu_block *b = emu_operand_block_find(ptr, nbytes);
    int rc = b == NULL ? 0 : emu_task_use_block(task, b) == 0 ? 1 : -1;
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

int pyaclnnEmuTaskUseAll(emu_task *task, int n, const void *const ptrs[], const size_t sizes[], int *failed)
{
    int rc = 1;
    pthread_mutex_lock(&emu_lock);
    for (int i = 0; rc == 1 && i < n; i++) {
        if (sizes[i] == 0) {
            continue;
        }
        emu_block *b = emu_operand_block_find(ptrs[i], sizes[i]);
        rc = b == NULL ? 0 : emu_task_use_block(task, b) == 0 ? 1 : -1;
        if (rc == 0) {
            *failed = i;
        }
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

/* Caller holds emu_lock. The task's memory may now go; the task goes. */
static void task_free_locked(emu_task *t)
{
    for (size_t i = 0; i < t->nblocks; i++) {
        emu_block_unuse(t->blocks[i]);
    }
    pyaclnnEmuFree(t->blocks);
    pyaclnnEmuFree(t);
}

/* Without the lock: release may take it (executors, events). */
static void task_release_ctx(emu_task *t)
{
    if (t->release != NULL) {
        t->release(t->ctx);
    }
}

void pyaclnnEmuTaskDiscard(emu_task *task)
{
    task_release_ctx(task);
    pthread_mutex_lock(&emu_lock);
    task_free_locked(task);
    pthread_mutex_unlock(&emu_lock);
}

void pyaclnnEmuTaskFail(emu_task *task, aclError status, const char *fmt, ...)
{
    char what[EMU_MSG_LEN - 64]; /* room for the suffix */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    emu_stream *s = task->stream;
    pthread_mutex_lock(&emu_lock);
    if (s->error == ACL_SUCCESS) { /* the first error sticks until reported */
        s->error = status;
        snprintf(s->error_msg, sizeof s->error_msg, "%s (device error of a launch on stream 0x%" PRIxPTR ")",
                 what, (uintptr_t)task->handle);
    }
    pthread_mutex_unlock(&emu_lock);
}

/* ---- streams ----------------------------------------------------------------- */

static void stream_init(emu_stream *s, int device)
{
    pthread_cond_init(&s->work, NULL);
    s->device = device;
    s->initialized = 1;
}

/* Caller holds emu_lock. The stream a handle names, NULL if not live (or
 * NULL, the default stream, in a thread with no current device). */
static emu_stream *stream_of(aclrtStream handle)
{
    if (handle != NULL) {
        return emu_handle_live_locked(EMU_STREAM, handle) ? (emu_stream *)handle : NULL;
    }
    int device = emu_current_device();
    if (device < 0) {
        return NULL;
    }
    emu_stream *s = &g_default[device];
    if (!s->initialized) {
        stream_init(s, device);
    }
    return s;
}

/* Caller holds emu_lock. The stream `handle` names for `api` in the calling
 * thread, in *out; `own` also requires it to be a stream of the current
 * device. ACL_SUCCESS, or the error with the message set: no current device
 * (ACL_ERROR_RT_CONTEXT_NULL), not live (ACL_ERROR_INVALID_PARAM), another
 * device's stream (ACL_ERROR_RT_STREAM_CONTEXT). */
static aclError resolve_locked(const char *api, aclrtStream handle, int own, emu_stream **out)
{
    *out = NULL;
    int device = emu_context_device(api);
    if (device < 0) {
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    emu_stream *s = stream_of(handle);
    if (s == NULL) {
        pyaclnnEmuSetError("%s: stream %p is not a live stream (destroyed, or not from aclrtCreateStream)", api,
                           handle);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (own && s->device != device) {
        pyaclnnEmuSetError("%s: stream %p belongs to device %d, not to this thread's current device %d "
                           "(ACL_ERROR_RT_STREAM_CONTEXT: stream not in current context); call "
                           "aclrtSetDevice(%d) first",
                           api, handle, s->device, device, s->device);
        return ACL_ERROR_RT_STREAM_CONTEXT;
    }
    *out = s;
    return ACL_SUCCESS;
}

aclError pyaclnnEmuStreamCheck(const char *api, aclrtStream stream)
{
    emu_stream *s;
    pthread_mutex_lock(&emu_lock);
    aclError rc = resolve_locked(api, stream, 1, &s);
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

static uint64_t first_pending(const emu_stream *s)
{
    if (s->running != NULL) {
        return s->running->ticket;
    }
    return s->head != NULL ? s->head->ticket : UINT64_MAX;
}

static int pending_count(const emu_stream *s)
{
    int n = s->running != NULL;
    for (const emu_task *t = s->head; t != NULL; t = t->next) {
        n++;
    }
    return n;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the profiler's records (libmsprofiler.so, profiler.c) -------------------------- */

/* Between pyaclnnEmuProfRecordStart and pyaclnnEmuProfRecordStop every task that finishes on
 * a stream of a listed device is one record, kept (under g_rec_lock, not emu_lock: a worker
 * records without it) until pyaclnnEmuProfRecordWrite appends them to a file as JSON lines,
 * the format pyaclnn/backends/numpy/_profiler.py writes too. */
typedef struct {
    int device;
    uintptr_t stream, event, graph;
    const char *kind, *api, *detail;
    uint64_t start_ns, end_ns;
} emu_record;

static int g_recording; /* atomic: read once per task */
static pthread_mutex_t g_rec_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char g_rec_devices[EMU_MAX_DEVICES];
static emu_record *g_records;
static size_t g_record_count, g_record_cap;

static const char *task_kind(const char *api)
{
    static const char *const kinds[][2] = {{"aclrtMemcpyAsync", "memcpy"},
                                           {"aclrtMemsetAsync", "memset"},
                                           {"aclrtRecordEvent", "event_record"},
                                           {"aclrtStreamWaitEvent", "event_wait"}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(api, kinds[i][0]) == 0) {
            return kinds[i][1];
        }
    }
    return "kernel";
}

static void prof_append(const emu_record *r)
{
    pthread_mutex_lock(&g_rec_lock);
    /* g_recording is checked again here: a task that ends after aclprofStop is not recorded */
    if (__atomic_load_n(&g_recording, __ATOMIC_ACQUIRE) && r->device >= 0 && r->device < EMU_MAX_DEVICES
        && g_rec_devices[r->device]) {
        if (g_record_count == g_record_cap) {
            size_t cap = g_record_cap ? 2 * g_record_cap : 256;
            emu_record *grown = realloc(g_records, cap * sizeof *grown);
            if (grown != NULL) {
                g_records = grown;
                g_record_cap = cap;
            }
        }
        if (g_record_count < g_record_cap) { /* out of host memory: the record is lost */
            g_records[g_record_count++] = *r;
        }
    }
    pthread_mutex_unlock(&g_rec_lock);
}

/* On the worker, after the task ran. The stream's records follow one another: one starts no
 * earlier than the previous one ended. */
static void prof_record_task(emu_stream *s, const emu_task *t, uint64_t start_ns, uint64_t end_ns)
{
    if (start_ns < s->prof_end_ns) {
        start_ns = s->prof_end_ns;
    }
    s->prof_end_ns = end_ns;
    if (t->api[0] == '\0') {
        return; /* a replay's bracket: recorded as the replay's own record */
    }
    emu_record r = {s->device, (uintptr_t)t->handle, (uintptr_t)t->event, (uintptr_t)t->graph,
                    task_kind(t->api), t->api, t->detail != NULL ? t->detail : "", start_ns, end_ns};
    prof_append(&r);
}

int pyaclnnEmuProfRecordStart(const uint32_t *devices, uint32_t count)
{
    pthread_mutex_lock(&g_rec_lock);
    memset(g_rec_devices, 0, sizeof g_rec_devices);
    for (uint32_t i = 0; i < count; i++) {
        if (devices[i] < EMU_MAX_DEVICES) {
            g_rec_devices[devices[i]] = 1;
        }
    }
    __atomic_store_n(&g_recording, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_rec_lock);
    return 0;
}

void pyaclnnEmuProfRecordStop(void)
{
    pthread_mutex_lock(&g_rec_lock);
    __atomic_store_n(&g_recording, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_rec_lock);
}

static int record_order(const void *a, const void *b)
{
    const emu_record *x = a, *y = b;
    if (x->start_ns != y->start_ns) {
        return x->start_ns < y->start_ns ? -1 : 1;
    }
    return x->end_ns < y->end_ns ? -1 : x->end_ns > y->end_ns;
}

int pyaclnnEmuProfRecordWrite(const char *file)
{
    pthread_mutex_lock(&g_rec_lock);
    emu_record *records = g_records;
    size_t n = g_record_count;
    g_records = NULL;
    g_record_count = g_record_cap = 0;
    pthread_mutex_unlock(&g_rec_lock);
    if (n > 1) { /* qsort of NULL is undefined, even for 0 elements */
        qsort(records, n, sizeof *records, record_order);
    }
    FILE *out = fopen(file, "a");
    int rc = out == NULL ? -1 : 0;
    for (size_t i = 0; out != NULL && i < n; i++) {
        const emu_record *r = &records[i];
        fprintf(out,
                "{\"device\": %d, \"stream\": \"0x%" PRIxPTR "\", \"kind\": \"%s\", \"name\": \"%s%s\", "
                "\"start_ns\": %" PRIu64 ", \"end_ns\": %" PRIu64,
                r->device, r->stream, r->kind, r->api, r->detail, r->start_ns, r->end_ns);
        if (r->event != 0) {
            fprintf(out, ", \"event\": \"0x%" PRIxPTR "\"", r->event);
        }
        if (r->graph != 0) {
            fprintf(out, ", \"graph\": \"0x%" PRIxPTR "\"", r->graph);
        }
        fputs("}\n", out);
    }
    if (out != NULL && fclose(out) != 0) {
        rc = -1;
    }
    pyaclnnEmuFree(records);
    return rc;
}

void emu_task_set_detail(emu_task *task, const char *detail) { task->detail = detail; }

/* Simulated device time, kept per stream: a task starts when it was queued
 * or when the previous task of its stream ended, whichever is later; a
 * kernel then lasts sleep_us (plus the emulator's own compute time) and its
 * worker waits until that end, on the clock (emu_sleep_us). So a chain of
 * kernels takes sleep_us each, whatever the thread wake-ups cost, and event
 * timestamps are device times (t->device_ns). */
static void run_marker(void *ctx, emu_task *task);
static void run_replay(void *ctx, emu_task *task); /* its steps are skipped each on its own */

/* A stream in ACL_STOP_ON_FAILURE mode runs none of the tasks queued after a failed one
 * while its error is not yet reported (an event record still completes, with its time, or
 * whoever waits for the event would wait forever). */
static int task_skipped(emu_stream *s, const emu_task *t)
{
    if (t->run == run_marker || t->run == run_replay || !__atomic_load_n(&s->stop_on_failure, __ATOMIC_ACQUIRE)) {
        return 0;
    }
    pthread_mutex_lock(&emu_lock);
    int failed = s->error != ACL_SUCCESS;
    pthread_mutex_unlock(&emu_lock);
    return failed;
}

/* A wait for an event (run_wait) moves its end, t->device_ns, to the device time the event
 * completed: the stream continues from there, so its later events time the awaited work. */
static void task_execute(emu_stream *s, emu_task *t)
{
    uint64_t start = t->queued_ns > s->device_clock_ns ? t->queued_ns : s->device_clock_ns;
    if (task_skipped(s, t)) {
        t->device_ns = start;
        task_release_ctx(t);
        return;
    }
    uint64_t end = start + (t->sleep_us > 0 ? (uint64_t)t->sleep_us * 1000u : 0u);
    uint64_t now = now_ns();
    /* The profiler (aclprofStart .. aclprofStop): one flag read per task while it is off. */
    int recording = __atomic_load_n(&g_recording, __ATOMIC_ACQUIRE);
    /* A kernel's record starts with its device time, so it spans its whole simulated time. */
    uint64_t record_start = t->sleep_us > 0 && start < now ? start : now;
    if (end > now) {
        emu_sleep_us((long)((end - now + 999u) / 1000u));
    }
    t->device_ns = end;
    t->run(t->ctx, t);
    uint64_t done = now_ns();
    uint64_t spent = done - (end > now ? end : now);
    uint64_t finish = t->device_ns > end ? t->device_ns : end; /* a wait: when its event completed */
    s->device_clock_ns = finish + (t->sleep_us > 0 ? spent : 0u);
    if (recording) {
        prof_record_task(s, t, record_start, done);
    }
    task_release_ctx(t);
}

/* Without the lock: a worker whose queue ran dry looks for new work a little
 * longer before it sleeps, as a device polls its queue, so a host queuing
 * call after call does not pay a thread wake-up for each. A device polls
 * with its own scheduler and takes no host CPU: the worker yields the CPU
 * while it looks, so on a loaded host (2 vCPUs shared with other work) it
 * does not take the core the calling thread or other processes need. (It
 * spun with a pause instruction: under load a call of the loop in
 * bench_overhead.py cost 15-21 us against 8-9 us without phase 2's C call;
 * yielding, 10 us.) */
#define EMU_LINGER_NS 20000u

static void linger(const emu_stream *s)
{
    uint64_t until = now_ns() + EMU_LINGER_NS;
    while (__atomic_load_n(&s->head, __ATOMIC_ACQUIRE) == NULL && !__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)
           && now_ns() < until) {
        sched_yield();
    }
}

static _Thread_local int t_worker; /* this thread is a stream's worker */
static void *g_freed_later;        /* what workers freed: a stack linked through each block's first word */

void pyaclnnEmuFree(void *ptr)
{
#ifndef __SANITIZE_ADDRESS__ /* (AddressSanitizer: at once, so that it sees every use after free) */
    if (ptr == NULL) {
        return;
    }
    if (t_worker) {
        void *head = __atomic_load_n(&g_freed_later, __ATOMIC_RELAXED);
        do {
            *(void **)ptr = head; /* (every block malloc gives holds a pointer) */
        } while (!__atomic_compare_exchange_n(&g_freed_later, &head, ptr, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
        return;
    }
    if (__atomic_load_n(&g_freed_later, __ATOMIC_RELAXED) != NULL) {
        void *later = __atomic_exchange_n(&g_freed_later, NULL, __ATOMIC_ACQUIRE);
        while (later != NULL) {
            void *next = *(void **)later;
            free(later);
            later = next;
        }
    }
#endif
    free(ptr);
}

static void *worker_main(void *arg)
{
    emu_stream *s = arg;
    t_worker = 1;
    pthread_mutex_lock(&emu_lock);
    for (;;) {
        if (s->head == NULL && !s->stop) {
            pthread_mutex_unlock(&emu_lock);
            linger(s);
            pthread_mutex_lock(&emu_lock);
        }
        while (s->head == NULL && !s->stop) {
            pthread_cond_wait(&s->work, &emu_lock);
        }
        if (s->head == NULL) {
            break; /* stopped, and nothing left */
        }
        emu_task *t = s->head;
        __atomic_store_n(&s->head, t->next, __ATOMIC_RELEASE);
        if (s->head == NULL) {
            s->tail = NULL;
        }
        s->running = t;
        pthread_mutex_unlock(&emu_lock);
        task_execute(s, t);
        pthread_mutex_lock(&emu_lock);
        s->running = NULL;
        task_free_locked(t);
        pthread_cond_broadcast(&g_progress);
    }
    pthread_mutex_unlock(&emu_lock);
    return NULL;
}

/* Caller holds emu_lock. A kernel reading memory of another device than
 * its stream's would fault or read garbage on real hardware (CANN checks
 * nothing at the launch). One hazard per task at most. (Work queued from a
 * thread whose current device is another is an error of emu_task_submit.) */
static void check_devices_locked(const emu_task *t, const emu_stream *s)
{
    for (size_t i = 0; i < t->nblocks; i++) {
        const emu_block *b = t->blocks[i];
        if (b->kind != EMU_HOST_ALLOC && b->device != s->device) {
            emu_hazard("memory %p of device %d used by work on a stream of device %d, %s", (void *)b->base,
                       b->device, s->device, t->api);
            return;
        }
    }
}

aclError emu_task_submit(emu_task *task, aclrtStream stream, uint64_t *ticket)
{
    pthread_mutex_lock(&emu_lock);
    emu_stream *s;
    aclError rc = resolve_locked(task->api, stream, 1, &s);
    if (rc == ACL_SUCCESS && s->capture_status != ACL_MODEL_RI_CAPTURE_STATUS_NONE) {
        /* Capturing: the task goes to the graph, keeping the memory it uses. */
        task->stream = s;
        task->handle = stream;
        if (ticket != NULL) {
            *ticket = 0;
        }
        if (graph_add_locked(s->capture, task, NULL, 0) != 0) {
            s->capture_status = ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED; /* CANN: a task the capture could not take */
            pthread_mutex_unlock(&emu_lock);
            pyaclnnEmuTaskDiscard(task);
            pyaclnnEmuSetError("%s: out of host memory for the captured task; the capture is invalidated", task->api);
            return ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
        }
        pthread_mutex_unlock(&emu_lock);
        return ACL_SUCCESS;
    }
    int started = rc == ACL_SUCCESS && (s->started || pthread_create(&s->thread, NULL, worker_main, s) == 0);
    if (!started) {
        pthread_mutex_unlock(&emu_lock);
        pyaclnnEmuTaskDiscard(task);
        if (rc == ACL_SUCCESS) {
            pyaclnnEmuSetError("%s: the worker thread of stream %p could not start", task->api, stream);
            rc = ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
        }
        return rc;
    }
    s->started = 1;
    check_devices_locked(task, s);
    task->stream = s;
    task->handle = stream;
    task->ticket = ++g_ticket;
    task->queued_ns = now_ns();
    if (ticket != NULL) {
        *ticket = task->ticket;
    }
    if (s->tail != NULL) {
        s->tail->next = task;
    } else {
        __atomic_store_n(&s->head, task, __ATOMIC_RELEASE);
    }
    s->tail = task;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&emu_lock);
    return ACL_SUCCESS;
}

aclError pyaclnnEmuTaskSubmit(emu_task *task, aclrtStream stream) { return emu_task_submit(task, stream, NULL); }

/* Caller holds emu_lock. Wait until s has run every task up to `ticket`. */
static void wait_locked(emu_stream *s, uint64_t ticket)
{
    s->syncers++;
    while (first_pending(s) <= ticket) {
        pthread_cond_wait(&g_progress, &emu_lock);
    }
    if (--s->syncers == 0) {
        pthread_cond_broadcast(&g_progress); /* a destroy may be waiting for us */
    }
}

void emu_stream_wait(aclrtStream stream, uint64_t ticket)
{
    pthread_mutex_lock(&emu_lock);
    emu_stream *s = stream_of(stream);
    if (s != NULL) {
        wait_locked(s, ticket);
    }
    pthread_mutex_unlock(&emu_lock);
}

/* Caller holds emu_lock. Moves the sticky error to `msg`; 0 if none. */
static aclError take_error_locked(emu_stream *s, char msg[EMU_MSG_LEN])
{
    aclError e = s->error;
    if (e != ACL_SUCCESS) {
        memcpy(msg, s->error_msg, EMU_MSG_LEN);
        s->error = ACL_SUCCESS;
    }
    return e;
}

/* After a synchronization: the simulated latency, then the device error
 * (if any) becomes the calling thread's recent error message. */
static aclError finish_sync(aclError error, const char *msg)
{
    emu_sleep_us(emu_env_us("PYACLNN_EMU_SYNC_US"));
    if (error != ACL_SUCCESS) {
        pyaclnnEmuSetError("%s", msg);
    }
    return error;
}

/* Any live stream, of any device, but the thread needs a current device. */
aclError aclrtSynchronizeStream(aclrtStream stream)
{
    char msg[EMU_MSG_LEN];
    pthread_mutex_lock(&emu_lock);
    emu_stream *s;
    aclError rc = resolve_locked("aclrtSynchronizeStream", stream, 0, &s);
    if (rc == ACL_SUCCESS && s->capture_status != ACL_MODEL_RI_CAPTURE_STATUS_NONE) {
        pyaclnnEmuSetError("aclrtSynchronizeStream: stream %p is capturing (aclmdlRICaptureBegin): not supported "
                           "until aclmdlRICaptureEnd (ACL_ERROR_RT_STREAM_CAPTURED)",
                           stream);
        rc = ACL_ERROR_RT_STREAM_CAPTURED;
    }
    if (rc != ACL_SUCCESS) {
        pthread_mutex_unlock(&emu_lock);
        return rc;
    }
    wait_locked(s, g_ticket);
    aclError error = take_error_locked(s, msg);
    pthread_mutex_unlock(&emu_lock);
    return finish_sync(error, msg);
}

static int marker_done_locked(const emu_task *t);

/* Caller holds emu_lock. A query that found work pending waits for the next task to finish, at
 * most EMU_POLL_WAIT_NS, before it answers: a device runs beside the host and takes none of its
 * CPU, but the emulator's workers are host threads, and a polling loop on a busy host would
 * otherwise keep the core the worker needs to end its kernel for a scheduler tick (4 ms). */
#define EMU_POLL_WAIT_NS 200000u

static void poll_wait_locked(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += EMU_POLL_WAIT_NS;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec += 1;
        until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&g_progress, &emu_lock, &until);
}

/* Caller holds emu_lock. Nothing of s is queued, and what runs (if anything) is an event record
 * that already completed the event: whoever saw the event complete sees the stream done. */
static int stream_done_locked(const emu_stream *s)
{
    return s->head == NULL && (s->running == NULL || marker_done_locked(s->running));
}

/* Any live stream, of any device (as aclrtSynchronizeStream); NOT_READY while a task of it is
 * queued or running. A failure is not reported here: the next synchronize reports it. */
aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status)
{
    static const char api[] = "aclrtStreamQuery";
    pthread_mutex_lock(&emu_lock);
    emu_stream *s;
    aclError rc = resolve_locked(api, stream, 0, &s);
    if (rc == ACL_SUCCESS && status == NULL) {
        pyaclnnEmuSetError("%s: status is NULL", api);
        rc = ACL_ERROR_INVALID_PARAM;
    }
    if (rc == ACL_SUCCESS && s->capture_status != ACL_MODEL_RI_CAPTURE_STATUS_NONE) {
        pyaclnnEmuSetError("%s: stream %p is capturing (aclmdlRICaptureBegin): not supported until "
                           "aclmdlRICaptureEnd (ACL_ERROR_RT_STREAM_CAPTURED)",
                           api, stream);
        rc = ACL_ERROR_RT_STREAM_CAPTURED;
    }
    if (rc == ACL_SUCCESS) {
        int done = stream_done_locked(s);
        if (!done) {
            s->syncers++; /* a destroy waits for us */
            poll_wait_locked();
            done = stream_done_locked(s);
            if (--s->syncers == 0) {
                pthread_cond_broadcast(&g_progress);
            }
        }
        *status = done ? ACL_STREAM_STATUS_COMPLETE : ACL_STREAM_STATUS_NOT_READY;
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

/* Caller holds emu_lock. The first stream of `device` (default stream
 * first) that has not run everything up to `ticket`, or NULL. */
static emu_stream *busy_stream(int device, uint64_t ticket)
{
    if (first_pending(&g_default[device]) <= ticket) {
        return &g_default[device];
    }
    for (emu_stream *s = g_streams; s != NULL; s = s->next) {
        if (s->device == device && first_pending(s) <= ticket) {
            return s;
        }
    }
    return NULL;
}

/* Caller holds emu_lock. Takes the sticky errors of all the device's
 * streams and returns the first (with its message): CANN's device
 * synchronize synchronizes every stream of the context, each consuming its
 * own error, and returns the first one in CONTINUE_ON_FAILURE mode
 * (Context::SyncStreamsWithTimeout, src/runtime/core/src/context/context.cc). */
static aclError take_device_error_locked(int device, char msg[EMU_MSG_LEN])
{
    char other[EMU_MSG_LEN];
    aclError e = take_error_locked(&g_default[device], msg);
    for (emu_stream *s = g_streams; s != NULL; s = s->next) {
        if (s->device == device) {
            aclError next = take_error_locked(s, e == ACL_SUCCESS ? msg : other);
            e = e == ACL_SUCCESS ? next : e;
        }
    }
    return e;
}

aclError aclrtSynchronizeDevice(void)
{
    char msg[EMU_MSG_LEN];
    pthread_mutex_lock(&emu_lock);
    int device = emu_context_device("aclrtSynchronizeDevice");
    if (device < 0) {
        pthread_mutex_unlock(&emu_lock);
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    for (const emu_stream *s = g_streams; s != NULL; s = s->next) {
        if (s->device == device && s->capture_status != ACL_MODEL_RI_CAPTURE_STATUS_NONE) {
            /* Context::Synchronize refuses before it waits for anything */
            pyaclnnEmuSetError("aclrtSynchronizeDevice: stream %p is capturing (aclmdlRICaptureBegin): not "
                               "supported until aclmdlRICaptureEnd (ACL_ERROR_RT_STREAM_CAPTURED)",
                               (const void *)s);
            pthread_mutex_unlock(&emu_lock);
            return ACL_ERROR_RT_STREAM_CAPTURED;
        }
    }
    stream_of(NULL); /* initializes the default stream */
    uint64_t ticket = g_ticket;
    /* Re-scan after every wake-up: streams may be created or destroyed. */
    while (busy_stream(device, ticket) != NULL) {
        pthread_cond_wait(&g_progress, &emu_lock);
    }
    aclError error = take_device_error_locked(device, msg);
    pthread_mutex_unlock(&emu_lock);
    return finish_sync(error, msg);
}

aclError aclrtCreateStream(aclrtStream *stream)
{
    if (stream == NULL) {
        pyaclnnEmuSetError("aclrtCreateStream: stream is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    int device = emu_context_device("aclrtCreateStream");
    if (device < 0) {
        *stream = NULL;
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    emu_stream *s = calloc(1, sizeof *s);
    if (s == NULL || pyaclnnEmuHandleAdd(EMU_STREAM, s) != 0) {
        pyaclnnEmuFree(s);
        *stream = NULL;
        pyaclnnEmuSetError("aclrtCreateStream: out of host memory");
        return ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
    }
    stream_init(s, device);
    pthread_mutex_lock(&emu_lock);
    s->next = g_streams;
    g_streams = s;
    pthread_mutex_unlock(&emu_lock);
    *stream = s;
    return ACL_SUCCESS;
}

/* The priority (0 to 7, acl_rt.h) and the flags are checked, then ignored: one worker thread per
 * stream runs as the OS schedules it. */
aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t flag)
{
    static const char api[] = "aclrtCreateStreamWithConfig";
    if (stream != NULL) {
        *stream = NULL;
    }
    if (priority > 7) {
        pyaclnnEmuSetError("%s: priority %u is outside 0..7", api, priority);
        return ACL_ERROR_INVALID_PARAM;
    }
    if ((flag & ~(uint32_t)(ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC)) != 0) {
        pyaclnnEmuSetError("%s: flag 0x%x is not an OR of ACL_STREAM_FAST_LAUNCH (1) and ACL_STREAM_FAST_SYNC (2)",
                           api, flag);
        return ACL_ERROR_INVALID_PARAM;
    }
    return aclrtCreateStream(stream);
}

aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode)
{
    static const char api[] = "aclrtSetStreamFailureMode";
    if (stream == NULL) {
        pyaclnnEmuSetError("%s: stream is NULL (the default stream's mode cannot be set)", api);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (mode != ACL_CONTINUE_ON_FAILURE && mode != ACL_STOP_ON_FAILURE) {
        pyaclnnEmuSetError("%s: mode %" PRIu64 " is neither ACL_CONTINUE_ON_FAILURE (0) nor ACL_STOP_ON_FAILURE (1)",
                           api, mode);
        return ACL_ERROR_INVALID_PARAM;
    }
    pthread_mutex_lock(&emu_lock);
    emu_stream *s;
    aclError rc = resolve_locked(api, stream, 1, &s);
    if (rc == ACL_SUCCESS) {
        __atomic_store_n(&s->stop_on_failure, mode == ACL_STOP_ON_FAILURE, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

/* Caller holds emu_lock. */
static void unlink_stream(emu_stream *s)
{
    for (emu_stream **p = &g_streams; *p != NULL; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            return;
        }
    }
}

/* CANN waits for the stream's tasks, but the caller must have synchronized
 * it first: tasks still pending are a hazard. */
aclError aclrtDestroyStream(aclrtStream stream)
{
    if (stream == NULL) {
        pyaclnnEmuSetError("aclrtDestroyStream: stream is NULL (the default stream cannot be destroyed)");
        return ACL_ERROR_INVALID_PARAM;
    }
    pthread_mutex_lock(&emu_lock);
    int device = emu_context_device("aclrtDestroyStream");
    int live = device >= 0 && emu_handle_live_locked(EMU_STREAM, stream);
    int owner = live ? ((emu_stream *)stream)->device : -1;
    int capturing = live && ((emu_stream *)stream)->capture_status != ACL_MODEL_RI_CAPTURE_STATUS_NONE;
    pthread_mutex_unlock(&emu_lock);
    if (device < 0) {
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    if (live && owner != device) { /* ApiImpl::StreamDestroy: the stream must be in the current context */
        pyaclnnEmuSetError("aclrtDestroyStream: stream %p belongs to device %d, not to this thread's current "
                           "device %d (ACL_ERROR_RT_STREAM_CONTEXT: stream not in current context); call "
                           "aclrtSetDevice(%d) first",
                           stream, owner, device, owner);
        return ACL_ERROR_RT_STREAM_CONTEXT;
    }
    if (capturing) { /* ApiErrorDecorator::StreamDestroy */
        pyaclnnEmuSetError("aclrtDestroyStream: stream %p is capturing (aclmdlRICaptureBegin): end the capture "
                           "first (ACL_ERROR_RT_STREAM_CAPTURED)",
                           stream);
        return ACL_ERROR_RT_STREAM_CAPTURED;
    }
    if (!pyaclnnEmuHandleRemove(EMU_STREAM, stream)) {
        pyaclnnEmuSetError("aclrtDestroyStream: stream %p is not live (destroyed twice, or not from "
                           "aclrtCreateStream)",
                           stream);
        return ACL_ERROR_INVALID_PARAM;
    }
    emu_stream *s = stream;
    pthread_mutex_lock(&emu_lock);
    int pending = pending_count(s);
    if (pending > 0) {
        emu_hazard("stream %p destroyed with %d task(s) pending (not synchronized), aclrtDestroyStream", stream,
                   pending);
    }
    while (first_pending(s) != UINT64_MAX || s->syncers > 0) {
        pthread_cond_wait(&g_progress, &emu_lock);
    }
    unlink_stream(s);
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    pthread_cond_signal(&s->work);
    int started = s->started;
    pthread_mutex_unlock(&emu_lock);
    if (started) {
        pthread_join(s->thread, NULL);
    }
    pthread_cond_destroy(&s->work);
    pyaclnnEmuFree(s);
    return ACL_SUCCESS;
}

int64_t emu_stream_count_locked(int device)
{
    int64_t n = 0;
    for (const emu_stream *s = g_streams; s != NULL; s = s->next) {
        n += s->device == device;
    }
    return n;
}

/* ---- executors ---------------------------------------------------------------- */

/* Lock-free (the launching thread and the stream's worker would otherwise take turns at
 * the runtime's lock for each launch): `holds` counts the queued launches, `disposed` is 1
 * once the owner gave the executor up and 2 once one of them claimed its release. Every
 * access is sequentially consistent, so of a last Unhold and a Dispose racing, at least
 * one sees the other's write, and the claim lets exactly one release it. */
static void release_once(aclOpExecutor *ex)
{
    int disposed = 1;
    if (__atomic_compare_exchange_n(&ex->disposed, &disposed, 2, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
        ex->release(ex);
    }
}

void pyaclnnEmuExecutorHold(aclOpExecutor *ex) { __atomic_add_fetch(&ex->holds, 1, __ATOMIC_SEQ_CST); }

void pyaclnnEmuExecutorUnhold(aclOpExecutor *ex)
{
    if (__atomic_sub_fetch(&ex->holds, 1, __ATOMIC_SEQ_CST) == 0 && __atomic_load_n(&ex->disposed, __ATOMIC_SEQ_CST)) {
        release_once(ex);
    }
}

void pyaclnnEmuExecutorDispose(aclOpExecutor *ex, const char *api)
{
    int holds = __atomic_load_n(&ex->holds, __ATOMIC_SEQ_CST);
    if (api != NULL && holds > 0) {
        emu_hazard("executor %p of %s destroyed while %d queued launch(es) of it have not finished, %s",
                   (void *)ex, ex->op_name, holds, api);
    }
    __atomic_store_n(&ex->disposed, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&ex->holds, __ATOMIC_SEQ_CST) == 0) {
        release_once(ex);
    }
}

/* ---- events ------------------------------------------------------------------ */

/* Records are numbered 1, 2, ...: `recorded` is the latest, `completed` the
 * highest whose marker has run (0: never). Complete means completed >=
 * recorded. refs: the handle plus each queued marker or wait. */
typedef struct {
    uint32_t flag;
    int device; /* current when it was created */
    uint64_t recorded, completed;
    struct timespec stamp; /* when the marker of `completed` ran */
    int refs;
    int graph_steps; /* records and waits of it in graphs not yet released (part of refs) */
    const void *capture; /* the graph of an active capture it was recorded into, else NULL */
} emu_event;

typedef struct {
    emu_event *event;
    uint64_t record;
} event_job;

#define EMU_EVENT_FLAGS (ACL_EVENT_SYNC | ACL_EVENT_CAPTURE_STREAM_PROGRESS | ACL_EVENT_TIME_LINE | ACL_EVENT_DEVICE_USE_ONLY)

/* Caller holds emu_lock. */
static void event_unref_locked(emu_event *e)
{
    if (--e->refs == 0) {
        pyaclnnEmuFree(e);
    }
}

static void release_event_job(void *ctx)
{
    event_job *job = ctx;
    pthread_mutex_lock(&emu_lock);
    event_unref_locked(job->event);
    pthread_mutex_unlock(&emu_lock);
    pyaclnnEmuFree(job);
}

/* Caller holds emu_lock. The event a handle names (with a message if not). */
static emu_event *event_of(const char *api, aclrtEvent event)
{
    if (event != NULL && emu_handle_live_locked(EMU_EVENT, event)) {
        return event;
    }
    pyaclnnEmuSetError("%s: event %p is not a live event (%s)", api, event,
                       event == NULL ? "NULL" : "destroyed, or not from aclrtCreateEvent(WithFlag)");
    return NULL;
}

static aclError create_event(const char *api, aclrtEvent *event, uint32_t flag)
{
    if (event == NULL) {
        pyaclnnEmuSetError("%s: event is NULL", api);
        return ACL_ERROR_INVALID_PARAM;
    }
    *event = NULL;
    int device = emu_context_device(api);
    if (device < 0) {
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    emu_event *e = calloc(1, sizeof *e);
    if (e == NULL || pyaclnnEmuHandleAdd(EMU_EVENT, e) != 0) {
        pyaclnnEmuFree(e);
        pyaclnnEmuSetError("%s: out of host memory", api);
        return ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
    }
    e->flag = flag;
    e->device = device;
    e->refs = 1;
    *event = e;
    return ACL_SUCCESS;
}

/* An event without flag can time and be waited on. */
aclError aclrtCreateEvent(aclrtEvent *event)
{
    return create_event("aclrtCreateEvent", event, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE);
}

aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag)
{
    if (flag != ACL_EVENT_EXTERNAL && (flag & ~(uint32_t)EMU_EVENT_FLAGS) != 0) {
        if (event != NULL) {
            *event = NULL;
        }
        pyaclnnEmuSetError("aclrtCreateEventWithFlag: flag 0x%x is not an OR of ACL_EVENT_SYNC (1), "
                           "ACL_EVENT_CAPTURE_STREAM_PROGRESS (2), ACL_EVENT_TIME_LINE (8), "
                           "ACL_EVENT_DEVICE_USE_ONLY (16), nor ACL_EVENT_EXTERNAL (32) alone",
                           flag);
        return ACL_ERROR_INVALID_PARAM;
    }
    return create_event("aclrtCreateEventWithFlag", event, flag);
}

/* Allowed while records are pending: queued markers and waits keep it. A
 * graph that records or waits for it would use a destroyed event at its
 * next replay: a hazard, as freeing memory a live graph uses. */
aclError aclrtDestroyEvent(aclrtEvent event)
{
    if (event == NULL || !pyaclnnEmuHandleRemove(EMU_EVENT, event)) {
        pthread_mutex_lock(&emu_lock);
        event_of("aclrtDestroyEvent", event);
        pthread_mutex_unlock(&emu_lock);
        return ACL_ERROR_INVALID_PARAM;
    }
    pthread_mutex_lock(&emu_lock);
    if (((emu_event *)event)->graph_steps > 0) {
        emu_hazard("event %p destroyed while a live graph (aclmdlRI) records or waits for it (destroy the "
                   "graph first), aclrtDestroyEvent",
                   event);
    }
    event_unref_locked(event);
    pthread_mutex_unlock(&emu_lock);
    return ACL_SUCCESS;
}

static void run_marker(void *ctx, emu_task *task)
{
    event_job *job = ctx;
    struct timespec now = {(time_t)(task->device_ns / 1000000000u), (long)(task->device_ns % 1000000000u)};
    pthread_mutex_lock(&emu_lock);
    if (job->record > job->event->completed) {
        job->event->completed = job->record;
        job->event->stamp = now;
    }
    pthread_mutex_unlock(&emu_lock);
}

/* Caller holds emu_lock. Whether t is an event record whose marker has run. */
static int marker_done_locked(const emu_task *t)
{
    const event_job *job = t->ctx;
    return t->run == run_marker && job->event->completed >= job->record;
}

static void run_wait(void *ctx, emu_task *task)
{
    event_job *job = ctx;
    pthread_mutex_lock(&emu_lock);
    while (job->event->completed < job->record) {
        pthread_cond_wait(&g_progress, &emu_lock);
    }
    /* The stream goes on at the device time the event completed, if later than its own. */
    uint64_t stamp = (uint64_t)job->event->stamp.tv_sec * 1000000000u + (uint64_t)job->event->stamp.tv_nsec;
    if (stamp > task->device_ns) {
        task->device_ns = stamp;
    }
    pthread_mutex_unlock(&emu_lock);
}

/* Queue `run` on `stream` for the given record of the event (the job holds
 * a reference to the event); `graph`: the graph whose replay queues it, or NULL. */
static aclError submit_event_job(const char *api, emu_event *e, uint64_t record, aclrtStream stream,
                                 void (*run)(void *ctx, emu_task *task), const void *graph)
{
    event_job *job = malloc(sizeof *job);
    if (job == NULL) {
        pyaclnnEmuSetError("%s: out of host memory", api);
        return ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
    }
    *job = (event_job){e, record};
    pthread_mutex_lock(&emu_lock);
    e->refs++;
    pthread_mutex_unlock(&emu_lock);
    emu_task *task = emu_task_new(api, run, release_event_job, job, 0);
    if (task == NULL) {
        pyaclnnEmuSetError("%s: out of host memory", api);
        return ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
    }
    task->event = e;
    task->graph = graph;
    return emu_task_submit(task, stream, NULL);
}

/* Caller holds emu_lock. Records an event record or wait into the capture of s. */
static aclError capture_event_locked(const char *api, emu_stream *s, emu_event *e, int record)
{
    if (graph_add_locked(s->capture, NULL, e, record) != 0) {
        s->capture_status = ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED;
        pyaclnnEmuSetError("%s: out of host memory for the captured task; the capture is invalidated", api);
        return ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
    }
    if (record) {
        e->capture = s->capture; /* CANN's Event::IsCapturing, until the capture ends */
    }
    return ACL_SUCCESS;
}

/* Caller holds emu_lock. ACL_ERROR_RT_EVENT_CAPTURED (with the message) for an event
 * recorded into a capture still active: CANN refuses to synchronize or query it
 * (ApiErrorDecorator::EventSynchronize / EventQueryStatus / EventElapsedTime). */
static aclError event_captured_locked(const char *api, const char *arg, const emu_event *e, aclrtEvent handle)
{
    if (e->capture == NULL) {
        return ACL_SUCCESS;
    }
    pyaclnnEmuSetError("%s: %s %p was recorded into a capture that has not ended: not supported until "
                       "aclmdlRICaptureEnd (ACL_ERROR_RT_EVENT_CAPTURED)",
                       api, arg, handle);
    return ACL_ERROR_RT_EVENT_CAPTURED;
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream)
{
    static const char api[] = "aclrtRecordEvent";
    pthread_mutex_lock(&emu_lock);
    emu_stream *s = NULL;
    aclError rc = emu_context_device(api) < 0 ? ACL_ERROR_RT_CONTEXT_NULL : ACL_SUCCESS;
    emu_event *e = rc == ACL_SUCCESS ? event_of(api, event) : NULL;
    if (rc == ACL_SUCCESS) {
        rc = e == NULL ? ACL_ERROR_INVALID_PARAM : resolve_locked(api, stream, 1, &s);
    }
    if (rc == ACL_SUCCESS && e->device != s->device) {
        /* The docs: recording fails when event and stream belong to different
         * devices; no code is documented: the emulator's choice. */
        pyaclnnEmuSetError("%s: event %p was created on device %d, stream %p belongs to device %d: an event "
                           "cannot be recorded on a stream of another device (ACL_ERROR_RT_STREAM_CONTEXT)",
                           api, event, e->device, stream, s->device);
        rc = ACL_ERROR_RT_STREAM_CONTEXT;
    }
    if (rc == ACL_SUCCESS && s->capture_status != ACL_MODEL_RI_CAPTURE_STATUS_NONE) {
        /* Recorded: each replay records the event anew on its stream. */
        rc = capture_event_locked(api, s, e, 1);
        pthread_mutex_unlock(&emu_lock);
        return rc;
    }
    uint64_t record = rc == ACL_SUCCESS ? ++e->recorded : 0;
    pthread_mutex_unlock(&emu_lock);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    return submit_event_job(api, e, record, stream, run_marker, NULL);
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event)
{
    static const char api[] = "aclrtStreamWaitEvent";
    pthread_mutex_lock(&emu_lock);
    if (emu_context_device(api) < 0) {
        pthread_mutex_unlock(&emu_lock);
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    emu_event *e = event_of(api, event);
    uint32_t flag = e != NULL ? e->flag : 0;
    uint64_t record = e != NULL ? e->recorded : 0;
    emu_stream *s;
    /* The stream must be the current device's; the event may be another's
     * (the cross-device wait of Atlas A2/A3). */
    aclError rc = e != NULL && (flag & ACL_EVENT_SYNC) ? resolve_locked(api, stream, 1, &s) : ACL_SUCCESS;
    if (e != NULL && (flag & ACL_EVENT_SYNC) && rc == ACL_SUCCESS
        && s->capture_status != ACL_MODEL_RI_CAPTURE_STATUS_NONE) {
        /* Recorded: each replay waits for the event's record latest then. */
        rc = capture_event_locked(api, s, e, 0);
        pthread_mutex_unlock(&emu_lock);
        return rc;
    }
    pthread_mutex_unlock(&emu_lock);
    if (e == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    if (!(flag & ACL_EVENT_SYNC)) {
        pyaclnnEmuSetError("%s: event %p was created with flag 0x%x, without ACL_EVENT_SYNC: it cannot be waited on",
                           api, event, flag);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    /* A never-recorded event is complete: nothing to wait for. */
    return record == 0 ? ACL_SUCCESS : submit_event_job(api, e, record, stream, run_wait, NULL);
}

aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status)
{
    pthread_mutex_lock(&emu_lock);
    emu_event *e = event_of("aclrtQueryEventStatus", event);
    aclError captured = e != NULL && status != NULL ? event_captured_locked("aclrtQueryEventStatus", "event", e, event)
                                                    : ACL_SUCCESS;
    int complete = e != NULL && e->completed >= e->recorded;
    if (e != NULL && status != NULL && captured == ACL_SUCCESS && !complete) {
        e->refs++; /* it may be destroyed while we wait */
        poll_wait_locked();
        complete = e->completed >= e->recorded;
        event_unref_locked(e);
    }
    pthread_mutex_unlock(&emu_lock);
    if (e == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    if (status == NULL) {
        pyaclnnEmuSetError("aclrtQueryEventStatus: status is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (captured != ACL_SUCCESS) {
        return captured;
    }
    *status = complete ? ACL_EVENT_RECORDED_STATUS_COMPLETE : ACL_EVENT_RECORDED_STATUS_NOT_READY;
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeEvent(aclrtEvent event)
{
    pthread_mutex_lock(&emu_lock);
    emu_event *e = event_of("aclrtSynchronizeEvent", event);
    if (e == NULL) {
        pthread_mutex_unlock(&emu_lock);
        return ACL_ERROR_INVALID_PARAM;
    }
    aclError captured = event_captured_locked("aclrtSynchronizeEvent", "event", e, event);
    if (captured != ACL_SUCCESS) {
        pthread_mutex_unlock(&emu_lock);
        return captured;
    }
    uint64_t record = e->recorded;
    e->refs++; /* it may be destroyed while we wait */
    while (e->completed < record) {
        pthread_cond_wait(&g_progress, &emu_lock);
    }
    event_unref_locked(e);
    pthread_mutex_unlock(&emu_lock);
    if (record > 0) {
        emu_sleep_us(emu_env_us("PYACLNN_EMU_SYNC_US"));
    }
    return ACL_SUCCESS;
}

/* Caller holds emu_lock. 0 when the event has a timestamp to give. */
static aclError event_time_locked(const char *arg, const emu_event *e, aclrtEvent handle, struct timespec *out)
{
    static const char api[] = "aclrtEventElapsedTime";
    if (!(e->flag & ACL_EVENT_TIME_LINE)) {
        pyaclnnEmuSetError("%s: %s %p was created with flag 0x%x, without ACL_EVENT_TIME_LINE: it has no "
                           "timestamps",
                           api, arg, handle, e->flag);
        return ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID;
    }
    if (e->recorded == 0) {
        pyaclnnEmuSetError("%s: %s %p was never recorded (aclrtRecordEvent)", api, arg, handle);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (e->completed < e->recorded) {
        pyaclnnEmuSetError("%s: %s %p is recorded but not complete yet (aclrtSynchronizeEvent first)", api, arg,
                           handle);
        return ACL_ERROR_RT_EVENT_NOT_COMPLETE;
    }
    *out = e->stamp;
    return ACL_SUCCESS;
}

aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent)
{
    static const char api[] = "aclrtEventElapsedTime";
    if (ms == NULL) {
        pyaclnnEmuSetError("%s: ms is NULL", api);
        return ACL_ERROR_INVALID_PARAM;
    }
    struct timespec t0, t1;
    pthread_mutex_lock(&emu_lock);
    emu_event *start = event_of(api, startEvent);
    emu_event *end = start != NULL ? event_of(api, endEvent) : NULL;
    aclError rc = end == NULL ? ACL_ERROR_INVALID_PARAM : event_captured_locked(api, "startEvent", start, startEvent);
    if (rc == ACL_SUCCESS) {
        rc = event_captured_locked(api, "endEvent", end, endEvent);
    }
    if (rc == ACL_SUCCESS) {
        rc = event_time_locked("startEvent", start, startEvent, &t0);
    }
    if (rc == ACL_SUCCESS) {
        rc = event_time_locked("endEvent", end, endEvent, &t1);
    }
    pthread_mutex_unlock(&emu_lock);
    if (rc == ACL_SUCCESS) {
        *ms = (float)((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    }
    return rc;
}

/* ---- stream capture (aclmdlRI) -------------------------------------------------
 *
 * Between aclmdlRICaptureBegin and aclmdlRICaptureEnd the tasks submitted to
 * the stream (launches, async copies and memsets) go to a graph instead of
 * the queue, keeping the memory they use (freeing it is then a hazard, as for
 * queued work); event records and waits are recorded as steps of their own.
 * aclmdlRIExecuteAsync queues one replay task on a stream, which holds the
 * graph and runs every step in order: a recorded task runs again (its kernel,
 * with its simulated time); a record records the event anew, a wait waits for
 * the event's record latest when the replay was queued. The rules and their sources are listed in
 * README.md ("Stream capture"); the numpy backend's
 * pyaclnn/backends/numpy/_capture.py implements the same. */

typedef struct emu_step {
    struct emu_step *next;
    emu_task *task;   /* a recorded task (never queued itself), or NULL */
    emu_event *event; /* else an event record (record 1) or wait (record 0); holds a reference */
    int record;
} emu_step;

typedef struct emu_graph {
    int device;
    int refs; /* the handle, until aclmdlRIDestroy, plus each queued replay task */
    size_t nevents; /* its event records and waits */
    emu_step *head, *tail;
} emu_graph;

static _Thread_local int t_exchange_mode = ACL_MODEL_RI_CAPTURE_MODE_GLOBAL; /* CANN's default */
static int64_t g_graph_count[EMU_MAX_DEVICES];

int64_t emu_graph_count_locked(int device) { return g_graph_count[device]; }

static int graph_add_locked(struct emu_graph *g, emu_task *task, void *event, int record)
{
    emu_step *step = calloc(1, sizeof *step);
    if (step == NULL) {
        return -1;
    }
    step->task = task;
    step->event = event;
    step->record = record;
    if (event != NULL) {
        step->event->refs++;
        step->event->graph_steps++;
        g->nevents++;
    }
    if (g->tail != NULL) {
        g->tail->next = step;
    } else {
        g->head = step;
    }
    g->tail = step;
    return 0;
}

/* Without the lock. One reference fewer; the last frees the recorded tasks
 * (their contexts released, their memory let go) and the event references. */
static void graph_unref(emu_graph *g)
{
    pthread_mutex_lock(&emu_lock);
    int gone = --g->refs == 0;
    pthread_mutex_unlock(&emu_lock);
    if (!gone) {
        return;
    }
    for (emu_step *step = g->head, *next; step != NULL; step = next) {
        next = step->next;
        if (step->task != NULL) {
            task_release_ctx(step->task);
        }
        pthread_mutex_lock(&emu_lock);
        if (step->task != NULL) {
            task_free_locked(step->task);
        } else {
            step->event->graph_steps--;
            event_unref_locked(step->event);
        }
        pthread_mutex_unlock(&emu_lock);
        pyaclnnEmuFree(step);
    }
    pyaclnnEmuFree(g);
}

/* Caller holds emu_lock. 1 when the calling thread may make a call that is
 * not safe during a capture (aclrtMemcpy, aclrtMemset, a pageable async copy)
 * on `device`: CANN's Context::IsCaptureModeSupport, with the context's mode
 * the strictest of its active captures and the thread's the strictest of
 * those it began. */
static int unsafe_allowed_locked(int device)
{
    int context_mode = ACL_MODEL_RI_CAPTURE_MODE_RELAXED + 1; /* no capture */
    int thread_mode = context_mode;
    pthread_t me = pthread_self();
    for (const emu_stream *s = g_streams; s != NULL; s = s->next) {
        if (s->device != device || s->capture_status == ACL_MODEL_RI_CAPTURE_STATUS_NONE) {
            continue;
        }
        context_mode = s->capture_mode < context_mode ? s->capture_mode : context_mode;
        if (pthread_equal(s->capture_thread, me) && s->capture_mode < thread_mode) {
            thread_mode = s->capture_mode;
        }
    }
    if (context_mode > ACL_MODEL_RI_CAPTURE_MODE_RELAXED) {
        return 1;
    }
    if (t_exchange_mode == ACL_MODEL_RI_CAPTURE_MODE_GLOBAL) {
        return !(context_mode == ACL_MODEL_RI_CAPTURE_MODE_GLOBAL || thread_mode == ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL);
    }
    if (t_exchange_mode == ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL) {
        return !(thread_mode == ACL_MODEL_RI_CAPTURE_MODE_GLOBAL || thread_mode == ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL);
    }
    return 1;
}

static aclError unsafe_refused(const char *api)
{
    pyaclnnEmuSetError("%s: not permitted while a stream is capturing in a mode that forbids it (GLOBAL, or "
                       "THREAD_LOCAL in the capturing thread); aclmdlRICaptureThreadExchangeMode(RELAXED) allows "
                       "it in this thread (ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT)",
                       api);
    return ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT;
}

aclError emu_capture_unsafe_check(const char *api, int device)
{
    pthread_mutex_lock(&emu_lock);
    int allowed = unsafe_allowed_locked(device);
    pthread_mutex_unlock(&emu_lock);
    return allowed ? ACL_SUCCESS : unsafe_refused(api);
}

aclError emu_capture_pageable_check(const char *api, aclrtStream stream)
{
    pthread_mutex_lock(&emu_lock);
    emu_stream *s;
    aclError rc = resolve_locked(api, stream, 1, &s);
    if (rc != ACL_SUCCESS) {
        pthread_mutex_unlock(&emu_lock);
        return rc;
    }
    int allowed = unsafe_allowed_locked(s->device);
    int capturing = s->capture_status != ACL_MODEL_RI_CAPTURE_STATUS_NONE;
    if (capturing) { /* the copy cannot become a task of the graph */
        s->capture_status = ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED;
    }
    pthread_mutex_unlock(&emu_lock);
    if (!allowed) {
        return unsafe_refused(api);
    }
    if (capturing) {
        pyaclnnEmuSetError("%s: a copy of pageable host memory cannot be captured (stream %p is capturing; copy "
                           "from aclrtMallocHost memory); the capture is now invalidated",
                           api, stream);
        return ACL_ERROR_RT_PARAM_INVALID;
    }
    return ACL_SUCCESS;
}

static aclError bad_mode(const char *api, int mode)
{
    pyaclnnEmuSetError("%s: mode %d is not an aclmdlRICaptureMode (GLOBAL 0, THREAD_LOCAL 1, RELAXED 2)", api, mode);
    return ACL_ERROR_RT_PARAM_INVALID;
}

aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode)
{
    static const char api[] = "aclmdlRICaptureBegin";
    if (stream == NULL) { /* the ACL layer's ACL_REQUIRES_NOT_NULL, before the runtime */
        pyaclnnEmuSetError("%s: stream is NULL: the default stream cannot be captured; capture a stream from "
                           "aclrtCreateStream",
                           api);
        return ACL_ERROR_INVALID_PARAM;
    }
    if ((int)mode < ACL_MODEL_RI_CAPTURE_MODE_GLOBAL || (int)mode > ACL_MODEL_RI_CAPTURE_MODE_RELAXED) {
        return bad_mode(api, (int)mode);
    }
    emu_graph *g = calloc(1, sizeof *g);
    if (g == NULL || pyaclnnEmuHandleAdd(EMU_GRAPH, g) != 0) {
        pyaclnnEmuFree(g);
        pyaclnnEmuSetError("%s: out of host memory", api);
        return ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
    }
    pthread_mutex_lock(&emu_lock);
    emu_stream *s;
    aclError rc = resolve_locked(api, stream, 1, &s);
    if (rc == ACL_SUCCESS && s->capture_status != ACL_MODEL_RI_CAPTURE_STATUS_NONE) {
        pyaclnnEmuSetError("%s: stream %p is already capturing (%s); end that capture with aclmdlRICaptureEnd "
                           "first (ACL_ERROR_RT_STREAM_CAPTURED)",
                           api, stream,
                           s->capture_status == ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE ? "active" : "invalidated");
        rc = ACL_ERROR_RT_STREAM_CAPTURED;
    }
    if (rc == ACL_SUCCESS) {
        g->device = s->device;
        g->refs = 1;
        g_graph_count[s->device]++;
        s->capture = g;
        s->capture_status = ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE;
        s->capture_mode = (int)mode;
        s->capture_thread = pthread_self();
    }
    pthread_mutex_unlock(&emu_lock);
    if (rc != ACL_SUCCESS) {
        pyaclnnEmuHandleRemove(EMU_GRAPH, g);
        pyaclnnEmuFree(g);
    }
    return rc;
}

aclError aclmdlRICaptureGetInfo(aclrtStream stream, aclmdlRICaptureStatus *status, aclmdlRI *modelRI)
{
    static const char api[] = "aclmdlRICaptureGetInfo";
    if (stream == NULL || (status == NULL && modelRI == NULL)) {
        pyaclnnEmuSetError("%s: %s", api, stream == NULL ? "stream is NULL" : "status and modelRI are both NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    pthread_mutex_lock(&emu_lock);
    emu_stream *s;
    aclError rc = resolve_locked(api, stream, 0, &s);
    if (rc == ACL_SUCCESS) {
        if (status != NULL) {
            *status = (aclmdlRICaptureStatus)s->capture_status;
        }
        if (modelRI != NULL) {
            *modelRI = s->capture;
        }
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI *modelRI)
{
    static const char api[] = "aclmdlRICaptureEnd";
    if (stream == NULL || modelRI == NULL) {
        pyaclnnEmuSetError("%s: %s is NULL", api, stream == NULL ? "stream" : "modelRI");
        return ACL_ERROR_INVALID_PARAM;
    }
    *modelRI = NULL;
    pthread_mutex_lock(&emu_lock);
    emu_stream *s;
    aclError rc = resolve_locked(api, stream, 1, &s);
    emu_graph *g = NULL;
    int invalidated = 0;
    if (rc == ACL_SUCCESS && s->capture_status == ACL_MODEL_RI_CAPTURE_STATUS_NONE) {
        pyaclnnEmuSetError("%s: stream %p is not capturing; call aclmdlRICaptureBegin first "
                           "(ACL_ERROR_RT_STREAM_NOT_CAPTURED)",
                           api, stream);
        rc = ACL_ERROR_RT_STREAM_NOT_CAPTURED;
    } else if (rc == ACL_SUCCESS) {
        g = s->capture;
        for (emu_step *step = g->head; step != NULL; step = step->next) { /* ResetCaptureEvents */
            if (step->event != NULL && step->event->capture == g) {
                step->event->capture = NULL;
            }
        }
        invalidated = s->capture_status == ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED;
        s->capture = NULL;
        s->capture_status = ACL_MODEL_RI_CAPTURE_STATUS_NONE;
        if (invalidated) {
            g_graph_count[g->device]--;
        }
    }
    pthread_mutex_unlock(&emu_lock);
    if (invalidated) { /* CANN destroys the graph and leaves the stream out of capture */
        pyaclnnEmuHandleRemove(EMU_GRAPH, g);
        graph_unref(g);
        pyaclnnEmuSetError("%s: the capture of stream %p was invalidated by a call it could not record; its work "
                           "is dropped (ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED)",
                           api, stream);
        return ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED;
    }
    if (rc == ACL_SUCCESS) {
        *modelRI = g;
    }
    return rc;
}

aclError aclmdlRICaptureThreadExchangeMode(aclmdlRICaptureMode *mode)
{
    static const char api[] = "aclmdlRICaptureThreadExchangeMode";
    if (mode == NULL) {
        pyaclnnEmuSetError("%s: mode is NULL", api);
        return ACL_ERROR_INVALID_PARAM;
    }
    if ((int)*mode < ACL_MODEL_RI_CAPTURE_MODE_GLOBAL || (int)*mode > ACL_MODEL_RI_CAPTURE_MODE_RELAXED) {
        return bad_mode(api, (int)*mode);
    }
    int old = t_exchange_mode;
    t_exchange_mode = (int)*mode;
    *mode = (aclmdlRICaptureMode)old;
    return ACL_SUCCESS;
}

/* Caller holds emu_lock. 1 if `g` is the graph of an active capture. */
static int graph_capturing_locked(const emu_graph *g)
{
    for (const emu_stream *s = g_streams; s != NULL; s = s->next) {
        if (s->capture == g) {
            return 1;
        }
    }
    return 0;
}

/* Caller holds emu_lock. ACL_SUCCESS for a live graph that no capture is still recording. */
static aclError graph_check_locked(const char *api, aclmdlRI modelRI)
{
    if (!emu_handle_live_locked(EMU_GRAPH, modelRI)) {
        pyaclnnEmuSetError("%s: modelRI %p is not a live graph (destroyed, or not from aclmdlRICaptureEnd)", api,
                           modelRI);
        return ACL_ERROR_RT_PARAM_INVALID;
    }
    if (graph_capturing_locked(modelRI)) { /* the emulations' choice: CANN gives it at aclmdlRICaptureEnd */
        pyaclnnEmuSetError("%s: modelRI %p is still being captured (aclmdlRICaptureEnd first)", api, modelRI);
        return ACL_ERROR_RT_STREAM_CAPTURED;
    }
    return ACL_SUCCESS;
}

/* One replay is one task, as a device runs a model from one submission: the host
 * queues it whatever the graph holds, and the stream's worker runs the steps in
 * order (each recorded task with its simulated time, each event record or wait),
 * as tasks of their own (the same ticket, the profiler's records, the failure
 * mode) that never go through the queue. The event steps are numbered when the
 * replay is queued, so a wait queued after it waits for its records. */
typedef struct {
    emu_graph *graph;
    size_t nevents;
    uint64_t records[]; /* the record number of each event step, in order */
} replay_job;

static void release_replay(void *ctx)
{
    replay_job *job = ctx;
    graph_unref(job->graph);
    pyaclnnEmuFree(job);
}

static void run_recorded(void *ctx, emu_task *task) { ((emu_task *)ctx)->run(((emu_task *)ctx)->ctx, task); }

static void run_replay(void *ctx, emu_task *task)
{
    replay_job *job = ctx;
    emu_stream *s = task->stream;
    size_t n = 0;
    for (const emu_step *step = job->graph->head; step != NULL; step = step->next) {
        emu_task t = {.handle = task->handle, .stream = s, .ticket = task->ticket, .queued_ns = task->queued_ns,
                      .graph = job->graph};
        event_job event = {NULL, 0};
        if (step->task != NULL) {
            t.api = step->task->api;
            t.detail = step->task->detail;
            t.run = run_recorded;
            t.ctx = step->task;
            t.sleep_us = step->task->sleep_us;
            pthread_mutex_lock(&emu_lock);
            check_devices_locked(step->task, s);
            pthread_mutex_unlock(&emu_lock);
        } else {
            event = (event_job){step->event, job->records[n++]};
            if (!step->record && event.record == 0) {
                continue; /* a never-recorded event is complete: nothing to wait for */
            }
            t.api = step->record ? "aclrtRecordEvent" : "aclrtStreamWaitEvent";
            t.run = step->record ? run_marker : run_wait;
            t.ctx = &event;
            t.event = step->event;
        }
        task_execute(s, &t);
        task->device_ns = s->device_clock_ns; /* the replay ends where its last step did */
        if (step->record) {
            pthread_mutex_lock(&emu_lock);
            pthread_cond_broadcast(&g_progress); /* whoever waits for the event */
            pthread_mutex_unlock(&emu_lock);
        }
    }
}

/* The profiler's record of one replay: a zero-time task before its tasks notes when they
 * start, one after them records the span (tasks named "", which are not recorded themselves). */
typedef struct {
    const void *graph;
    uint64_t start_ns;
} replay_span;

static void run_span_begin(void *ctx, emu_task *task)
{
    (void)task;
    ((replay_span *)ctx)->start_ns = now_ns();
}

static void run_span_end(void *ctx, emu_task *task)
{
    replay_span *span = ctx;
    uint64_t end = now_ns();
    emu_record r = {task->stream->device, (uintptr_t)task->handle, 0, (uintptr_t)span->graph, "replay",
                    "aclmdlRIExecuteAsync", "", span->start_ns, end};
    prof_append(&r);
    pyaclnnEmuFree(span); /* here, not as the task's release: a failed end task must not free it under the first */
}

/* The span of a replay, its first task queued; NULL (nothing recorded) when out of memory. */
static replay_span *replay_span_submit(const void *graph, aclrtStream stream)
{
    replay_span *span = calloc(1, sizeof *span);
    if (span == NULL) {
        return NULL;
    }
    span->graph = graph;
    emu_task *task = emu_task_new("", run_span_begin, NULL, span, 0);
    if (task == NULL || emu_task_submit(task, stream, NULL) != ACL_SUCCESS) {
        pyaclnnEmuFree(span);
        return NULL;
    }
    return span;
}

/* Its second task, which frees the span once it ran (out of host memory: the span is kept). */
static void replay_span_end(replay_span *span, aclrtStream stream)
{
    emu_task *task = emu_task_new("", run_span_end, NULL, span, 0);
    if (task != NULL) {
        (void)emu_task_submit(task, stream, NULL);
    }
}

aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream)
{
    static const char api[] = "aclmdlRIExecuteAsync";
    if (modelRI == NULL) {
        pyaclnnEmuSetError("%s: modelRI is NULL", api);
        return ACL_ERROR_INVALID_PARAM;
    }
    pthread_mutex_lock(&emu_lock);
    emu_stream *s;
    aclError rc = graph_check_locked(api, modelRI);
    if (rc == ACL_SUCCESS) {
        rc = resolve_locked(api, stream, 1, &s);
    }
    if (rc == ACL_SUCCESS && s->capture_status != ACL_MODEL_RI_CAPTURE_STATUS_NONE) { /* ApiErrorDecorator::ModelExecute */
        pyaclnnEmuSetError("%s: stream %p is capturing (aclmdlRICaptureBegin): not supported until "
                           "aclmdlRICaptureEnd (ACL_ERROR_RT_STREAM_CAPTURED)",
                           api, stream);
        rc = ACL_ERROR_RT_STREAM_CAPTURED;
    }
    emu_graph *g = modelRI;
    if (rc == ACL_SUCCESS) {
        g->refs++; /* kept while its steps are queued */
    }
    pthread_mutex_unlock(&emu_lock);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    replay_span *span = NULL;
    if (__atomic_load_n(&g_recording, __ATOMIC_ACQUIRE)) { /* the profiler's "replay" record */
        span = replay_span_submit(g, stream);
    }
    replay_job *job = malloc(sizeof *job + g->nevents * sizeof job->records[0]);
    if (job == NULL) {
        graph_unref(g);
    } else {
        job->graph = g; /* its reference, released once the replay ran */
        job->nevents = g->nevents;
    }
    emu_task *task = job == NULL ? NULL : emu_task_new("", run_replay, release_replay, job, 0);
    if (task == NULL) { /* (emu_task_new released the job) */
        pyaclnnEmuSetError("%s: out of host memory", api);
        return ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
    }
    task->graph = g;
    if (g->nevents > 0) {
        size_t n = 0;
        pthread_mutex_lock(&emu_lock);
        for (const emu_step *step = g->head; step != NULL; step = step->next) {
            if (step->task == NULL) {
                job->records[n++] = step->record ? ++step->event->recorded : step->event->recorded;
            }
        }
        pthread_mutex_unlock(&emu_lock);
    }
    rc = emu_task_submit(task, stream, NULL);
    if (span != NULL) {
        replay_span_end(span, stream);
    }
    return rc;
}

aclError aclmdlRIDestroy(aclmdlRI modelRI)
{
    static const char api[] = "aclmdlRIDestroy";
    if (modelRI == NULL) {
        pyaclnnEmuSetError("%s: modelRI is NULL", api);
        return ACL_ERROR_INVALID_PARAM;
    }
    pthread_mutex_lock(&emu_lock);
    aclError rc = graph_check_locked(api, modelRI);
    if (rc == ACL_SUCCESS) {
        g_graph_count[((emu_graph *)modelRI)->device]--;
    }
    pthread_mutex_unlock(&emu_lock);
    if (rc != ACL_SUCCESS || !pyaclnnEmuHandleRemove(EMU_GRAPH, modelRI)) {
        return rc != ACL_SUCCESS ? rc : ACL_ERROR_RT_PARAM_INVALID;
    }
    graph_unref(modelRI); /* replays already queued hold it until they have run */
    return ACL_SUCCESS;
}
