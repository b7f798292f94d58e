/*
 * Compiled CPU kernels of pyaclnn's numpy backend (C11, POSIX threads).
 *
 * The pure NumPy kernels in pyaclnn/kernels/ are the reference; every
 * function here computes the same bits where the accumulation order is the
 * same (see pyaclnn/kernels/_accel/__init__.py). The library is opened with
 * cffi in ABI mode: it exports plain C functions and includes no Python
 * header.
 *
 * Arrays arrive as NumPy hands them over: a pointer to the logical first
 * element and one byte stride per axis (any sign, any layout). The arguments
 * are those of a plan of pyaclnn/kernels/checks.py (non-empty arrays, valid
 * parameters and modes, a dtype code of the Python side's table) and are not
 * checked again here; how many threads a call uses is the Python side's
 * decision (pyaclnn/kernels/_workers.py, threads_for), capped here only by the
 * work there is to share out.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define API __attribute__((visibility("default")))

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_F16C_PATH 1
#else
#define HAVE_F16C_PATH 0
#endif

/* Version of the exported interface; the loader refuses a library of another one. */
#define PYACLNN_ACCEL_ABI 7

/* The dtypes the kernels take (pyaclnn/kernels/_accel/__init__.py, _FLOAT_CODES, maps them). */
enum { DT_FLOAT32 = 0, DT_FLOAT16 = 1, DT_BFLOAT16 = 2 };
/* RC_UNSUPPORTED: a call the kernel cannot take (the Python side runs another kernel). */
enum { RC_OK = 0, RC_BAD_INDEX = 1, RC_NO_MEMORY = -1, RC_UNSUPPORTED = -3 };

API int pyaclnn_accel_abi(void) { return PYACLNN_ACCEL_ABI; }

/* ------------------------------------------------------------------------
 * Scratch accounting: the benchmarks add it to the peak extra memory, which
 * tracemalloc (NumPy's buffers only) cannot see.
 * ------------------------------------------------------------------------ */

static atomic_llong scratch_now;
static atomic_llong scratch_peak;

/* Scratch starts on a cache line (64 bytes): the kernels lay their buffers out
 * in 64-byte steps, so none shares a line with another and the float32 rows
 * split no line. */
#define SCRATCH_ALIGN 64

static void *scratch_alloc(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, SCRATCH_ALIGN, bytes ? bytes : 1)) p = NULL;
    if (p) {
        long long now = atomic_fetch_add(&scratch_now, (long long)bytes) + (long long)bytes;
        long long peak = atomic_load(&scratch_peak);
        while (now > peak && !atomic_compare_exchange_weak(&scratch_peak, &peak, now)) {
        }
    }
    return p;
}

static void scratch_free(void *p, size_t bytes) {
    if (p) {
        atomic_fetch_sub(&scratch_now, (long long)bytes);
        free(p);
    }
}

/* Peak scratch bytes held at once since the last reset; ``reset`` restarts it. */
API long long pyaclnn_accel_scratch_peak(int reset) {
    long long peak = atomic_load(&scratch_peak);
    if (reset) atomic_store(&scratch_peak, atomic_load(&scratch_now));
    return peak;
}

/* ------------------------------------------------------------------------
 * 16-bit float conversions
 * ------------------------------------------------------------------------ */

static inline float bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* float16 -> float32, exact; a NaN keeps its payload and comes out quiet, as
 * VCVTPH2PS makes it. */
static inline float half_to_float_sw(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1Fu;
    uint32_t mantissa = h & 0x3FFu;
    if (exponent == 0x1F) {
        uint32_t quiet = mantissa ? 0x00400000u : 0;
        return bits_float(sign | 0x7F800000u | quiet | (mantissa << 13));
    }
    if (exponent == 0) {
        /* zero or subnormal: mantissa * 2^-24, exact in float32 */
        float magnitude = (float)mantissa * 0x1p-24f;
        return bits_float(sign | float_bits(magnitude));
    }
    return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

/* float32 -> float16 bits, round to nearest even; overflow gives inf and a
 * NaN stays a quiet NaN with the top of its payload, as VCVTPS2PH does. */
static inline uint16_t float_to_half_sw(float f) {
    uint32_t x = float_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
    if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* >= 65520 rounds to inf */
    if (a >= 0x38800000u) {                                  /* normal in float16 */
        /* rebias 127 -> 15 (wraps mod 2^32), round the 13 dropped bits to even */
        uint32_t r = a + 0xC8000FFFu + ((a >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    if (a <= 0x33000000u) return (uint16_t)sign; /* <= 2^-25: rounds to (signed) zero */
    uint32_t shift = 126 - (a >> 23);           /* 14..24: value in units of 2^-24 */
    uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    uint32_t q = m >> shift;
    uint32_t rest = m & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    q += (rest > halfway) | ((rest == halfway) & (q & 1u));
    return (uint16_t)(sign | q);
}

/* float32 -> bfloat16 bits, round to nearest even; NaN becomes the quiet NaN
 * 0x7FC0 with the sign, as ml_dtypes (Eigen) converts. */
static inline uint16_t float_to_bf16(float f) {
    uint32_t x = float_bits(f);
    uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
    uint32_t nan = ((x >> 16) & 0x8000u) | 0x7FC0u;
    return (uint16_t)((x & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}

static inline float bf16_to_float(uint16_t h) { return bits_float((uint32_t)h << 16); }

#if HAVE_F16C_PATH
__attribute__((target("avx,f16c"))) static void half_row_to_float_f16c(const uint16_t *src, float *dst,
                                                                        int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = _cvtsh_ss(src[i]);
}

__attribute__((target("avx,f16c"))) static void float_row_to_half_f16c(const float *src, uint16_t *dst,
                                                                        int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), 0));
    for (; i < n; i++) dst[i] = _cvtss_sh(src[i], 0);
}

/* Streaming-store writes of a whole C-contiguous plane of grad_input
 * (written once, not read again by the kernel): the stores skip reading the
 * lines they overwrite (a third of the memory traffic of a 16-bit backward)
 * and leave the caches to the caller's next work. Same bits as the row
 * conversions. 16 values a step into one 32-byte store (from a 32-byte
 * aligned cell on): a third fewer instructions a cell than 8 into 16 bytes,
 * which is what the plane conversion is bound by here. The task fences them
 * before returning. */
__attribute__((target("avx,f16c"))) static void float_plane_to_half_f16c_stream(const float *src, void *out,
                                                                                 int64_t n) {
    uint16_t *dst = out;
    int64_t i = 0;
    for (; i < n && ((uintptr_t)(dst + i) & 31); i++) dst[i] = _cvtss_sh(src[i], 0);
    for (; i + 16 <= n; i += 16) {
        const __m128i low = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), 0);
        const __m128i high = _mm256_cvtps_ph(_mm256_loadu_ps(src + i + 8), 0);
        _mm256_stream_si256((__m256i *)(dst + i), _mm256_insertf128_si256(_mm256_castsi128_si256(low), high, 1));
    }
    for (; i < n; i++) dst[i] = _cvtss_sh(src[i], 0);
}

/* float_plane_to_half_f16c_stream that also clears what it read (to +0.0, as
 * memset), in the same pass while the lines are in L1: write_slabs keeps its
 * slab's free slices zero this way instead of a memset of every new depth
 * slice (14% of the one-thread fp16 k3 s2 kernel). Same bits written. */
__attribute__((target("avx,f16c"))) static void float_plane_to_half_f16c_stream_clear(float *src, void *out,
                                                                                       int64_t n) {
    uint16_t *dst = out;
    const __m256 zero = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i < n && ((uintptr_t)(dst + i) & 31); i++) {
        dst[i] = _cvtss_sh(src[i], 0);
        src[i] = 0.0f;
    }
    for (; i + 16 <= n; i += 16) {
        const __m128i low = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), 0);
        const __m128i high = _mm256_cvtps_ph(_mm256_loadu_ps(src + i + 8), 0);
        _mm256_stream_si256((__m256i *)(dst + i), _mm256_insertf128_si256(_mm256_castsi128_si256(low), high, 1));
        _mm256_storeu_ps(src + i, zero);
        _mm256_storeu_ps(src + i + 8, zero);
    }
    for (; i < n; i++) {
        dst[i] = _cvtss_sh(src[i], 0);
        src[i] = 0.0f;
    }
}

/* float_to_bf16 on 8 lanes: round to nearest even, NaN -> quiet 0x7FC0 with the sign. */
__attribute__((target("avx2"))) static inline __m256i bf16_lanes(__m256 f) {
    const __m256i x = _mm256_castps_si256(f);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i biased = _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7FFF)), lsb);
    const __m256i rounded = _mm256_srli_epi32(biased, 16);
    const __m256i magnitude = _mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF));
    const __m256i is_nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7F800000));
    const __m256i nan = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x8000)),
                                        _mm256_set1_epi32(0x7FC0));
    return _mm256_blendv_epi8(rounded, nan, is_nan);
}

__attribute__((target("avx2"))) static void float_plane_to_bf16_avx2_stream(const float *src, void *out,
                                                                             int64_t n) {
    uint16_t *dst = out;
    int64_t i = 0;
    for (; i < n && ((uintptr_t)(dst + i) & 31); i++) dst[i] = float_to_bf16(src[i]);
    for (; i + 16 <= n; i += 16) {
        const __m256i low = bf16_lanes(_mm256_loadu_ps(src + i));
        const __m256i high = bf16_lanes(_mm256_loadu_ps(src + i + 8));
        /* packus interleaves 128-bit halves (all values fit 16 bits unsigned): reorder them */
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(low, high), 0xD8);
        _mm256_stream_si256((__m256i *)(dst + i), packed);
    }
    for (; i < n; i++) dst[i] = float_to_bf16(src[i]);
}

/* float_plane_to_bf16_avx2_stream, clearing what it read (see float_plane_to_half_f16c_stream_clear). */
__attribute__((target("avx2"))) static void float_plane_to_bf16_avx2_stream_clear(float *src, void *out,
                                                                                   int64_t n) {
    uint16_t *dst = out;
    const __m256 zero = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i < n && ((uintptr_t)(dst + i) & 31); i++) {
        dst[i] = float_to_bf16(src[i]);
        src[i] = 0.0f;
    }
    for (; i + 16 <= n; i += 16) {
        const __m256i low = bf16_lanes(_mm256_loadu_ps(src + i));
        const __m256i high = bf16_lanes(_mm256_loadu_ps(src + i + 8));
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(low, high), 0xD8);
        _mm256_stream_si256((__m256i *)(dst + i), packed);
        _mm256_storeu_ps(src + i, zero);
        _mm256_storeu_ps(src + i + 8, zero);
    }
    for (; i < n; i++) {
        dst[i] = float_to_bf16(src[i]);
        src[i] = 0.0f;
    }
}

/* float32 sums copied as they are (SSE2: every x86-64 CPU). */
static void float_plane_stream(const float *src, void *out, int64_t n) {
    float *dst = out;
    int64_t i = 0;
    for (; i < n && ((uintptr_t)(dst + i) & 15); i++) dst[i] = src[i];
    for (; i + 8 <= n; i += 8) {
        _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
        _mm_stream_ps(dst + i + 4, _mm_loadu_ps(src + i + 4));
    }
    for (; i < n; i++) dst[i] = src[i];
}

/* float_plane_stream, clearing what it read (see float_plane_to_half_f16c_stream_clear). */
static void float_plane_stream_clear(float *src, void *out, int64_t n) {
    float *dst = out;
    const __m128 zero = _mm_setzero_ps();
    int64_t i = 0;
    for (; i < n && ((uintptr_t)(dst + i) & 15); i++) {
        dst[i] = src[i];
        src[i] = 0.0f;
    }
    for (; i + 8 <= n; i += 8) {
        _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
        _mm_stream_ps(dst + i + 4, _mm_loadu_ps(src + i + 4));
        _mm_storeu_ps(src + i, zero);
        _mm_storeu_ps(src + i + 4, zero);
    }
    for (; i < n; i++) {
        dst[i] = src[i];
        src[i] = 0.0f;
    }
}
#endif

static void half_row_to_float_sw(const uint16_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = half_to_float_sw(src[i]);
}

static void float_row_to_half_sw(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = float_to_half_sw(src[i]);
}

/* Chosen once at load (pyaclnn_accel_use_f16c may change it): the hardware
 * path when the CPU has F16C, else the software one; both give the same bits. */
static void (*half_to_float_row)(const uint16_t *, float *, int64_t) = half_row_to_float_sw;
static void (*float_to_half_row)(const float *, uint16_t *, int64_t) = float_row_to_half_sw;
/* Whole-plane streaming stores by dtype (DT_*), NULL where the CPU (or the
 * switch) has none. */
typedef void (*plane_writer)(const float *, void *, int64_t);
static plane_writer stream_plane[3];
/* The same writers clearing the float32 values they read (NULL: write, then memset). */
typedef void (*plane_clearer)(float *, void *, int64_t);
static plane_clearer stream_plane_clear[3];
/* The index guard's scan of contiguous indices (see highest_contiguous_loops). */
static uint64_t highest_contiguous_base(const char *p, int size, int64_t n);
#if HAVE_F16C_PATH
static uint64_t highest_contiguous_avx2(const char *p, int size, int64_t n);
#endif
static uint64_t (*highest_contiguous)(const char *, int, int64_t) = highest_contiguous_base;
/* The max-pool backward's depth check (see depths_hold_loops). */
struct pool_backward;
static int depths_hold_base(const struct pool_backward *, const char *);
#if HAVE_F16C_PATH
static int depths_hold_avx2(const struct pool_backward *, const char *);
#endif
static int (*depths_hold)(const struct pool_backward *, const char *) = depths_hold_base;
/* The max-pool forward's inner loop (see take_max_loops). */
static void take_max_base(float *, int32_t *, const float *, int32_t, int32_t, int32_t, int32_t);
#if HAVE_F16C_PATH
static void take_max_avx2(float *, int32_t *, const float *, int32_t, int32_t, int32_t, int32_t);
#endif
static void (*take_max)(float *, int32_t *, const float *, int32_t, int32_t, int32_t, int32_t) = take_max_base;
/* Whether copy_clear streams in 32-byte AVX stores (else 16-byte SSE2 ones). */
static int avx_copies;

/* Use F16C when ``want`` and the CPU has it; returns whether it is used now.
 * ``want`` false also turns off the other SIMD builds (AVX2 bfloat16 lanes,
 * the AVX2 index scan, the AVX copy_clear), for tests: every path gives the
 * same results.
 * ``want`` < 0 only asks. Not for use while a kernel runs. */
API int pyaclnn_accel_use_f16c(int want) {
#if HAVE_F16C_PATH
    if (want >= 0) {
        __builtin_cpu_init();
        int hardware = want && __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
        half_to_float_row = hardware ? half_row_to_float_f16c : half_row_to_float_sw;
        float_to_half_row = hardware ? float_row_to_half_f16c : float_row_to_half_sw;
        stream_plane[DT_FLOAT32] = float_plane_stream;
        stream_plane_clear[DT_FLOAT32] = float_plane_stream_clear;
        stream_plane[DT_FLOAT16] = hardware ? float_plane_to_half_f16c_stream : NULL;
        stream_plane_clear[DT_FLOAT16] = hardware ? float_plane_to_half_f16c_stream_clear : NULL;
        /* bfloat16 has no hardware conversion here: AVX2 integer lanes, or the
         * scalar loop when F16C conversion is switched off (tests) */
        stream_plane[DT_BFLOAT16] = want && __builtin_cpu_supports("avx2") ? float_plane_to_bf16_avx2_stream : NULL;
        stream_plane_clear[DT_BFLOAT16] =
            want && __builtin_cpu_supports("avx2") ? float_plane_to_bf16_avx2_stream_clear : NULL;
        highest_contiguous = want && __builtin_cpu_supports("avx2") ? highest_contiguous_avx2 : highest_contiguous_base;
        depths_hold = want && __builtin_cpu_supports("avx2") ? depths_hold_avx2 : depths_hold_base;
        take_max = want && __builtin_cpu_supports("avx2") ? take_max_avx2 : take_max_base;
        avx_copies = want && __builtin_cpu_supports("avx");
    }
    return half_to_float_row == half_row_to_float_f16c;
#else
    (void)want;
    return 0;
#endif
}

