"""What the fuzz generates: arrays in odd layouts, bad parameters, junk flags and modes.

Values stay host-side and backend-free until a call: :class:`Dev` and
:data:`BACKEND` are markers that :func:`realize` turns into a DeviceArray or the
backend name of the call, so one drawn set of arguments serves both backends;
:class:`OtherStream` is one that :func:`with_stream` turns into a stream of the
other backend (kept until :func:`release_streams`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

import pyaclnn
from pyaclnn import bfloat16

INT64_MAX = 2**63 - 1
HUGE_INTS = [2**31 - 1, 2**31, 2**62, INT64_MAX, 2**63, 2**64, -(2**63), -(2**63) - 1, -(2**70)]


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


class OtherStream:
    """Marker: a pyaclnn.Stream of the other backend, created at call time."""


_other_streams: dict[str, pyaclnn.Stream] = {}


def with_stream(fn):
    """``fn`` with an :class:`OtherStream` argument made a live stream of the other backend."""

    def wrapped(**kw):
        if isinstance(kw.get("stream"), OtherStream):
            other = other_backend(kw["backend"])
            s = _other_streams.get(other)
            if s is None or s.closed:
                s = _other_streams[other] = pyaclnn.Stream(backend=other)
            kw["stream"] = s
        return fn(**kw)

    return wrapped


def release_streams() -> None:
    """Close the other-backend streams :func:`with_stream` made."""
    for s in _other_streams.values():
        s.close()
    _other_streams.clear()


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
