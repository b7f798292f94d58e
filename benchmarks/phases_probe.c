/*
 * The device's own share of a repeated pyaclnn.ops.add, for bench_ops.py: both phases of
 * aclnnAdd called `n` times from C on the arguments of the call's record (its words, as
 * pyaclnn._repeat calls them), with no Python in between: what the emulated CANN costs the
 * calling thread, which no binding can avoid.
 *
 * Not part of pyaclnn: built by bench_ops.py with the system's C compiler.
 */
#include <stdint.h>

typedef uint64_t u64;
typedef int32_t (*phase1_fn)(u64, u64, u64, u64, u64, u64);
typedef int32_t (*phase2_fn)(void *, u64, void *, void *);

/* words: phase 1's address, phase 2's, the stream, the count of arguments (4), the arguments.
 * 0 once done; the failing status, or -1 for another operator or one that needs a workspace. */
int probe_phases(const u64 *words, long n)
{
    if (words[3] != 4) {
        return -1;
    }
    for (long i = 0; i < n; i++) {
        u64 size = 0;
        void *executor = 0;
        int32_t status = ((phase1_fn)(uintptr_t)words[0])(words[4], words[5], words[6], words[7],
                                                           (u64)(uintptr_t)&size, (u64)(uintptr_t)&executor);
        if (status != 0 || executor == 0 || size != 0) {
            return status != 0 ? status : -1;
        }
        status = ((phase2_fn)(uintptr_t)words[1])(0, 0, executor, (void *)(uintptr_t)words[2]);
        if (status != 0) {
            return status;
        }
    }
    return 0;
}
