/*
 * Lower bounds for bench_floor.py: the parts of a max-pool backward that any
 * kernel must do, each alone, on the same threads as the compiled kernel.
 *
 * - probe_write: grad_input's bytes written with streaming stores (zeros);
 * - probe_scatter: the gradients and indices read and added into float32
 *   sums, two planes of sums a thread (cleared once per call, not per plane;
 *   nothing is written out and no index is checked, so the result is
 *   meaningless);
 * - probe_spin: a loop of independent integer adds, to see how much a second
 *   thread adds to the machine's throughput (about 2x on two cores, about
 *   1.1x on two hardware threads of one core).
 *
 * Not part of pyaclnn: built by bench_floor.py with the system's C compiler.
 */
#define _POSIX_C_SOURCE 200809L
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 16

typedef struct {
    const char *grad;
    const char *index;
    char *dst;
    int64_t bytes;              /* probe_write: this thread's bytes */
    int64_t first, end;         /* probe_scatter: this thread's planes */
    int64_t per_plane, plane;   /* gradients per plane, cells per plane */
    int half, index_size;       /* float16 gradients; 4 or 8 */
    int64_t iterations;         /* probe_spin */
    int64_t sum;                /* probe_spin's result, kept so the loop stays */
} share;

static void run_threads(void *(*fn)(void *), share *shares, int threads) {
    pthread_t ids[MAX_THREADS];
    int started = 0;
    for (int t = 1; t < threads; t++)
        if (pthread_create(&ids[t], NULL, fn, &shares[t]) == 0) started = t;
        else break;
    fn(&shares[0]);
    for (int t = 1; t <= started; t++) pthread_join(ids[t], NULL);
}

static int clamp_threads(int threads) { return threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads; }

__attribute__((target("avx"))) static void *write_share(void *arg) {
    share *s = arg;
    char *p = s->dst, *end = s->dst + s->bytes;
    while (p < end && ((uintptr_t)p & 31)) *p++ = 0;
    const __m256i zero = _mm256_setzero_si256();
    for (; p + 32 <= end; p += 32) _mm256_stream_si256((__m256i *)p, zero);
    while (p < end) *p++ = 0;
    _mm_sfence();
    return NULL;
}

void probe_write(intptr_t dst, int64_t bytes, int threads) {
    share shares[MAX_THREADS];
    threads = clamp_threads(threads);
    int64_t step = (bytes / threads + 63) & ~(int64_t)63, at = 0;
    for (int t = 0; t < threads; t++) {
        int64_t n = bytes - at < step ? bytes - at : step;
        shares[t].dst = (char *)dst + at;
        shares[t].bytes = n > 0 ? n : 0;
        at += shares[t].bytes;
    }
    run_threads(write_share, shares, threads);
}

__attribute__((target("avx,f16c"))) static inline float gradient(const share *s, const char *g, int64_t i) {
    return s->half ? _cvtsh_ss(((const uint16_t *)g)[i]) : ((const float *)g)[i];
}

static inline __attribute__((always_inline)) int64_t cell(const share *s, const char *ix, int64_t i) {
    return s->index_size == 8 ? ((const int64_t *)ix)[i] : ((const int32_t *)ix)[i];
}

/* Two planes at a time, their gradients interleaved, as pyaclnn's kernel sums
 * them: a run of gradients into one cell is a chain of dependent adds, and
 * the other plane's adds overlap with it. */
__attribute__((target("avx,f16c"))) static void *scatter_share(void *arg) {
    share *s = arg;
    float *acc = calloc(2 * (size_t)s->plane, sizeof(float));
    if (!acc) return NULL;
    float *acc1 = acc + s->plane;
    const int64_t grad_step = s->per_plane * (s->half ? 2 : 4), index_step = s->per_plane * s->index_size;
    for (int64_t p = s->first; p < s->end; p += 2) {
        const char *g0 = s->grad + p * grad_step, *i0 = s->index + p * index_step;
        if (p + 1 < s->end) {
            const char *g1 = g0 + grad_step, *i1 = i0 + index_step;
            for (int64_t i = 0; i < s->per_plane; i++) {
                acc[cell(s, i0, i)] += gradient(s, g0, i);
                acc1[cell(s, i1, i)] += gradient(s, g1, i);
            }
        } else {
            for (int64_t i = 0; i < s->per_plane; i++) acc[cell(s, i0, i)] += gradient(s, g0, i);
        }
    }
    volatile float keep = acc[0] + acc1[0]; /* the sums are "used" */
    (void)keep;
    free(acc);
    return NULL;
}

/* Contiguous (N*C, per_plane) gradients and indices into planes of ``plane`` cells. */
void probe_scatter(intptr_t grad, int half, intptr_t index, int index_size, int64_t planes, int64_t per_plane,
                   int64_t plane, int threads) {
    share shares[MAX_THREADS];
    threads = clamp_threads(threads);
    for (int t = 0; t < threads; t++) {
        shares[t].grad = (const char *)grad;
        shares[t].index = (const char *)index;
        shares[t].half = half;
        shares[t].index_size = index_size;
        shares[t].per_plane = per_plane;
        shares[t].plane = plane;
        shares[t].first = planes * t / threads;
        shares[t].end = planes * (t + 1) / threads;
    }
    run_threads(scatter_share, shares, threads);
}

static void *spin_share(void *arg) {
    share *s = arg;
    int64_t a = 0, b = 0, c = 0, d = 0;
    for (int64_t i = 0; i < s->iterations; i++) {
        __asm__ volatile("add $1, %0\n\tadd $1, %1\n\tadd $1, %2\n\tadd $1, %3" : "+r"(a), "+r"(b), "+r"(c), "+r"(d));
    }
    s->sum = a + b + c + d;
    return NULL;
}

/* ``iterations`` of the loop on each of ``threads`` threads. */
int64_t probe_spin(int64_t iterations, int threads) {
    share shares[MAX_THREADS];
    threads = clamp_threads(threads);
    for (int t = 0; t < threads; t++) shares[t].iterations = iterations;
    run_threads(spin_share, shares, threads);
    return shares[0].sum;
}
