"""A randomized concurrent workload over pyaclnn's asynchronous runtime, with every result checked.

:func:`run_workload` starts ``threads`` worker threads (thread ``i`` draws from
``random.Random(seed + i)``) and one consumer thread. Each worker runs random
chains of the four operators (max-pool forward and backward, grid sampler
forward and backward) on float32 and float16 with small random shapes and
parameters, over both emulated devices, using what the runtime offers at
once:

- ``pyaclnn.Device(d)`` blocks, the thread's default stream, Streams of its
  own (kept across chains or made for one chain, closed while work is still
  queued on them), ``ExternalStream`` over a handle of ``acl.rt.create_stream``
  (destroyed by the worker after closing the wrapper and synchronizing);
- Events: recorded, waited for by another stream (``Stream.wait_event``),
  synchronized, queried, timed;
- ``out=`` arrays kept across chains and reused, ``DeviceArray.from_ptr``
  views (strided, with an offset) over arrays the worker owns, as inputs and
  as outputs;
- ``memory_pool(device=d).free_all_blocks()`` and ``pyaclnn.synchronize()``
  at random points, racing the other threads;
- results handed through a queue (some with an Event recorded after them) to a
  consumer thread that never called pyaclnn before: it waits on the Event,
  queries and closes it, reads the array with ``.numpy()`` and closes it;
- now and then a call mixing devices, which must raise ValueError.

Every result is compared with the NumPy reference kernels of
:mod:`pyaclnn.kernels` run on the host: max-pool forward values and indices
exactly; the rest within ``1e-5 * max|reference|`` (float32) or one float16
rounding step plus that (float16: both sides accumulate in float32 and round
once, so the order of the float32 sums may flip one rounding).

Any exception in any thread is collected and raised by the caller as a
:class:`WorkloadError` naming the thread, the step and the seed. At the end
the devices are synchronized, everything is closed, ``pyaclnn.finalize`` runs,
and the backend must report no live object and no new hazard.

The process must emulate two devices (``PYACLNN_EMU_DEVICES=2``, read once
when the backend is made); with one device the workload runs on it alone.
Run it directly with ``python tests/concurrency_workload.py --backend numpy
--seconds 5`` (one JSON line of figures on stdout; exit status 1 on failure).
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import queue
import random
import resource
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import pyaclnn
from pyaclnn import acl, backends, runtime
from pyaclnn.kernels import grid_sampler3d as _grid
from pyaclnn.kernels import max_pool3d as _pool

__all__ = ["WorkloadError", "Failure", "run_workload", "main"]

F32, F16, I32 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.int32)
MODES = {"bilinear": _grid.BILINEAR, "nearest": _grid.NEAREST}
PADDINGS = {"zeros": _grid.ZEROS, "border": _grid.BORDER, "reflection": _grid.REFLECTION}
#: relative to max|reference|; float16 adds one rounding step of each element. Not 1e-5 as in
#: selftest: on the npu backend the C emulator computes independently of the NumPy kernels, and
#: a few-element float32 grid gradient under reflection padding differed by 1.4e-5 of its
#: maximum (soak, seed 2). Memory written by the wrong kernel is off by far more.
RELATIVE_TOLERANCE = 1e-4
#: the out= arrays a worker keeps across chains (oldest closed first)
OUT_CACHE_SIZE = 12
#: how long the caller waits for a thread after the deadline before calling it hung
HANG_GRACE_S = 120.0


# -- failures -------------------------------------------------------------------


@dataclass
class Failure:
    """One exception caught in a thread: where, during which step, and its traceback."""

    thread: str
    step: str
    exc: BaseException
    trace: str

    @property
    def signature(self) -> str:
        """Type and first line of the message: what tells two failures apart."""
        first = (str(self.exc).strip().splitlines() or [""])[0]
        return f"{type(self.exc).__name__}: {first[:300]}"


class WorkloadError(AssertionError):
    """Some thread of the workload failed; ``failures`` holds every one caught."""

    def __init__(self, message: str, failures: list[Failure], figures: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.failures = failures
        self.figures = figures or {}


# -- references and comparison ----------------------------------------------------


def ref_max_pool(
    x: np.ndarray, k: tuple[int, ...], s: tuple[int, ...], p: tuple[int, ...], ceil: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Pooled values and int32 indices of ``x`` by the reference kernel."""
    shape = x.shape[:2] + _pool.pool_output_shape(x.shape[2:], k, s, p, (1, 1, 1), ceil)
    out, indices = np.empty(shape, x.dtype), np.empty(shape, I32)
    _pool.max_pool3d_with_argmax(x, k, s, p, (1, 1, 1), ceil, out, indices)
    return out, indices


