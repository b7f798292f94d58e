"""The fuzz of max_pool3d_with_argmax_backward: its property and its reference (the indices it
is given come from the forward's reference)."""

from __future__ import annotations

from math import prod

import numpy as np
from hypothesis import strategies as st

import pyaclnn
from pyaclnn.kernels import max_pool3d as kpool

from ..outcomes import NAMES, judge
from ..strategies import (
    BACKEND,
    BAD_DTYPES,
    FLOATS,
    LAYOUTS,
    Dev,
    array_kind,
    bad_int_param,
    junk_flag,
    make_array,
    relayout,
)
from .max_pool3d_with_argmax import POOL_PARAMS, pool_input
from .max_pool3d_with_argmax import reference as ref_max_pool


def reference(a: dict):
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


CATEGORIES = [
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


def prop(backend: str, category: str, data, counts) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    x = pool_input(data, rng)
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
        reference,
        False,
        counts,
    )