__attribute__((constructor)) static void choose_conversions(void) { pyaclnn_accel_use_f16c(1); }

/* Single-value conversions for tests: ``n`` float16 bits -> float32 and back
 * through the path in use. */
API void pyaclnn_accel_half_to_float(const uint16_t *src, float *dst, int64_t n) { half_to_float_row(src, dst, n); }
API void pyaclnn_accel_float_to_half(const float *src, uint16_t *dst, int64_t n) { float_to_half_row(src, dst, n); }

/* ------------------------------------------------------------------------
 * Thread pool: plain pthreads sleeping on a condition variable (no spinning,
 * which would compete with PyTorch's OpenMP threads in the same process).
 * ------------------------------------------------------------------------ */

#define MAX_THREADS 64

typedef void (*task_fn)(void *ctx);

static struct {
    pthread_mutex_t busy; /* held by the one call using the workers */
    pthread_mutex_t lock; /* guards the fields below (``remaining`` is also read without it) */
    pthread_cond_t wake, done;
    int workers;          /* threads started */
    int wanted;           /* workers taking part in the current task */
    atomic_llong remaining; /* of those, still running it */
    unsigned long generation;
    task_fn fn;
    void *ctx;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, NULL, NULL};

/* The generation current when each worker was started: a worker that first
 * runs after the task it was started for was posted must still take it. */
static unsigned long start_generation[MAX_THREADS];

static void *worker_main(void *arg) {
    int id = (int)(intptr_t)arg;
    pthread_mutex_lock(&pool.lock);
    unsigned long seen = start_generation[id];
    for (;;) {
        while (pool.generation == seen) pthread_cond_wait(&pool.wake, &pool.lock);
        seen = pool.generation;
        if (id >= pool.wanted) continue;
        task_fn fn = pool.fn;
        void *ctx = pool.ctx;
        pthread_mutex_unlock(&pool.lock);
        fn(ctx);
        pthread_mutex_lock(&pool.lock);
        if (atomic_fetch_sub(&pool.remaining, 1) == 1) pthread_cond_signal(&pool.done);
    }
    return NULL;
}

/* A forked child inherits the pool's state but not its threads: start afresh. */
static void pool_reset(void) {
    pthread_mutex_init(&pool.busy, NULL);
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.done, NULL);
    pool.workers = pool.wanted = 0;
    atomic_store(&pool.remaining, 0);
}

/* Start workers up to ``count``; returns how many exist. Called holding pool.busy. */
static int pool_grow(int count) {
    while (pool.workers < count) {
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        start_generation[pool.workers] = pool.generation; /* pool.busy held: it cannot change */
        int failed = pthread_create(&thread, &attr, worker_main, (void *)(intptr_t)pool.workers);
        pthread_attr_destroy(&attr);
        if (failed) break;
        pool.workers++;
    }
    return pool.workers;
}

static inline void cpu_relax(void) {
#if HAVE_F16C_PATH
    _mm_pause();
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* How long a thread that has run out of work polls for the others before it
 * sleeps: about one plane's work. Falling asleep and being woken costs
 * 20-50 us each on a shared VM (measured: a no-op run_parallel on 2 threads
 * took 40-90 us); the poll ends as soon as the last share is done. */
#define FINISH_POLL_NS 200000

/* Poll until ``*value`` is 0, for at most FINISH_POLL_NS; returns whether it is. */
static int poll_zero(atomic_llong *value) {
    int64_t deadline = 0;
    for (unsigned spins = 0; atomic_load(value) != 0; spins++) {
        cpu_relax();
        if ((spins & 63) == 63) {
            int64_t now = now_ns();
            if (!deadline) {
                deadline = now + FINISH_POLL_NS;
            } else if (now > deadline) {
                return 0;
            }
        }
    }
    return 1;
}

/* Run ``fn(ctx)`` on ``threads`` threads, the caller being one of them; ``fn``
 * takes its work from a shared counter, so any number of threads gives the
 * same result. When another call already holds the workers (two streams at
 * once), this one runs in the caller alone instead of waiting. The caller
 * polls briefly for the helpers' last shares before it sleeps (see
 * FINISH_POLL_NS); the helpers themselves sleep between tasks, never spin. */
static void run_parallel(task_fn fn, void *ctx, int threads) {
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads <= 1 || pthread_mutex_trylock(&pool.busy) != 0) {
        fn(ctx);
        return;
    }
    int helpers = pool_grow(threads - 1);
    pthread_mutex_lock(&pool.lock);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.wanted = helpers;
    atomic_store(&pool.remaining, helpers);
    pool.generation++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    fn(ctx);
    if (!poll_zero(&pool.remaining)) {
        pthread_mutex_lock(&pool.lock);
        while (atomic_load(&pool.remaining) > 0) pthread_cond_wait(&pool.done, &pool.lock);
        pthread_mutex_unlock(&pool.lock);
    }
    pthread_mutex_unlock(&pool.busy);
}

__attribute__((constructor)) static void pool_init(void) { pthread_atfork(NULL, NULL, pool_reset); }

/* ------------------------------------------------------------------------
 * Max-pool backward
 * ------------------------------------------------------------------------ */

/* From this many bytes of grad_input on, its planes are summed in a scratch
 * plane and written with streaming stores (where the CPU has them; see
 * float_plane_to_half_f16c_stream). On the float32 benchmark shapes (CPU
 * time of one thread, into the same output) this takes 0.75-0.8x the time of
 * summing in place in grad_input for k3 s2, 0.9x for k3 s1 and 1.05-1.1x for
 * k2 s2; it also leaves the caches (and the Python that runs next) alone. */
#define STREAM_MIN_BYTES (1u << 20)

typedef struct pool_backward {
    const char *grad;
    const char *index;
    char *grad_input;
    int64_t gs[5], is[5], gis[5]; /* byte strides */
    int64_t out[5];               /* N, C, Do, Ho, Wo */
    int64_t in[3];                /* D, H, W */
    int64_t plane, planes, batch; /* D*H*W, N*C, planes per grab */
    int dtype, index_size;
    plane_writer writer;     /* streaming whole-plane writes (large grad_input, C-contiguous planes) or NULL */
    plane_clearer clear_writer; /* the writer that also clears what it read, or NULL (see store_slices) */
    int in_place;            /* float32 summed in grad_input itself (else in scratch planes) */
    int lanes;               /* planes a thread sums at once, their gradients interleaved: 1 or 2 */
    /* With the pooling's parameters: per output depth, the input depths its
     * windows reach, [zlo, zhi), at most ``slab`` of them; per plane, whether
     * its indices all lie there (see depths_hold). NULL otherwise. */
    int64_t *zlo, *zhi;
    int64_t slab, slab_room; /* depth slices a slab buffer holds: see write_slabs */
    unsigned char *by_slabs;
    int disjoint;             /* windows overlap on no axis, grad_input's planes C-contiguous: see write_disjoint */
    atomic_llong slab_planes; /* planes summed by slabs, for tests */
    atomic_llong disjoint_planes; /* planes write_disjoint wrote, for tests */
    atomic_llong next_check; /* next plane for the index guard to take */
    atomic_llong unchecked;  /* grabs of the index guard not finished yet */
    atomic_llong next;       /* next plane for the scatter to take */
    atomic_llong first_bad;  /* C-order position of the first bad index, or INT64_MAX */
    atomic_int failed;       /* a worker could not allocate its scratch */
} pool_backward;

static inline int64_t load_index(const char *p, int size) {
    if (size == 8) {
        int64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Take the next ``batch`` planes from ``next``: [*first, *end); false when none is left. */
static int take_planes(pool_backward *t, atomic_llong *next, int64_t batch, int64_t *first, int64_t *end) {
    int64_t start = atomic_fetch_add(next, batch);
    if (start >= t->planes) return 0;
    *first = start;
    *end = start + batch < t->planes ? start + batch : t->planes;
    return 1;
}

static inline const char *plane_ptr(const char *base, const int64_t *strides, int64_t p, int64_t c_count) {
    return base + (p / c_count) * strides[0] + (p % c_count) * strides[1];
}

static void atomic_min(atomic_llong *target, long long value) {
    long long seen = atomic_load(target);
    while (value < seen && !atomic_compare_exchange_weak(target, &seen, value)) {
    }
}

/* Largest index of ``n`` contiguous ones, read as unsigned: a negative index
 * reads larger than any plane. Plain loops the compiler vectorizes: for the
 * x86-64 baseline (SSE2, which has no unsigned 32-bit max) into compares and
 * blends that run at half the memory's speed (4 MB of int32 indices: 300 us
 * of one thread), hence the AVX2 build of the same loops (vpmaxud: 140 us,
 * the time of reading them), chosen with the conversions
 * (pyaclnn_accel_use_f16c). */
static inline __attribute__((always_inline)) uint64_t highest_contiguous_loops(const char *p, int size, int64_t n) {
    if (size == 8) {
        const uint64_t *v = (const uint64_t *)p;
        uint64_t highest = 0;
        for (int64_t i = 0; i < n; i++) highest = v[i] > highest ? v[i] : highest;
        return highest;
    }
    const uint32_t *v = (const uint32_t *)p;
    uint32_t highest = 0;
    for (int64_t i = 0; i < n; i++) highest = v[i] > highest ? v[i] : highest;
    /* int32 -1 must stay larger than any plane, also planes above UINT32_MAX */
    return highest > INT32_MAX ? UINT64_MAX : highest;
}

static uint64_t highest_contiguous_base(const char *p, int size, int64_t n) {
    return highest_contiguous_loops(p, size, n);
}

#if HAVE_F16C_PATH
__attribute__((target("avx2"))) static uint64_t highest_contiguous_avx2(const char *p, int size, int64_t n) {
    return highest_contiguous_loops(p, size, n);
}
#endif


static uint64_t highest_row(const char *row, int size, int64_t step, int64_t n) {
    if (step == size) return highest_contiguous(row, size, n);
    uint64_t highest = 0;
    for (int64_t w = 0; w < n; w++) {
        int64_t v = load_index(row + w * step, size);
        uint64_t u = v < 0 ? UINT64_MAX : (uint64_t)v;
        highest = u > highest ? u : highest;
    }
    return highest;
}

/* Whether ``n`` indices from ``ip`` (step ``step``) all lie in [lo, lo + span). */
#define IN_RANGE(TYPE, UTYPE)                                                                         \
    static inline __attribute__((always_inline)) int in_range_##TYPE(const char *ip, int64_t step,     \
                                                                     int64_t n, uint64_t lo,           \
                                                                     uint64_t span) {                  \
        UTYPE out = 0;                                                                                \
        if (step == (int64_t)sizeof(TYPE)) {                                                          \
            const UTYPE *v = (const UTYPE *)ip;                                                       \
            for (int64_t w = 0; w < n; w++) out |= (UTYPE)(v[w] - (UTYPE)lo) >= (UTYPE)span;           \
            return !out;                                                                              \
        }                                                                                             \
        for (int64_t w = 0; w < n; w++) out |= (UTYPE)(*(const UTYPE *)(ip + w * step) - (UTYPE)lo) >= (UTYPE)span; \
        return !out;                                                                                  \
    }
IN_RANGE(int32_t, uint32_t)
IN_RANGE(int64_t, uint64_t)

#if HAVE_F16C_PATH
/* in_range_* of contiguous indices, 4 int64 or 8 int32 lanes: (v - lo) ^ sign
 * = v + (sign - lo), compared signed against (span - 1) ^ sign. */
__attribute__((target("avx2"))) static inline int in_range_avx2(const char *ip, int size, int64_t n, uint64_t lo,
                                                                uint64_t span) {
    if (span == 0) return n == 0;
    __m256i bad = _mm256_setzero_si256();
    int64_t i = 0;
    int ok = 1;
    if (size == 8) {
        const int64_t *v = (const int64_t *)ip;
        const __m256i shift = _mm256_set1_epi64x((int64_t)(0x8000000000000000ull - lo));
        const __m256i limit = _mm256_set1_epi64x((int64_t)((span - 1) ^ 0x8000000000000000ull));
        for (; i + 4 <= n; i += 4) {
            const __m256i x = _mm256_add_epi64(_mm256_loadu_si256((const __m256i *)(v + i)), shift);
            bad = _mm256_or_si256(bad, _mm256_cmpgt_epi64(x, limit));
        }
        for (; i < n; i++) ok &= (uint64_t)v[i] - lo < span;
    } else {
        const int32_t *v = (const int32_t *)ip;
        const __m256i shift = _mm256_set1_epi32((int32_t)(0x80000000u - (uint32_t)lo));
        const __m256i limit = _mm256_set1_epi32((int32_t)(((uint32_t)span - 1) ^ 0x80000000u));
        for (; i + 8 <= n; i += 8) {
            const __m256i x = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(v + i)), shift);
            bad = _mm256_or_si256(bad, _mm256_cmpgt_epi32(x, limit));
        }
        for (; i < n; i++) ok &= (uint32_t)v[i] - (uint32_t)lo < (uint32_t)span;
    }
    return ok && _mm256_testz_si256(bad, bad);
}
#endif

/* Whether every index of a plane lies in the depths its output's windows
 * reach (any windows). Then the plane can be summed a slab of depths at a
 * time (write_slabs), in the same order. */
static inline __attribute__((always_inline)) int depths_hold_loops(const pool_backward *t, const char *ip,
                                                                   int avx2) {
    const int64_t od = t->out[2], oh = t->out[3], ow = t->out[4];
    const int64_t cells = t->in[1] * t->in[2];
    const int flat = t->is[4] == t->index_size && (oh == 1 || t->is[3] == t->index_size * ow);
    for (int64_t d = 0; d < od; d++) {
        const uint64_t lo = (uint64_t)(t->zlo[d] * cells), span = (uint64_t)((t->zhi[d] - t->zlo[d]) * cells);
        const char *slice = ip + d * t->is[2];
        const int64_t rows = flat ? 1 : oh, n = flat ? oh * ow : ow;
        for (int64_t h = 0; h < rows; h++) {
            const char *row = slice + h * t->is[3];
#if HAVE_F16C_PATH
            if (avx2 && t->is[4] == t->index_size) {
                if (!in_range_avx2(row, t->index_size, n, lo, span)) return 0;
                continue;
            }
#endif
            if (!(t->index_size == 8 ? in_range_int64_t(row, t->is[4], n, lo, span)
                                     : in_range_int32_t(row, t->is[4], n, lo, span)))
                return 0;
        }
    }
    return 1;
}

static int depths_hold_base(const pool_backward *t, const char *ip) { return depths_hold_loops(t, ip, 0); }
#if HAVE_F16C_PATH
__attribute__((target("avx2"))) static int depths_hold_avx2(const pool_backward *t, const char *ip) {
    return depths_hold_loops(t, ip, 1);
}
#endif

/* Index guard: find the first index outside [0, plane), before anything is
 * written. A plane whose indices are in range costs one vectorized pass; only
 * a plane holding a bad one is searched for its first. */
