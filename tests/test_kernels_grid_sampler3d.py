"""The grid-sampler kernels against PyTorch CPU (torch.ops.aten.grid_sampler_3d*), and the
tuned paths against the reference.

The reference (pyaclnn.kernels.grid_sampler3d) and the tuned NumPy paths
(pyaclnn.kernels._tuned.grid_sampler3d, its arguments grouped as the compiled
kernels take them, called here through ``TUNED`` with the reference's); the ``kernels``
fixture runs a test on each. The tuned paths' chunking and threads are tested
on them alone, calls a plan never makes (empty tensors) on the reference alone.

fp32/fp64 are compared with PyTorch in the same dtype. fp16/bf16 are compared
with PyTorch's fp32 result on the upcast inputs, rounded once to the dtype
(the device computes them in fp32 and rounds once), allowing 1 ulp.
"""

from __future__ import annotations

import itertools
import zlib
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

from pyaclnn.kernels import grid_sampler3d as gs
from pyaclnn.kernels._tuned import grid_sampler3d as tuned

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BF16]
# The tuned kernels take their arguments grouped, as the compiled ones do: called here with
# the reference's arguments.
TUNED = SimpleNamespace(
    grid_sampler3d=lambda x, grid, im, pm, ac, out: tuned.grid_sampler3d((x, grid), (im, pm, ac), out),
    grid_sampler3d_backward=lambda go, x, grid, im, pm, ac, gi, gg: tuned.grid_sampler3d_backward(
        (go, x, grid), (im, pm, ac), (gi, gg)
    ),
)
IMPLEMENTATIONS = {"reference": gs, "tuned": TUNED}


@pytest.fixture(params=list(IMPLEMENTATIONS))
def kernels(request):
    """The reference or the tuned NumPy kernels (called with the reference's arguments)."""
    return IMPLEMENTATIONS[request.param]


MODES = list(
    itertools.product([gs.BILINEAR, gs.NEAREST], [gs.ZEROS, gs.BORDER, gs.REFLECTION], [False, True])
)


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _torch_results(torch, go, inp, grid, interp, padding, align):
    """PyTorch's (out, input_grad, grid_grad) in the compute dtype, as NumPy."""
    ct = _compute_dtype(inp.dtype)

    def t(a):
        return torch.from_numpy(np.ascontiguousarray(a).astype(ct))

    out = torch.ops.aten.grid_sampler_3d(t(inp), t(grid), interp, padding, align)
    gi, gg = torch.ops.aten.grid_sampler_3d_backward(
        t(go), t(inp), t(grid), interp, padding, align, [True, True]
    )
    return out.numpy(), gi.numpy(), gg.numpy()


