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
 * element and one byte stride per axis (any sign, any layout).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_F16C_PATH 1
#else
#define HAVE_F16C_PATH 0
#endif

/* Version of the exported interface; the loader refuses a library of another one. */
#define PYACLNN_ACCEL_ABI 1

enum { DT_FLOAT32 = 0, DT_FLOAT16 = 1, DT_BFLOAT16 = 2 };
enum { RC_OK = 0, RC_BAD_INDEX = 1, RC_NO_MEMORY = -1, RC_BAD_ARGUMENT = -2 };

API int pyaclnn_accel_abi(void) { return PYACLNN_ACCEL_ABI; }

/* ------------------------------------------------------------------------
 * Scratch accounting: the benchmarks add it to the peak extra memory, which
 * tracemalloc (NumPy's buffers only) cannot see.
 * ------------------------------------------------------------------------ */

static atomic_llong scratch_now;
static atomic_llong scratch_peak;

static void *scratch_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
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

/* Streaming-store conversions of a whole C-contiguous plane of grad_input
 * (written once, not read again by the kernel): the stores skip reading the
 * lines they overwrite, a third of the memory traffic of a 16-bit backward.
 * Same bits as the row conversions. The task fences them before returning. */
__attribute__((target("avx,f16c"))) static void float_plane_to_half_f16c_stream(const float *src, uint16_t *dst,
                                                                                 int64_t n) {
    int64_t i = 0;
    for (; i < n && ((uintptr_t)(dst + i) & 15); i++) dst[i] = _cvtss_sh(src[i], 0);
    for (; i + 8 <= n; i += 8)
        _mm_stream_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), 0));
    for (; i < n; i++) dst[i] = _cvtss_sh(src[i], 0);
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

__attribute__((target("avx2"))) static void float_plane_to_bf16_avx2_stream(const float *src, uint16_t *dst,
                                                                             int64_t n) {
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
/* Whole-plane streaming conversions, NULL where the CPU (or the switch) has none. */
static void (*float_to_half_plane)(const float *, uint16_t *, int64_t);
static void (*float_to_bf16_plane)(const float *, uint16_t *, int64_t);

/* Use F16C when ``want`` and the CPU has it; returns whether it is used now.
 * ``want`` < 0 only asks. Not for use while a kernel runs. */
API int pyaclnn_accel_use_f16c(int want) {
#if HAVE_F16C_PATH
    if (want >= 0) {
        __builtin_cpu_init();
        int hardware = want && __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
        half_to_float_row = hardware ? half_row_to_float_f16c : half_row_to_float_sw;
        float_to_half_row = hardware ? float_row_to_half_f16c : float_row_to_half_sw;
        float_to_half_plane = hardware ? float_plane_to_half_f16c_stream : NULL;
        /* bfloat16 has no hardware conversion here: AVX2 integer lanes, or the
         * scalar loop when F16C conversion is switched off (tests) */
        float_to_bf16_plane = want && __builtin_cpu_supports("avx2") ? float_plane_to_bf16_avx2_stream : NULL;
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
    pthread_mutex_t lock; /* guards the fields below */
    pthread_cond_t wake, done;
    int workers;          /* threads started */
    int wanted;           /* workers taking part in the current task */
    int remaining;        /* of those, still running it */
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
        if (--pool.remaining == 0) pthread_cond_signal(&pool.done);
    }
    return NULL;
}

/* A forked child inherits the pool's state but not its threads: start afresh. */
static void pool_reset(void) {
    pthread_mutex_init(&pool.busy, NULL);
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.done, NULL);
    pool.workers = pool.wanted = pool.remaining = 0;
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

/* Run ``fn(ctx)`` on ``threads`` threads, the caller being one of them; ``fn``
 * takes its work from a shared counter, so any number of threads gives the
 * same result. When another call already holds the workers (two streams at
 * once), this one runs in the caller alone instead of waiting. */
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
    pool.remaining = helpers;
    pool.generation++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    fn(ctx);
    pthread_mutex_lock(&pool.lock);
    while (pool.remaining > 0) pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&pool.busy);
}

__attribute__((constructor)) static void pool_init(void) { pthread_atfork(NULL, NULL, pool_reset); }

/* ------------------------------------------------------------------------
 * Max-pool backward
 * ------------------------------------------------------------------------ */

/* From this many bytes of 16-bit grad_input on, its planes are written with
 * streaming stores (where the CPU has them; see float_plane_to_half_f16c_stream). */
#define STREAM_MIN_BYTES (1u << 20)