static void check_planes(pool_backward *t) {
    const int64_t od = t->out[2], oh = t->out[3], ow = t->out[4], per_plane = od * oh * ow;
    const int size = t->index_size;
    const uint64_t plane = (uint64_t)t->plane;
    /* contiguous planes of indices are scanned as one row */
    const int flat = t->is[4] == size && (oh == 1 || t->is[3] == size * ow) &&
                     (od == 1 || t->is[2] == size * ow * oh);
    int64_t first, end;
    while (take_planes(t, &t->next_check, t->batch, &first, &end)) {
        for (int64_t p = first; p < end; p++) {
            if (p * per_plane >= atomic_load(&t->first_bad)) break; /* an earlier one is known */
            const char *ip = plane_ptr(t->index, t->is, p, t->out[1]);
            if (t->by_slabs && depths_hold(t, ip)) { /* which implies every index in its plane */
                t->by_slabs[p] = 1;
                continue;
            }
            if (flat && highest_contiguous(ip, size, per_plane) < plane) continue;
            for (int64_t d = 0; d < od; d++) {
                for (int64_t h = 0; h < oh; h++) {
                    const char *row = ip + d * t->is[2] + h * t->is[3];
                    if (highest_row(row, size, t->is[4], ow) < plane) continue;
                    for (int64_t w = 0; w < ow; w++) {
                        int64_t v = load_index(row + w * t->is[4], size);
                        if (v < 0 || (uint64_t)v >= plane) {
                            atomic_min(&t->first_bad, ((p * od + d) * oh + h) * ow + w);
                            goto next_plane;
                        }
                    }
                }
            }
        next_plane:;
        }
        atomic_fetch_sub(&t->unchecked, 1);
    }
}

/* ``n`` values of ``dtype`` at byte step ``step`` from ``row``, as float32:
 * ``row`` itself when float32 and contiguous, else converted into ``buf``
 * (``bits`` holds strided 16-bit values on the way). */
static const float *widen(const char *row, int64_t step, int64_t n, int dtype, float *buf, uint16_t *bits) {
    if (dtype == DT_FLOAT32) {
        if (step == 4) return (const float *)row;
        for (int64_t w = 0; w < n; w++) memcpy(buf + w, row + w * step, 4);
        return buf;
    }
    const uint16_t *src = (const uint16_t *)row;
    if (step != 2) {
        for (int64_t w = 0; w < n; w++) memcpy(bits + w, row + w * step, 2);
        src = bits;
    }
    if (dtype == DT_FLOAT16) {
        half_to_float_row(src, buf, n);
    } else {
        for (int64_t w = 0; w < n; w++) buf[w] = bf16_to_float(src[w]);
    }
    return buf;
}

/* Whether grad_input's (D, H, W) planes are C-contiguous, of ``size``-byte elements. */
static int contiguous_planes(const pool_backward *t, int size) {
    const int64_t height = t->in[1], width = t->in[2];
    return t->gis[4] == size && (height == 1 || t->gis[3] == size * width) &&
           (t->in[0] == 1 || t->gis[2] == size * width * height);
}

/* Write the float32 values of ``depths`` depth slices (from depth ``d0`` of
 * the plane at ``dst``) into grad_input's dtype and strides, rounding once;
 * with ``clear``, the slices of ``acc`` are zero afterwards. */
static void store_slices(const pool_backward *t, float *acc, char *dst, int64_t d0, int64_t depths, uint16_t *bits,
                         int clear) {
    const int64_t height = t->in[1], width = t->in[2];
    const int size = t->dtype == DT_FLOAT32 ? 4 : 2;
    const int64_t step = t->gis[4];
    if (t->writer) { /* C-contiguous planes */
        if (clear && t->clear_writer) {
            t->clear_writer(acc, dst + d0 * t->gis[2], depths * height * width);
            return;
        }
        t->writer(acc, dst + d0 * t->gis[2], depths * height * width);
        if (clear) memset(acc, 0, (size_t)(depths * height * width) * sizeof(float));
        return;
    }
    for (int64_t d = d0; d < d0 + depths; d++) {
        for (int64_t h = 0; h < height; h++) {
            const float *src = acc + ((d - d0) * height + h) * width;
            char *row = dst + d * t->gis[2] + h * t->gis[3];
            if (size == 4) {
                for (int64_t w = 0; w < width; w++) memcpy(row + w * step, src + w, 4);
                continue;
            }
            uint16_t *out = step == 2 ? (uint16_t *)row : bits;
            if (t->dtype == DT_FLOAT16) {
                float_to_half_row(src, out, width);
            } else {
                for (int64_t w = 0; w < width; w++) out[w] = float_to_bf16(src[w]);
            }
            if (out == bits)
                for (int64_t w = 0; w < width; w++) memcpy(row + w * step, bits + w, 2);
        }
    }
    if (clear) memset(acc, 0, (size_t)(depths * height * width) * sizeof(float));
}

/* Write a plane's float32 sums into grad_input's dtype and strides, rounding once. */
static void store_plane(const pool_backward *t, float *acc, char *dst, uint16_t *bits) {
    store_slices(t, acc, dst, 0, t->in[0], bits, 0);
}

/* acc[index] += gradient over one row, in C order. */
#define SCATTER_ROW(TYPE)                                                                   \
    static void scatter_row_##TYPE(float *acc, const float *g, const char *ip, int64_t step, \
                                   int64_t n) {                                            \
        if (step == (int64_t)sizeof(TYPE)) {                                                \
            const TYPE *index = (const TYPE *)ip;                                           \
            for (int64_t w = 0; w < n; w++) acc[index[w]] += g[w];                          \
            return;                                                                         \
        }                                                                                   \
        for (int64_t w = 0; w < n; w++) acc[*(const TYPE *)(ip + w * step)] += g[w];        \
    }                                                                                       \
    static void scatter_pair_##TYPE(float *const acc[2], const float *const g[2],           \
                                    const char *const ip[2], int64_t step, int64_t n) {     \
        float *a0 = acc[0], *a1 = acc[1];                                                   \
        const float *g0 = g[0], *g1 = g[1];                                                 \
        if (step == (int64_t)sizeof(TYPE)) {                                                \
            const TYPE *i0 = (const TYPE *)ip[0], *i1 = (const TYPE *)ip[1];                \
            for (int64_t w = 0; w < n; w++) {                                               \
                a0[i0[w]] += g0[w];                                                         \
                a1[i1[w]] += g1[w];                                                         \
            }                                                                               \
            return;                                                                         \
        }                                                                                   \
        for (int64_t w = 0; w < n; w++) {                                                   \
            a0[*(const TYPE *)(ip[0] + w * step)] += g0[w];                                 \
            a1[*(const TYPE *)(ip[1] + w * step)] += g1[w];                                 \
        }                                                                                   \
    }
SCATTER_ROW(int32_t)
SCATTER_ROW(int64_t)

/* ``count`` (1 or 2) planes from ``p`` whose indices depths_hold accepted:
 * summed in float32 in C order as in the plane path, but in a window of the
 * depths the current output depth reaches (in the caches); a depth the
 * windows have moved past is final, written out (rounded once) and dropped.
 * The window slides along a buffer of ``slab_room`` slices and is moved back
 * to its start only when it reaches the end (moving the kept slices at every
 * output depth made k3 s1 with int32 indices 4% slower than whole planes;
 * sliding, it takes as long as they do). The buffer is zero outside the
 * window (cleared once per scratch, then by the writes that take slices out:
 * one pass instead of a memset of every new slice, 0.84x the one-thread time
 * of the fp16 k3 s2 benchmark case). Two
 * planes go side by side, their gradients interleaved, as in the plane path. */
static void write_slabs(pool_backward *t, int64_t p, int count, float *bufs, float *wide[2], uint16_t *bits) {
    const int64_t od = t->out[2], oh = t->out[3], ow = t->out[4], depth = t->in[0];
    const int64_t cells = t->in[1] * t->in[2];
    const char *gp[2], *ip[2];
    char *dst[2];
    float *buf[2];
    for (int k = 0; k < count; k++) {
        gp[k] = plane_ptr(t->grad, t->gs, p + k, t->out[1]);
        ip[k] = plane_ptr(t->index, t->is, p + k, t->out[1]);
        dst[k] = (char *)plane_ptr(t->grad_input, t->gis, p + k, t->out[1]);
        buf[k] = bufs + k * t->slab_room * cells;
    }
    /* the window holds depths [base, top) from slice ``at`` of the buffer; depths below base are written */
    int64_t base = 0, top = 0, at = 0;
    for (int64_t d = 0; d <= od; d++) {
        const int64_t z0 = d < od ? t->zlo[d] : depth, z1 = d < od ? t->zhi[d] : depth;
        /* write the depths below z0: those summed, then zeros up to z0 */
        const int64_t done = top < z0 ? top : z0, keep = top > z0 ? top - z0 : 0;
        for (int k = 0; k < count; k++) {
            /* written slices are cleared as they go: the buffer outside the window stays zero */
            if (done > base) store_slices(t, buf[k] + at * cells, dst[k], base, done - base, bits, 1);
            if (top < z0) /* nothing kept: the whole buffer is zero, any slice will do */
                for (int64_t z = top; z < z0; z++) store_slices(t, buf[k], dst[k], z, 1, bits, 0);
        }
        if (d == od) break;
        /* the window moves to [z0, z1): keep its slices from z0 on; the new ones are zero already */
        int64_t next = keep ? at + (z0 - base) : 0;
        for (int k = 0; k < count; k++) {
            if (next + (z1 - z0) > t->slab_room && keep) { /* past the end: back to the start */
                memmove(buf[k], buf[k] + next * cells, (size_t)(keep * cells) * sizeof(float));
                /* the kept slices' old place, outside the new window: zero again */
                const int64_t low = next > keep ? next : keep;
                memset(buf[k] + low * cells, 0, (size_t)((next + keep - low) * cells) * sizeof(float));
            }
        }
        if (next + (z1 - z0) > t->slab_room) next = 0;
        at = next;
        base = z0;
        top = z1;
        /* Where plane index 0 would be: depth z0 of the plane sits at the slab's `at`, so a
         * plane index lands in the slab through the plane path's own scatter. */
        const int64_t shift = (at - z0) * cells;
        float *origin[2] = {buf[0] + shift, count == 2 ? buf[1] + shift : NULL};
        for (int64_t h = 0; h < oh; h++) {
            const float *g[2];
            const char *irow[2];
            for (int k = 0; k < count; k++) {
                g[k] = widen(gp[k] + d * t->gs[2] + h * t->gs[3], t->gs[4], ow, t->dtype, wide[k], bits);
                irow[k] = ip[k] + d * t->is[2] + h * t->is[3];
            }
            if (count == 2) {
                if (t->index_size == 8)
                    scatter_pair_int64_t(origin, g, irow, t->is[4], ow);
                else
                    scatter_pair_int32_t(origin, g, irow, t->is[4], ow);
            } else if (t->index_size == 8) {
                scatter_row_int64_t(origin[0], g[0], irow[0], t->is[4], ow);
            } else {
                scatter_row_int32_t(origin[0], g[0], irow[0], t->is[4], ow);
            }
        }
    }
}

/* What the float32 sum gives a cell that receives the gradient of bits ``g``
 * alone: +0 + g rounded back, that is g itself, except +0 for -0 and a quiet
 * NaN for a signalling one (float32 and float16 keep the payload, as the
 * adds and VCVTPS2PH do; bfloat16 gives 0x7FC0 with the sign, as float_to_bf16). */
static inline uint32_t alone_bits(uint32_t g, int dtype) {
    /* written as selects, which the compiler turns into conditional moves */
    if (dtype == DT_FLOAT32) {
        const uint32_t magnitude = g & 0x7FFFFFFFu;
        const uint32_t quiet = magnitude > 0x7F800000u ? 0x00400000u : 0;
        return magnitude ? g | quiet : 0;
    }
    const uint32_t magnitude = g & 0x7FFFu;
    if (dtype == DT_FLOAT16) {
        const uint32_t quiet = magnitude > 0x7C00u ? 0x0200u : 0;
        return magnitude ? g | quiet : 0;
    }
    const uint32_t nan = (g & 0x8000u) | 0x7FC0u;
    return magnitude > 0x7F80u ? nan : magnitude ? g : 0;
}

#if HAVE_F16C_PATH
/* copy_clear's streaming copy in 32-byte stores (from a 32-byte aligned byte of dst on),
 * 64 bytes a step: half the instructions of the 16-byte one, as in
 * float_plane_to_half_f16c_stream. */
__attribute__((target("avx"))) static void stream_copy_clear_avx(char *src, char *dst, size_t bytes) {
    size_t head = (size_t)(-(uintptr_t)dst & 31);
    if (head > bytes) head = bytes;
    memcpy(dst, src, head);
    memset(src, 0, head);
    const __m256i zero = _mm256_setzero_si256();
    size_t i = head;
    for (; i + 64 <= bytes; i += 64) { /* cleared in the same pass, while in L1 */
        const __m256i a = _mm256_loadu_si256((const __m256i *)(src + i));
        const __m256i b = _mm256_loadu_si256((const __m256i *)(src + i + 32));
        _mm256_stream_si256((__m256i *)(dst + i), a);
        _mm256_stream_si256((__m256i *)(dst + i + 32), b);
        _mm256_storeu_si256((__m256i *)(src + i), zero);
        _mm256_storeu_si256((__m256i *)(src + i + 32), zero);
    }
    memcpy(dst + i, src + i, bytes - i);
    memset(src + i, 0, bytes - i);
}
#endif

/* Copy ``bytes`` from ``src`` to ``dst`` and clear ``src`` (to +0), with
 * streaming stores into ``dst`` where the CPU has them and ``stream`` asks
 * for them (large outputs: see STREAM_MIN_BYTES). */
static void copy_clear(char *src, char *dst, size_t bytes, int stream) {
#if HAVE_F16C_PATH
    if (stream && avx_copies) {
        stream_copy_clear_avx(src, dst, bytes);
        return;
    }
    if (stream) {
        size_t head = (size_t)(-(uintptr_t)dst & 15);
        if (head > bytes) head = bytes;
        memcpy(dst, src, head);
        memset(src, 0, head);
        const __m128i zero = _mm_setzero_si128();
        size_t i = head;
        for (; i + 32 <= bytes; i += 32) { /* cleared in the same pass, while in L1 */
            _mm_stream_si128((__m128i *)(dst + i), _mm_loadu_si128((const __m128i *)(src + i)));
            _mm_stream_si128((__m128i *)(dst + i + 16), _mm_loadu_si128((const __m128i *)(src + i + 16)));
            _mm_storeu_si128((__m128i *)(src + i), zero);
            _mm_storeu_si128((__m128i *)(src + i + 16), zero);
        }
        memcpy(dst + i, src + i, bytes - i);
        memset(src + i, 0, bytes - i);
        return;
    }
#endif
    (void)stream;
    memcpy(dst, src, bytes);
    memset(src, 0, bytes);
}

/* Put the gradients of one row into the slab as lone cells (alone_bits);
 * false when a cell already held a nonzero value (an index the caller
 * repeated: a sum to round once, which this path cannot give; the row has
 * then overwritten it, and the caller clears the slab). A cell holding +0
 * from an earlier -0 or +0 gradient takes the new one as the sum would
 * (+0 + g). One variant per dtype and index type, with no branch a cell: the
 * row is the direct path's whole work per gradient (18 instructions a
 * gradient with the dtype tested per cell and a branch on every cell). */
