/* Emulated ACL runtime (libascendcl.so / libacl_rt.so): memory, handles,
 * devices, options, the recent error message. Streams, tasks and events
 * are in streams.c (same library).
 *
 * This library owns the state shared with libnnopbase and the operator
 * libraries: the registry of live handles, the allocation table, the
 * stream queues and the per-thread recent error message, all behind one
 * mutex (emu_lock).
 *
 * Documented choices (no hardware to compare with):
 * - aclrtGet/CtxGetSysParamOpt of an option never set returns
 *   ACL_ERROR_RT_SYSPARAMOPT_NOT_SET (107021); process and context values are
 *   stored separately.
 * - Argument errors of runtime calls return ACL_ERROR_INVALID_PARAM (100000),
 *   except the codes named below (bad device id, allocation, free).
 * - aclrtMalloc fills new memory with 0xFF bytes (NaN for floats, -1 for ints)
 *   so that code relying on zeroed device memory fails loudly.
 * - aclGetRecentErrMsg returns "" (never NULL) when there is no message.
 * - aclInit is not required before other calls.
 * - The device follows the Atlas A2/A3 operator rules and calls itself
 *   "Ascend910B-emulator"; with PYACLNN_EMU_SOC=950 in the environment (read
 *   at every call) it follows the 950 rules and says "Ascend950-emulator".
 * - aclrtMemcpy / aclrtMemset run at once in the calling thread and wait for
 *   no stream (11-03_memory_copy_and_set.md); aclrtFree of memory that
 *   queued work still uses is a hazard and the memory is quarantined.
 * - Contexts (hicann/runtime 681ef76): a thread has a current context only
 *   after aclrtSetDevice in that thread (thread-local curCtx_,
 *   src/runtime/core/inc/common/inner_thread_local.hpp), until
 *   aclrtResetDevice of that device. Without one, aclrtMalloc, aclrtMemcpy,
 *   aclrtMemset (and their async forms), aclrtGetMemInfo, aclrtGetDevice and
 *   the stream and event calls of streams.c return ACL_ERROR_RT_CONTEXT_NULL
 *   (107002; ApiImpl::DevMalloc, MemCopySync, GetDevice in
 *   src/runtime/api/impl/api_impl.cc). aclrtMallocHost does too: an
 *   assumption (the notes did not trace it). aclrtFree / aclrtFreeHost work
 *   from any thread (ApiImpl::DevFree uses CurrentContext(false)). No
 *   "defaultDevice" of aclInit's json is modelled.
 */
#define _GNU_SOURCE
#include "runtime_internal.h"

#include <pthread.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Bytes of each emulated device: PYACLNN_EMU_DEVICE_MEMORY, read once, else 64 GiB (a 910B). */
#define EMU_DEVICE_DEFAULT ((size_t)64 << 30)
static size_t emu_device_total(void);
#define EMU_DEVICE_TOTAL emu_device_total()
#define EMU_ALIGN 32

pthread_mutex_t emu_lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;

/* ---- recent error message (per thread) --------------------------------- */

static _Thread_local char t_msg[EMU_MSG_LEN];
static _Thread_local char t_returned[EMU_MSG_LEN];
static _Thread_local int t_has_msg;

void pyaclnnEmuSetError(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_msg, sizeof t_msg, fmt, ap);
    va_end(ap);
    t_has_msg = 1;
}

const char *aclGetRecentErrMsg(void)
{
    /* The returned text stays valid until this thread's next call. */
    if (!t_has_msg) {
        t_returned[0] = '\0';
        return t_returned;
    }
    memcpy(t_returned, t_msg, sizeof t_returned);
    t_has_msg = 0;
    t_msg[0] = '\0';
    return t_returned;
}

/* ---- handle registry ---------------------------------------------------- */

typedef struct {
    const void *handle;
    int kind;
    int persistent;
} handle_entry;

static handle_entry *g_handles;
static size_t g_handle_count, g_handle_cap;
static int64_t g_live[EMU_KIND_COUNT];

/* Caller holds emu_lock. */
static long find_handle(int kind, const void *handle)
{
    for (size_t i = g_handle_count; i-- > 0;) {
        if (g_handles[i].handle == handle && g_handles[i].kind == kind) {
            return (long)i;
        }
    }
    return -1;
}

int emu_handle_live_locked(int kind, const void *handle) { return find_handle(kind, handle) >= 0; }

/* Caller holds emu_lock. */
static void drop_handle(long i)
{
    g_live[g_handles[i].kind]--;
    g_handles[i] = g_handles[--g_handle_count];
}

