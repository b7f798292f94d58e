"""What every fuzzed call must satisfy: an allowed error naming the broken argument,
or the reference result, and never a modified input.

:func:`judge` runs one call and counts its outcome per category; :data:`KNOWN`
lets a still-open bug pass (counted apart) while a strict xfail pins it.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import pyaclnn
from pyaclnn import AclError, AclnnError, bfloat16

from .strategies import Dev, host, realize

ALLOWED = (AclnnError, AclError, TypeError, ValueError)

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


# -- known bugs: (id, predicate(category, exc or None, backend)) -------------------------------


KNOWN: dict[str, Callable[[str, BaseException | None, str], bool]] = {
    # "<id>": predicate(category, error, backend) -> True for the known bug's symptom. Empty: every bug the
    # fuzz found so far (OverflowError on npu, int() of junk on numpy, huge kernels) is fixed.
}


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
    assert any(n.lower() in text.lower() for n in names), f"{context}: message names none of {names}: {text}"


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
        # The backend chooses a compiled or tuned kernel; they agree with the reference bit for
        # bit for max pooling and to rounding for the grid sampler (``exact`` says which).
        assert_same(got.result, reference({k: host(v) for k, v in args.items()}), context, exact=exact)
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