#define PUT_ROW(NAME, ELEM, ITYPE, DTYPE)                                                              \
    static int put_row_##NAME(ELEM *slab, int64_t origin, const char *g, int64_t gstep, const char *ip, \
                              int64_t istep, int64_t n) {                                             \
        ELEM *base = slab - origin;                                                                   \
        ELEM held = 0;                                                                                \
        if (gstep == (int64_t)sizeof(ELEM) && istep == (int64_t)sizeof(ITYPE)) {                      \
            const ELEM *gv = (const ELEM *)g;                                                         \
            const ITYPE *iv = (const ITYPE *)ip;                                                      \
            for (int64_t w = 0; w < n; w++) {                                                         \
                ELEM *cell = base + iv[w];                                                            \
                held |= *cell;                                                                        \
                *cell = (ELEM)alone_bits(gv[w], DTYPE);                                               \
            }                                                                                         \
            return !held;                                                                             \
        }                                                                                             \
        for (int64_t w = 0; w < n; w++) {                                                             \
            ELEM bits;                                                                                \
            memcpy(&bits, g + w * gstep, sizeof bits);                                                \
            ELEM *cell = base + *(const ITYPE *)(ip + w * istep);                                     \
            held |= *cell;                                                                            \
            *cell = (ELEM)alone_bits(bits, DTYPE);                                                    \
        }                                                                                             \
        return !held;                                                                                 \
    }
PUT_ROW(f32_i32, uint32_t, int32_t, DT_FLOAT32)
PUT_ROW(f32_i64, uint32_t, int64_t, DT_FLOAT32)
PUT_ROW(f16_i32, uint16_t, int32_t, DT_FLOAT16)
PUT_ROW(f16_i64, uint16_t, int64_t, DT_FLOAT16)
PUT_ROW(bf16_i32, uint16_t, int32_t, DT_BFLOAT16)
PUT_ROW(bf16_i64, uint16_t, int64_t, DT_BFLOAT16)

static int put_row(const pool_backward *t, void *slab, int64_t origin, const char *g, const char *ip) {
    const int64_t n = t->out[4], gstep = t->gs[4], istep = t->is[4];
    const int wide = t->index_size == 8;
    switch (t->dtype) {
    case DT_FLOAT32:
        return wide ? put_row_f32_i64(slab, origin, g, gstep, ip, istep, n)
                    : put_row_f32_i32(slab, origin, g, gstep, ip, istep, n);
    case DT_FLOAT16:
        return wide ? put_row_f16_i64(slab, origin, g, gstep, ip, istep, n)
                    : put_row_f16_i32(slab, origin, g, gstep, ip, istep, n);
    default:
        return wide ? put_row_bf16_i64(slab, origin, g, gstep, ip, istep, n)
                    : put_row_bf16_i32(slab, origin, g, gstep, ip, istep, n);
    }
}

/* A plane whose indices depths_hold accepted, for windows that do not overlap
 * on any axis (t->disjoint: no two outputs of the forward share a cell, and
 * the output depths' input depths are disjoint): every cell receives at most
 * one gradient, whose sum from +0 is the gradient's own bits (alone_bits), so
 * there is nothing to widen, add or round. The depths an output depth
 * reaches are assembled in grad_input's dtype in a slab (zero outside its
 * use, in the caches), then copied out and cleared; the depths no window
 * reaches are written from the zero slab. An index the caller repeated
 * inside a slab is found before the slab is written: the slab is cleared and
 * false returned, and the plane is summed by write_slabs instead (which
 * writes all of it again). grad_input's planes are C-contiguous. */
static int write_disjoint(pool_backward *t, int64_t p, char *slab) {
    const int64_t od = t->out[2], oh = t->out[3], depth = t->in[0];
    const int64_t cells = t->in[1] * t->in[2];
    const size_t size = t->dtype == DT_FLOAT32 ? 4 : 2, slice = (size_t)cells * size;
    const char *gp = plane_ptr(t->grad, t->gs, p, t->out[1]);
    const char *ip = plane_ptr(t->index, t->is, p, t->out[1]);
    char *dst = (char *)plane_ptr(t->grad_input, t->gis, p, t->out[1]);
    const int stream = t->writer != NULL;
    int64_t top = 0; /* the depths below are written */
    for (int64_t d = 0; d <= od; d++) {
        const int64_t z0 = d < od ? t->zlo[d] : depth, z1 = d < od ? t->zhi[d] : depth;
        for (; top < z0; top++) copy_clear(slab, dst + top * slice, slice, stream); /* zeros: slab unused */
        if (d == od) break;
        for (int64_t h = 0; h < oh; h++) {
            if (!put_row(t, slab, z0 * cells, gp + d * t->gs[2] + h * t->gs[3], ip + d * t->is[2] + h * t->is[3])) {
                memset(slab, 0, (size_t)(z1 - z0) * slice);
                return 0;
            }
        }
        copy_clear(slab, dst + z0 * slice, (size_t)(z1 - z0) * slice, stream);
        top = z1;
    }
    return 1;
}

static void scatter_planes(pool_backward *t) {
    const int64_t od = t->out[2], oh = t->out[3], ow = t->out[4], width = t->in[2];
    const int in_place = t->in_place, lanes = t->lanes;
    const int64_t row_len = ow > width ? ow : width;
    /* no float32 planes when every plane goes by slabs (the guard has marked them all) */
    int all_slabs = t->by_slabs != NULL;
    for (int64_t p = 0; all_slabs && p < t->planes; p++) all_slabs = t->by_slabs[p];
    const size_t acc_bytes = in_place || all_slabs ? 0 : (size_t)t->plane * sizeof(float);
    /* per lane: a row of widened gradients, then (lane 0) a row of 16-bit bits; 64-byte steps */
    const size_t buf_bytes = ((size_t)row_len * (sizeof(float) + sizeof(uint16_t)) + 63) & ~(size_t)63;
    /* slabs of the depths one output depth's windows reach, for write_slabs */
    const size_t slab_cells = (size_t)lanes * (size_t)t->slab_room * (size_t)t->in[1] * (size_t)width;
    const size_t slice_bytes = t->by_slabs ? (slab_cells * sizeof(float) + 63) & ~(size_t)63 : 0;
    /* write_disjoint's slab: the depths one output depth reaches, in grad_input's dtype */
    const size_t disjoint_bytes =
        t->disjoint ? ((size_t)t->slab * (size_t)t->in[1] * (size_t)width * (t->dtype == DT_FLOAT32 ? 4 : 2) + 63) &
                          ~(size_t)63
                    : 0;
    const size_t bytes = (size_t)lanes * (acc_bytes + buf_bytes) + slice_bytes + disjoint_bytes;
    char *scratch = scratch_alloc(bytes);
    if (!scratch) {
        atomic_store(&t->failed, 1);
        return;
    }
    float *bufs[2];
    for (int k = 0; k < lanes; k++) bufs[k] = (float *)(scratch + lanes * acc_bytes + k * buf_bytes);
    uint16_t *bits = (uint16_t *)(bufs[0] + row_len);
    float *slice = (float *)(scratch + lanes * (acc_bytes + buf_bytes));
    if (slice_bytes) memset(slice, 0, slice_bytes); /* write_slabs keeps it zero outside its window */
    char *disjoint = (char *)slice + slice_bytes;
    if (disjoint_bytes) memset(disjoint, 0, disjoint_bytes); /* write_disjoint keeps it zero */
    int64_t first, end, slabs = 0, lone = 0;
    while (take_planes(t, &t->next, lanes * t->batch, &first, &end)) {
        for (int64_t p = first, count; p < end; p += count) {
            const int slabs_here = t->by_slabs && t->by_slabs[p];
            count = p + 1 < end && lanes == 2 && (!t->by_slabs || t->by_slabs[p + 1] == slabs_here) ? 2 : 1;
            if (slabs_here && t->disjoint) {
                for (int k = 0; k < count; k++) {
                    if (write_disjoint(t, p + k, disjoint))
                        lone++;
                    else
                        write_slabs(t, p + k, 1, slice, bufs, bits);
                }
                slabs += count;
                continue;
            }
            if (slabs_here) {
                write_slabs(t, p, (int)count, slice, bufs, bits);
                slabs += count;
                continue;
            }
            const char *gp[2], *ip[2];
            char *dst[2];
            float *acc[2];
            for (int k = 0; k < count; k++) {
                gp[k] = plane_ptr(t->grad, t->gs, p + k, t->out[1]);
                ip[k] = plane_ptr(t->index, t->is, p + k, t->out[1]);
                dst[k] = (char *)plane_ptr(t->grad_input, t->gis, p + k, t->out[1]);
                acc[k] = in_place ? (float *)dst[k] : (float *)(scratch + k * acc_bytes);
                memset(acc[k], 0, (size_t)t->plane * sizeof(float));
            }
            for (int64_t d = 0; d < od; d++) {
                for (int64_t h = 0; h < oh; h++) {
                    const float *g[2];
                    const char *irow[2];
                    for (int k = 0; k < count; k++) {
                        g[k] = widen(gp[k] + d * t->gs[2] + h * t->gs[3], t->gs[4], ow, t->dtype, bufs[k], bits);
                        irow[k] = ip[k] + d * t->is[2] + h * t->is[3];
                    }
                    if (count == 2) {
                        if (t->index_size == 8)
                            scatter_pair_int64_t(acc, g, irow, t->is[4], ow);
                        else
                            scatter_pair_int32_t(acc, g, irow, t->is[4], ow);
                    } else if (t->index_size == 8) {
                        scatter_row_int64_t(acc[0], g[0], irow[0], t->is[4], ow);
                    } else {
                        scatter_row_int32_t(acc[0], g[0], irow[0], t->is[4], ow);
                    }
                }
            }
            if (!in_place)
                for (int k = 0; k < count; k++) store_plane(t, acc[k], dst[k], bits);
        }
    }
#if HAVE_F16C_PATH
    _mm_sfence(); /* store_plane's streaming stores are done before the call returns */
#endif
    scratch_free(scratch, bytes);
    atomic_fetch_add(&t->slab_planes, slabs);
    atomic_fetch_add(&t->disjoint_planes, lone);
}

/* Planes summed by write_slabs since the last reset, for tests. */
static atomic_llong slab_planes_total;

API long long pyaclnn_accel_slab_planes(int reset) {
    return reset ? atomic_exchange(&slab_planes_total, 0) : atomic_load(&slab_planes_total);
}

/* Planes written by write_disjoint since the last reset (also counted as slab planes), for tests. */
static atomic_llong disjoint_planes_total;

API long long pyaclnn_accel_disjoint_planes(int reset) {
    return reset ? atomic_exchange(&disjoint_planes_total, 0) : atomic_load(&disjoint_planes_total);
}

/* The whole backward in one parallel task (one wake-up of the workers): the
 * index guard over every plane, then, once no thread is still checking and
 * no bad index was found, the scatter. A thread out of planes to check waits
 * only for the other threads' planes in progress. */
static void backward_task(void *ctx) {
    pool_backward *t = ctx;
    if (t->out[2] * t->out[3] * t->out[4] > 0) {
        check_planes(t);
        if (!poll_zero(&t->unchecked)) /* a checking thread was descheduled */
            while (atomic_load(&t->unchecked) != 0) sched_yield();
        if (atomic_load(&t->first_bad) != INT64_MAX) return;
    }
    scatter_planes(t);
}

/*
 * grad_input = zeros + scatter-add of grad_output at the argmax positions.
 *
 * dtype: DT_FLOAT32/16/BF16 of grad_output and grad_input; index_size 4 or 8
 * (int32/int64); out_shape (N, C, Do, Ho, Wo) of grad_output and indices,
 * in_spatial (D, H, W) of grad_input. Sums run in float32 in the C order of
 * grad_output, rounded once per cell.
 *
 * params: the pooling's (kernel, stride, padding, dilation), 3 each (depth,
 * height, width), or NULL. With them, a plane whose indices all lie in the
 * depths their outputs' windows reach is summed a slab of depths at a time
 * (write_slabs); the others, and every plane without params, in whole
 * float32 planes. The same additions in the same order either way.
 *
 * Returns RC_OK; RC_BAD_INDEX with *bad = the C-order position of the first
 * index outside [0, D*H*W), before anything is written; or RC_NO_MEMORY (after
 * grad_input may have been partly written).
 */
API int pyaclnn_max_pool3d_backward(intptr_t grad, const int64_t *grad_strides, int dtype, intptr_t index,
                                    const int64_t *index_strides, int index_size, intptr_t grad_input,
                                    const int64_t *grad_input_strides, const int64_t *out_shape,
                                    const int64_t *in_spatial, const int64_t *params, int threads,
                                    int64_t *bad) {
    pool_backward t = {.grad = (const char *)grad, .index = (const char *)index, .grad_input = (char *)grad_input,
                       .dtype = dtype, .index_size = index_size};
    memcpy(t.gs, grad_strides, sizeof t.gs);
    memcpy(t.is, index_strides, sizeof t.is);
    memcpy(t.gis, grad_input_strides, sizeof t.gis);
    memcpy(t.out, out_shape, sizeof t.out);
    memcpy(t.in, in_spatial, sizeof t.in);
    t.plane = t.in[0] * t.in[1] * t.in[2];
    t.planes = t.out[0] * t.out[1];
    if (t.planes == 0 || t.plane == 0) return RC_OK; /* nothing to write (as the NumPy kernel) */
    /* Grab planes a few at a time so tiny planes do not contend on the counter. */
    const int64_t work = t.plane + t.out[2] * t.out[3] * t.out[4];
    t.batch = work >= 4096 ? 1 : 4096 / (work + 1) + 1;
    if (threads > t.planes) threads = (int)t.planes;
    /* A small grad_input stays in the caches for whoever reads it next. */
    const int size = dtype == DT_FLOAT32 ? 4 : 2;
    if ((uint64_t)t.planes * (uint64_t)t.plane * (uint64_t)size >= STREAM_MIN_BYTES && contiguous_planes(&t, size))
        t.writer = stream_plane[dtype];
    t.clear_writer = t.writer ? stream_plane_clear[dtype] : NULL;
    /* A small float32 grad_input with C-contiguous planes is summed in place. The
     * others are summed in scratch planes, two at a time when there are enough
     * planes (scratch of 2 planes a thread stays within half the float32 sums):
     * their gradients interleaved, the two planes' sums being independent, a
     * run of gradients into one cell (a chain of dependent adds) overlaps with
     * the other plane's work. CPU time of the k3 s1 benchmark case 0.9x. */
    t.in_place = dtype == DT_FLOAT32 && !t.writer && contiguous_planes(&t, 4);
    t.lanes = !t.in_place && t.planes >= 4 * (int64_t)threads ? 2 : 1;
    int64_t *windows = NULL;
    size_t window_bytes = 0;
    /* (int32 indices: the depths' bounds are compared in 32 bits) */
    if (params && t.out[2] * t.out[3] * t.out[4] > 0 && (index_size == 8 || t.plane <= INT32_MAX)) {
        /* zlo and zhi; a flag per plane */
        window_bytes = (size_t)(2 * t.out[2]) * sizeof(int64_t) + (size_t)t.planes;
        windows = scratch_alloc(window_bytes);
        if (windows) {
            t.zlo = windows;
            t.zhi = windows + t.out[2];
            t.slab = 1;
            for (int64_t d = 0; d < t.out[2]; d++) {
                const int64_t start = d * params[3] - params[6], stop = start + (params[0] - 1) * params[9] + 1;
                t.zlo[d] = start < 0 ? 0 : start > t.in[0] ? t.in[0] : start;
                t.zhi[d] = stop < t.zlo[d] ? t.zlo[d] : stop > t.in[0] ? t.in[0] : stop;
                if (t.zhi[d] - t.zlo[d] > t.slab) t.slab = t.zhi[d] - t.zlo[d];
            }
            /* room for the window to slide 4 of its sizes (within the depths) before it moves back */
            t.slab_room = 4 * t.slab < t.in[0] ? 4 * t.slab : t.in[0] > t.slab ? t.in[0] : t.slab;
            t.by_slabs = (unsigned char *)(windows + 2 * t.out[2]);
            memset(t.by_slabs, 0, (size_t)t.planes);
            /* a window's extent is (kernel - 1) * dilation + 1: no overlap when the stride reaches past it */
            t.disjoint = contiguous_planes(&t, size);
            for (int a = 0; a < 3; a++) t.disjoint &= params[3 + a] >= (params[a] - 1) * params[9 + a] + 1;
        }
    }

    atomic_init(&t.failed, 0);
    atomic_init(&t.slab_planes, 0);
    atomic_init(&t.disjoint_planes, 0);
    atomic_init(&t.next_check, 0);
    atomic_init(&t.unchecked, (t.planes + t.batch - 1) / t.batch);
    atomic_init(&t.next, 0);
    atomic_init(&t.first_bad, INT64_MAX);
    run_parallel(backward_task, &t, threads);
    scratch_free(windows, window_bytes);
    atomic_fetch_add(&slab_planes_total, atomic_load(&t.slab_planes));
    atomic_fetch_add(&disjoint_planes_total, atomic_load(&t.disjoint_planes));
    long long first_bad = atomic_load(&t.first_bad);
    if (first_bad != INT64_MAX) {
        *bad = first_bad;
        return RC_BAD_INDEX;
    }
    return atomic_load(&t.failed) ? RC_NO_MEMORY : RC_OK;
}