def _ulp(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Spacing of ``dtype`` at |x| (x already representable in dtype)."""
    fi = ml_dtypes.finfo(dtype) if dtype == BF16 else np.finfo(dtype)
    mag = np.maximum(np.abs(x.astype(np.float64)), float(fi.smallest_normal))
    return np.exp2(np.floor(np.log2(mag)) - fi.nmant)


def assert_matches(ours: np.ndarray, ref: np.ndarray, dtype: np.dtype, what: str) -> None:
    """Compare a kernel output (in ``dtype``) with PyTorch's compute-dtype result."""
    ours64 = np.asarray(ours).astype(np.float64)
    ref64 = np.asarray(ref).astype(np.float64)
    scale = float(np.max(np.abs(ref64), initial=0.0))
    if dtype == np.float64:
        np.testing.assert_allclose(ours64, ref64, rtol=1e-12, atol=1e-12 * scale, err_msg=what)
    elif dtype == np.float32:
        np.testing.assert_allclose(ours64, ref64, rtol=1e-5, atol=1e-5 * scale, err_msg=what)
    else:
        rounded = ref.astype(dtype)
        err = np.abs(ours64 - rounded.astype(np.float64))
        # 1 ulp of the rounded reference, plus fp32 reordering noise near cancellation.
        tol = _ulp(rounded, dtype) + 1e-5 * scale
        bad = ~(err <= tol)
        assert not bad.any(), (
            f"{what}: {bad.sum()} of {bad.size} differ by more than 1 ulp; "
            f"first at {np.argwhere(bad)[0]}: ours {ours64[bad][0]} ref {rounded.astype(np.float64)[bad][0]}"
        )


def _normalize(i: np.ndarray, size: int, align: bool) -> np.ndarray:
    """Normalized coordinate of the unnormalized source coordinate i."""
    if align:
        return 2 * i / max(size - 1, 1) - 1
    return (2 * i + 1) / size - 1


def _special_grid(rng, n, out_dims, in_dims, align):
    """Grid mixing random points, points far outside [-1, 1], exact borders,
    cell centres and half-way points (ties of nearest rounding)."""
    Do, Ho, Wo = out_dims
    g = rng.uniform(-1.2, 1.2, (n, Do, Ho, Wo, 3))
    kind = rng.integers(0, 5, g.shape)
    for axis, size in enumerate((in_dims[2], in_dims[1], in_dims[0])):  # x->W, y->H, z->D
        sl = (..., axis)
        centres = _normalize(rng.integers(-1, size + 1, g[sl].shape).astype(np.float64), size, align)
        halves = _normalize(rng.integers(-2, size + 1, g[sl].shape) + 0.5, size, align)
        far = rng.choice([-1, 1], g[sl].shape) * rng.uniform(1.5, 4.0, g[sl].shape)
        border = rng.choice([-1.0, 1.0], g[sl].shape)
        choices = [kind[sl] == 1, kind[sl] == 2, kind[sl] == 3, kind[sl] == 4]
        g[sl] = np.select(choices, [centres, halves, far, border], g[sl])
    return g


def _strided(rng, shape, dtype, layout, fill=None):
    """An array of ``shape`` in one of several layouts: 'c' contiguous,
    'cl' channels-last view (dims 1 and -1 swapped in storage), 'step' a view
    with steps and offsets into a larger buffer."""

    def make(storage_shape):
        if fill is None:
            return rng.standard_normal(storage_shape).astype(dtype)
        return np.full(storage_shape, fill, dtype=dtype)

    if layout == "c":
        return make(shape)
    if layout == "cl":
        st = (shape[0], *shape[2:], shape[1])
        return np.moveaxis(make(st), -1, 1)
    big = make(tuple(2 * s + 1 for s in shape))
    return big[tuple(slice(1, 1 + 2 * s, 2) for s in shape)]


# --------------------------------------------------------------------------
# The seed document example
# --------------------------------------------------------------------------


def test_seed_example_matches_hand_computed_values(kernels):
    # Expected values worked out by hand (docs/operator-semantics.md,
    # GridSampler3D: coordinates and GridSampler3DBackward: math; unnormalize
    # with align_corners=False: i = ((c+1)*S-1)/2, multipliers W/2=1.5, H/2=1.5,
    # D/2=0.5; only in-bounds corners count) and confirmed with
    # torch.ops.aten.grid_sampler_3d_backward in fp64.
    go = np.ones((1, 1, 1, 2, 2), np.float32)
    inp = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 1, 3, 3)
    grid = np.array([-1, -1, 0, -1, 1, -1, -1, 0, 0, 0, 1, 0], np.float32).reshape(1, 1, 2, 2, 3)
    gi = np.full(inp.shape, np.nan, np.float32)
    gg = np.full(grid.shape, np.nan, np.float32)
    kernels.grid_sampler3d_backward(go, inp, grid, gs.BILINEAR, gs.ZEROS, False, gi, gg)
    np.testing.assert_array_equal(gi[0, 0, 0], [[0.25, 0, 0], [0.5, 0, 0], [0.125, 0.5, 0]])
    np.testing.assert_array_equal(
        gg[0, 0],
        [[[0.75, 0.75, -0.125], [2.625, -2.625, 0.875]], [[6.0, 2.25, -1.0], [0.75, -12.0, -2.0]]],
    )


# --------------------------------------------------------------------------
# Randomized matrix against PyTorch
# --------------------------------------------------------------------------


