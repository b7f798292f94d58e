"""Property-based bad-input tests of the functional and the low-level API, on both backends.

Each example starts from a valid call and breaks one thing (its *category*):
wrong kinds of arrays (None, lists, DeviceArrays of the other backend, closed
DeviceArrays), wrong dtypes, ranks and shapes, zero-size and non-contiguous
arrays, NaN/Inf data, bad or huge (beyond int64) kernel/stride/padding/
dilation, bad modes, masks, layouts and indices. Every call must

* raise AclnnError, AclError, TypeError or ValueError with a non-empty
  message that names the broken argument (Python or C spelling, e.g.
  ``kernel_size`` / ``kernelSize``), or
* return the reference result: ``pyaclnn.kernels`` on host arrays for the
  numpy backend; the numpy backend's result for npu over the emulator (which
  must then also accept the call, and reject what numpy rejects with the same
  status);

and must never modify its inputs. The numpy backend runs in this process;
npu runs in a child process (the emulator is C: a crash must not take pytest
down), which compares against the numpy backend in the same child.

A known, still open bug can be tolerated by the fuzz through ``KNOWN`` (counted under
``known:<id>``) while a strict xfail test below pins it; remove the entry with the fix.

Examples per property: 300 by default (split evenly over its categories; Hypothesis stops a
category early when its space is exhausted), ``PYACLNN_FUZZ_EXAMPLES`` for more.
With ``PYACLNN_FUZZ_REPORT=<file>`` each property appends its per-category
counts to that file as one JSON line.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyaclnn
from pyaclnn import AclError, AclnnError, acl, aclnn, backends, bfloat16, runtime
from pyaclnn.dtypes import ACL_FLOAT, ACL_FORMAT_NCDHW, ACL_FORMAT_ND, ACL_INT32
from pyaclnn.kernels import grid_sampler3d as kgrid
from pyaclnn.kernels import max_pool3d as kpool

DEFAULT_EXAMPLES = 300
EXAMPLES = int(os.environ.get("PYACLNN_FUZZ_EXAMPLES", str(DEFAULT_EXAMPLES)))
HERE = Path(__file__).resolve().parent
ALLOWED = (AclnnError, AclError, TypeError, ValueError)

SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)

INT64_MAX = 2**63 - 1
HUGE_INTS = [2**31 - 1, 2**31, 2**62, INT64_MAX, 2**63, 2**64, -(2**63), -(2**63) - 1, -(2**70)]

NAMES = {
    "input": ("input", "self"),
    "grad_output": ("grad_output", "gradOutput"),
    "indices": ("indices",),
    "indices_dtype": ("indices_dtype", "indices"),
    "grid": ("grid",),
    "kernel_size": ("kernel_size", "kernelSize"),
    "stride": ("stride",),
    "padding": ("padding",),
    "dilation": ("dilation",),
    "ceil_mode": ("ceil_mode", "ceilMode"),
    "interpolation_mode": ("interpolation_mode", "interpolationMode"),
    "padding_mode": ("padding_mode", "paddingMode"),
    "align_corners": ("align_corners", "alignCorners"),
    "output_mask": ("output_mask", "outputMask"),
    "layout": ("layout",),
    "backend": ("backend",),
    "stream": ("stream",),
}
POOL_PARAMS = ("kernel_size", "stride", "padding", "dilation")


# -- known bugs: (id, predicate(category, exc or None, backend)) -------------------------------


KNOWN: dict[str, Callable[[str, BaseException | None, str], bool]] = {
    # "<id>": predicate(category, error, backend) -> True for the known bug's symptom. Empty: every bug the
    # fuzz found so far (OverflowError on npu, int() of junk on numpy, huge kernels) is fixed.
}


# -- values -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dev:
    """A NumPy array to pass as a DeviceArray: on the call's backend, the other one, or closed."""

    array: np.ndarray
    where: str = "same"  # same | other | closed


def other_backend(name: str) -> str:
    return "npu" if name == "numpy" else "numpy"


class _Backend:
    """Marker: the backend the call runs on (so one set of arguments serves both backends)."""

    def __repr__(self) -> str:
        return "BACKEND"


BACKEND = _Backend()


def realize(value: Any, backend: str, made: list) -> Any:
    if value is BACKEND:
        return backend
    if isinstance(value, Dev):
        target = backend if value.where != "other" else other_backend(backend)
        d = pyaclnn.to_device(value.array, backend=target)
        made.append(d)
        if value.where == "closed":
            d.close()
        return d
    return value


def host(value: Any) -> Any:
    return value.array if isinstance(value, Dev) else value


FLOATS = [np.float32, np.float16, bfloat16]
BAD_DTYPES = [np.float64, np.int32, np.int64, np.int8, np.uint8, np.bool_, np.complex64]