/* ------------------------------------------------------------------------
 * Max-pool forward (see pyaclnn/kernels/max_pool3d.py, the reference)
 * ------------------------------------------------------------------------ */

typedef struct {
    const char *input;
    char *out, *index;
    int64_t xs[5], os[5], is[5]; /* byte strides */
    int64_t in[5];               /* N, C, D, H, W */
    int64_t o[3];                /* Do, Ho, Wo */
    int64_t k[3], s[3], p[3], d[3];
    int dtype, size, index_size;
    atomic_llong next;           /* next (plane, output depth) row to take */
    atomic_int failed;           /* a worker could not allocate its scratch */
} pool_forward;

/* One axis of a window: the first in-bounds cell (the start moved right by
 * whole dilations, as PyTorch does; it may lie past the end) and one past
 * the last cell the window reaches. */
static inline void window_axis(int64_t o, int64_t k, int64_t s, int64_t p, int64_t d, int64_t length,
                               int64_t *start, int64_t *first, int64_t *end) {
    *start = o * s - p;
    *first = *start < 0 ? *start + (-*start + d - 1) / d * d : *start;
    int64_t reach = *start + (k - 1) * d + 1;
    *end = reach < length ? reach : length;
}

/* The input row at ``row`` as float32, split into ``sw`` phases: phase r
 * holds cells r, r + sw, ... at phases + r * plen (the widened row itself
 * when sw is 1). */
static const float *phase_row(const pool_forward *t, const char *row, float *wide, uint16_t *bits,
                              float *phases, int64_t plen) {
    const int64_t width = t->in[4], sw = t->s[2];
    const float *v = widen(row, t->xs[4], width, t->dtype, wide, bits);
    if (sw == 1) return v;
    if (sw == 2) { /* the common stride, in a loop the compiler vectorizes */
        for (int64_t i = 0; i < width / 2; i++) {
            phases[i] = v[2 * i];
            phases[plen + i] = v[2 * i + 1];
        }
        if (width & 1) phases[width / 2] = v[width - 1];
        return phases;
    }
    for (int64_t r = 0; r < sw; r++)
        for (int64_t i = 0, w = r; w < width; i++, w += sw) phases[r * plen + i] = v[w];
    return phases;
}

/* Over the outputs [lo, hi) of a row, output i reading v[i] (cell base + i * sw):
 * the cell wins when greater than best[i] or NaN. Plain loops the compiler
 * vectorizes (int32 cells: the Python side keeps planes below 2**31); the
 * AVX2 build is chosen at load with the other SIMD paths. */
static inline __attribute__((always_inline)) void take_max_loops(float *restrict best, int32_t *restrict index,
                                                                  const float *restrict v, int32_t lo, int32_t hi,
                                                                  int32_t base, int32_t sw) {
    for (int32_t i = lo; i < hi; i++) {
        const float x = v[i];
        const int take = (x > best[i]) | (x != x);
        best[i] = take ? x : best[i];
        index[i] = take ? base + i * sw : index[i];
    }
}

static void take_max_base(float *best, int32_t *index, const float *v, int32_t lo, int32_t hi, int32_t base,
                          int32_t sw) {
    take_max_loops(best, index, v, lo, hi, base, sw);
}

#if HAVE_F16C_PATH
__attribute__((target("avx2"))) static void take_max_avx2(float *best, int32_t *index, const float *v, int32_t lo,
                                                           int32_t hi, int32_t base, int32_t sw) {
    take_max_loops(best, index, v, lo, hi, base, sw);
}
#endif

/* A row of outputs: the winners as ``t->dtype`` (their exact bits: a float32
 * maximum is the input's value, a 16-bit one was widened exactly; a 16-bit
 * NaN is read again from the input for its payload; a window over padding
 * only kept -inf), and their cells as int32 or int64. */
static void store_row(const pool_forward *t, const char *x, const float *best, const int32_t *index, char *orow,
                      char *irow, uint16_t *bits) {
    const int64_t count = t->o[2], ostep = t->os[4], istep = t->is[4];
    if (t->dtype == DT_FLOAT32) {
        if (ostep == 4)
            memcpy(orow, best, (size_t)count * 4);
        else
            for (int64_t i = 0; i < count; i++) memcpy(orow + i * ostep, best + i, 4);
    } else {
        if (t->dtype == DT_FLOAT16) {
            float_to_half_row(best, bits, count);
        } else {
            for (int64_t i = 0; i < count; i++) bits[i] = float_to_bf16(best[i]);
        }
        const int64_t hw = t->in[3] * t->in[4];
        for (int64_t i = 0; i < count; i++) {
            if (best[i] != best[i]) {
                const int64_t z = index[i] / hw, y = index[i] / t->in[4] % t->in[3], w = index[i] % t->in[4];
                memcpy(bits + i, x + z * t->xs[2] + y * t->xs[3] + w * t->xs[4], 2);
            }
        }
        if (ostep == 2)
            memcpy(orow, bits, (size_t)count * 2);
        else
            for (int64_t i = 0; i < count; i++) memcpy(orow + i * ostep, bits + i, 2);
    }
    if (t->index_size == 4 && istep == 4) {
        memcpy(irow, index, (size_t)count * 4);
    } else if (t->index_size == 8 && istep == 8) {
        int64_t *wide = (int64_t *)irow;
        for (int64_t i = 0; i < count; i++) wide[i] = index[i];
    } else {
        for (int64_t i = 0; i < count; i++) {
            const int64_t wide = index[i];
            memcpy(irow + i * istep, t->index_size == 8 ? (const void *)&wide : (const void *)(index + i),
                   (size_t)t->index_size);
        }
    }
}

static void forward_task(void *ctx) {
    pool_forward *t = ctx;
    const int64_t depth = t->in[2], height = t->in[3], width = t->in[4];
    const int64_t od_count = t->o[0], oh_count = t->o[1], ow_count = t->o[2];
    const int64_t sw = t->s[2], pw = t->p[2], dw = t->d[2];
    const int64_t plen = (width + sw - 1) / sw;
    const int64_t rows = t->in[0] * t->in[1] * od_count;
    /* a widened row, its 16-bit bits, its phases; per output: best, index, first cell along W */
    const int64_t bits_len = width > ow_count ? width : ow_count;
    const int64_t kw = t->k[2];
    const size_t bytes = (size_t)width * 4 + (size_t)bits_len * 2 + (size_t)(sw * plen) * 4 + (size_t)ow_count * 16 +
                         (size_t)kw * 32 + 64;
    char *scratch = scratch_alloc(bytes);
    if (!scratch) {
        atomic_store(&t->failed, 1);
        return;
    }
    float *wide = (float *)scratch, *phases = wide + width, *best = phases + sw * plen;
    int32_t *index = (int32_t *)(best + ow_count);
    int64_t *first_w = (int64_t *)(((uintptr_t)(index + ow_count) + 7) & ~(uintptr_t)7);
    /* per kernel offset along W: where its cells are in the phases, and the outputs it reaches */
    int64_t *from = first_w + ow_count, *cell = from + kw, *lo = cell + kw, *hi = lo + kw;
    uint16_t *bits = (uint16_t *)(hi + kw);
    for (int64_t ow = 0; ow < ow_count; ow++) {
        int64_t start, end;
        window_axis(ow, kw, sw, pw, dw, width, &start, &first_w[ow], &end);
    }
    for (int64_t j = 0; j < kw; j++) {
        /* output ow reads cell ow * sw + rel: phase (rel mod sw), entry ow + shift */
        const int64_t rel = j * dw - pw;
        const int64_t phase = ((rel % sw) + sw) % sw;
        from[j] = phase * plen + (rel - phase) / sw;
        cell[j] = rel;
        lo[j] = rel < 0 ? (-rel + sw - 1) / sw : 0;
        hi[j] = width - 1 - rel < 0 ? 0 : (width - 1 - rel) / sw + 1;
        if (hi[j] > ow_count) hi[j] = ow_count;
    }
    for (int64_t r; (r = atomic_fetch_add(&t->next, 1)) < rows;) {
        const int64_t plane = r / od_count, od = r % od_count;
        const int64_t n = plane / t->in[1], c = plane % t->in[1];
        const char *x = t->input + n * t->xs[0] + c * t->xs[1];
        int64_t zs, z0, z1;
        window_axis(od, t->k[0], t->s[0], t->p[0], t->d[0], depth, &zs, &z0, &z1);
        for (int64_t oh = 0; oh < oh_count; oh++) {
            int64_t ys, y0, y1;
            window_axis(oh, t->k[1], t->s[1], t->p[1], t->d[1], height, &ys, &y0, &y1);
            /* start: -inf and the first in-bounds cell (beyond the plane for padding only) */
            const int64_t first = (z0 * height + y0) * width;
            for (int64_t ow = 0; ow < ow_count; ow++) {
                best[ow] = -INFINITY;
                index[ow] = (int32_t)(first + first_w[ow]);
            }
            for (int64_t z = z0; z < z1; z += t->d[0]) {
                for (int64_t y = y0; y < y1; y += t->d[1]) {
                    const float *v = phase_row(t, x + z * t->xs[2] + y * t->xs[3], wide, bits, phases, plen);
                    const int64_t row_cell = (z * height + y) * width;
                    for (int64_t j = 0; j < kw; j++)
                        if (lo[j] < hi[j])
                            take_max(best, index, v + from[j], (int32_t)lo[j], (int32_t)hi[j],
                                     (int32_t)(row_cell + cell[j]), (int32_t)sw);
                }
            }
            char *orow = t->out + n * t->os[0] + c * t->os[1] + od * t->os[2] + oh * t->os[3];
            char *irow = t->index + n * t->is[0] + c * t->is[1] + od * t->is[2] + oh * t->is[3];
            store_row(t, x, best, index, orow, irow, bits);
        }
    }
    scratch_free(scratch, bytes);
}

/*
 * out, indices = max pooling of input, as pyaclnn.kernels.max_pool3d.max_pool3d_with_argmax:
 * the in-bounds cells of each window in d, h, w order from -inf and the first
 * in-bounds cell; a cell wins when greater than the running maximum or NaN
 * (ties: the first maximum; NaN: the last NaN). out gets the winner's exact
 * bits; a window over padding only gives -inf and its first cell's index.
 *
 * dtype: DT_FLOAT32/16/BF16 of input and out; index_size 4 or 8; in_shape
 * (N, C, D, H, W); out_spatial (Do, Ho, Wo); params k[3], s[3], p[3], d[3]
 * (valid: k, s, d > 0, 0 <= p). Returns RC_OK, RC_NO_MEMORY (out partly
 * written) or RC_UNSUPPORTED for a plane whose cells, one dilation past each
 * end included (where a window over padding only starts), do not fit int32.
 */
API int pyaclnn_max_pool3d(intptr_t input, const int64_t *input_strides, int dtype, intptr_t out,
                           const int64_t *out_strides, intptr_t index, const int64_t *index_strides, int index_size,
                           const int64_t *in_shape, const int64_t *out_spatial, const int64_t *params, int threads) {
    pool_forward t = {.input = (const char *)input, .out = (char *)out, .index = (char *)index, .dtype = dtype,
                      .size = dtype == DT_FLOAT32 ? 4 : 2, .index_size = index_size};
    memcpy(t.xs, input_strides, sizeof t.xs);
    memcpy(t.os, out_strides, sizeof t.os);
    memcpy(t.is, index_strides, sizeof t.is);
    memcpy(t.in, in_shape, sizeof t.in);
    memcpy(t.o, out_spatial, sizeof t.o);
    for (int a = 0; a < 3; a++) {
        t.k[a] = params[a];
        t.s[a] = params[3 + a];
        t.p[a] = params[6 + a];
        t.d[a] = params[9 + a];
    }
    /* cells are int32 inside (take_max_loops), up to one dilation past each end */
    if ((t.in[2] + t.d[0]) * (t.in[3] + t.d[1]) * (t.in[4] + t.d[2]) > INT32_MAX) return RC_UNSUPPORTED;
    const int64_t rows = t.in[0] * t.in[1] * t.o[0];
    if (rows == 0 || t.o[1] * t.o[2] == 0 || t.in[2] * t.in[3] * t.in[4] == 0) return RC_OK;
    if (threads > rows) threads = (int)rows;
    atomic_init(&t.next, 0);
    atomic_init(&t.failed, 0);
    run_parallel(forward_task, &t, threads);
    return atomic_load(&t.failed) ? RC_NO_MEMORY : RC_OK;
}

/* ------------------------------------------------------------------------
 * GridSampler3D backward (see pyaclnn/kernels/grid_sampler3d.py, the reference)
 * ------------------------------------------------------------------------ */

enum { GS_BILINEAR = 0, GS_NEAREST = 1 };
enum { GS_ZEROS = 0, GS_BORDER = 1, GS_REFLECTION = 2 };

/* Points per scatter chunk: the NumPy kernel adds, per channel, chunk after
 * chunk of this many points, corner pair after corner pair; same order here. */
#define GS_CHUNK 8192