def _random_case(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3))
    c = int(rng.choice([1, 2, 3, 5]))
    in_dims = tuple(int(v) for v in rng.choice([1, 2, 3, 4, 7], 3))
    out_dims = tuple(int(v) for v in rng.choice([1, 2, 3, 5], 3))
    return rng, n, c, in_dims, out_dims


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("interp,padding,align", MODES)
@pytest.mark.parametrize("variant", range(3))
def test_forward_and_backward_match_torch(kernels, torch, dtype, interp, padding, align, variant):
    seed = zlib.crc32(repr((dtype.name, interp, padding, align, variant)).encode())
    rng, n, c, in_dims, out_dims = _random_case(seed)
    layouts = ["c", "cl", "step"]
    lay_in, lay_go, lay_grid, lay_out = (layouts[(variant + k) % 3] for k in range(4))
    inp = _strided(rng, (n, c, *in_dims), dtype, lay_in)
    grid = _special_grid(rng, n, out_dims, in_dims, align).astype(dtype)
    if lay_grid == "step":
        buf = np.zeros((n, *(2 * s for s in out_dims), 5), dtype)
        buf[:, ::2, ::2, ::2, 1:4] = grid
        grid = buf[:, ::2, ::2, ::2, 1:4]
    go = _strided(rng, (n, c, *out_dims), dtype, lay_go)
    originals = [a.copy() for a in (inp, grid, go)]

    out = _strided(rng, (n, c, *out_dims), dtype, lay_out, fill=np.nan)
    gi = _strided(rng, inp.shape, dtype, lay_out, fill=np.nan)
    gg = _strided(rng, grid.shape, dtype, lay_out, fill=np.nan)  # 'cl': a permuted view
    kernels.grid_sampler3d(inp, grid, interp, padding, align, out)
    kernels.grid_sampler3d_backward(go, inp, grid, interp, padding, align, gi, gg)

    r_out, r_gi, r_gg = _torch_results(torch, go, inp, grid, interp, padding, align)
    assert_matches(out, r_out, dtype, "out")
    assert_matches(gi, r_gi, dtype, "input_grad")
    assert_matches(gg, r_gg, dtype, "grid_grad")
    for a, orig in zip((inp, grid, go), originals):
        np.testing.assert_array_equal(a, orig)  # inputs untouched
    if lay_out == "step":
        # Nothing outside the output views was written.
        for a in (out, gi, gg):
            outside = np.ones(a.base.shape, bool)
            outside[tuple(slice(1, 1 + 2 * s, 2) for s in a.shape)] = False
            assert np.isnan(a.base[outside].astype(np.float32)).all()


@pytest.mark.parametrize("interp,padding,align", MODES)
def test_fp32_case_spanning_several_chunks_threads_and_batches(torch, monkeypatch, interp, padding, align):
    # Small chunks on the thread pool, and two batch items sharing the buffers.
    monkeypatch.setattr(tuned, "_CHUNK_POINTS", 256)
    monkeypatch.setattr(tuned, "_GATHER_BYTES", 1 << 12)  # several gathers per chunk
    monkeypatch.setattr(tuned, "PARALLEL_MIN_POINTS", 0)
    rng = np.random.default_rng(7)
    n, c, in_dims, out_dims = 2, 3, (5, 9, 11), (6, 9, 13)
    assert np.prod(out_dims) > 2 * tuned._chunk_points(c)
    inp = rng.standard_normal((n, c, *in_dims)).astype(np.float32)
    grid = _special_grid(rng, n, out_dims, in_dims, align).astype(np.float32)
    go = rng.standard_normal((n, c, *out_dims)).astype(np.float32)
    out = np.empty(go.shape, np.float32)
    gi = np.empty(inp.shape, np.float32)
    gg = np.empty(grid.shape, np.float32)
    TUNED.grid_sampler3d(inp, grid, interp, padding, align, out)
    TUNED.grid_sampler3d_backward(go, inp, grid, interp, padding, align, gi, gg)
    r_out, r_gi, r_gg = _torch_results(torch, go, inp, grid, interp, padding, align)
    assert_matches(out, r_out, np.dtype(np.float32), "out")
    assert_matches(gi, r_gi, np.dtype(np.float32), "input_grad")
    assert_matches(gg, r_gg, np.dtype(np.float32), "grid_grad")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("mask", [(True, False), (False, True)])
