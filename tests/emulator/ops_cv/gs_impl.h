/* Grid-sampler math, instantiated twice by gridsampler.c: GS_T float (for
 * float32, float16 and bfloat16 data) and GS_T double (for double data).
 * Follows docs/operator-semantics.md (GridSampler3D: coordinates, GridSampler3DBackward:
 * math): unnormalize, padding with gradient
 * multipliers, the -100 sentinel for non-finite or huge coordinates,
 * trilinear weights, nearest with round-half-to-even. */

#define GS_CAT_(a, b) a##_##b
#define GS_CAT(a, b) GS_CAT_(a, b)
#define GS_FN(name) GS_CAT(name, GS_SUFFIX)

/* Border clip with its gradient: the borders themselves count as clipped. */
static GS_T GS_FN(gs_clip)(GS_T x, GS_T size, GS_T *g)
{
    if (x <= 0) {
        *g = 0;
        return 0;
    }
    if (x >= size - 1) {
        *g = 0;
        return size - 1;
    }
    *g = 1;
    return x;
}

static GS_T GS_FN(gs_reflect)(GS_T x, GS_T twice_low, GS_T twice_high, GS_T *g)
{
    if (twice_low == twice_high) {
        *g = 0;
        return 0;
    }
    GS_T low = twice_low / 2;
    GS_T span = (twice_high - twice_low) / 2;
    GS_T t = x - low;
    GS_T sign = 1;
    if (t < 0) {
        sign = -1;
        t = -t;
    }
    GS_T rest = (GS_T)fmod(t, span);
    GS_T flips = (GS_T)floor(t / span);
    if (fmod(flips, 2.0) == 0) {
        *g = sign;
        return rest + low;
    }
    *g = -sign;
    return span - rest + low;
}

/* Source coordinate along one axis of length `size` and the gradient
 * multiplier; 0 when the device would substitute its -100 sentinel (then
 * the point contributes nothing and gets a zero gridGrad). */
static int GS_FN(gs_source)(GS_T c, int64_t size, int pad, int align, GS_T *out, GS_T *mult)
{
    GS_T s = (GS_T)size, x, m;
    if (align) {
        x = (c + 1) / 2 * (s - 1);
        m = (s - 1) / 2;
    } else {
        x = ((c + 1) * s - 1) / 2;
        m = s / 2;
    }
    if (pad == 1) { /* border: NaN is lost, +-inf clamps to the edge */
        if (isnan(x)) {
            return 0;
        }
        GS_T g;
        x = GS_FN(gs_clip)(x, s, &g);
        m = m * g;
    } else if (pad == 2) { /* reflection: a non-finite input is lost */
        if (!isfinite(x)) {
            return 0;
        }
        GS_T gr, gc;
        x = align ? GS_FN(gs_reflect)(x, 0, 2 * (s - 1), &gr) : GS_FN(gs_reflect)(x, -1, 2 * s - 1, &gr);
        x = GS_FN(gs_clip)(x, s, &gc);
        m = m * gr * gc;
    }
    if (isnan(x) || x > (GS_T)(INT_MAX - 1) || x < (GS_T)INT_MIN) {
        return 0;
    }
    *out = x;
    *mult = m;
    return 1;
}

typedef struct {
    int valid;
    GS_T x, y, z, mx, my, mz;
} GS_FN(gs_point);

static GS_FN(gs_point) GS_FN(gs_locate)(const gs_exec *e, int64_t n, int64_t d, int64_t h, int64_t w)
{
    GS_FN(gs_point) p;
    const int64_t *gs = e->grid_s;
    int64_t at = n * gs[0] + d * gs[1] + h * gs[2] + w * gs[3];
    GS_T cx = (GS_T)emu_load(&e->grid, at);
    GS_T cy = (GS_T)emu_load(&e->grid, at + gs[4]);
    GS_T cz = (GS_T)emu_load(&e->grid, at + 2 * gs[4]);
    p.valid = GS_FN(gs_source)(cx, e->in_dims[4], e->pad, e->align, &p.x, &p.mx)
              && GS_FN(gs_source)(cy, e->in_dims[3], e->pad, e->align, &p.y, &p.my)
              && GS_FN(gs_source)(cz, e->in_dims[2], e->pad, e->align, &p.z, &p.mz);
    return p;
}