static inline float load_float(const char *p, int dtype) {
    if (dtype == DT_FLOAT32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return dtype == DT_FLOAT16 ? half_to_float_sw(h) : bf16_to_float(h);
}

static inline void store_float(char *p, int dtype, float f) {
    if (dtype == DT_FLOAT32) {
        memcpy(p, &f, 4);
        return;
    }
    uint16_t h = dtype == DT_FLOAT16 ? float_to_half_sw(f) : float_to_bf16(f);
    memcpy(p, &h, 2);
}

/* One axis of _source_index: unnormalize, pad, clip to the int32 sentinel.
 * ``*gpad`` is the padding's gradient factor (1 for zeros padding). */
static inline float gs_source(float c, float size, int padding, int align, float *gpad) {
    float i = align ? ((c + 1.0f) / 2.0f) * (size - 1.0f) : ((c + 1.0f) * size - 1.0f) / 2.0f;
    int bad = 0;
    float g = 1.0f;
    if (padding == GS_BORDER) {
        bad = isnan(i);
        g = (i > 0.0f && i < size - 1.0f) ? 1.0f : 0.0f;
        if (i < 0.0f) i = 0.0f;
        if (i > size - 1.0f) i = size - 1.0f;
    } else if (padding == GS_REFLECTION) {
        bad = !isfinite(i);
        float lo = align ? 0.0f : -0.5f;
        float span = align ? size - 1.0f : size;
        if (span == 0.0f) {
            i = 0.0f;
            g = 0.0f;
        } else {
            float t = i - lo;
            int neg = t < 0.0f;
            t = fabsf(t);
            float extra = fmodf(t, span);
            float flips = floorf(t / span);
            int odd = fmodf(flips, 2.0f) != 0.0f;
            i = odd ? (span - extra) + lo : extra + lo;
            g = neg != odd ? -1.0f : 1.0f;
        }
        float gc = (i > 0.0f && i < size - 1.0f) ? 1.0f : 0.0f;
        if (i < 0.0f) i = 0.0f;
        if (i > size - 1.0f) i = size - 1.0f;
        g *= gc;
    }
    int keep = (i >= -2147483648.0f) && (i <= (float)2147483646) && !bad;
    *gpad = g;
    return keep ? i : -100.0f;
}

typedef struct {
    const char *grad, *input, *grid;
    char *input_grad, *grid_grad;
    int64_t gs[5], is[5], grs[5], igs[5], ggs[5]; /* byte strides */
    int64_t N, C, D, H, W, Do, Ho, Wo, P;
    int64_t wp, hwp, mp;   /* padded layout (D+2, H+2, W+2), as _Geometry */
    int dtype, interp, padding, align;
    int64_t n;             /* batch item being processed */
    int64_t cb, blocks;    /* channels per scatter block, their count */
    char *out;             /* forward: the output (N, C, Do, Ho, Wo), else NULL */
    int64_t os[5];
    int64_t *base;         /* per point: padded index of the (z0, y0, x0) corner, or -1 */
    float *wts;            /* per point: wx0, wx1, wy0, wy1, wz0, wz1 (bilinear) */
    atomic_llong next;
    atomic_int failed;
} grid_backward;

/* Points per grab of the coordinate pass; the offset of a corner outside the input. */
#define GS_OUTSIDE INT64_MIN
#define GS_STEP 1024

/* Per-thread scratch of the coordinate pass. */
typedef struct {
    float *g;      /* C + 1: one point's gradOutput (point-outer dots) */
    int64_t *off;  /* 8 per point: byte offset of corner k in an input plane, or GS_OUTSIDE */
    int64_t *goff; /* per point: byte offset in a gradOutput plane */
    float *dots;   /* 8 per point */
    float *zero;   /* per point: sum of 0 * gOut (0, or NaN where gOut is not finite) */
    float *gpad;   /* 3 per point: the padding's gradient factors */
} gs_scratch;

#define GS_SCRATCH_BYTES(C) \
    ((size_t)((C) + 1) * sizeof(float) + (size_t)GS_STEP * (8 * sizeof(int64_t) + sizeof(int64_t) + 12 * sizeof(float)))

/* Coordinates (and gridGrad) of points [p0, p1) of batch item t->n. */
static void gs_points(const grid_backward *t, int64_t n, int64_t p0, int64_t p1, gs_scratch *s, int64_t *base,
                      float *wts) {
    const int64_t C = t->C;
    const float sx = (float)t->W, sy = (float)t->H, sz = (float)t->D;
    const int nearest = t->interp == GS_NEAREST;
    const int want_grid = t->grid_grad != NULL;
    int64_t w = p0 % t->Wo, h = (p0 / t->Wo) % t->Ho, d = p0 / (t->Wo * t->Ho);
    for (int64_t p = p0; p < p1; p++) {
        const int64_t q = p - p0;
        const char *gp = t->grid + n * t->grs[0] + d * t->grs[1] + h * t->grs[2] + w * t->grs[3];
        float gpx, gpy, gpz;
        float ix = gs_source(load_float(gp, t->dtype), sx, t->padding, t->align, &gpx);
        float iy = gs_source(load_float(gp + t->grs[4], t->dtype), sy, t->padding, t->align, &gpy);
        float iz = gs_source(load_float(gp + 2 * t->grs[4], t->dtype), sz, t->padding, t->align, &gpz);
        float fx, fy, fz;
        int ok;
        if (nearest) {
            fx = nearbyintf(ix), fy = nearbyintf(iy), fz = nearbyintf(iz);
            ok = fx >= -1.0f && fx <= sx && fy >= -1.0f && fy <= sy && fz >= -1.0f && fz <= sz;
        } else {
            fx = floorf(ix), fy = floorf(iy), fz = floorf(iz);
            ok = fx >= -1.0f && fx <= sx - 1.0f && fy >= -1.0f && fy <= sy - 1.0f && fz >= -1.0f &&
                 fz <= sz - 1.0f;
        }
        const int64_t x0 = ok ? (int64_t)fx : 0, y0 = ok ? (int64_t)fy : 0, z0 = ok ? (int64_t)fz : 0;
        base[q] = ok ? (z0 + 1) * t->hwp + (y0 + 1) * t->wp + (x0 + 1) : -1;
        if (!nearest) {
            float *wt = wts + 6 * q;
            wt[0] = (fx + 1.0f) - ix, wt[1] = ix - fx;
            wt[2] = (fy + 1.0f) - iy, wt[3] = iy - fy;
            wt[4] = (fz + 1.0f) - iz, wt[5] = iz - fz;
        }
        if (want_grid || t->out) {
            s->gpad[3 * q] = gpx, s->gpad[3 * q + 1] = gpy, s->gpad[3 * q + 2] = gpz;
            s->goff[q] = d * t->gs[2] + h * t->gs[3] + w * t->gs[4];
            for (int k = 0; k < 8; k++) {
                int64_t z = z0 + (k >> 2), y = y0 + ((k >> 1) & 1), x = x0 + (k & 1);
                int inside = ok && z >= 0 && z < t->D && y >= 0 && y < t->H && x >= 0 && x < t->W;
                s->off[8 * q + k] = inside ? z * t->is[2] + y * t->is[3] + x * t->is[4] : GS_OUTSIDE;
            }
        }
        if (++w == t->Wo) {
            w = 0;
            if (++h == t->Ho) h = 0, d++;
        }
    }
    if (!want_grid) return;
    const int64_t count = p1 - p0;
    const char *in_n = t->input + n * t->is[0], *go_n = t->grad + n * t->gs[0];
    /* dots[k] = sum_c V[corner k, c] * gOut[c], summed over c in order from +0;
     * a corner outside reads 0 (as the NumPy kernel's zero padding) */
    if (t->is[1] == (t->dtype == DT_FLOAT32 ? 4 : 2)) {
        /* channels-last input: point outer, each corner's channels contiguous */
        for (int64_t q = 0; q < count; q++) {
            float zero = 0.0f;
            for (int64_t c = 0; c < C; c++) {
                s->g[c] = load_float(go_n + s->goff[q] + c * t->gs[1], t->dtype);
                zero += 0.0f * s->g[c];
            }
            for (int k = 0; k < 8; k++) {
                const int64_t off = s->off[8 * q + k];
                float sum = 0.0f;
                if (off == GS_OUTSIDE) {
                    sum = zero;
                } else {
                    const char *v = in_n + off;
                    if (t->dtype == DT_FLOAT32 && t->is[1] == 4) {
                        const float *vf = (const float *)v;
                        for (int64_t c = 0; c < C; c++) sum += vf[c] * s->g[c];
                    } else {
                        for (int64_t c = 0; c < C; c++) sum += load_float(v + c * t->is[1], t->dtype) * s->g[c];
                    }
                }
                s->dots[8 * q + k] = sum;
            }
        }
    } else {
        /* channels outer: one input plane at a time stays in cache */
        for (int64_t q = 0; q < 8 * count; q++) s->dots[q] = 0.0f;
        for (int64_t q = 0; q < count; q++) s->zero[q] = 0.0f;
        for (int64_t c = 0; c < C; c++) {
            const char *plane = in_n + c * t->is[1], *gplane = go_n + c * t->gs[1];
            for (int64_t q = 0; q < count; q++) {
                const float g = load_float(gplane + s->goff[q], t->dtype);
                s->zero[q] += 0.0f * g;
                float *dq = s->dots + 8 * q;
                const int64_t *oq = s->off + 8 * q;
                for (int k = 0; k < 8; k++)
                    dq[k] += oq[k] == GS_OUTSIDE ? 0.0f * g : load_float(plane + oq[k], t->dtype) * g;
            }
        }
    }
    w = p0 % t->Wo, h = (p0 / t->Wo) % t->Ho, d = p0 / (t->Wo * t->Ho);
    const float mx = t->align ? (sx - 1.0f) / 2.0f : sx / 2.0f;
    const float my = t->align ? (sy - 1.0f) / 2.0f : sy / 2.0f;
    const float mz = t->align ? (sz - 1.0f) / 2.0f : sz / 2.0f;
    for (int64_t q = 0; q < count; q++) {
        const float *wt = wts + 6 * q;
        const float *dots = s->dots + 8 * q;
        const float wx0 = wt[0], wx1 = wt[1], wy0 = wt[2], wy1 = wt[3], wz0 = wt[4], wz1 = wt[5];
#define T(z, y, x) dots[4 * (z) + 2 * (y) + (x)]
        float gx = ((T(0, 0, 1) - T(0, 0, 0)) * wy0 + (T(0, 1, 1) - T(0, 1, 0)) * wy1) * wz0 +
                   ((T(1, 0, 1) - T(1, 0, 0)) * wy0 + (T(1, 1, 1) - T(1, 1, 0)) * wy1) * wz1;
        float gy = ((T(0, 1, 0) - T(0, 0, 0)) * wx0 + (T(0, 1, 1) - T(0, 0, 1)) * wx1) * wz0 +
                   ((T(1, 1, 0) - T(1, 0, 0)) * wx0 + (T(1, 1, 1) - T(1, 0, 1)) * wx1) * wz1;
        float gz = ((T(1, 0, 0) - T(0, 0, 0)) * wx0 + (T(1, 0, 1) - T(0, 0, 1)) * wx1) * wy0 +
                   ((T(1, 1, 0) - T(0, 1, 0)) * wx0 + (T(1, 1, 1) - T(0, 1, 1)) * wx1) * wy1;
#undef T
        gx *= mx, gy *= my, gz *= mz;
        if (t->padding != GS_ZEROS) gx *= s->gpad[3 * q], gy *= s->gpad[3 * q + 1], gz *= s->gpad[3 * q + 2];
        char *gg = t->grid_grad + n * t->ggs[0] + d * t->ggs[1] + h * t->ggs[2] + w * t->ggs[3];
        store_float(gg, t->dtype, gx);
        store_float(gg + t->ggs[4], t->dtype, gy);
        store_float(gg + 2 * t->ggs[4], t->dtype, gz);
        if (++w == t->Wo) {
            w = 0;
            if (++h == t->Ho) h = 0, d++;
        }
    }
}

/* One thread's gs_scratch and ``extra`` more bytes (64-byte aligned, at
 * *extra_at), in one allocation of *bytes; NULL, with t->failed set, when
 * there is no memory. Freed with scratch_free(mem, *bytes). */
static char *gs_scratch_alloc(grid_backward *t, size_t extra, gs_scratch *s, char **extra_at, size_t *bytes) {
    const size_t head = (GS_SCRATCH_BYTES(t->C) + 63) & ~(size_t)63;
    *bytes = head + extra;
    char *mem = scratch_alloc(*bytes);
    if (!mem) {
        atomic_store(&t->failed, 1);
        return NULL;
    }
    s->off = (int64_t *)mem;
    s->goff = s->off + 8 * GS_STEP;
    s->dots = (float *)(s->goff + GS_STEP);
    s->zero = s->dots + 8 * GS_STEP;
    s->gpad = s->zero + GS_STEP;
    s->g = s->gpad + 3 * GS_STEP;
    *extra_at = mem + head;
    return mem;
}

static void gs_points_task(void *ctx) {
    grid_backward *t = ctx;
    gs_scratch s;
    char *unused;
    size_t bytes;
    char *mem = gs_scratch_alloc(t, 0, &s, &unused, &bytes);
    if (!mem) return;
    for (;;) {
        int64_t p0 = atomic_fetch_add(&t->next, GS_STEP);
        if (p0 >= t->P) break;
        gs_points(t, t->n, p0, p0 + GS_STEP < t->P ? p0 + GS_STEP : t->P, &s, t->base + p0,
                  t->wts ? t->wts + 6 * p0 : NULL);
    }
    scratch_free(mem, bytes);
}

/* inputGrad of channels [c0, c0 + cb) of batch item t->n. ``lo`` and ``hi``
 * are (mp, cb) accumulators: the x0 and the x1 corners of a point are summed
 * apart and added at the end, as the NumPy kernel's complex pairs do. */
static void gs_scatter_block(grid_backward *t, int64_t c0, int64_t cb, float *lo, float *hi, float *g,
                             float *rowbuf, uint16_t *rowbits) {
    const int64_t n = t->n, P = t->P, Wo = t->Wo, Ho = t->Ho;
    const int nearest = t->interp == GS_NEAREST;
    memset(lo, 0, (size_t)(t->mp * cb) * sizeof(float));
    if (!nearest) memset(hi, 0, (size_t)(t->mp * cb) * sizeof(float));
    const int64_t off4[4] = {0, t->wp, t->hwp, t->hwp + t->wp};
    for (int64_t q0 = 0; q0 < P; q0 += GS_CHUNK) {
        const int64_t q1 = q0 + GS_CHUNK < P ? q0 + GS_CHUNK : P;
        /* this chunk's gradOutput of the block's channels, float32, (point, channel) */
        int64_t w = q0 % Wo, h = (q0 / Wo) % Ho, d = q0 / (Wo * Ho);
        const char *plane = t->grad + n * t->gs[0] + c0 * t->gs[1];
        for (int64_t p = q0; p < q1; p++) {
            const char *go = plane + d * t->gs[2] + h * t->gs[3] + w * t->gs[4];
            float *gp = g + (p - q0) * cb;
            if (t->dtype == DT_FLOAT32) {
                for (int64_t c = 0; c < cb; c++) memcpy(gp + c, go + c * t->gs[1], 4);
            } else {
                for (int64_t c = 0; c < cb; c++) gp[c] = load_float(go + c * t->gs[1], t->dtype);
            }
            if (++w == Wo) {
                w = 0;
                if (++h == Ho) h = 0, d++;
            }
        }
        if (nearest) {
            for (int64_t p = q0; p < q1; p++) {
                const int64_t b = t->base[p];
                if (b < 0) continue;
                float *a = lo + b * cb;
                const float *gp = g + (p - q0) * cb;
                for (int64_t c = 0; c < cb; c++) a[c] += gp[c];
            }
            continue;
        }
        for (int j = 0; j < 4; j++) {
            const int zi = 4 + (j >> 1), yi = 2 + (j & 1);
            for (int64_t p = q0; p < q1; p++) {
                const int64_t b = t->base[p];
                if (b < 0) continue;
                const float *wt = t->wts + 6 * p;
                const float w0 = (wt[0] * wt[yi]) * wt[zi], w1 = (wt[1] * wt[yi]) * wt[zi];
                const int64_t cell = b + off4[j];
                float *a0 = lo + cell * cb, *a1 = hi + (cell + 1) * cb;
                const float *gp = g + (p - q0) * cb;
                if (cb == 1) {
                    a0[0] += w0 * gp[0];
                    a1[0] += w1 * gp[0];
                    continue;
                }
                for (int64_t c = 0; c < cb; c++) a0[c] += w0 * gp[c];
                for (int64_t c = 0; c < cb; c++) a1[c] += w1 * gp[c];
            }
        }
    }
    /* the interior cells, rounded once into inputGrad's dtype and strides */
    for (int64_t c = 0; c < cb; c++) {
        char *dst = t->input_grad + n * t->igs[0] + (c0 + c) * t->igs[1];
        for (int64_t z = 0; z < t->D; z++) {
            for (int64_t y = 0; y < t->H; y++) {
                const int64_t row = ((z + 1) * t->hwp + (y + 1) * t->wp + 1) * cb + c;
                char *out = dst + z * t->igs[2] + y * t->igs[3];
                const int64_t step = t->igs[4];
                for (int64_t x = 0; x < t->W; x++) rowbuf[x] = nearest ? lo[row + x * cb] : lo[row + x * cb] + hi[row + x * cb];
                if (t->dtype == DT_FLOAT32) {
                    for (int64_t x = 0; x < t->W; x++) memcpy(out + x * step, rowbuf + x, 4);
                    continue;
                }
                uint16_t *bits = step == 2 ? (uint16_t *)out : rowbits;
                if (t->dtype == DT_FLOAT16)
                    float_to_half_row(rowbuf, bits, t->W);
                else
                    for (int64_t x = 0; x < t->W; x++) bits[x] = float_to_bf16(rowbuf[x]);
                if (bits == rowbits)
                    for (int64_t x = 0; x < t->W; x++) memcpy(out + x * step, rowbits + x, 2);
            }
        }
    }
}

static void gs_scatter_task(void *ctx) {
    grid_backward *t = ctx;
    const size_t plane = (size_t)(t->mp * t->cb) * sizeof(float);
    const size_t gbytes = (size_t)(GS_CHUNK * t->cb) * sizeof(float);
    const size_t rbytes = (size_t)t->W * (sizeof(float) + sizeof(uint16_t));
    const size_t bytes = (t->interp == GS_NEAREST ? 1 : 2) * plane + gbytes + rbytes;
    char *scratch = scratch_alloc(bytes);
    if (!scratch) {
        atomic_store(&t->failed, 1);
        return;
    }
    float *lo = (float *)scratch;
    float *hi = t->interp == GS_NEAREST ? lo : (float *)(scratch + plane);
    float *g = (float *)(scratch + bytes - gbytes - rbytes);
    float *rowbuf = (float *)(scratch + bytes - rbytes);
    uint16_t *rowbits = (uint16_t *)(rowbuf + t->W);
    for (;;) {
        int64_t block = atomic_fetch_add(&t->next, 1);
        if (block >= t->blocks) break;
        int64_t c0 = block * t->cb;
        int64_t cb = c0 + t->cb <= t->C ? t->cb : t->C - c0;
        gs_scatter_block(t, c0, cb, lo, hi, g, rowbuf, rowbits);
    }
    scratch_free(scratch, bytes);
}

/* The part of a grid-sampler call that the forward and the backward share:
 * t zeroed, then input and grid, the shapes, dtype and modes. */
static void gs_setup(grid_backward *t, intptr_t input, const int64_t *input_strides, intptr_t grid,
                     const int64_t *grid_strides, const int64_t *in_shape, const int64_t *out_spatial, int dtype,
                     int interp, int padding, int align) {
    memset(t, 0, sizeof *t);
    t->input = (const char *)input;
    t->grid = (const char *)grid;
    memcpy(t->is, input_strides, sizeof t->is);
    memcpy(t->grs, grid_strides, sizeof t->grs);
    t->N = in_shape[0], t->C = in_shape[1], t->D = in_shape[2], t->H = in_shape[3], t->W = in_shape[4];
    t->Do = out_spatial[0], t->Ho = out_spatial[1], t->Wo = out_spatial[2];
    t->P = t->Do * t->Ho * t->Wo;
    t->dtype = dtype, t->interp = interp, t->padding = padding, t->align = align;
    t->wp = t->W + 2, t->hwp = (t->H + 2) * t->wp, t->mp = (t->D + 2) * t->hwp;
}

/* gridGrad of nearest interpolation, which has no gradient with respect to the grid: zeros. */
static void gs_zero_grid_grad(const grid_backward *t, char *grid_grad) {
    for (int64_t n = 0; n < t->N; n++)
        for (int64_t d = 0; d < t->Do; d++)
            for (int64_t h = 0; h < t->Ho; h++)
                for (int64_t w = 0; w < t->Wo; w++)
                    for (int64_t k = 0; k < 3; k++)
                        store_float(grid_grad + n * t->ggs[0] + d * t->ggs[1] + h * t->ggs[2] + w * t->ggs[3] +
                                        k * t->ggs[4],
                                    t->dtype, 0.0f);
}

/*
 * inputGrad and gridGrad of grid sampling (aclnnGridSampler3DBackward).
 *
 * in_shape (N, C, D, H, W) of input (and inputGrad), out_spatial (Do, Ho, Wo)
 * of gradOutput and grid; strides in bytes. input_grad or grid_grad 0: not
 * wanted (at least one is given); gridGrad of nearest is written as zeros.
 * threads: of the pass over the points; scatter_threads: of inputGrad's
 * scatter. budget: scratch bytes allowed beyond the per-point cache, which
 * sets how many channels one scatter block takes.
 *
 * Returns RC_OK or RC_NO_MEMORY (outputs may be partly written).
 */
API int pyaclnn_grid_sampler3d_backward(intptr_t grad, const int64_t *grad_strides, intptr_t input,
                                        const int64_t *input_strides, intptr_t grid, const int64_t *grid_strides,
                                        intptr_t input_grad, const int64_t *input_grad_strides, intptr_t grid_grad,
                                        const int64_t *grid_grad_strides, const int64_t *in_shape,
                                        const int64_t *out_spatial, int dtype, int interp, int padding, int align,
                                        int threads, int scatter_threads, int64_t budget) {
    grid_backward t;
    gs_setup(&t, input, input_strides, grid, grid_strides, in_shape, out_spatial, dtype, interp, padding, align);
    t.grad = (const char *)grad;
    t.input_grad = (char *)input_grad;
    t.grid_grad = interp == GS_NEAREST ? NULL : (char *)grid_grad;
    memcpy(t.gs, grad_strides, sizeof t.gs);
    if (input_grad) memcpy(t.igs, input_grad_strides, sizeof t.igs);
    if (grid_grad) memcpy(t.ggs, grid_grad_strides, sizeof t.ggs);
    if (grid_grad && !t.grid_grad) gs_zero_grid_grad(&t, (char *)grid_grad); /* nearest: no gradient */
    if (!t.input_grad && !t.grid_grad) return RC_OK;
    if (scatter_threads > MAX_THREADS) scatter_threads = MAX_THREADS;
    /* Channels per scatter block: 4 (measured on the benchmark shapes, both
     * layouts: 1, 2, 8 and 16 were slower: one point's weights serve 4
     * channels, and 4 accumulator planes still stay close to the caches), fewer
     * when the blocks of all threads would not fit the budget. The block size
     * changes no result: each (cell, channel) sums in the same order. */
    const int64_t per_channel = (int64_t)(interp == GS_NEAREST ? 1 : 2) * t.mp * (int64_t)sizeof(float);
    int64_t cb = budget / ((int64_t)scatter_threads * per_channel);
    if (cb > 4) cb = 4;
    if (cb > t.C) cb = t.C;
    if (cb < 1) cb = 1;
    t.cb = cb;
    t.blocks = (t.C + cb - 1) / cb;
    const size_t base_bytes = (size_t)t.P * sizeof(int64_t);
    const size_t wts_bytes = interp == GS_NEAREST ? 0 : (size_t)t.P * 6 * sizeof(float);
    char *cache = scratch_alloc(base_bytes + wts_bytes);
    if (!cache) return RC_NO_MEMORY;
    t.base = (int64_t *)cache;
    t.wts = wts_bytes ? (float *)(cache + base_bytes) : NULL; /* none for nearest */
    atomic_init(&t.failed, 0);
    if (scatter_threads > t.blocks) scatter_threads = (int)t.blocks;
    for (int64_t n = 0; n < t.N && !atomic_load(&t.failed); n++) {
        t.n = n;
        atomic_init(&t.next, 0);
        run_parallel(gs_points_task, &t, threads);
        if (t.input_grad && !atomic_load(&t.failed)) {
            atomic_init(&t.next, 0);
            run_parallel(gs_scatter_task, &t, scatter_threads);
        }
    }
    scratch_free(cache, base_bytes + wts_bytes);
    return atomic_load(&t.failed) ? RC_NO_MEMORY : RC_OK;
}

/* ------------------------------------------------------------------------
 * GridSampler3D forward
 * ------------------------------------------------------------------------ */

/* Output of points [p0, p1): the weighted sum of the 8 corners (a corner
 * outside reads 0, in corner order z-major, x-minor), or the nearest cell. */
static void gs_forward_points(const grid_backward *t, int64_t n, int64_t p0, int64_t p1, gs_scratch *s,
                              int64_t *base, float *wts) {
    gs_points(t, n, p0, p1, s, base, wts);
    const int64_t C = t->C, count = p1 - p0;
    const int nearest = t->interp == GS_NEAREST;
    const char *in_n = t->input + n * t->is[0];
    char *out_n = t->out + n * t->os[0];
    float *w8 = s->dots; /* 8 corner weights a point, (wx * wy) * wz as NumPy forms them */
    if (!nearest)
        for (int64_t q = 0; q < count; q++) {
            const float *wt = wts + 6 * q;
            for (int k = 0; k < 8; k++) w8[8 * q + k] = (wt[k & 1] * wt[2 + ((k >> 1) & 1)]) * wt[4 + (k >> 2)];
        }
    /* the output offsets of the points, in the goff slots */
    int64_t w = p0 % t->Wo, h = (p0 / t->Wo) % t->Ho, d = p0 / (t->Wo * t->Ho);
    for (int64_t q = 0; q < count; q++) {
        s->goff[q] = d * t->os[2] + h * t->os[3] + w * t->os[4];
        if (++w == t->Wo) {
            w = 0;
            if (++h == t->Ho) h = 0, d++;
        }
    }
    const int size = t->dtype == DT_FLOAT32 ? 4 : 2;
    if (t->is[1] == size && C > 1) {
        /* channels-last input: point outer, each corner's channels contiguous */
        for (int64_t q = 0; q < count; q++) {
            const int64_t *oq = s->off + 8 * q;
            for (int64_t c = 0; c < C; c++) s->g[c] = 0.0f;
            if (nearest) {
                if (base[q] >= 0 && oq[0] != GS_OUTSIDE)
                    for (int64_t c = 0; c < C; c++) s->g[c] = load_float(in_n + oq[0] + c * size, t->dtype);
            } else {
                for (int k = 0; k < 8; k++) {
                    const float wk = w8[8 * q + k];
                    if (oq[k] == GS_OUTSIDE) {
                        for (int64_t c = 0; c < C; c++) s->g[c] += wk * 0.0f;
                    } else if (t->dtype == DT_FLOAT32) {
                        const float *v = (const float *)(in_n + oq[k]);
                        for (int64_t c = 0; c < C; c++) s->g[c] += wk * v[c];
                    } else {
                        for (int64_t c = 0; c < C; c++) s->g[c] += wk * load_float(in_n + oq[k] + c * size, t->dtype);
                    }
                }
            }
            char *o = out_n + s->goff[q];
            for (int64_t c = 0; c < C; c++) store_float(o + c * t->os[1], t->dtype, s->g[c]);
        }
        return;
    }
    /* channels outer: one input plane at a time stays in cache */
    for (int64_t c = 0; c < C; c++) {
        const char *plane = in_n + c * t->is[1];
        char *oplane = out_n + c * t->os[1];
        for (int64_t q = 0; q < count; q++) {
            const int64_t *oq = s->off + 8 * q;
            float v = 0.0f;
            if (nearest) {
                if (base[q] >= 0 && oq[0] != GS_OUTSIDE) v = load_float(plane + oq[0], t->dtype);
            } else {
                const float *wq = w8 + 8 * q;
                for (int k = 0; k < 8; k++) v += wq[k] * (oq[k] == GS_OUTSIDE ? 0.0f : load_float(plane + oq[k], t->dtype));
            }
            store_float(oplane + s->goff[q], t->dtype, v);
        }
    }
}

static void gs_forward_task(void *ctx) {
    grid_backward *t = ctx;
    gs_scratch s;
    char *cache;
    size_t bytes;
    char *mem = gs_scratch_alloc(t, (size_t)GS_STEP * (sizeof(int64_t) + 6 * sizeof(float)), &s, &cache, &bytes);
    if (!mem) return;
    int64_t *base = (int64_t *)cache; /* the points' corners and weights, as the backward's cache */
    float *wts = (float *)(base + GS_STEP);
    /* grabs of GS_STEP points within one batch item */
    const int64_t per_item = (t->P + GS_STEP - 1) / GS_STEP;
    for (;;) {
        int64_t grab = atomic_fetch_add(&t->next, 1);
        if (grab >= t->N * per_item) break;
        int64_t n = grab / per_item, p0 = (grab % per_item) * GS_STEP;
        gs_forward_points(t, n, p0, p0 + GS_STEP < t->P ? p0 + GS_STEP : t->P, &s, base, wts);
    }
    scratch_free(mem, bytes);
}

/*
 * Grid sampling (aclnnGridSampler3D) into ``out`` (N, C, Do, Ho, Wo), any
 * strides (bytes). in_shape (N, C, D, H, W), out_spatial (Do, Ho, Wo).
 * Returns RC_OK or RC_NO_MEMORY (out may be partly written).
 */
API int pyaclnn_grid_sampler3d(intptr_t input, const int64_t *input_strides, intptr_t grid,
                               const int64_t *grid_strides, intptr_t out, const int64_t *out_strides,
                               const int64_t *in_shape, const int64_t *out_spatial, int dtype, int interp,
                               int padding, int align, int threads) {
    grid_backward t;
    gs_setup(&t, input, input_strides, grid, grid_strides, in_shape, out_spatial, dtype, interp, padding, align);
    t.out = (char *)out;
    memcpy(t.os, out_strides, sizeof t.os);
    atomic_init(&t.next, 0);
    atomic_init(&t.failed, 0);
    run_parallel(gs_forward_task, &t, threads);
    return atomic_load(&t.failed) ? RC_NO_MEMORY : RC_OK;
}

/* ------------------------------------------------------------------------
 * Elementwise kernels of the references (pyaclnn/kernels/references): Gelu
 * in its erf form and the cast float32 -> float16. One thread, contiguous
 * arrays; the Python side checks the dtypes, the layout and the overlap.
 * ------------------------------------------------------------------------ */

/* (1 + 2a) erfcx(a), erfcx(a) = exp(a^2) erfc(a), for a >= 0 is a polynomial
 * of degree 22 in t = (a - 4) / (a + 4) (t in [-1, 1) covers a in [0, inf)):
 * Chebyshev interpolation of 40-digit values, expanded into powers of t
 * (no coefficient above 1.3, so Horner's rule loses nothing). Relative error
 * of erfcx below 6e-16 on [0, 27]. */
static const double ERFCX_POLY[23] = {
    1.2329951186255526,     -0.1396211168405572,    0.015379652102610473,   0.06809705425421975,
    -0.10103906603586531,   0.09373283501077742,    -0.06633036582031154,   0.03716751538635946,
    -0.016197733981455194,  0.005031971002298884,   -0.000757773707063825,  -0.00019926095315041177,
    0.00015062309720018628, -2.438779085759055e-05, -1.1225101875659178e-05, 5.689537732302816e-06,
    2.9801353803031333e-07, -8.020193766522085e-07, 7.115337800585303e-08,  9.295292277973951e-08,
    -1.6371779763566967e-08, -6.9926126813398e-09,  1.5738283774192037e-09,
};
/* exp(r) for |r| <= ln2/2: Taylor to r^13 (the next term is below 5e-18). */
static const double EXP_POLY[14] = {
    1.0, 1.0, 0.5, 0.16666666666666666, 0.041666666666666664, 0.008333333333333333,
    0.001388888888888889, 0.0001984126984126984, 2.48015873015873e-05, 2.7557319223985893e-06,
    2.755731922398589e-07, 2.505210838544172e-08, 2.08767569878681e-09, 1.6059043836821613e-10,
};
/* erf(z) = z R(z^2) for |z| <= 2.2, R a polynomial of degree 18 in
 * u = z^2 / 2.42 - 1 (Chebyshev interpolation of 50-digit values on
 * z^2 in [0, 4.84], expanded into powers of u in [-1, 1]: no coefficient above
 * 0.63, where powers of z^2 would cancel terms 60 times the sum). The near
 * path of gelu: no exponential, no division. Its float64 value is within
 * 6e-14 of the exact one, relative (1 - erf(a) at a < 2, erfc(2) = 4.7e-3;
 * 2e-15 for x >= 0). */
static const double ERF_POLY[19] = {
    0.6249493974083775, -0.2623060483813847, 0.13602546939544563, -0.06438661053779086,
    0.026712676109062496, -0.009702614172226336, 0.0031107492797075647, -0.0008891787334479261,
    0.00022879437676480652, -5.345670606726212e-05, 1.1428166376975676e-05, -2.2504459650556546e-06,
    4.105987216018919e-07, -6.977232645768433e-08, 1.109076032513053e-08, -1.6511259470556603e-09,
    2.3244155670007466e-10, -3.332666470996141e-11, 4.192812387310921e-12,
};
#define GELU_NEAR_SCALE (2.0 / 4.84)
/* The near path takes x*x/2 below these: a < 2.2 for x >= 0 (1 + erf, no
 * cancellation), a < 2 for x < 0 (1 - erf). */
#define GELU_NEAR_ABOVE 4.84
#define GELU_NEAR_BELOW 4.0
#define GELU_LOG2E 1.4426950408889634
#define GELU_LN2_HI 6.93147180369123816490e-01 /* 32 bits: k * LN2_HI is exact */
#define GELU_LN2_LO 1.90821492927058770002e-10
#define GELU_SHIFT 0x1.8p52 /* adding it rounds to an integer, left in the low bits */
#define GELU_SQRT1_2 0.70710678118654752440
#define GELU_SQUARE_MAX 700.0 /* exp(-700) is still a normal double */
#define GELU_ERFC_ZERO 26.0   /* erfc(26) < 1e-295: 0 for every float32 result */

static inline double double_of_bits(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static inline uint64_t bits_of_double(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/* x/2 (1 + erf(x/sqrt2)) on the near path (ERF_POLY): 1 + z R in one rounding. */
static inline double gelu_near(double x, double square) {
    double z = x * GELU_SQRT1_2;
    double u = fma(square, GELU_NEAR_SCALE, -1.0);
    double u2 = u * u;
    double re = ERF_POLY[18], ro = ERF_POLY[17];
    for (int i = 16; i >= 2; i -= 2) {
        re = fma(re, u2, ERF_POLY[i]);
        ro = fma(ro, u2, ERF_POLY[i - 1]);
    }
    re = fma(re, u2, ERF_POLY[0]);
    double r = fma(ro, u, re);
    return 0.5 * x * fma(z, r, 1.0);
}

/* gelu(x) = x/2 erfc(-x/sqrt2) in double (rounded once to float32 by the
 * callers). Near 0 by the erf polynomial; else, with a = |x|/sqrt2,
 * erfc(a) = exp(-x*x/2) erfcx(a), where x*x/2 of a float32 is exact in
 * double, and x >= 0 takes 2 - erfc(a): relative error below 1e-15 there
 * (measured 8e-16: the erfcx fit, the exponential, a few roundings). Every
 * step is the one the AVX2 lanes take (fma is correctly rounded both ways),
 * so the two builds give the same bits. Edge cases as the NumPy reference:
 * +inf -> +inf, -inf -> NaN (x/2 times an erfc of 0), NaN -> NaN. */
static inline double gelu_double(double x) {
    double square = 0.5 * x * x;
    if (square < (x < 0 ? GELU_NEAR_BELOW : GELU_NEAR_ABOVE)) return gelu_near(x, square);
    double a = fabs(x) * GELU_SQRT1_2;
    double y = -(square < GELU_SQUARE_MAX ? square : GELU_SQUARE_MAX);
    double kd = fma(y, GELU_LOG2E, GELU_SHIFT);
    double k = kd - GELU_SHIFT;
    double r = fma(k, -GELU_LN2_HI, y);
    r = fma(k, -GELU_LN2_LO, r);
    double r2 = r * r;
    double pe = EXP_POLY[12], po = EXP_POLY[13];
    for (int i = 10; i >= 0; i -= 2) {
        pe = fma(pe, r2, EXP_POLY[i]);
        po = fma(po, r2, EXP_POLY[i + 1]);
    }
    double p = fma(po, r, pe);
    double scale = double_of_bits((bits_of_double(kd) + 1023u) << 52);
    double t = (a - 4.0) / (a + 4.0);
    double t2 = t * t;
    double qe = ERFCX_POLY[22], qo = ERFCX_POLY[21];
    for (int i = 20; i >= 2; i -= 2) {
        qe = fma(qe, t2, ERFCX_POLY[i]);
        qo = fma(qo, t2, ERFCX_POLY[i - 1]);
    }
    qe = fma(qe, t2, ERFCX_POLY[0]);
    double q = fma(qo, t, qe);
    double e = p * scale * q / fma(2.0, a, 1.0);
    e = a < GELU_ERFC_ZERO ? e : 0.0;
    double half = 0.5 * x;
    return x < 0 ? half * e : half * (2.0 - e);
}

static inline float gelu_one(float x) { return (float)gelu_double(x); }

static void gelu_row_sw(const float *x, float *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = gelu_one(x[i]);
}

#if HAVE_F16C_PATH
__attribute__((target("avx2,fma"))) static inline __m256d gelu_near_avx2(__m256d x, __m256d square) {
    __m256d z = _mm256_mul_pd(x, _mm256_set1_pd(GELU_SQRT1_2));
    __m256d u = _mm256_fmadd_pd(square, _mm256_set1_pd(GELU_NEAR_SCALE), _mm256_set1_pd(-1.0));
    __m256d u2 = _mm256_mul_pd(u, u);
    __m256d re = _mm256_set1_pd(ERF_POLY[18]), ro = _mm256_set1_pd(ERF_POLY[17]);
    for (int i = 16; i >= 2; i -= 2) {
        re = _mm256_fmadd_pd(re, u2, _mm256_set1_pd(ERF_POLY[i]));
        ro = _mm256_fmadd_pd(ro, u2, _mm256_set1_pd(ERF_POLY[i - 1]));
    }
    re = _mm256_fmadd_pd(re, u2, _mm256_set1_pd(ERF_POLY[0]));
    __m256d r = _mm256_fmadd_pd(ro, u, re);
    return _mm256_mul_pd(_mm256_mul_pd(_mm256_set1_pd(0.5), x), _mm256_fmadd_pd(z, r, _mm256_set1_pd(1.0)));
}

__attribute__((target("avx2,fma"))) static inline __m256d gelu_far_avx2(__m256d x) {
    const __m256d sign = _mm256_set1_pd(-0.0);
    __m256d a = _mm256_mul_pd(_mm256_andnot_pd(sign, x), _mm256_set1_pd(GELU_SQRT1_2));
    __m256d square = _mm256_mul_pd(_mm256_mul_pd(_mm256_set1_pd(0.5), x), x);
    /* min(square, 700) with square first: a NaN square gives 700, as the scalar select */
    __m256d y = _mm256_xor_pd(sign, _mm256_blendv_pd(_mm256_set1_pd(GELU_SQUARE_MAX), square,
                                                     _mm256_cmp_pd(square, _mm256_set1_pd(GELU_SQUARE_MAX),
                                                                   _CMP_LT_OQ)));
    __m256d kd = _mm256_fmadd_pd(y, _mm256_set1_pd(GELU_LOG2E), _mm256_set1_pd(GELU_SHIFT));
    __m256d k = _mm256_sub_pd(kd, _mm256_set1_pd(GELU_SHIFT));
    __m256d r = _mm256_fmadd_pd(k, _mm256_set1_pd(-GELU_LN2_HI), y);
    r = _mm256_fmadd_pd(k, _mm256_set1_pd(-GELU_LN2_LO), r);
    __m256d r2 = _mm256_mul_pd(r, r);
    __m256d pe = _mm256_set1_pd(EXP_POLY[12]), po = _mm256_set1_pd(EXP_POLY[13]);
    for (int i = 10; i >= 0; i -= 2) {
        pe = _mm256_fmadd_pd(pe, r2, _mm256_set1_pd(EXP_POLY[i]));
        po = _mm256_fmadd_pd(po, r2, _mm256_set1_pd(EXP_POLY[i + 1]));
    }
    __m256d p = _mm256_fmadd_pd(po, r, pe);
    __m256i scale_bits = _mm256_slli_epi64(_mm256_add_epi64(_mm256_castpd_si256(kd), _mm256_set1_epi64x(1023)), 52);
    __m256d scale = _mm256_castsi256_pd(scale_bits);
    __m256d t = _mm256_div_pd(_mm256_sub_pd(a, _mm256_set1_pd(4.0)), _mm256_add_pd(a, _mm256_set1_pd(4.0)));
    __m256d t2 = _mm256_mul_pd(t, t);
    __m256d qe = _mm256_set1_pd(ERFCX_POLY[22]), qo = _mm256_set1_pd(ERFCX_POLY[21]);
    for (int i = 20; i >= 2; i -= 2) {
        qe = _mm256_fmadd_pd(qe, t2, _mm256_set1_pd(ERFCX_POLY[i]));
        qo = _mm256_fmadd_pd(qo, t2, _mm256_set1_pd(ERFCX_POLY[i - 1]));
    }
    qe = _mm256_fmadd_pd(qe, t2, _mm256_set1_pd(ERFCX_POLY[0]));
    __m256d q = _mm256_fmadd_pd(qo, t, qe);
    __m256d e = _mm256_div_pd(_mm256_mul_pd(_mm256_mul_pd(p, scale), q),
                              _mm256_fmadd_pd(_mm256_set1_pd(2.0), a, _mm256_set1_pd(1.0)));
    e = _mm256_and_pd(e, _mm256_cmp_pd(a, _mm256_set1_pd(GELU_ERFC_ZERO), _CMP_LT_OQ));
    __m256d half = _mm256_mul_pd(_mm256_set1_pd(0.5), x);
    __m256d below = _mm256_mul_pd(half, e);
    __m256d above = _mm256_mul_pd(half, _mm256_sub_pd(_mm256_set1_pd(2.0), e));
    return _mm256_blendv_pd(above, below, _mm256_cmp_pd(x, _mm256_setzero_pd(), _CMP_LT_OQ));
}

/* Lanes of the far path are set aside (position and value: out may be x) and
 * run 4 at a time at the end of a block of GELU_BLOCK elements, instead of
 * running both paths on every vector holding one (11% of the vectors of
 * uniform(-3, 3) inputs hold one, 3% of the lanes are far): 15% less work
 * there. The near path's value written for a far lane is overwritten. */
#define GELU_BLOCK 1024

/* The near path of x[0..3] into out[0..3]; returns the mask of the far lanes,
 * whose inputs it leaves in ``inputs`` (read before out, which may be x, is written). */
__attribute__((target("avx2,fma"))) static inline int gelu_near_lanes_avx2(const float *x, float *out,
                                                                        double *inputs) {
    __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(x));
    __m256d square = _mm256_mul_pd(_mm256_mul_pd(_mm256_set1_pd(0.5), v), v);
    __m256d bound = _mm256_blendv_pd(_mm256_set1_pd(GELU_NEAR_ABOVE), _mm256_set1_pd(GELU_NEAR_BELOW),
                                     _mm256_cmp_pd(v, _mm256_setzero_pd(), _CMP_LT_OQ));
    int far = _mm256_movemask_pd(_mm256_cmp_pd(square, bound, _CMP_LT_OQ)) ^ 0xF;
    if (far) _mm256_storeu_pd(inputs, v);
    _mm_storeu_ps(out, _mm256_cvtpd_ps(gelu_near_avx2(v, square)));
    return far;
}

__attribute__((target("avx2,fma"))) static void gelu_row_avx2(const float *x, float *out, int64_t n) {
    double far_x[GELU_BLOCK + 4];
    int64_t far_at[GELU_BLOCK + 4];
    int64_t i = 0;
    while (i + 4 <= n) {
        int64_t end = i + GELU_BLOCK <= n ? i + GELU_BLOCK : n - (n - i) % 4;
        int count = 0;
        for (; i < end; i += 4) {
            double inputs[4];
            for (int far = gelu_near_lanes_avx2(x + i, out + i, inputs); far; far &= far - 1) {
                int lane = __builtin_ctz((unsigned)far);
                far_x[count] = inputs[lane];
                far_at[count++] = i + lane;
            }
        }
        for (int k = count; k % 4; k++) far_x[k] = 0.0; /* padding lanes, not written */
        for (int k = 0; k < count; k += 4) {
            double lanes[4];
            _mm256_storeu_pd(lanes, gelu_far_avx2(_mm256_loadu_pd(far_x + k)));
            for (int j = k; j < count && j < k + 4; j++) out[far_at[j]] = (float)lanes[j - k];
        }
    }
    for (; i < n; i++) out[i] = gelu_one(x[i]);
}
#endif

/* float32 -> float16 bits as NumPy's astype gives them: round to nearest
 * even, overflow to inf, subnormals rounded (float_to_half_sw), and a NaN
 * keeps its sign and the top 10 bits of its payload unquietened (1 when those
 * are all zero), where VCVTPS2PH would set the quiet bit. */
static inline uint16_t float_to_half_numpy(float f) {
    uint32_t x = float_bits(f);
    uint32_t a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u) {
        uint32_t payload = (a & 0x7FFFFFu) >> 13;
        return (uint16_t)(((x >> 16) & 0x8000u) | 0x7C00u | (payload ? payload : 1u));
    }
    return float_to_half_sw(f);
}

static void float_to_half_numpy_sw(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = float_to_half_numpy(src[i]);
}

#if HAVE_F16C_PATH
/* F16C 8 lanes at a time; a block holding a NaN is done again lane by lane. */
__attribute__((target("avx,f16c"))) static void float_to_half_numpy_f16c(const float *src, uint16_t *dst,
                                                                          int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(src + i);
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(v, 0));
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
            for (int64_t j = i; j < i + 8; j++) dst[j] = float_to_half_numpy(src[j]);
    }
    for (; i < n; i++) dst[i] = float_to_half_numpy(src[i]);
}
#endif