def make_array(
    rng: np.random.Generator, shape, dtype, layout: str = "c", nonfinite: bool = False
) -> np.ndarray:
    values = rng.standard_normal(shape) * 2
    if nonfinite and values.size:
        where = rng.random(values.shape) < 0.25
        values[where] = rng.choice([np.nan, np.inf, -np.inf], size=int(where.sum()))
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        a = np.round(values * 3).astype(dtype)
    elif dtype.kind == "b":
        a = values > 0
    else:
        a = values.astype(dtype)
    return relayout(a, layout)


def relayout(a: np.ndarray, layout: str) -> np.ndarray:
    """The same values (for "broadcast": the first slice repeated) in another memory layout."""
    if a.ndim == 0 or a.size == 0 or layout == "c":
        return a
    if layout == "strided":
        big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        big[..., ::2] = a
        return big[..., ::2]
    if layout == "transposed":
        order = tuple(reversed(range(a.ndim)))
        return np.ascontiguousarray(a.transpose(order)).transpose(order)
    if layout == "reversed":
        return np.ascontiguousarray(a[..., ::-1])[..., ::-1]
    if layout == "broadcast":
        return np.broadcast_to(a[:1], a.shape)
    raise AssertionError(layout)


LAYOUTS = ["c", "strided", "transposed", "reversed", "broadcast"]


def bad_int_param(allow_empty: bool = True):
    """kernel_size / stride / padding / dilation values: mostly wrong, sometimes right."""
    ints = st.one_of(st.integers(-3, 5), st.sampled_from(HUGE_INTS), st.integers(0, 3).map(np.int64))
    junk = st.one_of(
        st.none(),
        st.floats(allow_nan=True),
        st.text(max_size=3),
        st.booleans(),
        st.just(np.float32(2.0)),
        st.just(object()),
    )
    seqs = st.lists(st.one_of(ints, junk), min_size=0 if allow_empty else 1, max_size=5)
    return st.one_of(
        ints,
        junk,
        seqs,
        seqs.map(tuple),
        st.lists(st.integers(-3, 5), min_size=1, max_size=4).map(lambda v: np.array(v)),
        st.just(np.ones((1, 3), int)),
        st.lists(st.lists(st.integers(1, 3), max_size=2), max_size=2),
    )


def junk_flag():
    return st.one_of(
        st.booleans(),
        st.integers(-2, 2),
        st.just(2**70),
        st.none(),
        st.text(max_size=3),
        st.floats(allow_nan=True),
        st.just(np.bool_(True)),
        st.just([True]),
    )


def bad_mode(names: list[str]):
    return st.one_of(
        st.sampled_from(names + ["bicubic", "", "BILINEAR", "linear", "zero"]),
        st.integers(-3, 4),
        st.sampled_from(HUGE_INTS),
        st.none(),
        st.floats(),
        st.booleans(),
        st.just([0]),
        st.just(np.int32(1)),
    )


def array_kind(data, rng, shape, dtype, category: str):
    """Replacement for an array argument in its 'kind' category."""
    choice = data.draw(st.sampled_from(["none", "list", "scalar", "str", "other", "closed", "object", "dev"]))
    if choice == "none":
        return None
    if choice == "list":
        return make_array(rng, shape, dtype).tolist()
    if choice == "scalar":
        return 1.5
    if choice == "str":
        return "array"
    if choice == "object":
        return np.empty(shape, dtype=object)
    return Dev(make_array(rng, shape, dtype), {"other": "other", "closed": "closed", "dev": "same"}[choice])


# -- running one call ------------------------------------------------------------------------


@dataclass
class Outcome:
    result: Any = None
    error: BaseException | None = None


def snapshot(values) -> list:
    snaps = []
    for v in values:
        if isinstance(v, np.ndarray) and v.dtype != object:
            snaps.append((v, v.copy()))
            if isinstance(v.base, np.ndarray):
                snaps.append((v.base, v.base.copy()))
        elif isinstance(v, pyaclnn.DeviceArray) and not v.closed:
            snaps.append((v, v.numpy()))
    return snaps


def assert_unmodified(snaps) -> None:
    for original, copy in snaps:
        now = original.numpy() if isinstance(original, pyaclnn.DeviceArray) else original
        assert np.array_equal(
            np.ascontiguousarray(now).view(np.uint8), np.ascontiguousarray(copy).view(np.uint8)
        ), "an input was modified"


def to_host(result) -> Any:
    if isinstance(result, tuple):
        return tuple(to_host(r) for r in result)
    if isinstance(result, pyaclnn.DeviceArray):
        try:
            return result.numpy()
        finally:
            result.close()
    return result