static void GS_FN(gs_forward)(const gs_exec *e)
{
    const int64_t *in = e->in_dims, *is = e->in_s, *od = e->out_dims, *os = e->go_s;
    for (int64_t n = 0; n < od[0]; n++) {
        for (int64_t d = 0; d < od[2]; d++) {
            for (int64_t h = 0; h < od[3]; h++) {
                for (int64_t w = 0; w < od[4]; w++) {
                    GS_FN(gs_point) p = GS_FN(gs_locate)(e, n, d, h, w);
                    int64_t out_at = n * os[0] + d * os[2] + h * os[3] + w * os[4];
                    for (int64_t c = 0; c < od[1]; c++) {
                        GS_T acc = 0;
                        int64_t base = n * is[0] + c * is[1];
                        if (p.valid && e->interp == 1) {
                            int64_t x = (int64_t)nearbyint(p.x), y = (int64_t)nearbyint(p.y),
                                    z = (int64_t)nearbyint(p.z);
                            if (x >= 0 && x < in[4] && y >= 0 && y < in[3] && z >= 0 && z < in[2]) {
                                acc = (GS_T)emu_load(&e->input, base + z * is[2] + y * is[3] + x * is[4]);
                            }
                        } else if (p.valid) {
                            int64_t x0 = (int64_t)floor(p.x), y0 = (int64_t)floor(p.y), z0 = (int64_t)floor(p.z);
                            GS_T wx[2] = {(GS_T)(x0 + 1) - p.x, p.x - (GS_T)x0};
                            GS_T wy[2] = {(GS_T)(y0 + 1) - p.y, p.y - (GS_T)y0};
                            GS_T wz[2] = {(GS_T)(z0 + 1) - p.z, p.z - (GS_T)z0};
                            for (int bz = 0; bz < 2; bz++) {
                                for (int by = 0; by < 2; by++) {
                                    for (int bx = 0; bx < 2; bx++) {
                                        int64_t x = x0 + bx, y = y0 + by, z = z0 + bz;
                                        if (x < 0 || x >= in[4] || y < 0 || y >= in[3] || z < 0 || z >= in[2]) {
                                            continue;
                                        }
                                        GS_T v = (GS_T)emu_load(&e->input, base + z * is[2] + y * is[3] + x * is[4]);
                                        acc += v * (wx[bx] * wy[by] * wz[bz]);
                                    }
                                }
                            }
                        }
                        emu_store(&e->out, out_at + c * os[1], (double)acc);
                    }
                }
            }
        }
    }
}

/* acc: zeroed input-shaped (N, C, D, H, W) contiguous accumulator for
 * inputGrad, or NULL when mask[0] is false. */
static void GS_FN(gs_backward)(const gs_exec *e, GS_T *acc)
{
    const int64_t *in = e->in_dims, *is = e->in_s, *od = e->out_dims, *os = e->go_s, *gg = e->gg_s;
    const int64_t vol = in[2] * in[3] * in[4];
    for (int64_t n = 0; n < od[0]; n++) {
        for (int64_t d = 0; d < od[2]; d++) {
            for (int64_t h = 0; h < od[3]; h++) {
                for (int64_t w = 0; w < od[4]; w++) {
                    GS_FN(gs_point) p = GS_FN(gs_locate)(e, n, d, h, w);
                    int64_t go_at = n * os[0] + d * os[2] + h * os[3] + w * os[4];
                    GS_T gx = 0, gy = 0, gz = 0;
                    if (p.valid && e->interp == 1) {
                        int64_t x = (int64_t)nearbyint(p.x), y = (int64_t)nearbyint(p.y), z = (int64_t)nearbyint(p.z);
                        if (acc != NULL && x >= 0 && x < in[4] && y >= 0 && y < in[3] && z >= 0 && z < in[2]) {
                            for (int64_t c = 0; c < od[1]; c++) {
                                acc[(n * in[1] + c) * vol + (z * in[3] + y) * in[4] + x] +=
                                    (GS_T)emu_load(&e->grad_output, go_at + c * os[1]);
                            }
                        }
                    } else if (p.valid) {
                        int64_t x0 = (int64_t)floor(p.x), y0 = (int64_t)floor(p.y), z0 = (int64_t)floor(p.z);
                        GS_T wx[2] = {(GS_T)(x0 + 1) - p.x, p.x - (GS_T)x0};
                        GS_T wy[2] = {(GS_T)(y0 + 1) - p.y, p.y - (GS_T)y0};
                        GS_T wz[2] = {(GS_T)(z0 + 1) - p.z, p.z - (GS_T)z0};
                        for (int64_t c = 0; c < od[1]; c++) {
                            GS_T g = (GS_T)emu_load(&e->grad_output, go_at + c * os[1]);
                            int64_t base = n * is[0] + c * is[1];
                            GS_T *plane = acc != NULL ? acc + (n * in[1] + c) * vol : NULL;
                            for (int bz = 0; bz < 2; bz++) {
                                for (int by = 0; by < 2; by++) {
                                    for (int bx = 0; bx < 2; bx++) {
                                        int64_t x = x0 + bx, y = y0 + by, z = z0 + bz;
                                        if (x < 0 || x >= in[4] || y < 0 || y >= in[3] || z < 0 || z >= in[2]) {
                                            continue;
                                        }
                                        if (plane != NULL) {
                                            plane[(z * in[3] + y) * in[4] + x] += (wx[bx] * wy[by] * wz[bz]) * g;
                                        }
                                        GS_T v = (GS_T)emu_load(&e->input, base + z * is[2] + y * is[3] + x * is[4]);
                                        /* low corner on an axis: minus; high corner: plus */
                                        gx += (bx ? 1 : -1) * (v * wy[by] * wz[bz] * g);
                                        gy += (by ? 1 : -1) * (v * wx[bx] * wz[bz] * g);
                                        gz += (bz ? 1 : -1) * (v * wx[bx] * wy[by] * g);
                                    }
                                }
                            }
                        }
                    }
                    if (e->mask[1]) {
                        /* nearest, and points lost to the sentinel, get zeros */
                        int valid_bilinear = p.valid && e->interp == 0;
                        int64_t at = n * gg[0] + d * gg[1] + h * gg[2] + w * gg[3];
                        emu_store(&e->grid_grad, at, valid_bilinear ? (double)(p.mx * gx) : 0.0);
                        emu_store(&e->grid_grad, at + gg[4], valid_bilinear ? (double)(p.my * gy) : 0.0);
                        emu_store(&e->grid_grad, at + 2 * gg[4], valid_bilinear ? (double)(p.mz * gz) : 0.0);
                    }
                }
            }
        }
    }
}

#undef GS_FN
#undef GS_CAT
#undef GS_CAT_