@pytest.mark.parametrize("interp", [gs.BILINEAR, gs.NEAREST])
def test_backward_with_one_output_not_requested(kernels, torch, dtype, mask, interp):
    rng = np.random.default_rng(11)
    inp = rng.standard_normal((2, 3, 4, 5, 3)).astype(dtype)
    grid = _special_grid(rng, 2, (3, 2, 4), (4, 5, 3), False).astype(dtype)
    go = rng.standard_normal((2, 3, 3, 2, 4)).astype(dtype)
    gi = np.full(inp.shape, np.nan, dtype) if mask[0] else None
    gg = np.full(grid.shape, np.nan, dtype) if mask[1] else None
    kernels.grid_sampler3d_backward(go, inp, grid, interp, gs.BORDER, False, gi, gg)
    _, r_gi, r_gg = _torch_results(torch, go, inp, grid, interp, gs.BORDER, False)
    if mask[0]:
        assert_matches(gi, r_gi, dtype, "input_grad")
    else:
        assert_matches(gg, r_gg, dtype, "grid_grad")


def test_nearest_rounds_half_to_even(kernels, torch):
    # Unnormalized x = 0.5, 1.5, 2.5, 3.5 (align_corners=False, W=5): ties go to
    # the even cell 0, 2, 2, 4.
    inp = np.arange(5, dtype=np.float32).reshape(1, 1, 1, 1, 5) * 10
    xs = _normalize(np.array([0.5, 1.5, 2.5, 3.5]), 5, False)
    grid = np.zeros((1, 1, 1, 4, 3), np.float32)
    grid[0, 0, 0, :, 0] = xs
    out = np.empty((1, 1, 1, 1, 4), np.float32)
    kernels.grid_sampler3d(inp, grid, gs.NEAREST, gs.ZEROS, False, out)
    np.testing.assert_array_equal(out.ravel(), [0, 20, 20, 40])
    r_out, r_gi, _ = _torch_results(torch, np.ones_like(out), inp, grid, gs.NEAREST, gs.ZEROS, False)
    np.testing.assert_array_equal(out, r_out)
    gi = np.empty_like(inp)
    gg = np.full(grid.shape, np.nan, np.float32)
    kernels.grid_sampler3d_backward(np.ones_like(out), inp, grid, gs.NEAREST, gs.ZEROS, False, gi, gg)
    np.testing.assert_array_equal(gi.ravel(), [1, 0, 2, 0, 1])
    np.testing.assert_array_equal(gi, r_gi)
    np.testing.assert_array_equal(gg, 0)


# --------------------------------------------------------------------------
# Non-finite and huge coordinates
# --------------------------------------------------------------------------

SPECIALS = [np.nan, np.inf, -np.inf, 1e30, -1e30]


def _nonfinite_case(dtype, align):
    rng = np.random.default_rng(3)
    in_dims = (3, 4, 5)
    inp = rng.standard_normal((1, 2, *in_dims)).astype(dtype)
    # One point per (special value, axis), the other two coordinates finite and inside.
    pts = []
    for v in SPECIALS:
        for axis in range(3):
            p = list(rng.uniform(-0.8, 0.8, 3))
            p[axis] = v
            pts.append(p)
    grid = np.array(pts, np.float64).reshape(1, 1, 1, len(pts), 3).astype(dtype)
    go = rng.standard_normal((1, 2, 1, 1, len(pts))).astype(dtype)
    return inp, grid, go


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64)], ids=lambda d: d.name)
@pytest.mark.parametrize("padding", [gs.ZEROS, gs.BORDER, gs.REFLECTION])
@pytest.mark.parametrize("interp", [gs.BILINEAR, gs.NEAREST])
@pytest.mark.parametrize("align", [False, True])
def test_nonfinite_and_huge_coordinates(kernels, torch, dtype, padding, interp, align):
    inp, grid, go = _nonfinite_case(dtype, align)
    out = np.full(go.shape, np.nan, dtype)
    gi = np.full(inp.shape, np.nan, dtype)
    gg = np.full(grid.shape, np.nan, dtype)
    kernels.grid_sampler3d(inp, grid, interp, padding, align, out)
    kernels.grid_sampler3d_backward(go, inp, grid, interp, padding, align, gi, gg)
    r_out, r_gi, r_gg = _torch_results(torch, go, inp, grid, interp, padding, align)

    coords = grid[0, 0, 0].astype(np.float64)  # (points, 3)
    nan = np.isnan(coords).any(axis=1)
    inf = np.isinf(coords).any(axis=1)
    # The rule: which points contribute nothing at all.
    if padding == gs.ZEROS:
        dead = nan | inf | (np.abs(coords) > 1e20).any(axis=1)
    elif padding == gs.BORDER:
        dead = nan
    else:
        dead = nan | inf
    assert dead.any()
    np.testing.assert_array_equal(out[..., dead], 0)
    np.testing.assert_array_equal(gg[0, 0, 0][dead], 0)
    assert np.isfinite(out).all() and np.isfinite(gi).all() and np.isfinite(gg).all()

    # PyTorch's backward follows the same rules on CPU: compare everything.
    assert_matches(gi, r_gi, dtype, "input_grad")
    assert_matches(gg, r_gg, dtype, "grid_grad")
    # PyTorch's forward clamps NaN (and reflects +-inf) instead of dropping the
    # point: compare only the points where it is defined the same way.
    live = ~(nan | (inf & (padding == gs.REFLECTION)))
    assert_matches(out[..., live], r_out[..., live], dtype, "out")
    assert live[-6:].all()  # the +-1e30 points are always compared


