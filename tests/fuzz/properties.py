"""The fuzz properties of the functional API: per operator, a valid call and one
broken thing per category, handed to :func:`.outcomes.judge`.

:data:`PROPERTIES` and :data:`CATEGORIES` list every property (the low-level
one lives in :mod:`.lowlevel_property`) by the name the tests use.
"""

from __future__ import annotations

from math import prod

import numpy as np
import operators
from hypothesis import strategies as st

import pyaclnn
from pyaclnn import bfloat16

from . import lowlevel_property
from .lowlevel_property import LOWLEVEL_CATEGORIES, prop_lowlevel
from .outcomes import NAMES, judge
from .references import (
    INTERP_MODES,
    PAD_MODES,
    ref_grid,
    ref_grid_backward,
    ref_max_pool,
    ref_max_pool_backward,
)
from .strategies import (
    BACKEND,
    BAD_DTYPES,
    FLOATS,
    LAYOUTS,
    Dev,
    array_kind,
    bad_int_param,
    bad_mode,
    junk_flag,
    make_array,
    other_backend,
    relayout,
)

POOL_PARAMS = ("kernel_size", "stride", "padding", "dilation")


def _pool_input(data, rng, dtype=None, layout="c", nonfinite=False):
    rank = data.draw(st.sampled_from([5, 5, 4]))
    shape = tuple(data.draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank)))
    return make_array(rng, shape, dtype or data.draw(st.sampled_from(FLOATS)), layout, nonfinite)


POOL_FWD_CATEGORIES = [
    "input kind",
    "input dtype",
    "input rank",
    "zero-size",
    "layout",
    "nan/inf",
    *POOL_PARAMS,
    "ceil_mode",
    "indices_dtype",
    "backend",
    "stream",
]


def prop_max_pool_forward(backend: str, category: str, data, counts) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    x = _pool_input(data, rng)
    a = {
        "input": x,
        "kernel_size": data.draw(st.sampled_from([1, 2, (2, 1, 2), [3]])),
        "stride": (),
        "padding": 0,
        "dilation": 1,
        "ceil_mode": data.draw(st.booleans()),
        "indices_dtype": np.int32,
        "backend": BACKEND,
    }
    names = NAMES["input"]
    if category == "input kind":
        a["input"] = array_kind(data, rng, x.shape, x.dtype, category)
    elif category == "input dtype":
        a["input"] = make_array(rng, x.shape, data.draw(st.sampled_from(BAD_DTYPES + FLOATS)))
    elif category == "input rank":
        rank = data.draw(st.sampled_from([0, 1, 2, 3, 6, 7]))
        a["input"] = make_array(
            rng, tuple(data.draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))), np.float32
        )
    elif category == "zero-size":
        shape = list(x.shape)
        shape[data.draw(st.integers(0, len(shape) - 1))] = 0
        a["input"] = make_array(rng, tuple(shape), x.dtype)
    elif category == "layout":
        a["input"] = relayout(x, data.draw(st.sampled_from(LAYOUTS)))
        if data.draw(st.booleans()):
            a["input"] = Dev(a["input"])
    elif category == "nan/inf":
        a["input"] = make_array(rng, x.shape, x.dtype, nonfinite=True)
    elif category in POOL_PARAMS:
        a[category] = data.draw(bad_int_param(allow_empty=True))
        names = NAMES[category] + (("padding",) if category == "kernel_size" else ())
    elif category == "ceil_mode":
        a["ceil_mode"] = data.draw(junk_flag())
        names = NAMES["ceil_mode"]
    elif category == "indices_dtype":
        # strings are left out: see test_a_bad_indices_dtype_string_names_the_argument
        a["indices_dtype"] = data.draw(
            st.sampled_from([np.int64, np.int32, np.float32, np.int16, np.uint32, None, float, bfloat16])
        )
        names = NAMES["indices_dtype"]
    elif category == "backend":
        a["backend"] = data.draw(st.sampled_from(["tpu", "", "NUMPY", "cuda", 0]))
        names = NAMES["backend"]
    elif category == "stream":
        a["stream"] = data.draw(st.sampled_from([0, "stream", object(), "other-backend"]))
        if a["stream"] == "other-backend":
            a["stream"] = OtherStream()
        names = NAMES["stream"]
    judge(
        "max_pool3d_with_argmax",
        category,
        names,
        with_stream(pyaclnn.max_pool3d_with_argmax),
        a,
        backend,
        ref_max_pool,
        True,
        counts,
    )


