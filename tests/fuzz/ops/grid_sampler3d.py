"""The fuzz of grid_sampler3d: its property and its reference; also the inputs, categories and
mutations its backward shares (:mod:`.grid_sampler3d_backward`)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import pyaclnn
from pyaclnn import bfloat16
from pyaclnn.kernels import grid_sampler3d as kgrid

from ..outcomes import NAMES, judge
from ..references import INTERP_MODES, PAD_MODES, mode_value, ncdhw
from ..strategies import (
    BACKEND,
    LAYOUTS,
    Dev,
    array_kind,
    bad_mode,
    junk_flag,
    make_array,
    relayout,
)


def reference(a: dict):
    x, g = np.asarray(a["input"]), np.asarray(a["grid"])
    layout = a.get("layout", "NCDHW")
    xc = ncdhw(x, layout)
    out = np.zeros((xc.shape[0], xc.shape[1], *g.shape[1:4]), x.dtype)
    if x.size and g.size:
        kgrid.grid_sampler3d(
            xc,
            g,
            mode_value(a["interpolation_mode"], INTERP_MODES),
            mode_value(a["padding_mode"], PAD_MODES),
            bool(a["align_corners"]),
            out,
        )
    return np.moveaxis(out, 1, 4) if layout == "NDHWC" else out


CATEGORIES = [
    "input kind",
    "dtype",
    "input rank",
    "input shape",
    "grid kind",
    "grid dtype",
    "grid shape",
    "grid values",
    "interpolation_mode",
    "padding_mode",
    "align_corners",
    "layout",
    "strides",
]


def grid_inputs(data, rng, dtype):
    n = data.draw(st.integers(1, 2))
    c, d, h, w = (data.draw(st.integers(1, 4)) for _ in range(4))
    do, ho, wo = (data.draw(st.integers(1, 3)) for _ in range(3))
    x = make_array(rng, (n, c, d, h, w), dtype)
    grid = (rng.uniform(-1.3, 1.3, (n, do, ho, wo, 3))).astype(dtype)
    return x, grid


def grid_case(data, rng, category, a, names_for_mode=True):
    """Mutations shared by the forward and the backward; returns the names the error must mention."""
    x, grid = a["input"], a["grid"]
    names = NAMES["input"]
    if category == "input kind":
        a["input"] = array_kind(data, rng, x.shape, x.dtype, category)
    elif category == "dtype":
        dt = data.draw(st.sampled_from([np.float64, np.float16, bfloat16, np.int32, np.complex64, np.bool_]))
        for key in ("input", "grid", "grad_output"):
            if key in a:
                a[key] = np.asarray(a[key]).astype(dt)
    elif category == "input rank":
        rank = data.draw(st.sampled_from([0, 1, 3, 4, 6]))
        a["input"] = make_array(
            rng, tuple(data.draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))), x.dtype
        )
    elif category == "input shape":
        shape = list(x.shape)
        shape[data.draw(st.integers(0, 4))] = data.draw(st.sampled_from([0, 5]))
        a["input"] = make_array(rng, tuple(shape), x.dtype)
        names = NAMES["input"] + ("N", "C", "grad_output", "gradOutput", "out")
    elif category == "grid kind":
        a["grid"] = array_kind(data, rng, grid.shape, grid.dtype, category)
        names = NAMES["grid"]
    elif category == "grid dtype":
        a["grid"] = grid.astype(data.draw(st.sampled_from([np.float64, np.float32, np.float16, np.int32])))
        names = NAMES["grid"]
    elif category == "grid shape":
        shape = list(grid.shape)
        if data.draw(st.booleans()):
            shape[data.draw(st.integers(0, 4))] = data.draw(st.sampled_from([0, 2, 4]))
        else:
            shape = shape[:-1] if data.draw(st.booleans()) else shape + [1]
        a["grid"] = rng.uniform(-1, 1, shape).astype(grid.dtype)
        names = NAMES["grid"] + ("N", "grad_output", "gradOutput")
    elif category == "grid values":
        special = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 2.0**31, -(2.0**31), 1.0, -1.0, 0.0])
        g = rng.uniform(-1.5, 1.5, grid.shape)
        where = rng.random(g.shape) < 0.4
        g[where] = rng.choice(special, size=int(where.sum()))
        with np.errstate(over="ignore"):  # 1e30 in float16 is inf: also a fine coordinate
            a["grid"] = g.astype(grid.dtype)
    elif category in ("interpolation_mode", "padding_mode"):
        modes = INTERP_MODES if category == "interpolation_mode" else PAD_MODES
        a[category] = data.draw(bad_mode(list(modes)))
        names = NAMES[category]
    elif category == "align_corners":
        a["align_corners"] = data.draw(junk_flag())
        names = NAMES["align_corners"]
    elif category == "layout":
        a["layout"] = data.draw(st.sampled_from(["NDHWC", "NCDHW", "ndhwc", "ND", "", None, 30]))
        names = NAMES["layout"] + NAMES["input"] + ("C",)
    elif category == "strides":
        for key in ("input", "grid", "grad_output"):
            if key in a and data.draw(st.booleans()):
                a[key] = relayout(np.asarray(a[key]), data.draw(st.sampled_from(LAYOUTS)))
                if data.draw(st.booleans()):
                    a[key] = Dev(a[key])
    return names


def prop(backend: str, category: str, data, counts) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    x, grid = grid_inputs(
        data, rng, data.draw(st.sampled_from([np.float32, np.float64, np.float16, bfloat16]))
    )
    a = {
        "input": x,
        "grid": grid,
        "interpolation_mode": data.draw(st.sampled_from(["bilinear", "nearest", 0, 1])),
        "padding_mode": data.draw(st.sampled_from(["zeros", "border", "reflection", 2])),
        "align_corners": data.draw(st.booleans()),
        "layout": "NCDHW",
        "backend": BACKEND,
    }
    names = grid_case(data, rng, category, a)
    judge("grid_sampler3d", category, names, pyaclnn.grid_sampler3d, a, backend, reference, False, counts)