def call(fn: Callable, backend: str, args: dict) -> Outcome:
    made: list = []
    real = {k: realize(v, backend, made) for k, v in args.items()}
    snaps = snapshot(real.values())
    try:
        result = to_host(fn(**real))
        outcome = Outcome(result=result)
    except Exception as exc:  # noqa: BLE001 -- judged by the caller
        outcome = Outcome(error=exc)
    assert_unmodified(snaps)
    for d in made:
        d.close()
    return outcome


def check_error(exc: BaseException, names: tuple[str, ...], context: str) -> None:
    assert isinstance(exc, ALLOWED), f"{context}: {type(exc).__name__} is not an allowed error: {exc}"
    text = str(exc)
    assert text.strip(), f"{context}: {type(exc).__name__} without a message"
    # A pooling that leaves no window names every pooling argument and the input's size at once.
    no_window = isinstance(exc, ValueError) and "do not fit input" in text
    assert no_window or any(n.lower() in text.lower() for n in names), (
        f"{context}: message names none of {names}: {text}"
    )


def as_float(a):
    if a is None:
        return None
    a = np.asarray(a)
    return a.astype(np.float64) if a.dtype.kind == "f" or a.dtype == bfloat16 else a


def assert_same(got, want, context: str, exact: bool, dtype=None) -> None:
    got_t = got if isinstance(got, tuple) else (got,)
    want_t = want if isinstance(want, tuple) else (want,)
    assert len(got_t) == len(want_t), context
    for g, w in zip(got_t, want_t):
        if w is None:
            assert g is None, f"{context}: expected None"
            continue
        assert isinstance(g, np.ndarray), f"{context}: got {type(g).__name__}"
        assert g.shape == w.shape, f"{context}: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"{context}: dtype {g.dtype} != {w.dtype}"
        if exact:
            np.testing.assert_array_equal(as_float(g), as_float(w), err_msg=context)
        else:
            tol = {np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-10}.get(np.dtype(w.dtype), 2e-2)
            gf, wf = as_float(g), as_float(w)
            scale = max(float(np.nanmax(np.abs(np.where(np.isfinite(wf), wf, 0)), initial=0)), 1.0)
            np.testing.assert_allclose(gf, wf, rtol=tol, atol=tol * scale, equal_nan=True, err_msg=context)


def judge(
    prop: str,
    category: str,
    names: tuple[str, ...],
    fn: Callable,
    args: dict,
    backend: str,
    reference: Callable[[dict], Any],
    exact: bool,
    counts: collections.Counter,
) -> None:
    context = f"{prop}/{category} on {backend} with {summary(args)}"
    got = call(fn, backend, args)
    for bug, known in KNOWN.items():
        if got.error is not None and known(category, got.error, backend):
            counts[(category, f"known:{bug}")] += 1
            return
    if backend == "numpy":
        if got.error is not None:
            check_error(got.error, names, context)
            counts[(category, "error")] += 1
            return
        assert_same(got.result, reference({k: host(v) for k, v in args.items()}), context, exact=True)
        counts[(category, "result")] += 1
        return
    # npu over the emulator: the numpy backend on the same call is the reference
    ref = call(fn, "numpy", args)
    if got.error is not None:
        check_error(got.error, names, context)
        assert ref.error is not None, f"{context}: npu raised {got.error!r} but numpy accepted the call"
        if isinstance(got.error, AclnnError) and isinstance(ref.error, AclnnError):
            assert got.error.status == ref.error.status, f"{context}: npu {got.error} / numpy {ref.error}"
        counts[(category, "error")] += 1
        return
    assert ref.error is None, f"{context}: npu accepted the call but numpy raised {ref.error!r}"
    assert_same(got.result, ref.result, context, exact=exact)
    counts[(category, "result")] += 1


def summary(args: dict) -> str:
    def one(v):
        if isinstance(v, Dev):
            return f"Dev({v.where}, {v.array.shape}, {v.array.dtype})"
        if isinstance(v, np.ndarray):
            return f"ndarray({v.shape}, {v.dtype}, strides={v.strides})"
        text = repr(v)
        return text if len(text) < 60 else text[:57] + "..."

    return ", ".join(f"{k}={one(v)}" for k, v in args.items())


# -- references (pyaclnn.kernels on host arrays) ------------------------------------------------


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


_INTERP = {"bilinear": 0, "nearest": 1}
_PAD = {"zeros": 0, "border": 1, "reflection": 2}


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
            _mode(a["interpolation_mode"], _INTERP),
            _mode(a["padding_mode"], _PAD),
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
            _mode(a["interpolation_mode"], _INTERP),
            _mode(a["padding_mode"], _PAD),
            bool(a["align_corners"]),
            _ncdhw(ig, layout) if mask[0] else None,
            gg if mask[1] else None,
        )
    return (ig if mask[0] else None, gg if mask[1] else None)