int pyaclnnEmuHandleAdd(int kind, const void *handle)
{
    int rc = 0;
    pthread_mutex_lock(&emu_lock);
    if (g_handle_count == g_handle_cap) {
        size_t cap = g_handle_cap ? 2 * g_handle_cap : 256;
        handle_entry *grown = realloc(g_handles, cap * sizeof *grown);
        if (grown == NULL) {
            rc = -1;
        } else {
            g_handles = grown;
            g_handle_cap = cap;
        }
    }
    if (rc == 0) {
        g_handles[g_handle_count++] = (handle_entry){handle, kind, 0};
        g_live[kind]++;
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

int pyaclnnEmuHandleRemove(int kind, const void *handle)
{
    pthread_mutex_lock(&emu_lock);
    long i = find_handle(kind, handle);
    if (i >= 0) {
        drop_handle(i);
    }
    pthread_mutex_unlock(&emu_lock);
    return i >= 0;
}

int pyaclnnEmuHandleIsLive(int kind, const void *handle)
{
    pthread_mutex_lock(&emu_lock);
    long i = find_handle(kind, handle);
    pthread_mutex_unlock(&emu_lock);
    return i >= 0;
}

int pyaclnnEmuHandlesLive(int n, const int kinds[], const void *const handles[])
{
    int bad = -1;
    pthread_mutex_lock(&emu_lock);
    for (int i = 0; bad < 0 && i < n; i++) {
        if (find_handle(kinds[i], handles[i]) < 0) {
            bad = i;
        }
    }
    pthread_mutex_unlock(&emu_lock);
    return bad;
}

int pyaclnnEmuHandleSetPersistent(int kind, const void *handle)
{
    pthread_mutex_lock(&emu_lock);
    long i = find_handle(kind, handle);
    if (i >= 0) {
        g_handles[i].persistent = 1;
    }
    pthread_mutex_unlock(&emu_lock);
    return i >= 0;
}

int pyaclnnEmuHandleAcquire(int kind, const void *handle)
{
    int rc;
    pthread_mutex_lock(&emu_lock);
    long i = find_handle(kind, handle);
    if (i < 0) {
        rc = -1;
    } else if (g_handles[i].persistent) {
        rc = 1;
    } else {
        drop_handle(i);
        rc = 0;
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

int pyaclnnEmuStreamIsValid(aclrtStream stream)
{
    return stream == NULL || pyaclnnEmuHandleIsLive(EMU_STREAM, stream);
}

/* ---- hazards, environment ----------------------------------------------- */

static _Atomic int64_t g_hazards;

void emu_hazard(const char *fmt, ...)
{
    char what[EMU_MSG_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    fprintf(stderr, "pyaclnn emulator HAZARD: %s\n", what);
    g_hazards++;
    /* Read at each hazard, as the numpy backend does: the test suite sets it so a
     * hazard fails the run where it happens (faulthandler prints the Python stack). */
    if (emu_env_flag("PYACLNN_EMU_HAZARD_FATAL")) {
        fprintf(stderr, "PYACLNN_EMU_HAZARD_FATAL=1: aborting\n");
        fflush(stderr);
        abort();
    }
}

int64_t pyaclnnEmuHazardCount(void) { return g_hazards; }

/* A malformed PYACLNN_* value is never ignored silently (as pyaclnn/_env.py): said once per
 * variable and value on stderr, naming what the variable accepts, and the default is used. */
static void env_malformed(const char *name, const char *text, const char *accepts, const char *fallback)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static char said[8][160];
    char key[160];
    snprintf(key, sizeof key, "%s=%s", name, text);
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < sizeof said / sizeof said[0]; i++) {
        if (strcmp(said[i], key) == 0) {
            pthread_mutex_unlock(&lock);
            return;
        }
        if (said[i][0] == '\0') {
            memcpy(said[i], key, sizeof key);
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    fprintf(stderr, "pyaclnn emulator: %s='%s' is ignored: %s accepts %s; using %s\n", name, text, name, accepts,
            fallback);
}

/* A switch, as pyaclnn/_env.py's flag: 1, on, true, yes or 0, off, false, no (any case); unset
 * or malformed (said) is off. */
int emu_env_flag(const char *name)
{
    const char *text = getenv(name);
    if (text == NULL || *text == '\0') {
        return 0;
    }
    static const char *const on[] = {"1", "on", "true", "yes"}, *const off[] = {"0", "off", "false", "no"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(text, on[i]) == 0) {
            return 1;
        }
        if (strcasecmp(text, off[i]) == 0) {
            return 0;
        }
    }
    env_malformed(name, text, "1, on, true, yes or 0, off, false, no", "0");
    return 0;
}

/* A number of microseconds >= 0 (as the numpy backend: "0.5" is 0 here, whole microseconds). */
long emu_env_us(const char *name)
{
    const char *text = getenv(name);
    if (text == NULL || *text == '\0') {
        return 0;
    }
    char *end;
    double us = strtod(text, &end);
    while (*end == ' ' || *end == '\t' || *end == '\n') {
        end++;
    }
    if (end == text || *end != '\0' || !(us >= 0) || us > 1e12) {
        env_malformed(name, text, "a number of microseconds >= 0", "0");
        return 0;
    }
    return (long)us;
}

/* Simulated latency, accurate to a few microseconds: a timer sleep would
 * overshoot by the thread's timer slack (50 us by default), more than the
 * latencies being modelled, so the last EMU_SPIN_US are waited out on the clock. */
#define EMU_SPIN_US 200

static uint64_t monotonic_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void emu_sleep_us(long us)
{
    if (us <= 0) {
        return;
    }
    uint64_t end = monotonic_us() + (uint64_t)us;
    if (us > EMU_SPIN_US) {
        long coarse = us - EMU_SPIN_US;
        struct timespec ts = {coarse / 1000000, (coarse % 1000000) * 1000};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    while (monotonic_us() < end) {
    }
}

static pthread_once_t g_total_once = PTHREAD_ONCE_INIT;
static size_t g_device_total = EMU_DEVICE_DEFAULT;

static void read_device_total(void)
{
    const char *text = getenv("PYACLNN_EMU_DEVICE_MEMORY");
    if (text == NULL || *text == '\0') {
        return;
    }
    char *end;
    unsigned long long n = strtoull(text, &end, 10);
    if (*end != '\0' || n == 0 || text[0] == '-') {
        env_malformed("PYACLNN_EMU_DEVICE_MEMORY", text, "a number of bytes >= 1", "64 GiB");
        return;
    }
    g_device_total = (size_t)n;
}

static size_t emu_device_total(void)
{
    pthread_once(&g_total_once, read_device_total);
    return g_device_total;
}

/* ---- devices ------------------------------------------------------------- */

static pthread_once_t g_devices_once = PTHREAD_ONCE_INIT;
static int g_devices = 1;
static _Thread_local int t_device = -1; /* none set */

/* PYACLNN_EMU_DEVICES is read once: the device count of a process is fixed. */
static void read_device_count(void)
{
    const char *text = getenv("PYACLNN_EMU_DEVICES");
    char *end = NULL;
    long n = text != NULL && *text != '\0' ? strtol(text, &end, 10) : 1;
    if (end != NULL && (*end != '\0' || n < 1 || n > EMU_MAX_DEVICES)) {
        char accepts[64];
        snprintf(accepts, sizeof accepts, "an integer from 1 to %d", EMU_MAX_DEVICES);
        env_malformed("PYACLNN_EMU_DEVICES", text, accepts, "1");
        n = 1;
    }
    g_devices = (int)n;
}

int emu_device_count(void)
{
    pthread_once(&g_devices_once, read_device_count);
    return g_devices;
}

int emu_current_device(void) { return t_device; }

int emu_context_device(const char *api)
{
    if (t_device < 0) {
        pyaclnnEmuSetError("%s: no device is set in this thread (ACL_ERROR_RT_CONTEXT_NULL: the thread has no "
                           "current context); call aclrtSetDevice first",
                           api);
    }
    return t_device;
}

/* ---- allocation table --------------------------------------------------- */

static emu_block **g_allocs;
static size_t g_alloc_count, g_alloc_cap;
static size_t g_device_bytes[EMU_MAX_DEVICES];

emu_block *emu_block_find(int kind, const void *ptr, size_t n)
{
    uintptr_t p = (uintptr_t)ptr;
    for (size_t i = 0; i < g_alloc_count; i++) {
        emu_block *b = g_allocs[i];
        uintptr_t base = (uintptr_t)b->base;
        if (b->kind == kind && p >= base && p - base < b->size && n <= b->size - (p - base)) {
            return b;
        }
    }
    return NULL;
}

/* Caller holds emu_lock. Index of the allocation of any kind starting at p. */
static long find_alloc_base(const void *ptr)
{
    for (size_t i = 0; i < g_alloc_count; i++) {
        if (g_allocs[i]->base == ptr) {
            return (long)i;
        }
    }
    return -1;
}

static void block_release(emu_block *b)
{
    if (b->kind != EMU_MAPPED_ALLOC) { /* a mapping's memory is the caller's */
        pyaclnnEmuFree(b->base);
    }
    pyaclnnEmuFree(b);
}

void emu_block_unuse(emu_block *b)
{
    if (--b->users == 0 && b->freed) {
        block_release(b);
    }
}

emu_block *emu_operand_block_find(const void *ptr, size_t n)
{
    emu_block *b = emu_block_find(EMU_DEVICE_ALLOC, ptr, n);
    return b != NULL ? b : emu_block_find(EMU_MAPPED_ALLOC, ptr, n);
}

int pyaclnnEmuDeviceRange(const void *ptr, size_t nbytes)
{
    pthread_mutex_lock(&emu_lock);
    emu_block *b = emu_operand_block_find(ptr, nbytes);
    pthread_mutex_unlock(&emu_lock);
    return b != NULL;
}

/* Caller holds emu_lock. Appends b to the table; -1 when it cannot grow. */
static int table_add(emu_block *b)
{
    if (g_alloc_count == g_alloc_cap) {
        size_t cap = g_alloc_cap ? 2 * g_alloc_cap : 256;
        emu_block **grown = realloc(g_allocs, cap * sizeof *grown);
        if (grown == NULL) {
            return -1;
        }
        g_allocs = grown;
        g_alloc_cap = cap;
    }
    g_allocs[g_alloc_count++] = b;
    g_live[b->kind]++;
    if (b->kind == EMU_DEVICE_ALLOC) {
        g_device_bytes[b->device] += b->size;
    }
    return 0;
}

static aclError emu_alloc(const char *api, void **out, size_t size, int kind)
{
    if (out == NULL) {
        pyaclnnEmuSetError("%s: the output pointer is NULL", api);
        return ACL_ERROR_INVALID_PARAM;
    }
    *out = NULL;
    if (size == 0) {
        pyaclnnEmuSetError("%s: size is 0; the size must be greater than 0", api);
        return ACL_ERROR_INVALID_PARAM;
    }
    int device = emu_context_device(api);
    if (device < 0) {
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    pthread_mutex_lock(&emu_lock);
    size_t used = g_device_bytes[device];
    pthread_mutex_unlock(&emu_lock);
    int too_big = kind == EMU_DEVICE_ALLOC && size > EMU_DEVICE_TOTAL - used;
    if (too_big || size > SIZE_MAX - EMU_ALIGN) {
        pyaclnnEmuSetError("%s: cannot allocate %zu bytes: the emulated device has %zu bytes in total "
                           "and %zu in use",
                           api, size, EMU_DEVICE_TOTAL, used);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    size_t rounded = (size + EMU_ALIGN - 1) / EMU_ALIGN * EMU_ALIGN;
    emu_block *b = calloc(1, sizeof *b);
    char *mem = b != NULL ? aligned_alloc(EMU_ALIGN, rounded) : NULL;
    if (mem == NULL) {
        pyaclnnEmuFree(b);
        pyaclnnEmuSetError("%s: the host could not provide %zu bytes", api, size);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    if (kind == EMU_DEVICE_ALLOC) {
        memset(mem, 0xFF, rounded);
    }
    *b = (emu_block){mem, size, kind, device, 0, 0};
    pthread_mutex_lock(&emu_lock);
    int rc = table_add(b);
    pthread_mutex_unlock(&emu_lock);
    if (rc != 0) {
        block_release(b);
        pyaclnnEmuSetError("%s: the allocation table cannot grow", api);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    *out = mem;
    return ACL_SUCCESS;
}

/* Caller holds emu_lock. Takes entry i out of the table; its memory goes at
 * once, or when the last queued task using it has finished (a hazard). */
static void table_remove(const char *api, long i)
{
    emu_block *b = g_allocs[i];
    if (b->kind == EMU_DEVICE_ALLOC) {
        g_device_bytes[b->device] -= b->size;
    }
    g_live[b->kind]--;
    g_allocs[i] = g_allocs[--g_alloc_count];
    if (b->users == 0) {
        block_release(b);
        return;
    }
    b->freed = 1;
    if (b->kind == EMU_MAPPED_ALLOC) {
        emu_hazard("host memory %p (%zu bytes) unregistered while %d queued, running or captured task(s) still "
                   "use it, %s",
                   (void *)b->base, b->size, b->users, api);
        return;
    }
    emu_hazard("%s memory %p (%zu bytes) freed while %d queued, running or captured task(s) still use it "
               "(a live aclmdlRI graph keeps its captured tasks until aclmdlRIDestroy), %s",
               b->kind == EMU_DEVICE_ALLOC ? "device" : "pinned host", (void *)b->base, b->size, b->users, api);
}

static aclError emu_free(const char *api, void *ptr, int kind)
{
    if (ptr == NULL) {
        pyaclnnEmuSetError("%s: the pointer is NULL", api);
        return ACL_ERROR_INVALID_PARAM;
    }
    pthread_mutex_lock(&emu_lock);
    long i = find_alloc_base(ptr);
    int wrong_kind = i >= 0 && g_allocs[i]->kind != kind;
    int refused_kind = wrong_kind ? g_allocs[i]->kind : kind;
    if (i >= 0 && !wrong_kind) {
        table_remove(api, i);
    }
    pthread_mutex_unlock(&emu_lock);
    if (i < 0) {
        pyaclnnEmuSetError("%s: %p is not the start of a live allocation (freed twice, or never returned "
                           "by %s)",
                           api, ptr, kind == EMU_DEVICE_ALLOC ? "aclrtMalloc" : "aclrtMallocHost");
        return ACL_ERROR_RT_MEMORY_FREE;
    }
    if (wrong_kind && refused_kind == EMU_MAPPED_ALLOC) {
        pyaclnnEmuSetError("%s: %p is host memory mapped with aclrtHostRegister, not allocated; end the "
                           "mapping with aclrtHostUnregister",
                           api, ptr);
        return ACL_ERROR_RT_MEMORY_FREE;
    }
    if (wrong_kind) {
        pyaclnnEmuSetError("%s: %p was allocated by %s; free it with %s", api, ptr,
                           kind == EMU_DEVICE_ALLOC ? "aclrtMallocHost" : "aclrtMalloc",
                           kind == EMU_DEVICE_ALLOC ? "aclrtFreeHost" : "aclrtFree");
        return ACL_ERROR_RT_MEMORY_FREE;
    }
    return ACL_SUCCESS;
}

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    if ((int)policy < 0 || (int)policy > ACL_MEM_MALLOC_HUGE1G_ONLY_P2P) {
        if (devPtr != NULL) {
            *devPtr = NULL;
        }
        pyaclnnEmuSetError("aclrtMalloc: policy %d is not an aclrtMemMallocPolicy (0..7)", (int)policy);
        return ACL_ERROR_INVALID_PARAM;
    }
    return emu_alloc("aclrtMalloc", devPtr, size, EMU_DEVICE_ALLOC);
}

aclError aclrtFree(void *devPtr) { return emu_free("aclrtFree", devPtr, EMU_DEVICE_ALLOC); }

aclError aclrtMallocHost(void **hostPtr, size_t size)
{
    return emu_alloc("aclrtMallocHost", hostPtr, size, EMU_HOST_ALLOC);
}

aclError aclrtFreeHost(void *hostPtr) { return emu_free("aclrtFreeHost", hostPtr, EMU_HOST_ALLOC); }

/* ---- host memory mapped for the device ---------------------------------- */
/* aclrtHostRegister: hicann/runtime src/acl/aclrt_impl/memory.cpp checks ptr, devPtr and size
 * first (ACL_ERROR_INVALID_PARAM); the runtime then refuses another type, a thread without a
 * context, a ptr not on a page boundary and a range overlapping a live mapping. The device
 * address is the host address itself (the host is the device here); the numpy backend hands
 * out a distinct one, which keeps the callers honest about using the returned address.
 * Operators may use the mapping (pyaclnnEmuDeviceRange); memcpy, memset and aclrtFree refuse
 * it. Unregistering it under queued work is a hazard. */
#define EMU_HOST_PAGE 4096

aclError aclrtHostRegister(void *ptr, uint64_t size, aclrtHostRegisterType type, void **devPtr)
{
    static const char api[] = "aclrtHostRegister";
    if (ptr == NULL || devPtr == NULL) {
        pyaclnnEmuSetError("%s: %s is NULL", api, ptr == NULL ? "ptr" : "devPtr");
        return ACL_ERROR_INVALID_PARAM;
    }
    *devPtr = NULL;
    if (size == 0) {
        pyaclnnEmuSetError("%s: size is 0; it must be a positive number of bytes", api);
        return ACL_ERROR_INVALID_PARAM;
    }
    if ((int)type != ACL_HOST_REGISTER_MAPPED) {
        pyaclnnEmuSetError("%s: type %d is not supported; the only aclrtHostRegisterType is "
                           "ACL_HOST_REGISTER_MAPPED (0)",
                           api, (int)type);
        return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    }
    int device = emu_context_device(api);
    if (device < 0) {
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    if ((uintptr_t)ptr % EMU_HOST_PAGE != 0) {
        pyaclnnEmuSetError("%s: ptr %p is not %d-byte aligned (mapped in whole pages)", api, ptr, EMU_HOST_PAGE);
        return ACL_ERROR_RT_PARAM_INVALID;
    }
    if (size > SIZE_MAX || (uintptr_t)ptr > UINTPTR_MAX - size) {
        pyaclnnEmuSetError("%s: size %llu runs past the end of the address space", api, (unsigned long long)size);
        return ACL_ERROR_INVALID_PARAM;
    }
    emu_block *b = calloc(1, sizeof *b);
    if (b == NULL) {
        pyaclnnEmuSetError("%s: out of host memory for the mapping", api);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    *b = (emu_block){ptr, (size_t)size, EMU_MAPPED_ALLOC, device, 0, 0};
    uintptr_t start = (uintptr_t)ptr, end = start + (size_t)size;
    aclError rc = ACL_SUCCESS;
    pthread_mutex_lock(&emu_lock);
    for (size_t i = 0; i < g_alloc_count && rc == ACL_SUCCESS; i++) {
        const emu_block *m = g_allocs[i];
        uintptr_t m_start = (uintptr_t)m->base;
        if (m->kind == EMU_MAPPED_ALLOC && m_start < end && start < m_start + m->size) {
            pyaclnnEmuSetError("%s: [%p, +%llu bytes) overlaps the registered range [%p, +%zu bytes)", api, ptr,
                               (unsigned long long)size, (void *)m->base, m->size);
            rc = ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
    }
    if (rc == ACL_SUCCESS && table_add(b) != 0) {
        pyaclnnEmuSetError("%s: the allocation table cannot grow", api);
        rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    pthread_mutex_unlock(&emu_lock);
    if (rc != ACL_SUCCESS) {
        pyaclnnEmuFree(b);
        return rc;
    }
    *devPtr = ptr;
    return ACL_SUCCESS;
}

aclError aclrtHostUnregister(void *ptr)
{
    static const char api[] = "aclrtHostUnregister";
    if (ptr == NULL) {
        pyaclnnEmuSetError("%s: ptr is NULL", api);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (emu_context_device(api) < 0) {
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    pthread_mutex_lock(&emu_lock);
    long i = find_alloc_base(ptr);
    int mapped = i >= 0 && g_allocs[i]->kind == EMU_MAPPED_ALLOC;
    if (mapped) {
        table_remove(api, i);
    }
    pthread_mutex_unlock(&emu_lock);
    if (!mapped) {
        pyaclnnEmuSetError("%s: ptr %p is not the start of memory registered with aclrtHostRegister", api, ptr);
        return ACL_ERROR_HOST_MEMORY_NOT_REGISTERED;
    }
    return ACL_SUCCESS;
}

/* ---- memcpy / memset ---------------------------------------------------- */

static aclError check_device_side(const char *api, const char *arg, const void *ptr, size_t count)
{
    pthread_mutex_lock(&emu_lock);
    int device = emu_block_find(EMU_DEVICE_ALLOC, ptr, count) != NULL;
    int mapped = !device && emu_block_find(EMU_MAPPED_ALLOC, ptr, count) != NULL;
    pthread_mutex_unlock(&emu_lock);
    if (mapped) {
        pyaclnnEmuSetError("%s: %s %p is host memory mapped with aclrtHostRegister: it is for operators "
                           "only, not for memory operations (copy through the host pointer)",
                           api, arg, ptr);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (!device) {
        pyaclnnEmuSetError("%s: %s range [%p, +%zu bytes) is not inside one live aclrtMalloc allocation",
                           api, arg, ptr, count);
        return ACL_ERROR_INVALID_PARAM;
    }
    return ACL_SUCCESS;
}

/* With ACL_MEMCPY_DEFAULT the side is inferred: a pointer that starts inside
 * a device allocation must have its whole range inside it. */
static aclError check_default_side(const char *api, const char *arg, const void *ptr, size_t count)
{
    int starts_inside = pyaclnnEmuDeviceRange(ptr, 0);
    if (starts_inside && !pyaclnnEmuDeviceRange(ptr, count)) {
        return check_device_side(api, arg, ptr, count);
    }
    return ACL_SUCCESS;
}

/* The checks both memcpy calls make at the call (count 0 passes). */
static aclError check_memcpy(const char *api, void *dst, size_t destMax, const void *src, size_t count,
                             aclrtMemcpyKind kind)
{
    if (count > destMax) {
        pyaclnnEmuSetError("%s: count %zu exceeds destMax %zu; count must be <= destMax", api, count,
                           destMax);
        return ACL_ERROR_INVALID_PARAM;
    }
    if ((int)kind < ACL_MEMCPY_HOST_TO_HOST || (int)kind > ACL_MEMCPY_DEFAULT) {
        pyaclnnEmuSetError("%s: kind %d is not supported; use HOST_TO_HOST(0), HOST_TO_DEVICE(1), "
                           "DEVICE_TO_HOST(2), DEVICE_TO_DEVICE(3) or DEFAULT(4)",
                           api, (int)kind);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (count == 0) {
        return ACL_SUCCESS;
    }
    if (dst == NULL || src == NULL) {
        pyaclnnEmuSetError("%s: %s is NULL", api, dst == NULL ? "dst" : "src");
        return ACL_ERROR_INVALID_PARAM;
    }
    aclError rc = ACL_SUCCESS;
    switch (kind) {
    case ACL_MEMCPY_HOST_TO_DEVICE:
        rc = check_device_side(api, "dst", dst, count);
        break;
    case ACL_MEMCPY_DEVICE_TO_HOST:
        rc = check_device_side(api, "src", src, count);
        break;
    case ACL_MEMCPY_DEVICE_TO_DEVICE:
        rc = check_device_side(api, "dst", dst, count);
        if (rc == ACL_SUCCESS) {
            rc = check_device_side(api, "src", src, count);
        }
        break;
    case ACL_MEMCPY_DEFAULT:
        rc = check_default_side(api, "dst", dst, count);
        if (rc == ACL_SUCCESS) {
            rc = check_default_side(api, "src", src, count);
        }
        break;
    default:
        break;
    }
    return rc;
}

/* CANN: the synchronous copy does not wait for any stream; it copies now. */
aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind)
{
    int device = emu_context_device("aclrtMemcpy"); /* ApiImpl::MemCopySync */
    if (device < 0) {
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    if (emu_capture_unsafe_check("aclrtMemcpy", device) != ACL_SUCCESS) { /* then the capture mode */
        return ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT;
    }
    aclError rc = check_memcpy("aclrtMemcpy", dst, destMax, src, count, kind);
    if (rc == ACL_SUCCESS && count > 0) {
        memmove(dst, src, count);
    }
    return rc;
}

/* What a queued memcpy / memset does when it runs. */
typedef struct {
    void *dst;
    const void *src; /* NULL: memset with value */
    int value;
    size_t count;
} copy_job;

static void run_copy(void *ctx, emu_task *task)
{
    (void)task;
    copy_job *job = ctx;
    if (job->src != NULL) {
        memmove(job->dst, job->src, job->count);
    } else {
        memset(job->dst, job->value, job->count);
    }
}

/* Caller holds emu_lock. Makes the task a user of the allocation holding
 * [ptr, +count): device memory or pinned host memory. 1 when the range is
 * in neither (pageable host memory), 0 when used, -1 out of memory. */
static int use_range(emu_task *task, const void *ptr, size_t count)
{
    emu_block *b = emu_block_find(EMU_DEVICE_ALLOC, ptr, count);
    if (b == NULL) {
        b = emu_block_find(EMU_HOST_ALLOC, ptr, count);
    }
    return b == NULL ? 1 : emu_task_use_block(task, b);
}

/* Enqueue `job` on `stream`. A copy with a pageable host side returns only
 * when it has run (CANN: the pageable copy is synchronous to the caller),
 * plus the PYACLNN_EMU_SYNC_US latency of a synchronization. */
static aclError submit_copy(const char *api, const copy_job *job, aclrtStream stream, const char *detail)
{
    copy_job *copy = malloc(sizeof *copy);
    emu_task *task = copy != NULL ? emu_task_new(api, run_copy, free, copy, 0) : NULL;
    if (task == NULL) {
        pyaclnnEmuFree(copy);
        pyaclnnEmuSetError("%s: out of host memory for the task", api);
        return ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
    }
    emu_task_set_detail(task, detail);
    *copy = *job;
    pthread_mutex_lock(&emu_lock);
    int dst = use_range(task, job->dst, job->count);
    int src = job->src != NULL ? use_range(task, job->src, job->count) : 0;
    pthread_mutex_unlock(&emu_lock);
    if (dst == 1 || src == 1) { /* pageable: synchronous to the caller, an unsafe call of a capture */
        aclError refused = emu_capture_pageable_check(api, stream);
        if (refused != ACL_SUCCESS) {
            pyaclnnEmuTaskDiscard(task);
            return refused;
        }
    }
    uint64_t ticket;
    aclError rc = dst < 0 || src < 0 ? ACL_ERROR_RT_RESOURCE_ALLOC_FAIL : emu_task_submit(task, stream, &ticket);
    if (dst < 0 || src < 0) {
        pyaclnnEmuTaskDiscard(task);
        pyaclnnEmuSetError("%s: out of host memory for the task", api);
    }
    if (rc == ACL_SUCCESS && (dst == 1 || src == 1)) {
        emu_stream_wait(stream, ticket);
        emu_sleep_us(emu_env_us("PYACLNN_EMU_SYNC_US"));
    }
    return rc;
}

/* The profiler's name of a copy's direction: " H2D" and so on; with ACL_MEMCPY_DEFAULT a side
 * is the device's when its pointer is inside an aclrtMalloc allocation. */
static const char *copy_direction(aclrtMemcpyKind kind, const void *dst, const void *src)
{
    static const char *const names[2][2] = {{" H2H", " H2D"}, {" D2H", " D2D"}};
    int from = kind == ACL_MEMCPY_DEVICE_TO_HOST || kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
    int to = kind == ACL_MEMCPY_HOST_TO_DEVICE || kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
    if (kind == ACL_MEMCPY_DEFAULT) {
        pthread_mutex_lock(&emu_lock);
        from = emu_block_find(EMU_DEVICE_ALLOC, src, 0) != NULL;
        to = emu_block_find(EMU_DEVICE_ALLOC, dst, 0) != NULL;
        pthread_mutex_unlock(&emu_lock);
    }
    return names[from][to];
}

aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream)
{
    static const char api[] = "aclrtMemcpyAsync";
    aclError rc = pyaclnnEmuStreamCheck(api, stream);
    if (rc == ACL_SUCCESS) {
        rc = check_memcpy(api, dst, destMax, src, count, kind);
    }
    if (rc != ACL_SUCCESS || count == 0) {
        return rc;
    }
    copy_job job = {dst, src, 0, count};
    return submit_copy(api, &job, stream, copy_direction(kind, dst, src));
}

static aclError check_memset(const char *api, void *devPtr, size_t maxCount, size_t count)
{
    if (count > maxCount) {
        pyaclnnEmuSetError("%s: count %zu exceeds maxCount %zu; count must be <= maxCount", api, count,
                           maxCount);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (devPtr == NULL) {
        pyaclnnEmuSetError("%s: devPtr is NULL", api);
        return ACL_ERROR_INVALID_PARAM;
    }
    pthread_mutex_lock(&emu_lock);
    int inside = emu_block_find(EMU_DEVICE_ALLOC, devPtr, count) != NULL
                 || emu_block_find(EMU_HOST_ALLOC, devPtr, count) != NULL;
    pthread_mutex_unlock(&emu_lock);
    if (!inside) {
        pyaclnnEmuSetError("%s: devPtr range [%p, +%zu bytes) is not inside one live aclrtMalloc or "
                           "aclrtMallocHost allocation",
                           api, devPtr, count);
        return ACL_ERROR_INVALID_PARAM;
    }
    return ACL_SUCCESS;
}

/* CANN: the synchronous memset does not wait for any stream; it sets now. */
aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)
{
    int device = emu_context_device("aclrtMemset"); /* ApiImpl::MemSetSync */
    if (device < 0) {
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    if (emu_capture_unsafe_check("aclrtMemset", device) != ACL_SUCCESS) {
        return ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT;
    }
    aclError rc = check_memset("aclrtMemset", devPtr, maxCount, count);
    if (rc == ACL_SUCCESS) {
        memset(devPtr, value, count);
    }
    return rc;
}

aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream)
{
    static const char api[] = "aclrtMemsetAsync";
    aclError rc = pyaclnnEmuStreamCheck(api, stream);
    if (rc == ACL_SUCCESS) {
        rc = check_memset(api, devPtr, maxCount, count);
    }
    if (rc != ACL_SUCCESS || count == 0) {
        return rc;
    }
    copy_job job = {devPtr, NULL, value, count};
    return submit_copy(api, &job, stream, "");
}

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free_bytes, size_t *total)
{
    if ((int)attr < ACL_DDR_MEM || (int)attr > ACL_HBM_MEM_P2P_HUGE1G) {
        pyaclnnEmuSetError("aclrtGetMemInfo: attr %d is not an aclrtMemAttr (0..11)", (int)attr);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (free_bytes == NULL || total == NULL) {
        pyaclnnEmuSetError("aclrtGetMemInfo: %s is NULL", free_bytes == NULL ? "free" : "total");
        return ACL_ERROR_INVALID_PARAM;
    }
    int device = emu_context_device("aclrtGetMemInfo");
    if (device < 0) {
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    pthread_mutex_lock(&emu_lock);
    *total = EMU_DEVICE_TOTAL;
    *free_bytes = EMU_DEVICE_TOTAL - g_device_bytes[device];
    pthread_mutex_unlock(&emu_lock);
    return ACL_SUCCESS;
}

/* ---- init, device ------------------------------------------------------- */

static int g_init_refs;

aclError aclInit(const char *configPath)
{
    (void)configPath;
    pthread_mutex_lock(&emu_lock);
    int repeat = g_init_refs > 0;
    g_init_refs++;
    pthread_mutex_unlock(&emu_lock);
    if (repeat) {
        pyaclnnEmuSetError("aclInit: already initialized (repeated aclInit is reference-counted)");
        return ACL_ERROR_REPEAT_INITIALIZE;
    }
    return ACL_SUCCESS;
}

aclError aclFinalize(void)
{
    pthread_mutex_lock(&emu_lock);
    int was = g_init_refs;
    g_init_refs = 0;
    pthread_mutex_unlock(&emu_lock);
    if (was == 0) {
        pyaclnnEmuSetError("aclFinalize: aclInit was not called, or aclFinalize already ran");
        return ACL_ERROR_REPEAT_FINALIZE;
    }
    return ACL_SUCCESS;
}

aclError aclFinalizeReference(uint64_t *refCount)
{
    pthread_mutex_lock(&emu_lock);
    int was = g_init_refs;
    if (was > 0) {
        g_init_refs--;
    }
    int now = g_init_refs;
    pthread_mutex_unlock(&emu_lock);
    if (refCount != NULL) {
        *refCount = (uint64_t)now;
    }
    if (was == 0) {
        pyaclnnEmuSetError("aclFinalizeReference: aclInit was not called, or everything is finalized");
        return ACL_ERROR_REPEAT_FINALIZE;
    }
    return ACL_SUCCESS;
}

static aclError check_device_id(const char *api, int32_t deviceId)
{
    int n = emu_device_count();
    if (deviceId < 0 || deviceId >= n) {
        pyaclnnEmuSetError("%s: deviceId %d does not exist; the emulator has %d device(s), ids 0..%d "
                           "(PYACLNN_EMU_DEVICES)",
                           api, (int)deviceId, n, n - 1);
        return ACL_ERROR_RT_INVALID_DEVICEID;
    }
    return ACL_SUCCESS;
}

/* The current device is per thread, as in CANN. */
aclError aclrtSetDevice(int32_t deviceId)
{
    aclError rc = check_device_id("aclrtSetDevice", deviceId);
    if (rc == ACL_SUCCESS) {
        t_device = deviceId;
    }
    return rc;
}

aclError aclrtResetDevice(int32_t deviceId)
{
    aclError rc = check_device_id("aclrtResetDevice", deviceId);
    if (rc == ACL_SUCCESS && t_device == deviceId) {
        t_device = -1;
    }
    return rc;
}

aclError aclrtGetDevice(int32_t *deviceId)
{
    if (deviceId == NULL) {
        pyaclnnEmuSetError("aclrtGetDevice: deviceId is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (t_device < 0) {
        pyaclnnEmuSetError("aclrtGetDevice: no device is set in this thread; call aclrtSetDevice first");
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    *deviceId = t_device;
    return ACL_SUCCESS;
}

aclError aclrtGetDeviceCount(uint32_t *count)
{
    if (count == NULL) {
        pyaclnnEmuSetError("aclrtGetDeviceCount: count is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    *count = (uint32_t)emu_device_count();
    return ACL_SUCCESS;
}


/* ---- system parameters, versions, sizes -------------------------------- */

#define EMU_OPT_COUNT (ACL_OPT_ENABLE_KERNEL_EARLY_START + 1)
static int64_t g_opt_value[2][EMU_OPT_COUNT];
static int g_opt_set[2][EMU_OPT_COUNT];

static aclError set_opt(const char *api, int scope, aclSysParamOpt opt, int64_t value)
{
    if ((int)opt < 0 || (int)opt >= EMU_OPT_COUNT) {
        pyaclnnEmuSetError("%s: opt %d is not an aclSysParamOpt (0..%d)", api, (int)opt, EMU_OPT_COUNT - 1);
        return ACL_ERROR_INVALID_PARAM;
    }
    pthread_mutex_lock(&emu_lock);
    g_opt_value[scope][opt] = value;
    g_opt_set[scope][opt] = 1;
    pthread_mutex_unlock(&emu_lock);
    return ACL_SUCCESS;
}

static aclError get_opt(const char *api, int scope, aclSysParamOpt opt, int64_t *value)
{
    if ((int)opt < 0 || (int)opt >= EMU_OPT_COUNT) {
        pyaclnnEmuSetError("%s: opt %d is not an aclSysParamOpt (0..%d)", api, (int)opt, EMU_OPT_COUNT - 1);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (value == NULL) {
        pyaclnnEmuSetError("%s: value is NULL", api);
        return ACL_ERROR_INVALID_PARAM;
    }
    pthread_mutex_lock(&emu_lock);
    int set = g_opt_set[scope][opt];
    int64_t v = g_opt_value[scope][opt];
    pthread_mutex_unlock(&emu_lock);
    if (!set) {
        pyaclnnEmuSetError("%s: option %d was never set", api, (int)opt);
        return ACL_ERROR_RT_SYSPARAMOPT_NOT_SET;
    }
    *value = v;
    return ACL_SUCCESS;
}

aclError aclrtCtxSetSysParamOpt(aclSysParamOpt opt, int64_t value)
{
    return set_opt("aclrtCtxSetSysParamOpt", 0, opt, value);
}

aclError aclrtCtxGetSysParamOpt(aclSysParamOpt opt, int64_t *value)
{
    return get_opt("aclrtCtxGetSysParamOpt", 0, opt, value);
}

aclError aclrtSetSysParamOpt(aclSysParamOpt opt, int64_t value)
{
    return set_opt("aclrtSetSysParamOpt", 1, opt, value);
}

aclError aclrtGetSysParamOpt(aclSysParamOpt opt, int64_t *value)
{
    return get_opt("aclrtGetSysParamOpt", 1, opt, value);
}

aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion, int32_t *patchVersion)
{
    if (majorVersion == NULL || minorVersion == NULL || patchVersion == NULL) {
        pyaclnnEmuSetError("aclrtGetVersion: an output pointer is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    *majorVersion = 1; /* ACL API 1.17.0, as in the runtime headers described */
    *minorVersion = 17;
    *patchVersion = 0;
    return ACL_SUCCESS;
}

int pyaclnnEmuIs950(void)
{
    const char *soc = getenv("PYACLNN_EMU_SOC");
    return soc != NULL && strstr(soc, "950") != NULL;
}

const char *aclrtGetSocName(void) { return pyaclnnEmuIs950() ? "Ascend950-emulator" : "Ascend910B-emulator"; }

size_t aclDataTypeSize(aclDataType dataType)
{
    switch (dataType) {
    case ACL_INT8:
    case ACL_UINT8:
    case ACL_BOOL:
        return 1;
    case ACL_FLOAT16:
    case ACL_BF16:
    case ACL_INT16:
    case ACL_UINT16:
        return 2;
    case ACL_FLOAT:
    case ACL_INT32:
    case ACL_UINT32:
    case ACL_COMPLEX32:
        return 4;
    case ACL_INT64:
    case ACL_UINT64:
    case ACL_DOUBLE:
    case ACL_COMPLEX64:
        return 8;
    case ACL_COMPLEX128:
        return 16;
    default: /* undefined, string and sub-byte types have no element size */
        return 0;
    }
}

/* The kind counted at position i of pyaclnnEmuLiveCounts. */
static int live_kind(int i)
{
    static const int later[] = {EMU_MAPPED_ALLOC, EMU_GRAPH, EMU_SCALAR, EMU_FLOAT_ARRAY, EMU_TENSOR_LIST,
                                EMU_SCALAR_LIST};
    return i < 7 ? i : later[i - 7];
}
#define EMU_LIVE_COUNTS 13

int pyaclnnEmuLiveCounts(int64_t *counts, int n)
{
    if (counts == NULL || n <= 0) {
        return 0;
    }
    int written = n < EMU_LIVE_COUNTS ? n : EMU_LIVE_COUNTS;
    pthread_mutex_lock(&emu_lock);
    for (int i = 0; i < written; i++) {
        counts[i] = g_live[live_kind(i)];
    }
    pthread_mutex_unlock(&emu_lock);
    return written;
}

/* Caller holds emu_lock. Live allocations of `kind` made on `device`. */
static int64_t device_allocs(int kind, int device)
{
    int64_t count = 0;
    for (size_t i = 0; i < g_alloc_count; i++) {
        count += g_allocs[i]->kind == kind && g_allocs[i]->device == device;
    }
    return count;
}

int pyaclnnEmuDeviceLiveCounts(int32_t device, int64_t *counts, int n)
{
    if (counts == NULL || n <= 0 || device < 0 || device >= emu_device_count()) {
        return 0;
    }
    int written = n < EMU_LIVE_COUNTS ? n : EMU_LIVE_COUNTS;
    pthread_mutex_lock(&emu_lock);
    for (int i = 0; i < written; i++) {
        counts[i] = g_live[live_kind(i)]; /* descriptors and executors are global */
    }
    counts[0] = device_allocs(EMU_DEVICE_ALLOC, device);
    if (written > 1) {
        counts[1] = device_allocs(EMU_HOST_ALLOC, device);
    }
    if (written > 6) {
        counts[6] = emu_stream_count_locked(device);
    }
    if (written > 7) {
        counts[7] = device_allocs(EMU_MAPPED_ALLOC, device);
    }
    if (written > 8) {
        counts[8] = emu_graph_count_locked(device);
    }
    pthread_mutex_unlock(&emu_lock);
    return written;
}
