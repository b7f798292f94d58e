"""The fuzz of grid_sampler3d_backward: its property (the forward's categories and mutations, and
its own) and its reference."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import pyaclnn
from pyaclnn import bfloat16
from pyaclnn.kernels import grid_sampler3d as kgrid

from ..outcomes import NAMES, judge
from ..references import INTERP_MODES, PAD_MODES, mode_value, ncdhw
from ..strategies import BACKEND, array_kind, junk_flag, make_array
from .grid_sampler3d import CATEGORIES as GRID_CATEGORIES
from .grid_sampler3d import grid_case, grid_inputs


def reference(a: dict):
    x, g, go = np.asarray(a["input"]), np.asarray(a["grid"]), np.asarray(a["grad_output"])
    layout = a.get("layout", "NCDHW")
    mask = tuple(bool(m) for m in a["output_mask"])
    ig, gg = np.zeros(x.shape, x.dtype), np.zeros(g.shape, x.dtype)
    if x.size and g.size and go.size and any(mask):
        kgrid.grid_sampler3d_backward(
            ncdhw(go, layout),
            ncdhw(x, layout),
            g,
            mode_value(a["interpolation_mode"], INTERP_MODES),
            mode_value(a["padding_mode"], PAD_MODES),
            bool(a["align_corners"]),
            ncdhw(ig, layout) if mask[0] else None,
            gg if mask[1] else None,
        )
    return (ig if mask[0] else None, gg if mask[1] else None)


CATEGORIES = GRID_CATEGORIES + ["grad_output kind", "grad_output shape", "output_mask"]


def prop(backend: str, category: str, data, counts) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    dtype = data.draw(st.sampled_from([np.float32, np.float64, np.float16, bfloat16]))
    x, grid = grid_inputs(data, rng, dtype)
    go = make_array(rng, (x.shape[0], x.shape[1], *grid.shape[1:4]), dtype)
    a = {
        "grad_output": go,
        "input": x,
        "grid": grid,
        "interpolation_mode": data.draw(st.sampled_from(["bilinear", "nearest", 0, 1])),
        "padding_mode": data.draw(st.sampled_from(["zeros", "border", "reflection", 1])),
        "align_corners": data.draw(st.booleans()),
        "output_mask": data.draw(
            st.sampled_from([(True, True), (True, False), (False, True), [False, False]])
        ),
        "layout": "NCDHW",
        "backend": BACKEND,
    }
    if category == "grad_output kind":
        a["grad_output"] = array_kind(data, rng, go.shape, go.dtype, category)
        names = NAMES["grad_output"]
    elif category == "grad_output shape":
        shape = list(go.shape)
        shape[data.draw(st.integers(0, 4))] += data.draw(st.sampled_from([-1, 1]))
        a["grad_output"] = make_array(rng, tuple(max(0, n) for n in shape), dtype)
        names = NAMES["grad_output"] + ("N", "C", "grid")
    elif category == "output_mask":
        a["output_mask"] = data.draw(
            st.one_of(
                st.lists(junk_flag(), max_size=4),
                st.lists(st.booleans(), max_size=4).map(tuple),
                st.none(),
                st.text(max_size=3),
                st.integers(),
                st.just(np.array([True, False])),
                st.just({"a": 1}),
            )
        )
        names = NAMES["output_mask"]
    else:
        if category == "layout" and data.draw(st.booleans()):
            # a real channels-last call: every (N, C, ...) array read as (N, D, H, W, C)
            a["input"], a["grad_output"] = np.moveaxis(x, 1, 4), np.moveaxis(go, 1, 4)
            a["layout"] = "NDHWC"
            names = NAMES["layout"]
        else:
            names = grid_case(data, rng, category, a)
        names = names + NAMES["grad_output"]
    judge(
        "grid_sampler3d_backward",
        category,
        names,
        pyaclnn.grid_sampler3d_backward,
        a,
        backend,
        reference,
        False,
        counts,
    )