def _mode(v, names):
    return names[v] if isinstance(v, str) else int(v)


# -- properties ------------------------------------------------------------------------------


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
        _with_stream(pyaclnn.max_pool3d_with_argmax),
        a,
        backend,
        ref_max_pool,
        True,
        counts,
    )


class OtherStream:
    """Marker: a pyaclnn.Stream of the other backend, created at call time."""


_other_streams: dict[str, pyaclnn.Stream] = {}


def _with_stream(fn):
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
        a[category] = data.draw(bad_mode(list(_INTERP if category == "interpolation_mode" else _PAD)))
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


# -- low level ----------------------------------------------------------------------------------


def _junk_handle(data, backend: str, made: dict):
    """Something that is not the expected live handle; made at call time on ``backend``."""
    kind = data.draw(
        st.sampled_from(
            [
                "none",
                "int",
                "str",
                "float",
                "tensor",
                "int array",
                "bool array",
                "stream",
                "destroyed tensor",
                "destroyed int array",
                "other tensor",
                "other int array",
            ]
        )
    )
    return kind


def _make_junk(kind: str, backend: str, made: dict, names) -> Any:
    if kind == "none":
        return None
    if kind == "int":
        return 12345
    if kind == "str":
        return "handle"
    if kind == "float":
        return 1.5
    if kind == "tensor":
        return made["tensor"]
    if kind == "int array":
        return made["ints"]
    if kind == "bool array":
        return made["bools"]
    if kind == "stream":
        return made["stream"]
    if kind == "destroyed tensor":
        return made["dead tensor"]
    if kind == "destroyed int array":
        return made["dead ints"]
    if kind == "other tensor":
        return made["other"]["tensor"]
    if kind == "other int array":
        return made["other"]["ints"]
    raise AssertionError(kind)


def _handles(backend: str) -> dict:
    made: dict = {}
    ptr = acl.rt.malloc(512, backend=backend)
    acl.rt.memset(ptr, 512, 0, 512, backend=backend)  # index 0 everywhere: a valid argmax
    made["ptr"] = ptr
    made["ws"] = acl.rt.malloc(64, backend=backend)
    made["dead ptr"] = acl.rt.malloc(64, backend=backend)
    acl.rt.free(made["dead ptr"], backend=backend)
    made["gin"] = acl.create_tensor(
        (1, 1, 2, 2, 2), ACL_FLOAT, None, 0, ACL_FORMAT_NCDHW, (8,), ptr + 256, backend=backend
    )
    made["tensor"] = acl.create_tensor(
        (1, 1, 2, 2, 2), ACL_FLOAT, None, 0, ACL_FORMAT_NCDHW, (8,), ptr, backend=backend
    )
    made["out"] = acl.create_tensor(
        (1, 1, 1, 1, 1), ACL_FLOAT, None, 0, ACL_FORMAT_NCDHW, (1,), ptr + 64, backend=backend
    )
    made["idx"] = acl.create_tensor(
        (1, 1, 1, 1, 1), ACL_INT32, None, 0, ACL_FORMAT_NCDHW, (1,), ptr + 96, backend=backend
    )
    made["grid"] = acl.create_tensor(
        (1, 1, 1, 1, 3), ACL_FLOAT, None, 0, ACL_FORMAT_ND, (3,), ptr + 128, backend=backend
    )
    made["ints"] = acl.create_int_array((2,), backend=backend)
    made["empty ints"] = acl.create_int_array((), backend=backend)
    made["zero ints"] = acl.create_int_array((0,), backend=backend)
    made["one ints"] = acl.create_int_array((1,), backend=backend)
    made["bools"] = acl.create_bool_array((True, True), backend=backend)
    made["stream"] = acl.rt.create_stream(backend=backend)
    made["dead tensor"] = acl.create_tensor(
        (1,), ACL_FLOAT, None, 0, ACL_FORMAT_ND, (1,), ptr, backend=backend
    )
    acl.destroy_tensor(made["dead tensor"], backend=backend)
    made["dead ints"] = acl.create_int_array((1,), backend=backend)
    acl.destroy_int_array(made["dead ints"], backend=backend)
    return made


def _free_handles(backend: str, made: dict) -> None:
    for key in ("tensor", "out", "idx", "grid", "gin"):
        acl.destroy_tensor(made[key], backend=backend)
    for key in ("ints", "empty ints", "zero ints", "one ints"):
        acl.destroy_int_array(made[key], backend=backend)
    acl.destroy_bool_array(made["bools"], backend=backend)
    acl.rt.destroy_stream(made["stream"], backend=backend)
    acl.rt.free(made["ptr"], backend=backend)
    acl.rt.free(made["ws"], backend=backend)