typedef struct {
    const char *grad;
    const char *index;
    char *grad_input;
    int64_t gs[5], is[5], gis[5]; /* byte strides */
    int64_t out[5];               /* N, C, Do, Ho, Wo */
    int64_t in[3];                /* D, H, W */
    int64_t plane, planes, batch; /* D*H*W, N*C, planes per grab */
    int dtype, index_size;
    int stream;              /* whole-plane streaming conversions allowed (a large grad_input) */
    atomic_llong next;       /* next plane to take */
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

/* Take the next batch of planes: [*first, *end); false when none is left. */
static int take_planes(pool_backward *t, int64_t *first, int64_t *end) {
    int64_t start = atomic_fetch_add(&t->next, t->batch);
    if (start >= t->planes) return 0;
    *first = start;
    *end = start + t->batch < t->planes ? start + t->batch : t->planes;
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
 * reads larger than any plane. Plain loops the compiler vectorizes. */
static uint64_t highest_contiguous(const char *p, int size, int64_t n) {
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

/* Index guard: find the first index outside [0, plane), before anything is
 * written. A plane whose indices are in range costs one vectorized pass; only
 * a plane holding a bad one is searched for its first. */
static void check_task(void *ctx) {
    pool_backward *t = ctx;
    const int64_t od = t->out[2], oh = t->out[3], ow = t->out[4], per_plane = od * oh * ow;
    const int size = t->index_size;
    const uint64_t plane = (uint64_t)t->plane;
    /* contiguous planes of indices are scanned as one row */
    const int flat = t->is[4] == size && (oh == 1 || t->is[3] == size * ow) &&
                     (od == 1 || t->is[2] == size * ow * oh);
    int64_t first, end;
    while (take_planes(t, &first, &end)) {
        for (int64_t p = first; p < end; p++) {
            if (p * per_plane >= atomic_load(&t->first_bad)) return; /* an earlier one is known */
            const char *ip = plane_ptr(t->index, t->is, p, t->out[1]);
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
    }
}

/* One row of gradients as float32: ``row`` itself when it is float32 and
 * contiguous, else converted into ``buf``. */
static const float *widen_row(const pool_backward *t, const char *row, float *buf, uint16_t *bits) {
    const int64_t n = t->out[4], step = t->gs[4];
    if (t->dtype == DT_FLOAT32) {
        if (step == 4) return (const float *)row;
        for (int64_t w = 0; w < n; w++) memcpy(buf + w, row + w * step, 4);
        return buf;
    }
    const uint16_t *src = (const uint16_t *)row;
    if (step != 2) {
        for (int64_t w = 0; w < n; w++) memcpy(bits + w, row + w * step, 2);
        src = bits;
    }
    if (t->dtype == DT_FLOAT16) {
        half_to_float_row(src, buf, n);
    } else {
        for (int64_t w = 0; w < n; w++) buf[w] = bf16_to_float(src[w]);
    }
    return buf;
}

/* Write a plane's float32 sums into grad_input's dtype and strides, rounding once. */
static void store_plane(const pool_backward *t, const float *acc, char *dst, uint16_t *bits) {
    const int64_t depth = t->in[0], height = t->in[1], width = t->in[2];
    const int size = t->dtype == DT_FLOAT32 ? 4 : 2;
    const int64_t step = t->gis[4];
    void (*plane_fn)(const float *, uint16_t *, int64_t) =
        t->dtype == DT_FLOAT16 ? float_to_half_plane : t->dtype == DT_BFLOAT16 ? float_to_bf16_plane : NULL;
    if (plane_fn && t->stream && step == 2 && (height == 1 || t->gis[3] == 2 * width) &&
        (depth == 1 || t->gis[2] == 2 * width * height)) {
        plane_fn(acc, (uint16_t *)dst, t->plane);
        return;
    }
    for (int64_t d = 0; d < depth; d++) {
        for (int64_t h = 0; h < height; h++) {
            const float *src = acc + (d * height + h) * width;
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
    }
SCATTER_ROW(int32_t)
SCATTER_ROW(int64_t)

static void scatter_task(void *ctx) {
    pool_backward *t = ctx;
    const int64_t od = t->out[2], oh = t->out[3], ow = t->out[4];
    const int64_t depth = t->in[0], height = t->in[1], width = t->in[2];
    /* float32 grad_input with C-contiguous planes: sum in place, no accumulator. */
    const int in_place = t->dtype == DT_FLOAT32 && t->gis[4] == 4 && t->gis[3] == 4 * width &&
                         (depth == 1 || t->gis[2] == 4 * width * height);
    const int64_t row_len = ow > width ? ow : width;
    const size_t acc_bytes = in_place ? 0 : (size_t)t->plane * sizeof(float);
    const size_t buf_bytes = (size_t)row_len * (sizeof(float) + sizeof(uint16_t));
    char *scratch = scratch_alloc(acc_bytes + buf_bytes);
    if (!scratch) {
        atomic_store(&t->failed, 1);
        return;
    }
    float *buf = (float *)(scratch + acc_bytes);
    uint16_t *bits = (uint16_t *)(buf + row_len);
    int64_t first, end;
    while (take_planes(t, &first, &end)) {
        for (int64_t p = first; p < end; p++) {
            const char *gp = plane_ptr(t->grad, t->gs, p, t->out[1]);
            const char *ip = plane_ptr(t->index, t->is, p, t->out[1]);
            char *dst = (char *)plane_ptr(t->grad_input, t->gis, p, t->out[1]);
            float *acc = in_place ? (float *)dst : (float *)scratch;
            memset(acc, 0, (size_t)t->plane * sizeof(float));
            for (int64_t d = 0; d < od; d++) {
                for (int64_t h = 0; h < oh; h++) {
                    const float *g = widen_row(t, gp + d * t->gs[2] + h * t->gs[3], buf, bits);
                    const char *irow = ip + d * t->is[2] + h * t->is[3];
                    if (t->index_size == 8)
                        scatter_row_int64_t(acc, g, irow, t->is[4], ow);
                    else
                        scatter_row_int32_t(acc, g, irow, t->is[4], ow);
                }
            }
            if (!in_place) store_plane(t, acc, dst, bits);
        }
    }
#if HAVE_F16C_PATH
    _mm_sfence(); /* store_plane's streaming stores are done before the call returns */
#endif
    scratch_free(scratch, acc_bytes + buf_bytes);
}

/*
 * grad_input = zeros + scatter-add of grad_output at the argmax positions.
 *
 * dtype: DT_FLOAT32/16/BF16 of grad_output and grad_input; index_size 4 or 8
 * (int32/int64); out_shape (N, C, Do, Ho, Wo) of grad_output and indices,
 * in_spatial (D, H, W) of grad_input. Sums run in float32 in the C order of
 * grad_output, rounded once per cell.
 *
 * Returns RC_OK; RC_BAD_INDEX with *bad = the C-order position of the first
 * index outside [0, D*H*W), before anything is written; RC_NO_MEMORY (after
 * grad_input may have been partly written) or RC_BAD_ARGUMENT.
 */
API int pyaclnn_max_pool3d_backward(intptr_t grad, const int64_t *grad_strides, int dtype, intptr_t index,
                                    const int64_t *index_strides, int index_size, intptr_t grad_input,
                                    const int64_t *grad_input_strides, const int64_t *out_shape,
                                    const int64_t *in_spatial, int threads, int64_t *bad) {
    if ((dtype != DT_FLOAT32 && dtype != DT_FLOAT16 && dtype != DT_BFLOAT16) ||
        (index_size != 4 && index_size != 8))
        return RC_BAD_ARGUMENT;
    pool_backward t;
    memset(&t, 0, sizeof t);
    t.grad = (const char *)grad;
    t.index = (const char *)index;
    t.grad_input = (char *)grad_input;
    memcpy(t.gs, grad_strides, sizeof t.gs);
    memcpy(t.is, index_strides, sizeof t.is);
    memcpy(t.gis, grad_input_strides, sizeof t.gis);
    memcpy(t.out, out_shape, sizeof t.out);
    memcpy(t.in, in_spatial, sizeof t.in);
    t.dtype = dtype;
    t.index_size = index_size;
    t.plane = t.in[0] * t.in[1] * t.in[2];
    t.planes = t.out[0] * t.out[1];
    if (t.planes == 0 || t.plane == 0) return RC_OK; /* nothing to write (as the NumPy kernel) */
    /* Grab planes a few at a time so tiny planes do not contend on the counter. */
    const int64_t work = t.plane + t.out[2] * t.out[3] * t.out[4];
    t.batch = work >= 4096 ? 1 : 4096 / (work + 1) + 1;
    if (threads > t.planes) threads = (int)t.planes;
    /* A small grad_input stays in the caches for whoever reads it next. */
    t.stream = (uint64_t)t.planes * (uint64_t)t.plane * 2u >= STREAM_MIN_BYTES;

    atomic_init(&t.failed, 0);
    if (t.out[2] * t.out[3] * t.out[4] > 0) {
        atomic_init(&t.next, 0);
        atomic_init(&t.first_bad, INT64_MAX);
        run_parallel(check_task, &t, threads);
        long long first_bad = atomic_load(&t.first_bad);
        if (first_bad != INT64_MAX) {
            *bad = first_bad;
            return RC_BAD_INDEX;
        }
    }
    atomic_init(&t.next, 0);
    run_parallel(scatter_task, &t, threads);
    return atomic_load(&t.failed) ? RC_NO_MEMORY : RC_OK;
}