/* Whether the SIMD builds run: the CPU has them and pyaclnn_accel_use_f16c
 * has not switched them off (tests run both; they give the same bits). */
static int elementwise_simd(const char *feature) {
#if HAVE_F16C_PATH
    if (!pyaclnn_accel_use_f16c(-1)) return 0;
    if (feature[0] == 'f') return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return 1; /* F16C in use */
#else
    (void)feature;
    return 0;
#endif
}

/* out[i] = gelu(x[i]) (erf form) for n contiguous float32; out may be x. */
API void pyaclnn_gelu_float32(intptr_t x, intptr_t out, int64_t n) {
#if HAVE_F16C_PATH
    if (elementwise_simd("fma")) {
        gelu_row_avx2((const float *)x, (float *)out, n);
        return;
    }
#endif
    gelu_row_sw((const float *)x, (float *)out, n);
}

/* dst[i] = src[i] as float16 bits, as NumPy's astype, for n contiguous values. */
API void pyaclnn_float_to_half_numpy(intptr_t src, intptr_t dst, int64_t n) {
#if HAVE_F16C_PATH
    if (elementwise_simd("f16c")) {
        float_to_half_numpy_f16c((const float *)src, (uint16_t *)dst, n);
        return;
    }
#endif
    float_to_half_numpy_sw((const float *)src, (uint16_t *)dst, n);
}