def ref_max_pool_backward(grad: np.ndarray, indices: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    grad_input = np.empty(shape, grad.dtype)
    _pool.max_pool3d_with_argmax_backward(grad, indices, grad_input)
    return grad_input


def ref_grid_sampler(x: np.ndarray, grid: np.ndarray, mode: str, padding: str, align: bool) -> np.ndarray:
    out = np.empty(x.shape[:2] + grid.shape[1:4], x.dtype)
    _grid.grid_sampler3d(x, grid, MODES[mode], PADDINGS[padding], align, out)
    return out


def ref_grid_sampler_backward(
    grad: np.ndarray,
    x: np.ndarray,
    grid: np.ndarray,
    mode: str,
    padding: str,
    align: bool,
    mask: tuple[bool, bool],
) -> tuple[np.ndarray | None, np.ndarray | None]:
    input_grad = np.empty(x.shape, x.dtype) if mask[0] else None
    grid_grad = np.empty(grid.shape, x.dtype) if mask[1] else None
    _grid.grid_sampler3d_backward(grad, x, grid, MODES[mode], PADDINGS[padding], align, input_grad, grid_grad)
    return input_grad, grid_grad


def compare(what: str, got: np.ndarray, want: np.ndarray, exact: bool) -> None:
    """Raise AssertionError unless ``got`` matches ``want`` (see the module docstring)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        raise AssertionError(
            f"{what}: got {got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
        )
    g, w = got.astype(np.float64), want.astype(np.float64)
    if exact:
        bad = g != w
    else:
        scale = float(np.max(np.abs(w), initial=0.0))
        allowed = RELATIVE_TOLERANCE * scale + 1e-30
        if want.dtype == F16:
            allowed = allowed + np.abs(np.spacing(np.abs(want))).astype(np.float64)
        bad = ~(np.abs(g - w) <= allowed)  # NaN is bad too
    if np.any(bad):
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(
            f"{what}: {int(np.count_nonzero(bad))} of {bad.size} elements differ "
            f"({'exact' if exact else 'tolerance'}); first at {list(first)}: got {got[first]!r}, "
            f"expected {want[first]!r}"
        )


@dataclass
class Pending:
    """A result queued on the device and the reference it must equal once read."""

    what: str
    array: Any  # DeviceArray
    expected: np.ndarray
    exact: bool = False
    host: np.ndarray | None = None  # what .numpy() gave, once read
    event: Any = None  # an Event after the call, handed over with the array (the consumer closes it)


# -- the shared state -------------------------------------------------------------


@dataclass
class _Shared:
    backend: str
    devices: int
    deadline: float
    seed: int
    fail_fast: bool
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    failures: list[Failure] = field(default_factory=list)
    figures: Counter[str] = field(default_factory=Counter)
    handoff: queue.Queue[Pending | None] = field(default_factory=lambda: queue.Queue(maxsize=16))

    def fail(self, thread: str, step: str, exc: BaseException) -> None:
        with self.lock:
            self.failures.append(Failure(thread, step, exc, traceback.format_exc()))
        if self.fail_fast:
            self.stop.set()

    def add(self, figures: Counter[str]) -> None:
        with self.lock:
            self.figures.update(figures)

    def running(self) -> bool:
        return not self.stop.is_set() and time.monotonic() < self.deadline


# -- a worker -----------------------------------------------------------------------


class _Worker:
    """One thread's random chains; everything it makes it closes, except what it hands off."""

    def __init__(self, shared: _Shared, index: int) -> None:
        self.shared = shared
        self.b = shared.backend
        self.name = f"worker-{index}"
        self.rng = random.Random(shared.seed + index)
        self.figures: Counter[str] = Counter()
        self.step = "start"
        self.failed_step = ""  # self.step when the chain raised, with the chain's trail
        self.trail: list[str] = []  # what the current chain did so far, for failure reports
        self.used_outs: set[tuple[Any, ...]] = set()  # out= keys the current chain wrote
        # op configurations (shapes, parameters) seen before, replayed with new data so that
        # out= arrays and cached executors get reused
        self.configs: dict[str, list[tuple[Any, ...]]] = {}
        # per device: Streams kept across chains, replaced now and then
        self.streams: dict[int, list[pyaclnn.Stream]] = {}
        # out= arrays kept across chains, by (op, device, shapes, dtype), oldest first
        self.outs: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    # -- loop ------------------------------------------------------------------
    def run(self) -> None:
        try:
            while self.shared.running():
                try:
                    self.chain()
                    self.figures["chains"] += 1
                except BaseException as exc:  # noqa: BLE001 -- collected, raised by the caller
                    self.shared.fail(self.name, self.failed_step or self.step, exc)
                    self.failed_step = ""
                    if self.shared.fail_fast:
                        break
        finally:
            self.step = "closing the worker's streams and out= arrays"
            try:
                self.close_all()
            except BaseException as exc:  # noqa: BLE001
                self.shared.fail(self.name, self.step, exc)
            self.shared.add(self.figures)

    def close_all(self) -> None:
        for arrays in self.outs.values():
            for a in arrays:
                a.close()
        self.outs.clear()
        for streams in self.streams.values():
            for s in streams:
                s.close()
                self.figures["stream_closes"] += 1
        self.streams.clear()

    # -- helpers ---------------------------------------------------------------
    def note(self, text: str) -> None:
        self.trail.append(text)

    def config(self, op: str, make: Callable[[], tuple[Any, ...]]) -> tuple[Any, ...]:
        """A configuration of ``op`` used before (half the time, once there are some) or a new one."""
        seen = self.configs.setdefault(op, [])
        if seen and self.rng.random() < 0.5:
            return self.rng.choice(seen)
        made = make()
        seen.append(made)
        del seen[:-4]
        return made

    def np_rng(self) -> np.random.Generator:
        return np.random.default_rng(self.rng.getrandbits(64))

    def shape5(self) -> tuple[int, int, int, int, int]:
        r = self.rng
        return (r.randint(1, 2), r.randint(1, 3), r.randint(2, 6), r.randint(2, 6), r.randint(2, 6))

    def stream_for(self, d: int, closers: list[Callable[[], None]]) -> tuple[Any, Any]:
        """(stream to pass as ``stream=``, the Stream object for events) of a random kind."""
        r, b = self.rng, self.b
        kind = r.choice(("default", "kept", "kept", "fresh", "external"))
        self.figures[f"stream_{kind}"] += 1
        if kind == "default":
            s = runtime.default_stream(backend=b)
            self.note(f"default {s!r}")
            return None, s
        if kind == "kept":
            kept = self.streams.setdefault(d, [])
            if len(kept) < 2:
                kept.append(pyaclnn.Stream(backend=b))
            s = r.choice(kept)
            self.note(f"kept {s!r}")
            return s, s
        if kind == "fresh":
            s = pyaclnn.Stream(backend=b, device=d) if r.random() < 0.5 else pyaclnn.Stream(backend=b)
            closers.append(self.closing(s))
            self.note(f"fresh {s!r}")
            return s, s
        acl.rt.set_device(d, backend=b)  # the thread's device is d already (a Device block): no change
        handle = acl.rt.create_stream(backend=b)
        try:
            s = pyaclnn.ExternalStream(handle, device=d, backend=b)
        except BaseException:
            acl.rt.destroy_stream(handle, backend=b)
            raise
        self.note(f"{s!r}")

        def close_external() -> None:
            self.step = f"closing {s!r}, then destroying its handle"
            if not s.closed:
                s.close()
                self.figures["stream_closes"] += 1
            acl.rt.synchronize_stream(handle, backend=b)
            acl.rt.destroy_stream(handle, backend=b)

        closers.append(close_external)
        return s, s

    def closing(self, s: pyaclnn.Stream) -> Callable[[], None]:
        def close() -> None:
            if not s.closed:  # settle() may have closed it already
                self.step = f"closing {s!r}"
                s.close()
                self.figures["stream_closes"] += 1

        return close

    def upload(self, x: np.ndarray, stream: Any, d: int, closers: list[Callable[[], None]]) -> Any:
        """``x`` on device ``d``: a plain upload, or a strided from_ptr view into a larger upload."""
        b = self.b
        if self.rng.random() < 0.7:
            xd = pyaclnn.to_device(x, backend=b, stream=stream)
            closers.append(xd.close)
            self.note(f"upload {x.dtype}{list(x.shape)}")
            return xd
        # x is the box [lead:, :, :, :, :W] of a larger host array; the view addresses it in place
        lead, extra = self.rng.randint(0, 1), self.rng.randint(0, 3)
        big = self.np_rng().standard_normal((x.shape[0] + lead, *x.shape[1:4], x.shape[4] + extra))
        big = big.astype(x.dtype)
        big[lead:, ..., : x.shape[4]] = x
        base = pyaclnn.to_device(big, backend=b, stream=stream)
        closers.append(base.close)
        strides = tuple(s // big.itemsize for s in big.strides)
        view = pyaclnn.DeviceArray.from_ptr(
            base.ptr, x.shape, x.dtype, strides=strides, offset=lead * strides[0], device=d, backend=b
        )
        closers.append(view.close)  # closers run last-in first-out: the view before its base
        self.figures["views_in"] += 1
        self.note(f"input view {x.dtype}{list(x.shape)} strides {strides} offset {lead * strides[0]}")
        return view

    def out_array(
        self, key: tuple[Any, ...], shapes: tuple[tuple[int, ...], ...], dtypes: tuple[np.dtype, ...]
    ) -> tuple[Any, ...] | None:
        """Outputs kept from an earlier chain for ``key`` (made now if new), or None (the call allocates)."""
        # Once per chain: a second call into the same arrays would overwrite the first's unread result.
        if self.rng.random() < 0.4 or key in self.used_outs:
            return None
        self.used_outs.add(key)
        arrays = self.outs.pop(key, None)
        if arrays is None:
            arrays = tuple(pyaclnn.empty(s, t, backend=self.b) for s, t in zip(shapes, dtypes))
        else:
            self.figures["out_reused"] += 1
        self.note(f"out= kept {key[0]} {[a.ptr for a in arrays]}")
        self.outs[key] = arrays  # now the newest
        while len(self.outs) > OUT_CACHE_SIZE:
            for a in self.outs.pop(next(iter(self.outs))):
                a.close()
        return arrays

    def out_view(
        self, shape: tuple[int, ...], dtype: np.dtype, d: int, closers: list[Callable[[], None]]
    ) -> Any:
        """A strided from_ptr view, over a larger array of the worker's, to write a result into."""
        extra = self.rng.randint(1, 3)
        base = pyaclnn.empty((*shape[:-1], shape[-1] + extra), dtype, backend=self.b)
        closers.append(base.close)
        strides = (*(s // base.itemsize for s in base.strides[:-1]), 1)  # from_ptr counts elements
        view = pyaclnn.DeviceArray.from_ptr(
            base.ptr, shape, dtype, strides=strides, offset=extra, device=d, backend=self.b
        )
        closers.append(view.close)
        self.figures["views_out"] += 1
        self.note(f"out= view {dtype}{list(shape)} strides {strides} offset {extra}")
        return view

    def other_stream(self, stream: Any, events: Any, d: int, closers: list[Callable[[], None]]) -> Any:
        """The stream a dependent call runs on: the same one, or another that waits for an event."""
        r = self.rng
        if r.random() < 0.5:
            return stream
        other, other_events = self.stream_for(d, closers)
        if other_events is events:
            return other
        self.step = "record_event / wait_event"
        event = events.record_event()
        closers.append(event.close)  # closing a pending event is allowed
        other_events.wait_event(event)
        self.note("event between the streams")
        self.figures["events"] += 1
        self.figures["event_waits"] += 1
        if r.random() < 0.3:
            event.query()  # either answer is right here; it must not raise
            self.figures["event_queries"] += 1
        return other

    def maybe_race(self) -> None:
        """free_all_blocks or a device-wide synchronize at a random point, racing the other threads."""
        r = self.rng
        x = r.random()
        if x < 0.06:
            d = r.randrange(self.shared.devices)
            self.step = f"memory_pool(device={d}).free_all_blocks()"
            pyaclnn.memory_pool(backend=self.b, device=d).free_all_blocks()
            self.note(f"free_all_blocks({d})")
            self.figures["free_all_blocks"] += 1
        elif x < 0.08:
            self.step = "pyaclnn.synchronize()"
            pyaclnn.synchronize(backend=self.b)
            self.note("synchronize()")
            self.figures["device_synchronizes"] += 1

    # -- the ops ---------------------------------------------------------------
    def max_pool(
        self, stream: Any, events: Any, d: int, dtype: np.dtype, closers: list[Callable[[], None]]
    ) -> list[Pending]:
        r, b = self.rng, self.b

        def make() -> tuple[Any, ...]:
            shape = self.shape5()
            k = tuple(r.randint(1, min(3, n)) for n in shape[2:])
            s = tuple(r.randint(1, 2) for _ in range(3))
            p = tuple(r.randint(0, kk // 2) for kk in k)
            return shape, k, () if r.random() < 0.2 else s, p, r.random() < 0.3

        shape, k, stride_arg, p, ceil = self.config(f"pool {dtype}", make)
        s = stride_arg or k  # stride=() means stride = kernel
        x = self.np_rng().standard_normal(shape).astype(dtype)
        want_out, want_idx = ref_max_pool(x, k, s, p, ceil)
        xd = self.upload(x, stream, d, closers)
        what = f"max_pool3d_with_argmax {dtype} x{list(x.shape)} k{k} s{stride_arg} p{p} ceil={ceil}"
        out = self.out_array(
            ("pool", d, want_out.shape, dtype), (want_out.shape, want_out.shape), (dtype, I32)
        )
        if out is None and r.random() < 0.3:
            out = (self.out_view(want_out.shape, dtype, d, closers), None)
        self.step = what + (" out=" if out else "")
        values, indices = pyaclnn.max_pool3d_with_argmax(
            xd, k, stride_arg, p, 1, ceil, out=out, backend=b, stream=stream
        )
        self.count_call("max_pool3d_with_argmax", stream)
        self.check_out(what, out, (values, indices))
        owned = [a for a, given in zip((values, indices), out or (None, None)) if given is None]
        closers.extend(a.close for a in owned)
        pending = [
            Pending(what + " values", values, want_out, True),
            Pending(what + " indices", indices, want_idx, True),
        ]
        if r.random() < 0.6:
            self.maybe_race()
            pending += self.max_pool_backward(
                x, xd, indices, want_idx, (k, stride_arg, p, ceil), stream, events, d, closers
            )
        return pending

    def max_pool_backward(
        self,
        x: np.ndarray,
        xd: Any,
        indices: Any,
        want_idx: np.ndarray,
        params: tuple[Any, ...],
        stream: Any,
        events: Any,
        d: int,
        closers: list[Callable[[], None]],
    ) -> list[Pending]:
        k, stride_arg, p, ceil = params
        grad = self.np_rng().standard_normal(want_idx.shape).astype(x.dtype)
        other = self.other_stream(stream, events, d, closers)
        gd = self.upload(grad, other, d, closers)
        want = ref_max_pool_backward(grad, want_idx, x.shape)
        what = (
            f"max_pool3d_with_argmax_backward {x.dtype} x{list(x.shape)} k{k} s{stride_arg} p{p} ceil={ceil}"
        )
        out = self.out_array(("pool_bwd", d, x.shape, x.dtype), (x.shape,), (x.dtype,))
        self.step = what + (" out=" if out else "")
        grad_input = pyaclnn.max_pool3d_with_argmax_backward(
            gd,
            xd,
            indices,
            k,
            stride_arg,
            p,
            1,
            ceil,
            out=out[0] if out else None,
            backend=self.b,
            stream=other,
        )
        self.count_call("max_pool3d_with_argmax_backward", other)
        self.check_out(what, out, (grad_input,))
        return self.keep_or_hand_off(Pending(what, grad_input, want), out is not None, closers)

    def grid_sampler(
        self, stream: Any, events: Any, d: int, dtype: np.dtype, closers: list[Callable[[], None]]
    ) -> list[Pending]:
        r, b, g = self.rng, self.b, self.np_rng()

        def make() -> tuple[Any, ...]:
            shape = self.shape5()
            points = (shape[0], r.randint(1, 4), r.randint(1, 4), r.randint(1, 4), 3)
            return shape, points, r.choice(list(MODES)), r.choice(list(PADDINGS)), r.random() < 0.5

        shape, points, mode, padding, align = self.config(f"grid {dtype}", make)
        x = g.standard_normal(shape).astype(dtype)
        grid = g.uniform(-1.2, 1.2, points).astype(dtype)
        want = ref_grid_sampler(x, grid, mode, padding, align)
        xd = self.upload(x, stream, d, closers)
        gridd = self.upload(grid, stream, d, closers)
        what = f"grid_sampler3d {dtype} x{list(shape)} grid{list(points)} {mode} {padding} align={align}"
        out = self.out_array(("grid", d, want.shape, dtype), (want.shape,), (dtype,))
        if out is None and r.random() < 0.3:
            out = (self.out_view(want.shape, dtype, d, closers),)
        self.step = what + (" out=" if out else "")
        y = pyaclnn.grid_sampler3d(
            xd, gridd, mode, padding, align, out=out[0] if out else None, backend=b, stream=stream
        )
        self.count_call("grid_sampler3d", stream)
        self.check_out(what, out, (y,))
        if out is None:
            closers.append(y.close)
        pending = [Pending(what, y, want)]
        if r.random() < 0.6:
            self.maybe_race()
            pending += self.grid_sampler_backward(
                x, xd, grid, gridd, y, want, (mode, padding, align), stream, events, d, closers
            )
        return pending

    def grid_sampler_backward(
        self,
        x: np.ndarray,
        xd: Any,
        grid: np.ndarray,
        gridd: Any,
        y: Any,
        want_y: np.ndarray,
        params: tuple[str, str, bool],
        stream: Any,
        events: Any,
        d: int,
        closers: list[Callable[[], None]],
    ) -> list[Pending]:
        r = self.rng
        mode, padding, align = params
        mask = r.choice(((True, True), (True, True), (True, False), (False, True)))
        other = self.other_stream(stream, events, d, closers)
        if r.random() < 0.5:
            # the forward's output, still on the device, is the gradient: a device-side dependency.
            # The reference takes the reference forward: a float16 ulp there would move the backward
            # by about as much as the tolerance allows, so float32 only.
            gd, grad = (y, want_y) if x.dtype == F32 else (None, None)
        else:
            gd, grad = None, None
        if gd is None:
            grad = self.np_rng().standard_normal(want_y.shape).astype(x.dtype)
            gd = self.upload(grad, other, d, closers)
        assert grad is not None
        want = ref_grid_sampler_backward(grad, x, grid, mode, padding, align, mask)
        what = (
            f"grid_sampler3d_backward {x.dtype} x{list(x.shape)} grid{list(grid.shape)} "
            f"{mode} {padding} align={align} mask={mask}"
        )
        out = None
        if r.random() < 0.5:
            kept = self.out_array(
                ("grid_bwd", d, x.shape, grid.shape, x.dtype), (x.shape, grid.shape), (x.dtype, x.dtype)
            )
            if kept is not None:
                out = tuple(a if m else None for a, m in zip(kept, mask))
        self.step = what + (" out=" if out else "")
        results = pyaclnn.grid_sampler3d_backward(
            gd, xd, gridd, mode, padding, align, mask, out=out, backend=self.b, stream=other
        )
        self.count_call("grid_sampler3d_backward", other)
        pending: list[Pending] = []
        for name, result, expected, given, m in zip(
            ("input_grad", "grid_grad"), results, want, out or (None, None), mask
        ):
            if not m:
                if result is not None:
                    raise AssertionError(f"{what}: {name} masked out but returned {result!r}")
                continue
            if given is not None and result is not given:
                raise AssertionError(f"{what}: {name} is not the out= array given")
            assert expected is not None
            pending += self.keep_or_hand_off(
                Pending(f"{what} {name}", result, expected), given is not None, closers
            )
        return pending

    def mixed_devices(self, d: int, closers: list[Callable[[], None]]) -> None:
        """A call whose arrays live on another device than its stream must raise ValueError."""
        other = (d + 1) % self.shared.devices
        x = self.np_rng().standard_normal((1, 1, 2, 2, 2)).astype(F32)
        self.step = f"to_device(device={other}) for a call on device {d}"
        xo = pyaclnn.to_device(x, backend=self.b, device=other)
        closers.append(xo.close)
        self.step = f"max_pool3d_with_argmax of a device-{other} array on a device-{d} stream (must raise)"
        try:
            result = pyaclnn.max_pool3d_with_argmax(
                xo, 2, backend=self.b, stream=runtime.default_stream(backend=self.b)
            )
        except ValueError:
            self.figures["mixed_device_refusals"] += 1
            return
        for a in result:
            a.close()
        raise AssertionError(f"{self.step}: no ValueError, got {result!r}")

    # -- bookkeeping -----------------------------------------------------------
    def count_call(self, op: str, stream: Any) -> None:
        self.note(f"{op} on {stream or 'the default stream'!r}")
        self.figures["calls"] += 1
        self.figures[f"calls_{op}"] += 1

    def check_out(self, what: str, out: tuple[Any, ...] | None, results: tuple[Any, ...]) -> None:
        for given, result in zip(out or (), results):
            if given is not None and result is not given:
                raise AssertionError(f"{what}: the call returned {result!r}, not the out= array {given!r}")

    def keep_or_hand_off(
        self, item: Pending, reused: bool, closers: list[Callable[[], None]]
    ) -> list[Pending]:
        """Keep ``item`` to check in this thread, or hand it to the consumer (which closes it).

        out= arrays stay: the worker reuses them. A handed-off array is no longer the worker's.
        """
        if reused:
            return [item]
        # Not the result of an ExternalStream: the worker destroys that handle itself, and a
        # consumer synchronizing on it meanwhile would be the workload's own race.
        if self.rng.random() < 0.25 and not isinstance(item.array.stream, pyaclnn.ExternalStream):
            stream = item.array.stream
            if stream is not None and self.rng.random() < 0.5:
                item.event = stream.record_event()  # for the consumer to wait on, query and close
                self.figures["events"] += 1
            while not self.shared.stop.is_set():
                try:
                    self.shared.handoff.put(item, timeout=0.5)
                    self.figures["handed_off"] += 1
                    return []
                except queue.Full:
                    pass
            if item.event is not None:
                closers.append(item.event.close)
        closers.append(item.array.close)
        return [item]

    # -- one chain ---------------------------------------------------------------
    def chain(self) -> None:
        r, b = self.rng, self.b
        d = r.randrange(self.shared.devices)
        closers: list[Callable[[], None]] = []
        self.trail = [f"Device({d})"]
        self.used_outs.clear()
        self.step = f"entering pyaclnn.Device({d})"
        with pyaclnn.Device(d, backend=b):
            try:
                if pyaclnn.get_device(backend=b) != d:
                    raise AssertionError(
                        f"inside Device({d}) get_device() is {pyaclnn.get_device(backend=b)}"
                    )
                self.step = "making a stream"
                stream, events = self.stream_for(d, closers)
                start = None
                if r.random() < 0.3:
                    self.step = "Event().record(stream)"
                    start = pyaclnn.Event(backend=b).record(events)
                    closers.append(start.close)
                    self.figures["events"] += 1
                pending: list[Pending] = []
                for _ in range(r.randint(1, 3)):
                    dtype = r.choice((F32, F16))
                    op = self.max_pool if r.random() < 0.5 else self.grid_sampler
                    pending += op(stream, events, d, dtype, closers)
                    self.maybe_race()
                if self.shared.devices > 1 and r.random() < 0.03:
                    self.mixed_devices(d, closers)
                end = None
                if r.random() < 0.4:
                    self.step = "stream.record_event()"
                    end = events.record_event()
                    closers.append(end.close)
                    self.figures["events"] += 1
                self.settle(stream, events, start, end)
                self.step = "reading results"
                for item in pending:
                    self.step = f"reading {item.what}"
                    item.host = item.array.numpy()
                    compare(item.what, item.host, item.expected, item.exact)
                    self.figures["checked"] += 1
            except BaseException:
                self.failed_step = f"{self.step} [chain: {'; '.join(self.trail)}]"
                raise
            finally:
                # Closing (streams with work still queued on them among it) runs even after a failure,
                # so that one failure does not leave the others to trip on what it left behind.
                while closers:
                    closers.pop()()
                    self.figures["closes"] += 1

    def settle(self, stream: Any, events: Any, start: Any, end: Any) -> None:
        """Some way to wait before reading, or none (numpy() waits): the point is the variety."""
        r = self.rng
        how = r.random()
        if end is not None and how < 0.4:
            self.step = "end.synchronize()"
            end.synchronize()
            if not end.query():
                raise AssertionError("Event.query() is False right after Event.synchronize()")
            self.figures["event_synchronizes"] += 1
            self.note("end.synchronize()")
            if start is not None:
                self.step = "start.elapsed_time(end)"
                start.synchronize()
                ms = start.elapsed_time(end)
                if not ms >= 0:
                    raise AssertionError(f"elapsed_time gave {ms}")
                self.figures["event_timings"] += 1
        elif how < 0.6 and stream is not None:
            self.step = f"{stream!r}.synchronize()"
            stream.synchronize()
            self.figures["stream_synchronizes"] += 1
            self.note(f"{stream!r}.synchronize()")
        elif how < 0.8 and stream is not None:
            # Close a Stream while its work is still queued: kept streams get replaced by a new one.
            kept = self.streams.get(stream.device, [])
            if stream in kept:
                kept.remove(stream)
                self.step = f"closing kept {stream!r} with work queued"
                stream.close()
                self.figures["stream_closes"] += 1
            else:
                # a fresh Stream's closer finds it closed; an ExternalStream's still destroys the handle
                self.step = f"closing {stream!r} with work queued"
                stream.close()
                self.figures["stream_closes"] += 1
            self.figures["closes_with_work_queued"] += 1
            self.note(f"closed {stream!r} before reading")


# -- the consumer --------------------------------------------------------------------


def _consume(shared: _Shared) -> None:
    """Read and check what the workers hand over; this thread never called pyaclnn before."""
    figures: Counter[str] = Counter()
    try:
        while (item := shared.handoff.get()) is not None:
            try:
                if item.event is not None:
                    step = f"Event.synchronize() after {item.what} (recorded by another thread)"
                    item.event.synchronize()
                    if not item.event.query():
                        raise AssertionError("Event.query() is False right after Event.synchronize()")
                    item.event.close()
                    figures["consumer_event_waits"] += 1
                step = f"reading {item.what} (made by another thread)"
                compare(item.what, item.array.numpy(), item.expected, item.exact)
                figures["checked"] += 1
                figures["checked_by_consumer"] += 1
                step = f"closing {item.what} (made by another thread)"
                item.array.close()
                figures["closes"] += 1
            except BaseException as exc:  # noqa: BLE001 -- collected, raised by the caller
                shared.fail("consumer", step, exc)
                if item.event is not None:
                    item.event.close()
                item.array.close()  # the worker gave it up: nobody else will
    finally:
        shared.add(figures)


def _drain(shared: _Shared) -> None:
    """Close whatever is still queued for the consumer (it failed, or the workers did)."""
    while True:
        try:
            item = shared.handoff.get_nowait()
        except queue.Empty:
            return
        if item is not None:
            if item.event is not None:
                item.event.close()
            item.array.close()


# -- the whole run ---------------------------------------------------------------------


def _live_objects(backend: str) -> dict[str, int] | None:
    counts = backends.get(backend).live_counts()
    return None if counts is None else {k: v for k, v in counts.items() if v}


def run_workload(
    backend: str, seconds: float, threads: int = 4, seed: int = 0, *, fail_fast: bool = True
) -> dict[str, Any]:
    """Run the workload for about ``seconds``; return its figures or raise WorkloadError.

    Parameters
    ----------
    backend : {"numpy", "npu"}
        For "npu", PYACLNN_ASCEND_HOME must name the CANN (emulator) home.
    seconds : float
        Wall time of the random chains; closing and the final checks come on top.
    threads : int
        Worker threads; worker ``i`` draws from ``random.Random(seed + i)``.
    seed : int
    fail_fast : bool
        Stop every thread at the first failure (default); False keeps every thread
        going after a failed chain, to collect every distinct failure of the run.

    Returns
    -------
    dict
        Counts (``calls``, ``checked``, ``stream_closes``, ``events``, ...), plus
        ``seconds``, ``calls_per_s``, ``devices``, ``max_rss_kib``, ``new_hazards``.

    Raises
    ------
    WorkloadError
        If any thread raised (a wrong result is an AssertionError there), a thread
        hung, or the backend reports live objects or new hazards after finalize.
    """
    raw = backends.get(backend)
    hazards_before = raw.hazard_count() or 0
    devices = min(2, pyaclnn.device_count(backend=backend))
    began = time.monotonic()
    shared = _Shared(backend, devices, began + seconds, seed, fail_fast)
    workers = [_Worker(shared, i) for i in range(threads)]
    pool_threads = [threading.Thread(target=w.run, name=w.name, daemon=True) for w in workers]
    consumer = threading.Thread(target=_consume, args=(shared,), name="consumer", daemon=True)
    consumer.start()
    for t in pool_threads:
        t.start()
    hung = []
    for t, w in zip(pool_threads, workers):
        t.join(max(0.0, shared.deadline - time.monotonic()) + HANG_GRACE_S)
        if t.is_alive():
            hung.append(f"{t.name} (step: {w.step})")
    shared.handoff.put(None, timeout=HANG_GRACE_S)
    consumer.join(HANG_GRACE_S)
    if consumer.is_alive():
        hung.append("consumer")
    elapsed = time.monotonic() - began
    if hung:
        frames = sys._current_frames()
        stacks = "\n".join(
            f"--- {t.name}\n{''.join(traceback.format_stack(frames[t.ident]))}"
            for t in [*pool_threads, consumer]
            if t.is_alive() and t.ident in frames
        )
        # Finalizing under a hung thread is unsupported: report without it.
        raise WorkloadError(f"threads hung: {', '.join(hung)} (seed {seed})\n{stacks}", shared.failures)
    _drain(shared)

    figures: dict[str, Any] = dict(sorted(shared.figures.items()))
    end_step = "final synchronize"
    try:
        for d in range(devices):
            with pyaclnn.Device(d, backend=backend):
                pyaclnn.synchronize(backend=backend)
        end_step = "pyaclnn.finalize"
        pyaclnn.finalize(backend)
    except BaseException as exc:  # noqa: BLE001
        shared.fail("main", end_step, exc)
    live = _live_objects(backend)
    new_hazards = (raw.hazard_count() or 0) - hazards_before
    figures.update(
        backend=backend,
        seed=seed,
        threads=threads,
        devices=devices,
        seconds=round(elapsed, 2),
        calls_per_s=round(figures.get("calls", 0) / elapsed, 1) if elapsed else 0.0,
        max_rss_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        new_hazards=new_hazards,
        failures=len(shared.failures),
    )
    problems = []
    if shared.failures:
        distinct = Counter(f.signature for f in shared.failures)
        lines = [f"  {n} x {sig}" for sig, n in distinct.most_common()]
        first = shared.failures[0]
        problems.append(
            f"{len(shared.failures)} failure(s), {len(distinct)} distinct:\n"
            + "\n".join(lines)
            + f"\nfirst, in {first.thread} during: {first.step}\n{first.trace}"
        )
    if live:
        problems.append(f"live objects left on {backend} after finalize: {live}")
    if new_hazards:
        problems.append(f"{new_hazards} new hazard(s) on {backend}: see the HAZARD lines on stderr")
    if problems:
        message = f"workload failed (backend {backend}, seed {seed}):\n" + "\n".join(problems)
        error = WorkloadError(message, shared.failures, figures)
        if shared.failures:
            raise error from shared.failures[0].exc
        raise error
    return figures


def main(argv: list[str] | None = None) -> int:
    """Command line: run the workload, print its figures as one JSON line; 1 on failure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--backend", default=os.environ.get("PYACLNN_BACKEND", "numpy"), choices=("numpy", "npu")
    )
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep-going", action="store_true", help="collect every failure instead of stopping")
    args = parser.parse_args(argv)
    # A hang prints every thread's stack, then the process ends: the parent sees a failure.
    faulthandler.dump_traceback_later(args.seconds + 2 * HANG_GRACE_S + 60, exit=True)
    try:
        figures = run_workload(
            args.backend, args.seconds, args.threads, args.seed, fail_fast=not args.keep_going
        )
    except WorkloadError as exc:
        print(exc, file=sys.stderr)
        print(json.dumps(exc.figures), flush=True)
        return 1
    print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
