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

/* Kinds of tracked objects. The first seven are the order of
 * pyaclnnEmuLiveCounts; allocations are counted from the allocation table. */
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
    EMU_KIND_COUNT = 9
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
int pyaclnnEmuHandleSetPersistent(int kind, const void *handle);
int pyaclnnEmuHandleAcquire(int kind, const void *handle);

/* 1 if [ptr, ptr + nbytes) lies inside one live aclrtMalloc allocation. */
int pyaclnnEmuDeviceRange(const void *ptr, size_t nbytes);

/* 1 when the emulated device follows the 950 rules (environment variable
 * PYACLNN_EMU_SOC contains "950"), 0 for the Atlas A2/A3 rules (default). */
int pyaclnnEmuIs950(void);

/* 1 if the stream is NULL (default stream) or a live aclrtCreateStream one. */
int pyaclnnEmuStreamIsValid(aclrtStream stream);
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

/* An operator's executor: each op embeds this as the first member of its
 * own snapshot struct. release frees the whole snapshot; libnnopbase calls
 * it from aclDestroyAclOpExecutor, the op library from phase 2. */
struct aclOpExecutor {
    const char *op_name;
    uint64_t workspace;
    void (*release)(aclOpExecutor *self);
};

#endif