LOWLEVEL_CATEGORIES = [
    "pool self",
    "pool kernelSize",
    "pool stride",
    "pool out",
    "grid input",
    "grid grid",
    "grid interpolationMode",
    "grid out",
    "phase2 executor",
    "phase2 workspace",
    "phase2 stream",
    "create_tensor",
    "int array values",
]

_LL_STATE: dict[str, dict] = {}


def _ll_state(backend: str) -> dict:
    state = _LL_STATE.get(backend)
    if state is None:
        runtime.context(backend)
        runtime.context(other_backend(backend))
        state = _LL_STATE[backend] = _handles(backend)
        state["other"] = _LL_STATE.get(other_backend(backend)) or _handles(other_backend(backend))
        _LL_STATE.setdefault(other_backend(backend), state["other"])
    return state


def _release_ll_state() -> None:
    for name, state in list(_LL_STATE.items()):
        _free_handles(name, state)
    _LL_STATE.clear()


def _pool_args(m: dict) -> list:
    return [m["tensor"], m["ints"], m["empty ints"], m["zero ints"], m["one ints"], False, m["out"], m["idx"]]


def _grid_args(m: dict) -> list:
    return [m["tensor"], m["grid"], 0, 0, False, m["out"]]


def _run_ll(backend: str, category: str, data, m: dict) -> tuple[BaseException | None, tuple[str, ...]]:
    """One low-level call with one bad argument; returns (error or None, names the error must mention)."""
    pool_slots = {
        "pool self": (0, "self"),
        "pool kernelSize": (1, "kernelSize"),
        "pool stride": (2, "stride"),
        "pool out": (6, "out"),
    }
    grid_slots = {"grid input": (0, "input"), "grid grid": (1, "grid"), "grid out": (5, "out")}
    try:
        if category in pool_slots or category in grid_slots:
            pool = category in pool_slots
            slot, name = (pool_slots if pool else grid_slots)[category]
            args = _pool_args(m) if pool else _grid_args(m)
            kind = _junk_handle(data, backend, m)
            args[slot] = _make_junk(kind, backend, m, name)
            phase1 = (
                aclnn.max_pool3d_with_argmax_get_workspace_size
                if pool
                else aclnn.grid_sampler3d_get_workspace_size
            )
            _, executor = phase1(*args, backend=backend)
            if executor is not None:  # accepted: only a live handle of the right kind may be
                aclnn.max_pool3d_with_argmax(
                    0, 0, executor, None, backend=backend
                ) if pool else aclnn.grid_sampler3d(0, 0, executor, None, backend=backend)
                assert (kind == "int array") == (name in ("kernelSize", "stride")) and kind in (
                    "tensor",
                    "int array",
                ), f"phase 1 accepted {kind!r} as {name}"
            return None, (name,)
        if category == "grid interpolationMode":
            args = _grid_args(m)
            args[2] = data.draw(
                st.one_of(st.integers(-5, 5), st.sampled_from(HUGE_INTS), st.none(), st.just("0"))
            )
            valid = isinstance(args[2], int) and 0 <= args[2] <= 1
            try:
                _, executor = aclnn.grid_sampler3d_get_workspace_size(*args, backend=backend)
            except Exception as exc:  # noqa: BLE001
                return exc, ("interpolationMode",)
            assert valid, f"interpolationMode {args[2]!r} accepted"
            aclnn.grid_sampler3d(0, 0, executor, m["stream"], backend=backend)
            return None, ("interpolationMode",)
        if category.startswith("phase2"):
            return _ll_phase2(backend, category, data, m)
        if category == "create_tensor":
            return _ll_create_tensor(backend, data, m)
        if category == "int array values":
            values = data.draw(
                st.lists(st.one_of(st.integers(-(2**63), INT64_MAX), st.sampled_from(HUGE_INTS)), max_size=4)
            )
            fits = all(-(2**63) <= v <= INT64_MAX for v in values)
            try:
                h = acl.create_int_array(values, backend=backend)
            except Exception as exc:  # noqa: BLE001
                return exc, ("values", "int64", "aclCreateIntArray")
            acl.destroy_int_array(h, backend=backend)
            assert fits, f"aclCreateIntArray accepted {values} (beyond int64)"
            return None, ()
    except AssertionError:
        raise
    except Exception as exc:  # noqa: BLE001
        return exc, (pool_slots.get(category) or grid_slots.get(category) or (None, category))[1:]
    raise AssertionError(category)