@pytest.mark.parametrize("padding", [gs.ZEROS, gs.BORDER, gs.REFLECTION])
def test_nonfinite_coordinate_on_a_size_one_axis_with_align_corners_contributes_nothing(kernels, padding):
    # align_corners with S = 1 turns +-inf into inf * 0 = NaN before padding:
    # the device sentinel drops the point (PyTorch's reflection would put it at 0).
    inp = np.full((1, 1, 1, 2, 2), 3.0, np.float32)
    grid = np.array([[0.0, 0.0, np.inf], [0.0, 0.0, 0.5]], np.float32).reshape(1, 1, 1, 2, 3)
    go = np.ones((1, 1, 1, 1, 2), np.float32)
    out = np.empty(go.shape, np.float32)
    gi = np.empty(inp.shape, np.float32)
    gg = np.full(grid.shape, np.nan, np.float32)
    kernels.grid_sampler3d(inp, grid, gs.BILINEAR, padding, True, out)
    kernels.grid_sampler3d_backward(go, inp, grid, gs.BILINEAR, padding, True, gi, gg)
    np.testing.assert_array_equal(out.ravel(), [0.0, 3.0])
    # Only the finite point lands, at the centre of the 2x2 plane.
    np.testing.assert_array_equal(gi.ravel(), [0.25] * 4)
    np.testing.assert_array_equal(gg, 0)


# --------------------------------------------------------------------------
# Finite differences
# --------------------------------------------------------------------------


def _grid_away_from_boundaries(rng, size, npts, padding, align):
    """Normalized coordinates whose source coordinate is at least 0.1 away
    from integers and, after padding, strictly inside the clip range."""
    cell = rng.integers(0, max(size - 1, 1), npts)
    r = cell + rng.uniform(0.1, 0.9, npts)
    if size == 1:
        r = rng.uniform(-0.4, -0.1, npts) if not align else np.zeros(npts)
    i = r.copy()
    if padding == gs.REFLECTION:
        lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        side = rng.integers(0, 3, npts)
        i = np.where(side == 1, 2 * lo - r, np.where(side == 2, 2 * hi - r, r))
    elif padding == gs.ZEROS:
        # Some points straddle the outer edge: one corner in, one out.
        edge = rng.random(npts) < 0.3
        i = np.where(edge, rng.choice([-1.0, size - 1.0], npts) + rng.uniform(0.1, 0.9, npts), i)
    return _normalize(i, size, align)


@pytest.mark.parametrize("padding", [gs.ZEROS, gs.BORDER, gs.REFLECTION])
@pytest.mark.parametrize("align", [False, True])
def test_grid_grad_matches_central_differences_of_the_forward(kernels, padding, align):
    rng = np.random.default_rng(5)
    in_dims = (3, 4, 5)
    out_dims = (2, 2, 3)
    npts = int(np.prod(out_dims))
    inp = rng.standard_normal((1, 2, *in_dims))
    grid = np.stack(
        [
            _grid_away_from_boundaries(rng, s, npts, padding, align)
            for s in (in_dims[2], in_dims[1], in_dims[0])
        ],
        axis=-1,
    ).reshape(1, *out_dims, 3)
    weight = rng.standard_normal((1, 2, *out_dims))

    def loss(g):
        out = np.empty(weight.shape)
        kernels.grid_sampler3d(inp, g, gs.BILINEAR, padding, align, out)
        return float(np.sum(out * weight))

    gg = np.empty(grid.shape)
    kernels.grid_sampler3d_backward(weight, inp, grid, gs.BILINEAR, padding, align, None, gg)
    eps = 1e-6
    fd = np.empty(grid.shape)
    for j in np.ndindex(grid.shape):
        gp, gm = grid.copy(), grid.copy()
        gp[j] += eps
        gm[j] -= eps
        fd[j] = (loss(gp) - loss(gm)) / (2 * eps)
    np.testing.assert_allclose(gg, fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())
    assert np.abs(fd).max() > 0.1


