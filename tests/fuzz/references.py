"""The fuzz's reference results: pyaclnn.kernels called directly on host arrays.

These restate the functional layer's argument handling (expanding kernel
sizes, reading modes and layouts) on purpose: they are an independent oracle
for the numpy backend, so they must not share its code.
"""

from __future__ import annotations

import numpy as np

from pyaclnn.kernels import grid_sampler3d as kgrid
from pyaclnn.kernels import max_pool3d as kpool


def _expand(v, default=None):
    v = tuple(int(i) for i in np.atleast_1d(np.asarray(v, dtype=object))) if not isinstance(v, int) else (v,)
    if len(v) == 0:
        return default
    return v * 3 if len(v) == 1 else v


def _pool_geometry(a):
    k = _expand(a["kernel_size"])
    s = _expand(a["stride"], k)
    p = _expand(a["padding"])
    d = _expand(a["dilation"])
    return k, s, p, d, bool(a["ceil_mode"])


def ref_max_pool(a: dict):
    x = np.asarray(a["input"])
    k, s, p, d, ceil = _pool_geometry(a)
    xb = x if x.ndim == 5 else x[np.newaxis]
    spatial = tuple(max(n, 0) for n in kpool.pool_output_shape(xb.shape[2:], k, s, p, d, ceil))
    out = np.zeros(xb.shape[:2] + spatial, x.dtype)
    idx = np.zeros(out.shape, np.int32)
    if out.size and xb.size:
        kpool.max_pool3d_with_argmax(xb, k, s, p, d, ceil, out, idx)
    if x.ndim == 4:
        out, idx = out[0], idx[0]
    return out, idx.astype(np.dtype(a.get("indices_dtype", np.int32)))


def ref_max_pool_backward(a: dict):
    x = np.asarray(a["input"])
    g, i = np.asarray(a["grad_output"]), np.asarray(a["indices"])
    gi = np.zeros(x.shape, x.dtype)
    if x.ndim == 4:
        g, i, gib = g[np.newaxis], i[np.newaxis], gi[np.newaxis]
    else:
        gib = gi
    if g.size and x.size and i.size:
        kpool.max_pool3d_with_argmax_backward(g, i, gib)
    return gi


INTERP_MODES = {"bilinear": 0, "nearest": 1}
PAD_MODES = {"zeros": 0, "border": 1, "reflection": 2}


def _ncdhw(x, layout):
    return np.moveaxis(x, 4, 1) if layout == "NDHWC" else x


def ref_grid(a: dict):
    x, g = np.asarray(a["input"]), np.asarray(a["grid"])
    layout = a.get("layout", "NCDHW")
    xc = _ncdhw(x, layout)
    out = np.zeros((xc.shape[0], xc.shape[1], *g.shape[1:4]), x.dtype)
    if x.size and g.size:
        kgrid.grid_sampler3d(
            xc,
            g,
            _mode(a["interpolation_mode"], INTERP_MODES),
            _mode(a["padding_mode"], PAD_MODES),
            bool(a["align_corners"]),
            out,
        )
    return np.moveaxis(out, 1, 4) if layout == "NDHWC" else out


def ref_grid_backward(a: dict):
    x, g, go = np.asarray(a["input"]), np.asarray(a["grid"]), np.asarray(a["grad_output"])
    layout = a.get("layout", "NCDHW")
    mask = tuple(bool(m) for m in a["output_mask"])
    ig, gg = np.zeros(x.shape, x.dtype), np.zeros(g.shape, x.dtype)
    if x.size and g.size and go.size and any(mask):
        kgrid.grid_sampler3d_backward(
            _ncdhw(go, layout),
            _ncdhw(x, layout),
            g,
            _mode(a["interpolation_mode"], INTERP_MODES),
            _mode(a["padding_mode"], PAD_MODES),
            bool(a["align_corners"]),
            _ncdhw(ig, layout) if mask[0] else None,
            gg if mask[1] else None,
        )
    return (ig if mask[0] else None, gg if mask[1] else None)


def _mode(v, names):
    return names[v] if isinstance(v, str) else int(v)