def _bwd_args(m: dict) -> list:
    return [
        m["out"],
        m["tensor"],
        m["idx"],
        m["ints"],
        m["empty ints"],
        m["zero ints"],
        m["one ints"],
        False,
        m["gin"],
    ]


def _ll_phase2(backend: str, category: str, data, m: dict):
    """Phase 2 of the max-pool backward (which asks for 32 bytes of workspace) with one bad argument."""
    phase1, phase2 = (
        aclnn.max_pool3d_with_argmax_backward_get_workspace_size,
        aclnn.max_pool3d_with_argmax_backward,
    )
    size, executor = phase1(*_bwd_args(m), backend=backend)
    assert size > 0
    real = executor
    workspace, stream = m["ws"], m["stream"]
    if category == "phase2 executor":
        executor = _make_junk(
            data.draw(st.sampled_from(["none", "int", "str", "tensor", "stream"])), backend, m, "executor"
        )
        names: tuple[str, ...] = ("executor",)
    elif category == "phase2 workspace":
        workspace, size = data.draw(
            st.sampled_from(
                [
                    (12345, size),
                    (-1, size),
                    ("ws", size),
                    (1.5, size),
                    (2**64 + 5, size),
                    (0, size),
                    (m["ws"], 0),
                    (m["ws"], size // 2),
                    (m["dead ptr"], size),
                    (m["ptr"] + 500, size),
                ]
            )
        )
        names = ("workspace",)
    else:
        stream = _make_junk(
            data.draw(st.sampled_from(["int", "str", "tensor", "int array"])), backend, m, "stream"
        )
        names = ("stream",)
    try:
        phase2(workspace, size, executor, stream, backend=backend)
        error = None
    except Exception as exc:  # noqa: BLE001
        error = exc
    # A failed launch consumes a non-repeatable executor (test_lifetimes checks that); the junk-executor
    # case never launched the real one: run it off.
    if backends.get(backend).live_counts()["executors"]:
        phase2(m["ws"], 32, real, m["stream"], backend=backend)
    assert error is not None, f"{category}: a bad phase-2 argument was accepted"
    return error, names


def _ll_create_tensor(backend: str, data, m: dict):
    args = {
        "view_dims": (2, 3),
        "data_type": ACL_FLOAT,
        "strides": None,
        "offset": 0,
        "format": ACL_FORMAT_ND,
        "storage_dims": (6,),
        "data": m["ptr"],
    }
    which = data.draw(st.sampled_from(list(args)))
    names = {
        "view_dims": ("viewDims", "view_dims", "tensorData", "storageDims", "view"),
        "strides": ("stride", "tensorData", "storageDims", "view"),
        "offset": ("offset", "tensorData", "storageDims", "view"),
        "data_type": ("dataType", "data_type", "aclDataType"),
        "format": ("format",),
        "storage_dims": ("storageDims", "storage_dims", "tensorData"),
        "data": ("tensorData", "data"),
    }[which]
    ints = st.one_of(st.integers(-3, 8), st.sampled_from(HUGE_INTS))
    value = {
        "view_dims": st.lists(ints, max_size=3),
        "strides": st.lists(ints, min_size=2, max_size=3),
        "offset": ints,
        "data_type": st.one_of(st.integers(-2, 40), st.sampled_from(HUGE_INTS)),
        "format": st.one_of(st.sampled_from([2, 30, 27, 0]), st.sampled_from(HUGE_INTS)),
        "storage_dims": st.lists(ints, max_size=2),
        "data": st.sampled_from([0, 12345, "freed", "other", m["ptr"] + 200]),
    }[which]
    args[which] = data.draw(value)
    if args["data"] == "other":
        args["data"] = m["other"]["ptr"]
    elif args["data"] == "freed":
        args["data"] = m["dead ptr"]
    try:
        h = acl.create_tensor(*args.values(), backend=backend)
    except Exception as exc:  # noqa: BLE001
        return exc, names
    acl.destroy_tensor(h, backend=backend)
    return None, names


def prop_lowlevel(backend: str, category: str, data, counts) -> None:
    m = _ll_state(backend)
    error, names = _run_ll(backend, category, data, m)
    if error is None:
        counts[(category, "accepted")] += 1
        return
    for bug, known in KNOWN.items():
        if known(category, error, backend):
            counts[(category, f"known:{bug}")] += 1
            return
    check_error(error, names, f"lowlevel/{category} on {backend}")
    counts[(category, "error")] += 1


PROPERTIES = {
    "max_pool3d_with_argmax": prop_max_pool_forward,
    "max_pool3d_with_argmax_backward": prop_max_pool_backward,
    "grid_sampler3d": prop_grid_forward,
    "grid_sampler3d_backward": prop_grid_backward,
    "lowlevel": prop_lowlevel,
}
CATEGORIES = {
    "max_pool3d_with_argmax": POOL_FWD_CATEGORIES,
    "max_pool3d_with_argmax_backward": POOL_BWD_CATEGORIES,
    "grid_sampler3d": GRID_CATEGORIES,
    "grid_sampler3d_backward": GRID_BWD_CATEGORIES,
    "lowlevel": LOWLEVEL_CATEGORIES,
}


def _category_property(name: str, backend: str, category: str, counts, examples: int):
    @settings(SETTINGS, max_examples=examples)
    @given(st.data())
    def prop(data):
        PROPERTIES[name](backend, category, data, counts)

    return prop


def run_property(name: str, backend: str) -> dict[str, int]:
    """Run one property on one backend, category by category; per-category counts of outcomes.

    Each category gets an equal share of ``EXAMPLES`` (at least 10), so the counts are even.
    """
    counts: collections.Counter = collections.Counter()
    per_category = max(10, -(-EXAMPLES // len(CATEGORIES[name])))
    try:
        for category in CATEGORIES[name]:
            _category_property(name, backend, category, counts, per_category)()
    finally:
        _release_ll_state()
        for s in _other_streams.values():
            s.close()
        _other_streams.clear()
    return {f"{cat}|{outcome}": n for (cat, outcome), n in sorted(counts.items())}


def _report(name: str, backend: str, counts: dict[str, int]) -> None:
    path = os.environ.get("PYACLNN_FUZZ_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(
                json.dumps({"property": name, "backend": backend, "examples": EXAMPLES, "counts": counts})
                + "\n"
            )


def _assert_coverage(name: str, counts: dict[str, int]) -> None:
    seen = {key.split("|")[0] for key in counts}
    missing = [c for c in CATEGORIES[name] if c not in seen]
    assert not missing, f"{name}: categories never generated: {missing}"
    # Hypothesis stops early only in small, exhausted spaces: at the default budget most categories
    # reach their share. A larger budget asks some categories for more examples than their space
    # holds, so it must still give at least what the default gives.
    assert sum(counts.values()) >= min(EXAMPLES, DEFAULT_EXAMPLES) // 2, counts


CHILD = textwrap.dedent(
    """
    import json, resource, sys
    # a bug that allocates without bound must fail with MemoryError here, not exhaust the machine
    resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
    sys.path.insert(0, {tests!r})
    import test_fuzz, pyaclnn
    from pyaclnn import backends
    counts = test_fuzz.run_property({name!r}, {backend!r})
    for b in ("numpy", "npu"):
        pyaclnn.finalize(b)
        left = backends.get(b).live_counts()
        assert not any(left.values()), f"live objects left on {{b}}: {{left}}"
    print("COUNTS " + json.dumps(counts))
    """
)
CHILD_MEMORY = 6 << 30


@pytest.mark.parametrize("name", list(PROPERTIES))
@pytest.mark.parametrize("backend_name", ["numpy", "npu"])
def test_fuzz(backend_name, name, emulator_home):
    """One property on one backend, in a child process (npu runs C code; both get a memory limit).

    The numpy child also holds npu DeviceArrays and handles (the other backend), and vice versa.
    """
    env = dict(
        os.environ,
        PYACLNN_ASCEND_HOME=str(emulator_home),
        PYACLNN_BACKEND="numpy",
        PYACLNN_NUMPY_DEVICE_MEMORY=str(1 << 30),
    )
    script = CHILD.format(tests=str(HERE), name=name, backend=backend_name, limit=CHILD_MEMORY)
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False, timeout=900
    )
    assert proc.returncode == 0, (
        f"child exited with {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}"
    )
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("COUNTS ")][-1]
    counts = json.loads(line[len("COUNTS ") :])
    _assert_coverage(name, counts)
    _report(name, backend_name, counts)


# -- bugs the fuzz found: regression tests, and strict xfails for those still open ---------------------


def _in_child(script: str, emulator_home, backend: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYACLNN_ASCEND_HOME=str(emulator_home), PYACLNN_BACKEND=backend)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_a_huge_valid_kernel_neither_exhausts_memory_nor_time(emulator_home):
    proc = _in_child(
        """
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
        import numpy as np, pyaclnn
        x = np.arange(64, dtype=np.float32).reshape(1, 1, 4, 4, 4)
        out, idx = pyaclnn.max_pool3d_with_argmax(x, 2**31 - 1, ceil_mode=True)
        assert out.shape == (1, 1, 1, 1, 1) and out.item() == 63 and idx.item() == 63, (out, idx)
        print("ok")
    """,
        emulator_home,
        "numpy",
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_a_mode_beyond_int64_is_a_value_error_on_npu(emulator_home):
    proc = _in_child(
        """
        import numpy as np, pyaclnn
        x, g = np.ones((1, 1, 2, 2, 2), np.float32), np.zeros((1, 1, 1, 1, 3), np.float32)
        for kw in ({"interpolation_mode": 2**70}, {"padding_mode": -2**64}):
            try:
                pyaclnn.grid_sampler3d(x, g, **kw)
            except (TypeError, ValueError) as exc:
                assert next(iter(kw)) in str(exc) or "Mode" in str(exc), exc
            except pyaclnn.AclError:
                pass
            else:
                raise SystemExit(f"{kw} accepted")
        from pyaclnn import acl
        for fn in (lambda: acl.create_int_array([2**63]), lambda: acl.rt.malloc(-1)):
            try:
                fn()
            except (TypeError, ValueError, pyaclnn.AclError):
                pass
            else:
                raise SystemExit("accepted")
        print("ok")
    """,
        emulator_home,
        "npu",
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


@pytest.mark.parametrize("values", [[2**63], [-(2**63) - 1], [1.5], ["a"]])
def test_numpy_int_array_rejects_what_c_cannot_hold(values):
    with pytest.raises((TypeError, ValueError), match="values"):
        h = acl.create_int_array(values, backend="numpy")
        acl.destroy_int_array(h, backend="numpy")


@pytest.mark.parametrize("values", [["x"], [2], [None]])
def test_numpy_bool_array_rejects_non_bools(values):
    with pytest.raises(TypeError, match="values"):
        h = acl.create_bool_array(values, backend="numpy")
        acl.destroy_bool_array(h, backend="numpy")


@pytest.mark.parametrize(
    "what",
    [
        "create_tensor data",
        "memset ptr",
        "phase-2 workspace",
        "mode None",
        "mode str",
    ],
)
def test_numpy_a_str_address_names_the_argument(what):
    runtime.context("numpy")
    m = _handles("numpy")
    try:
        with pytest.raises(
            (TypeError, ValueError, AclError), match="(?i)data|ptr|workspace|interpolationMode"
        ):
            if what == "create_tensor data":
                acl.create_tensor((1,), ACL_FLOAT, None, 0, ACL_FORMAT_ND, (1,), "a", backend="numpy")
            elif what == "memset ptr":
                acl.rt.memset("a", 4, 0, 4, backend="numpy")
            elif what.startswith("mode"):
                args = _grid_args(m)
                args[2] = None if what == "mode None" else "0"
                try:
                    _, executor = aclnn.grid_sampler3d_get_workspace_size(*args, backend="numpy")
                except (TypeError, ValueError) as exc:
                    assert "interpolationMode" in str(exc), exc
                    raise
                aclnn.grid_sampler3d(0, 0, executor, None, backend="numpy")
            else:
                size, executor = aclnn.max_pool3d_with_argmax_backward_get_workspace_size(
                    *_bwd_args(m), backend="numpy"
                )
                try:
                    aclnn.max_pool3d_with_argmax_backward("ws", size, executor, m["stream"], backend="numpy")
                finally:
                    if backends.get("numpy").live_counts()["executors"]:
                        aclnn.max_pool3d_with_argmax_backward(m["ws"], size, executor, None, backend="numpy")
    finally:
        _free_handles("numpy", m)


def test_numpy_memcpy_negative_count_names_count():
    runtime.context("numpy")
    ptr = acl.rt.malloc(16, backend="numpy")
    try:
        with pytest.raises((AclError, ValueError), match="count"):
            acl.rt.memcpy(np.zeros(4, np.uint8), 4, ptr, -1, 2, backend="numpy")
    finally:
        acl.rt.free(ptr, backend="numpy")


def test_a_bad_indices_dtype_string_names_the_argument():
    with pytest.raises(TypeError, match="indices_dtype"):
        pyaclnn.max_pool3d_with_argmax(
            np.zeros((1, 1, 2, 2, 2), np.float32), 2, indices_dtype="foo", backend="numpy"
        )


@pytest.mark.parametrize("change", ["float dim", "negative storage", "storage beyond allocation"])
def test_numpy_create_tensor_checks_dims_like_the_emulator(change):
    runtime.context("numpy")
    ptr = acl.rt.malloc(16, backend="numpy")
    view, storage = {
        "float dim": ((1.5,), (1,)),
        "negative storage": ((1,), (-5,)),
        "storage beyond allocation": ((1,), (10**6,)),
    }[change]
    try:
        with pytest.raises((AclnnError, TypeError)):
            h = acl.create_tensor(view, ACL_FLOAT, None, 0, ACL_FORMAT_ND, storage, ptr, backend="numpy")
            acl.destroy_tensor(h, backend="numpy")
    finally:
        acl.rt.free(ptr, backend="numpy")