# --------------------------------------------------------------------------
# Empty tensors
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n,c,in_dims,out_dims",
    [
        (0, 2, (2, 2, 2), (2, 2, 2)),
        (1, 0, (2, 2, 2), (2, 2, 2)),
        (1, 2, (2, 2, 2), (0, 3, 2)),
        (2, 3, (0, 2, 2), (1, 2, 2)),
    ],
)
def test_the_reference_writes_every_element_of_empty_tensors(n, c, in_dims, out_dims):
    rng = np.random.default_rng(0)
    inp = rng.standard_normal((n, c, *in_dims)).astype(np.float32)
    grid = rng.uniform(-1, 1, (n, *out_dims, 3)).astype(np.float32)
    go = rng.standard_normal((n, c, *out_dims)).astype(np.float32)
    out = np.full(go.shape, np.nan, np.float32)
    gi = np.full(inp.shape, np.nan, np.float32)
    gg = np.full(grid.shape, np.nan, np.float32)
    gs.grid_sampler3d(inp, grid, gs.BILINEAR, gs.ZEROS, False, out)
    gs.grid_sampler3d_backward(go, inp, grid, gs.BILINEAR, gs.ZEROS, False, gi, gg)
    # Every element that exists is written: no input cell or no sample gives zeros.
    np.testing.assert_array_equal(out, np.zeros_like(out))
    np.testing.assert_array_equal(gi, np.zeros_like(gi))
    np.testing.assert_array_equal(gg, np.zeros_like(gg))


@pytest.mark.parametrize("channels_per_pass", [1, 2, 3])
@pytest.mark.parametrize("interp", [gs.BILINEAR, gs.NEAREST])
def test_backward_with_points_split_into_cached_groups(torch, monkeypatch, interp, channels_per_pass):
    # Large grids scatter inputGrad group by group into per-channel planes
    # that persist across groups, as many channels per pass over the points as
    # the memory bound allows; force those paths on a small case.
    monkeypatch.setattr(tuned, "_MAX_CACHED_POINTS", 64)
    monkeypatch.setattr(tuned, "_SCATTER_CHUNK", 16)
    monkeypatch.setattr(tuned, "_channels_per_pass", lambda channels, room, plane_bytes: channels_per_pass)
    monkeypatch.setattr(tuned, "_CHUNK_POINTS", 32)  # several gridGrad chunks per group of points
    monkeypatch.setattr(tuned, "PARALLEL_MIN_POINTS", 0)  # on the worker threads, as large grids are
    rng = np.random.default_rng(13)
    inp = rng.standard_normal((2, 3, 4, 5, 6)).astype(np.float32)
    grid = _special_grid(rng, 2, (5, 6, 7), (4, 5, 6), False).astype(np.float32)
    go = rng.standard_normal((2, 3, 5, 6, 7)).astype(np.float32)
    gi = np.full(inp.shape, np.nan, np.float32)
    gg = np.full(grid.shape, np.nan, np.float32)
    TUNED.grid_sampler3d_backward(go, inp, grid, interp, gs.ZEROS, False, gi, gg)
    _, r_gi, r_gg = _torch_results(torch, go, inp, grid, interp, gs.ZEROS, False)
    assert_matches(gi, r_gi, np.dtype(np.float32), "input_grad")
    assert_matches(gg, r_gg, np.dtype(np.float32), "grid_grad")