class OtherStream:
    """Marker: a pyaclnn.Stream of the other backend, created at call time."""


_other_streams: dict[str, pyaclnn.Stream] = {}


def with_stream(fn):
    def wrapped(**kw):
        if isinstance(kw.get("stream"), OtherStream):
            other = other_backend(kw["backend"])
            s = _other_streams.get(other)
            if s is None or s.closed:
                s = _other_streams[other] = pyaclnn.Stream(other)
            kw["stream"] = s
        return fn(**kw)

    return wrapped


POOL_BWD_CATEGORIES = [
    "grad_output kind",
    "grad_output dtype",
    "grad_output shape",
    "input kind",
    "input dtype",
    "input shape",
    "indices values",
    "indices dtype",
    "indices shape",
    "layout",
    "nan/inf",
    *POOL_PARAMS,
    "ceil_mode",
]


def prop_max_pool_backward(backend: str, category: str, data, counts) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    x = _pool_input(data, rng)
    kernel = data.draw(st.sampled_from([1, 2, (2, 1, 2)]))
    base = {
        "input": x,
        "kernel_size": kernel,
        "stride": (),
        "padding": 0,
        "dilation": 1,
        "ceil_mode": data.draw(st.booleans()),
    }
    out, idx = ref_max_pool(base)
    g = make_array(rng, out.shape, x.dtype)
    a = dict(
        grad_output=g,
        input=x,
        indices=idx,
        **{k: v for k, v in base.items() if k != "input"},
        backend=BACKEND,
    )
    plane = prod(x.shape[-3:])
    names = NAMES["grad_output"]
    if category == "grad_output kind":
        a["grad_output"] = array_kind(data, rng, g.shape, g.dtype, category)
    elif category == "grad_output dtype":
        a["grad_output"] = make_array(rng, g.shape, data.draw(st.sampled_from(BAD_DTYPES + FLOATS)))
    elif category == "grad_output shape":
        shape = list(g.shape)
        i = data.draw(st.integers(0, len(shape)))
        shape = (
            shape[:i] + shape[i + 1 :]
            if data.draw(st.booleans())
            else shape[:i] + [data.draw(st.integers(0, 3))] + shape[i + 1 :]
        )
        a["grad_output"] = make_array(rng, tuple(shape), g.dtype)
        names = NAMES["grad_output"] + NAMES["indices"]  # the shape rule names both
    elif category.startswith("input"):
        names = NAMES["input"] + NAMES["grad_output"]
        if category == "input kind":
            a["input"] = array_kind(data, rng, x.shape, x.dtype, category)
        elif category == "input dtype":
            a["input"] = make_array(rng, x.shape, data.draw(st.sampled_from(BAD_DTYPES + FLOATS)))
        else:
            shape = list(x.shape)
            shape[data.draw(st.integers(0, len(shape) - 1))] += data.draw(st.sampled_from([-1, 1, 2]))
            a["input"] = make_array(rng, tuple(max(n, 0) for n in shape), x.dtype)
    elif category == "indices values":
        bad = idx.copy()
        if bad.size:
            flat = bad.reshape(-1)
            flat[data.draw(st.integers(0, flat.size - 1))] = data.draw(
                st.sampled_from([-1, -(2**31), plane, plane + 7, 2**31 - 1])
            )
        if data.draw(st.booleans()):
            bad = bad.astype(np.int64)
            if bad.size and data.draw(st.booleans()):
                bad.reshape(-1)[0] = data.draw(st.sampled_from([2**31, 2**40, -(2**40)]))
        a["indices"] = bad
        names = NAMES["indices"]
    elif category == "indices dtype":
        a["indices"] = idx.astype(
            data.draw(
                st.sampled_from([np.int64, np.float32, np.int16, np.uint8, np.uint32, np.float64, np.bool_])
            )
        )
        names = NAMES["indices"]
    elif category == "indices shape":
        a["indices"] = idx.reshape(idx.shape + (1,)) if data.draw(st.booleans()) else idx[..., :0]
        names = NAMES["indices"] + NAMES["grad_output"]
    elif category == "layout":
        for key in data.draw(st.sets(st.sampled_from(["grad_output", "input", "indices"]), min_size=1)):
            a[key] = relayout(np.asarray(a[key]), data.draw(st.sampled_from(LAYOUTS)))
            if data.draw(st.booleans()):
                a[key] = Dev(a[key])
    elif category == "nan/inf":
        a["grad_output"] = make_array(rng, g.shape, g.dtype, nonfinite=True)
    elif category in POOL_PARAMS:
        a[category] = data.draw(bad_int_param(allow_empty=True))
        names = (
            NAMES[category]
            + NAMES["grad_output"]
            + (("padding",) if category in ("kernel_size", "dilation") else ())
        )
    elif category == "ceil_mode":
        a["ceil_mode"] = data.draw(junk_flag())
        names = NAMES["ceil_mode"] + NAMES["grad_output"]
    judge(
        "max_pool3d_with_argmax_backward",
        category,
        names,
        pyaclnn.max_pool3d_with_argmax_backward,
        a,
        backend,
        ref_max_pool_backward,
        False,
        counts,
    )


