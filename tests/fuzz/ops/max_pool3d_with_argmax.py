"""The fuzz of max_pool3d_with_argmax: its property and its reference; also the pooled input
and the pooling parameters its backward shares (:mod:`.max_pool3d_with_argmax_backward`)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import pyaclnn
from pyaclnn import bfloat16
from pyaclnn.kernels import max_pool3d as kpool

from ..outcomes import NAMES, judge
from ..references import expand
from ..strategies import (
    BACKEND,
    BAD_DTYPES,
    FLOATS,
    LAYOUTS,
    Dev,
    OtherStream,
    array_kind,
    bad_int_param,
    junk_flag,
    make_array,
    relayout,
    with_stream,
)

POOL_PARAMS = ("kernel_size", "stride", "padding", "dilation")


def pool_input(data, rng, dtype=None, layout="c", nonfinite=False):
    rank = data.draw(st.sampled_from([5, 5, 4]))
    shape = tuple(data.draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank)))
    return make_array(rng, shape, dtype or data.draw(st.sampled_from(FLOATS)), layout, nonfinite)


def _pool_geometry(a):
    k = expand(a["kernel_size"])
    s = expand(a["stride"], k)
    p = expand(a["padding"])
    d = expand(a["dilation"])
    return k, s, p, d, bool(a["ceil_mode"])


def reference(a: dict):
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


CATEGORIES = [
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


def prop(backend: str, category: str, data, counts) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    x = pool_input(data, rng)
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
        reference,
        True,
        counts,
    )