@pytest.mark.parametrize("interp,padding,align", MODES)
def test_nonfinite_input_values_propagate_like_torch(kernels, torch, interp, padding, align):
    # NaN/inf cells spread only through in-bounds corners: out-of-bounds
    # corners read the zero padding and never meet them.
    rng = np.random.default_rng(17)
    inp = rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    inp.ravel()[[3, 40, 77]] = [np.nan, np.inf, -np.inf]
    grid = _special_grid(rng, 1, (4, 5, 6), (3, 4, 5), align).astype(np.float32)
    go = rng.standard_normal((1, 2, 4, 5, 6)).astype(np.float32)
    out = np.empty(go.shape, np.float32)
    gi = np.empty(inp.shape, np.float32)
    gg = np.empty(grid.shape, np.float32)
    kernels.grid_sampler3d(inp, grid, interp, padding, align, out)
    kernels.grid_sampler3d_backward(go, inp, grid, interp, padding, align, gi, gg)
    r_out, r_gi, r_gg = _torch_results(torch, go, inp, grid, interp, padding, align)
    assert np.isnan(r_out).any() or np.isinf(r_out).any()
    for ours, ref in ((out, r_out), (gi, r_gi), (gg, r_gg)):
        np.testing.assert_array_equal(np.isnan(ours), np.isnan(ref))
        finite = np.isfinite(ref)
        np.testing.assert_array_equal(ours[~finite & ~np.isnan(ref)], ref[~finite & ~np.isnan(ref)])
        scale = np.abs(ref[finite]).max(initial=1)
        np.testing.assert_allclose(ours[finite], ref[finite], rtol=1e-5, atol=1e-5 * scale)


@pytest.mark.parametrize("interp", [0, 1])
def test_results_do_not_depend_on_the_thread_count(monkeypatch, interp):
    monkeypatch.setattr(tuned, "_CHUNK_POINTS", 256)
    monkeypatch.setattr(tuned, "PARALLEL_MIN_POINTS", 0)
    rng = np.random.default_rng(11)
    inp = rng.standard_normal((2, 3, 4, 5, 6)).astype(np.float32)
    grid = rng.uniform(-1.2, 1.2, (2, 5, 6, 7, 3)).astype(np.float32)
    go = rng.standard_normal((2, 3, 5, 6, 7)).astype(np.float32)
    results = []
    for threads in ("1", "2", "5"):
        monkeypatch.setenv("PYACLNN_NUM_THREADS", threads)
        out, gi, gg = (np.empty(a.shape, np.float32) for a in (go, inp, grid))
        TUNED.grid_sampler3d(inp, grid, interp, 0, False, out)
        TUNED.grid_sampler3d_backward(go, inp, grid, interp, 0, False, gi, gg)
        results.append((out, gi, gg))
    for got in results[1:]:
        for a, b in zip(got, results[0]):
            np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------
# The tuned paths against the reference
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("interp,padding,align", MODES)
def test_the_tuned_paths_match_the_reference(dtype, interp, padding, align):
    """The same coordinates, so the same cells and weights: equal to float32 rounding
    (another summation order), NaN and infinities where the reference has them."""
    rng = np.random.default_rng(zlib.crc32(repr((dtype.name, interp, padding, align)).encode()))
    n, c, in_dims, out_dims = 2, 3, (4, 5, 6), (3, 4, 5)
    inp = rng.standard_normal((n, c, *in_dims)).astype(dtype)
    inp.reshape(-1)[[3, 50]] = [np.nan, np.inf]
    grid = _special_grid(rng, n, out_dims, in_dims, align).astype(dtype)
    with np.errstate(over="ignore"):  # 1e30 is inf in float16
        grid.reshape(-1, 3)[:3, 0] = [np.nan, np.inf, 1e30]
    go = rng.standard_normal((n, c, *out_dims)).astype(dtype)
    results = []
    for impl in (gs, TUNED):
        out, gi, gg = (np.full(a.shape, 7, dtype) for a in (go, inp, grid))
        impl.grid_sampler3d(inp, grid, interp, padding, align, out)
        impl.grid_sampler3d_backward(go, inp, grid, interp, padding, align, gi, gg)
        results.append((out, gi, gg))
    for what, ours, ref in zip(("out", "input_grad", "grid_grad"), results[1], results[0]):
        o, r = ours.astype(np.float64), ref.astype(np.float64)
        np.testing.assert_array_equal(np.isnan(o), np.isnan(r), err_msg=what)
        np.testing.assert_array_equal(o[np.isinf(r)], r[np.isinf(r)], err_msg=what)
        finite = np.isfinite(r)
        assert_matches(ours[finite], ref[finite].astype(_compute_dtype(dtype)), dtype, what)