GRID_CATEGORIES = [
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


def _grid_inputs(data, rng, dtype):
    n = data.draw(st.integers(1, 2))
    c, d, h, w = (data.draw(st.integers(1, 4)) for _ in range(4))
    do, ho, wo = (data.draw(st.integers(1, 3)) for _ in range(3))
    x = make_array(rng, (n, c, d, h, w), dtype)
    grid = (rng.uniform(-1.3, 1.3, (n, do, ho, wo, 3))).astype(dtype)
    return x, grid


def _grid_case(data, rng, category, a, names_for_mode=True):
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


def prop_grid_forward(backend: str, category: str, data, counts) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    x, grid = _grid_inputs(
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
    names = _grid_case(data, rng, category, a)
    judge("grid_sampler3d", category, names, pyaclnn.grid_sampler3d, a, backend, ref_grid, False, counts)


GRID_BWD_CATEGORIES = GRID_CATEGORIES + ["grad_output kind", "grad_output shape", "output_mask"]


def prop_grid_backward(backend: str, category: str, data, counts) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    dtype = data.draw(st.sampled_from([np.float32, np.float64, np.float16, bfloat16]))
    x, grid = _grid_inputs(data, rng, dtype)
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
            names = _grid_case(data, rng, category, a)
        names = names + NAMES["grad_output"]
    judge(
        "grid_sampler3d_backward",
        category,
        names,
        pyaclnn.grid_sampler3d_backward,
        a,
        backend,
        ref_grid_backward,
        False,
        counts,
    )


# One property per operator of the table (a new operator fails here until it has one), and the low-level API.
PROPERTIES = {
    **operators.per_operator(
        {
            "max_pool3d_with_argmax": prop_max_pool_forward,
            "max_pool3d_with_argmax_backward": prop_max_pool_backward,
            "grid_sampler3d": prop_grid_forward,
            "grid_sampler3d_backward": prop_grid_backward,
        },
        "fuzz properties",
    ),
    "lowlevel": prop_lowlevel,
}
CATEGORIES = {
    **operators.per_operator(
        {
            "max_pool3d_with_argmax": POOL_FWD_CATEGORIES,
            "max_pool3d_with_argmax_backward": POOL_BWD_CATEGORIES,
            "grid_sampler3d": GRID_CATEGORIES,
            "grid_sampler3d_backward": GRID_BWD_CATEGORIES,
        },
        "fuzz categories",
    ),
    "lowlevel": LOWLEVEL_CATEGORIES,
}


def release() -> None:
    """Free what the properties keep between examples: low-level handles, other-backend streams."""
    try:
        lowlevel_property.release_state()
    finally:
        for s in _other_streams.values():
            s.close()
        _other_streams.clear()
