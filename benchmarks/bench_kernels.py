"""Speed of the numpy backend against PyTorch CPU on realistic shapes.

Each case runs the same op on inputs made once before timing, in three paths
of pyaclnn and against PyTorch in the same run:

* (a) numpy: NumPy arrays in and out, a fresh output as the user gets it:
  ``pyaclnn.<op>(numpy arrays, backend="numpy")`` returning NumPy arrays
  (from 1 MiB of arrays the call maps them with ``aclrtHostRegister`` and
  writes its results into buffers of pyaclnn's host pool, ``PYACLNN_MAP_HOST``;
  smaller calls copy, so the quick shapes copy); the results are dropped after
  the call, inside the timed region;
* (b) numpy out=: the same call with ``out=`` NumPy arrays made once;
* (c) device: device-resident inputs (``pyaclnn.to_device(x, backend="numpy")``),
  followed by ``pyaclnn.synchronize`` (calls return once queued on a stream);
  the output DeviceArrays are closed after every call, inside the timed region;
* kernel: the kernel alone, as the numpy backend chooses it for the call
  (``pyaclnn.backends.numpy._kernels`` on host arrays and the plan phase 1
  would make, into outputs allocated once): the compiled kernel where it takes
  the call, else the tuned NumPy path; so the cost of the layers above it
  shows;
* numpy kernel: for max pooling, the same with the compiled kernels off
  (``PYACLNN_ACCEL=0``): the NumPy path they replace;
* torch: ``torch.ops.aten.*`` on CPU tensors with torch's default thread count,
  which allocates its outputs on every call; for max pooling also its
  ``out=`` overload into outputs made once ("torch out="). Whether glibc hands
  torch fresh pages (mmap, page faults on every call) or reused ones depends on
  the process's allocation history, and a 32 MiB output sits right at glibc's
  largest mmap threshold, so the plain op alone swings by 10x. torch's grid
  sampler ``out=`` overloads are generated ones (the plain op, then a copy into
  ``out``), so they are not timed: the plain op stands for them.

Ratios (mins over the repeats), each path against the torch call that does
what it does:

* numpy / torch: path (a) against torch's plain op (both allocate outputs);
* numpy out= / torch out=: path (b) against torch's ``out=`` overload where
  torch has a native one (max pooling), the plain op elsewhere;
* device / torch best: path (c) against the faster of torch's plain op and
  ``out=`` (``ratio_device_plain`` in the JSON: the plain op only);
* numpy / device: path (a) against path (c), what NumPy in and out costs over
  device-resident data.

As information, the script also gives numpy / device and device / torch best
over only the calls during which no thread of the process was preempted (no
involuntary context switch, ``getrusage``), with how many such calls each path
had: on a 2-core machine shared with other work, a call whose thread loses its
core runs its kernels' two threads on one core and takes up to twice as long,
so a min over few rounds says whether a path drew a quiet moment as much as
how fast it is. The targets are judged on the plain mins.

Warm-up 1 call, then ``--repeat`` rounds in which each contender is timed
once in turn (so all see the same background load on a shared machine; the
order rotates from round to round); the table shows the min and median. Every
timed call starts after a pause of ``--settle`` ms (default 25): after each op
PyTorch's OpenMP threads keep spinning for about 10 ms (measured here: the
process burns 8-10 ms of CPU in a 20 ms sleep after a torch op), and on a
2-core machine whatever runs next shares the cores with them. Without the
pause the contender that follows a torch op in the round paid for torch's
spinning. Even after 25 ms, a call right after a torch op is slower (fp16
max-pool backward at load 3, 15 rounds: first quartile 3.0-3.3 ms after a
torch op against 1.9-2.6 ms after a pyaclnn call on the NumPy and device
paths, 2.6-2.7 against 1.7-2.1 ms for the kernel alone; 2.2 ms after 100 ms,
as after a pyaclnn call), and with the order rotating each
contender always follows the same one: the NumPy path followed a torch op in
every round. So the pause after a torch op is at least ``TORCH_SETTLE_MS``.

Peak extra memory of one call of each path (tracemalloc, which sees NumPy's
buffers: the peak during the call minus the outputs it returns when it
allocated them, plus the peak scratch the compiled kernels report, which
tracemalloc cannot see) is reported relative to the output size.

For max-pool backward the script also prints, as information (no target),
the ratio of the device path's time to the memory-bandwidth floor: bytes read
(gradients, indices) plus bytes written (grad_input) over the copy bandwidth
measured in the same run (the faster of a one- and a two-thread
``np.copyto`` of 64 MiB, counting read and written bytes).

Targets:

* numpy / torch: no case above 1.0, geometric mean at most 0.6;
* numpy / device: at most 1.15 on every case;
* numpy out= / torch out=: no case above 1.0;
* device / torch best: no case above 1.0, geometric mean at most 0.5;
* peak extra memory at most 2x the output, on every path.

Usage: python benchmarks/bench_kernels.py [--quick] [--repeat R] [--json PATH] [--strict]
Exit status: 0; 2 when PyTorch is missing; 1 with --strict when a target is missed.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

CASE_TARGET = 1.0  # every path against its torch call, on every case
NUMPY_GEOMEAN_TARGET = 0.6  # path (a) against torch's plain op
DEVICE_GEOMEAN_TARGET = 0.5  # path (c) against torch's best
NUMPY_VS_DEVICE_TARGET = 1.15  # path (a) against path (c), on every case
MEMORY_TARGET = 2.0
SETTLE_MS = 25.0  # pause before every timed call (see the module docstring)
TORCH_SETTLE_MS = 100.0  # and at least this after a torch op

INTERP = {"bilinear": 0, "nearest": 1}
PADDING = {"zeros": 0, "border": 1, "reflection": 2}


@dataclass
class Case:
    """One benchmark case: zero-argument callables over inputs made once."""

    name: str
    dtype: str
    device: Callable[[], list]  # path (c): returns the DeviceArrays it produced (closed by the caller)
    numpy: Callable[[], Any]  # path (a): NumPy arrays in, fresh NumPy results out
    numpy_out: Callable[[], Any]  # path (b): NumPy arrays in, written into out= arrays made once
    kernel: Callable[[], Any]
    torch: Callable[[], Any]
    torch_fp32: Callable[[], Any] | None = None  # for fp16/bf16 cases: the same op in fp32
    output_bytes: int = 0
    # the torch op writing into outputs made once (native out= kernels only): what torch costs
    # without allocating and page-faulting fresh output memory on every call
    torch_out: Callable[[], Any] | None = None
    # bytes the op must read and write at least (0: no bandwidth floor is reported)
    floor_bytes: int = 0
    # whether a compiled kernel can take the case: then the pure NumPy kernel is timed too
    compiled: bool = False
    results: dict[str, Any] = field(default_factory=dict)


def _dtype(name: str) -> np.dtype:
    import pyaclnn

    return np.dtype({"fp32": np.float32, "fp16": np.float16, "bf16": pyaclnn.bfloat16}[name])


def _torch_dtype(torch: Any, name: str) -> Any:
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


def _closing(call: Callable[[], Any]) -> Callable[[], list]:
    """``call`` returning its DeviceArray outputs as a flat list (None dropped)."""

    def run() -> list:
        result = call()
        items = result if isinstance(result, tuple) else (result,)
        return [a for a in items if a is not None]

    return run


# -- max pooling ------------------------------------------------------------------------


def max_pool_specs(quick: bool) -> list[tuple[str, tuple[int, ...], int, int, int, bool, str, bool]]:
    """The max-pool cases: name, input shape, kernel, stride, padding, ceil_mode, dtype, backward."""
    big = (1, 4, 8, 16, 16) if quick else (2, 32, 32, 64, 64)
    res = (1, 4, 8, 14, 14) if quick else (1, 64, 16, 56, 56)
    return [
        ("maxpool bwd k2 s2 p0", big, 2, 2, 0, False, "fp32", True),
        ("maxpool bwd k3 s2 p1", big, 3, 2, 1, False, "fp32", True),
        ("maxpool bwd k3 s1 p1 ceil", res, 3, 1, 1, True, "fp32", True),
        ("maxpool fwd k2 s2 p0", big, 2, 2, 0, False, "fp32", False),
        ("maxpool bwd k3 s2 p1", big, 3, 2, 1, False, "fp16", True),
        ("maxpool bwd k2 s2 p0", big, 2, 2, 0, False, "fp16", True),  # disjoint windows: no float32 sums
    ]


def max_pool_cases(torch: Any, quick: bool) -> list[Case]:
    import pyaclnn
    from pyaclnn.backends.numpy import _kernels as backend
    from pyaclnn.dtypes import compute_dtype
    from pyaclnn.kernels import checks

    rng = np.random.default_rng(0)
    cases = []
    for name, shape, k, s, p, ceil, dname, backward in max_pool_specs(quick):
        dt = _dtype(dname)
        x32 = rng.standard_normal(shape, dtype=np.float32)
        x = x32.astype(dt)
        ks, st, pd, dl = (k,) * 3, (s,) * 3, (p,) * 3, (1,) * 3
        params = checks.pool_params(ks, st, pd, dl, ceil)
        oshape = shape[:2] + params.pooled(shape[2:])
        # the plan phase 1 would make: the kernel column runs what the backend chooses for it
        plan = checks.MaxPoolPlan(params, True, shape, oshape, compute_dtype(dt))  # type: ignore[arg-type]

        def torch_tensors(tdt: Any, x32: np.ndarray = x32, ks=ks, st=st, pd=pd, ceil=ceil) -> tuple:
            tx = torch.from_numpy(x32).to(tdt)
            tout, tidx = torch.ops.aten.max_pool3d_with_indices(tx, ks, st, pd, [1, 1, 1], ceil)
            tgo = torch.from_numpy(rng.standard_normal(tuple(tout.shape), dtype=np.float32)).to(tdt)
            return tx, tgo, tidx

        if backward:
            out, idx = pyaclnn.max_pool3d_with_argmax(x, ks, st, pd, 1, ceil, backend="numpy")
            go = rng.standard_normal(out.shape, dtype=np.float32).astype(dt)
            d_go, d_x, d_idx = (pyaclnn.to_device(a, backend="numpy") for a in (go, x, idx))

            def call(go=d_go, x=d_x, idx=d_idx, ks=ks, st=st, pd=pd, ceil=ceil, out=None):
                return pyaclnn.max_pool3d_with_argmax_backward(
                    go, x, idx, ks, st, pd, 1, ceil, out=out, backend="numpy"
                )

            numpy_call = functools.partial(call, go, x, idx)
            numpy_out = functools.partial(numpy_call, out=np.empty(x.shape, x.dtype))

            def kernel(plan=plan, go=go, idx=idx, gi=np.empty(x.shape, x.dtype)):
                backend.max_pool3d_with_argmax_backward(plan, go, idx, gi)
                return gi

            def make_torch(tdt: Any, ks=ks, st=st, pd=pd, ceil=ceil, out: bool = False) -> Callable[[], Any]:
                tx, tgo, tidx = torch_tensors(tdt)
                if out:
                    buf = torch.empty_like(tx)
                    return lambda: torch.ops.aten.max_pool3d_with_indices_backward.grad_input(
                        tgo, tx, ks, st, pd, [1, 1, 1], ceil, tidx, grad_input=buf
                    )
                return lambda: torch.ops.aten.max_pool3d_with_indices_backward(
                    tgo, tx, ks, st, pd, [1, 1, 1], ceil, tidx
                )

            out_bytes = x.nbytes
            floor_bytes = go.nbytes + idx.nbytes + x.nbytes
        else:
            d_x = pyaclnn.to_device(x, backend="numpy")

            def call(x=d_x, ks=ks, st=st, pd=pd, ceil=ceil, out=None):
                return pyaclnn.max_pool3d_with_argmax(x, ks, st, pd, 1, ceil, out=out, backend="numpy")

            numpy_call = functools.partial(call, x)
            numpy_out = functools.partial(
                numpy_call, out=(np.empty(oshape, x.dtype), np.empty(oshape, np.int32))
            )

            def kernel(plan=plan, x=x, o=np.empty(oshape, x.dtype), i=np.empty(oshape, np.int32)):
                backend.max_pool3d_with_argmax(plan, x, o, i)
                return o, i

            def make_torch(
                tdt: Any, ks=ks, st=st, pd=pd, ceil=ceil, out: bool = False, x32=x32, oshape=oshape
            ) -> Callable[[], Any]:
                tx = torch.from_numpy(x32).to(tdt)
                if out:
                    o, i = torch.empty(oshape, dtype=tdt), torch.empty(oshape, dtype=torch.int64)
                    return lambda: torch.ops.aten.max_pool3d_with_indices.out(
                        tx, ks, st, pd, [1, 1, 1], ceil, out=o, indices=i
                    )
                return lambda: torch.ops.aten.max_pool3d_with_indices(tx, ks, st, pd, [1, 1, 1], ceil)

            out_bytes = int(np.prod(oshape)) * (dt.itemsize + 4)
            floor_bytes = 0
        label = f"{name} {'x'.join(map(str, shape))} {dname}"
        cases.append(
            Case(
                label,
                dname,
                device=_closing(call),
                numpy=numpy_call,
                numpy_out=numpy_out,
                kernel=kernel,
                torch=make_torch(_torch_dtype(torch, dname)),
                torch_fp32=make_torch(torch.float32) if dname != "fp32" else None,
                output_bytes=out_bytes,
                torch_out=make_torch(_torch_dtype(torch, dname), out=True),
                floor_bytes=floor_bytes,
                compiled=True,
            )
        )
    return cases


# -- grid sampling ----------------------------------------------------------------------


def grid_cases(torch: Any, quick: bool) -> list[Case]:
    import pyaclnn
    from pyaclnn.backends.numpy import _kernels as backend
    from pyaclnn.dtypes import compute_dtype
    from pyaclnn.kernels.checks import GridPlan

    in_shape = (1, 4, 8, 16, 16) if quick else (2, 16, 32, 64, 64)
    grid_shape = (1, 8, 16, 16, 3) if quick else (2, 32, 64, 64, 3)
    specs = [
        # name, interpolation, padding, align_corners, layout, dtype, backward
        ("grid bwd bilinear zeros", "bilinear", "zeros", False, "NCDHW", "fp32", True),
        ("grid bwd bilinear reflection ac", "bilinear", "reflection", True, "NCDHW", "fp32", True),
        ("grid bwd nearest border", "nearest", "border", False, "NCDHW", "fp32", True),
        ("grid bwd bilinear zeros NDHWC", "bilinear", "zeros", False, "NDHWC", "fp32", True),
        ("grid fwd bilinear zeros", "bilinear", "zeros", False, "NCDHW", "fp32", False),
        ("grid bwd bilinear zeros", "bilinear", "zeros", False, "NCDHW", "bf16", True),
    ]
    rng = np.random.default_rng(1)
    n, c = in_shape[:2]
    out_shape = (n, c, *grid_shape[1:4])
    cases = []
    for name, interp, pad, ac, layout, dname, backward in specs:
        dt = _dtype(dname)
        x32 = rng.standard_normal(in_shape, dtype=np.float32)
        # a little beyond [-1, 1] so the padding mode matters
        g32 = rng.uniform(-1.1, 1.1, grid_shape).astype(np.float32)
        go32 = rng.standard_normal(out_shape, dtype=np.float32)
        last = layout == "NDHWC"
        # channels-last data is stored (N, D, H, W, C); the kernels see NCDHW views of it
        to_layout = (lambda a: np.ascontiguousarray(np.moveaxis(a, 1, 4))) if last else (lambda a: a)
        x, go, g = to_layout(x32).astype(dt), to_layout(go32).astype(dt), g32.astype(dt)
        im, pm = INTERP[interp], PADDING[pad]
        # the plan phase 1 would make: the kernel column runs what the backend chooses for it
        plan = GridPlan(last, im, pm, ac, in_shape, out_shape, compute_dtype(dt))  # type: ignore[arg-type]
        kx = np.moveaxis(x, 4, 1) if last else x
        kgo = np.moveaxis(go, 4, 1) if last else go
        d_x, d_g = pyaclnn.to_device(x, backend="numpy"), pyaclnn.to_device(g, backend="numpy")

        def torch_inputs(tdt: Any, x32=x32, g32=g32, go32=go32, last=last) -> tuple:
            def t(a: np.ndarray) -> Any:
                if last:  # the same NDHWC storage, seen as NCDHW (torch's channels_last_3d)
                    nd = np.ascontiguousarray(np.moveaxis(a, 1, 4))
                    return torch.from_numpy(nd).to(tdt).permute(0, 4, 1, 2, 3)
                return torch.from_numpy(a).to(tdt)

            return t(x32), torch.from_numpy(g32).to(tdt), t(go32)

        if backward:
            d_go = pyaclnn.to_device(go, backend="numpy")

            def call(go=d_go, x=d_x, g=d_g, interp=interp, pad=pad, ac=ac, layout=layout, out=None):
                return pyaclnn.grid_sampler3d_backward(
                    go, x, g, interp, pad, ac, (True, True), layout=layout, out=out, backend="numpy"
                )

            numpy_call = functools.partial(call, go, x, g)
            numpy_out = functools.partial(numpy_call, out=(np.empty(x.shape, dt), np.empty(g.shape, dt)))

            def kernel(
                plan=plan,
                kgo=kgo,
                kx=kx,
                g=g,
                last=last,
                ig=np.empty(x.shape, x.dtype),
                gg=np.empty(g.shape, g.dtype),
            ):
                kig = np.moveaxis(ig, 4, 1) if last else ig
                backend.grid_sampler3d_backward(plan, kgo, kx, g, kig, gg)
                return ig, gg

            def make_torch(tdt: Any, im=im, pm=pm, ac=ac) -> Callable[[], Any]:
                tx, tg, tgo = torch_inputs(tdt)
                return lambda: torch.ops.aten.grid_sampler_3d_backward(tgo, tx, tg, im, pm, ac, [True, True])

            out_bytes = x.nbytes + g.nbytes
        else:

            def call(x=d_x, g=d_g, interp=interp, pad=pad, ac=ac, layout=layout, out=None):
                return pyaclnn.grid_sampler3d(x, g, interp, pad, ac, layout=layout, out=out, backend="numpy")

            numpy_call = functools.partial(call, x, g)
            numpy_out = functools.partial(numpy_call, out=np.empty(out_shape, dt))

            def kernel(plan=plan, kx=kx, g=g, o=np.empty(out_shape, dt)):
                backend.grid_sampler3d(plan, kx, g, o)
                return o

            def make_torch(tdt: Any, im=im, pm=pm, ac=ac) -> Callable[[], Any]:
                tx, tg, _ = torch_inputs(tdt)
                return lambda: torch.ops.aten.grid_sampler_3d(tx, tg, im, pm, ac)

            out_bytes = int(np.prod(out_shape)) * dt.itemsize
        label = f"{name} {'x'.join(map(str, x.shape))} grid {'x'.join(map(str, grid_shape))} {dname}"
        cases.append(
            Case(
                label,
                dname,
                device=_closing(call),
                numpy=numpy_call,
                numpy_out=numpy_out,
                kernel=kernel,
                torch=make_torch(_torch_dtype(torch, dname)),
                torch_fp32=make_torch(torch.float32) if dname != "fp32" else None,
                output_bytes=out_bytes,
            )
        )
    return cases


# -- running ----------------------------------------------------------------------------


def copy_bandwidth(repeat: int) -> float:
    """Bytes per second read plus written by the faster of a one- and a two-thread copy of 64 MiB."""
    from concurrent.futures import ThreadPoolExecutor

    src = np.ones(8 << 20, np.float64)
    dst = np.empty_like(src)
    halves = [(dst[: src.size // 2], src[: src.size // 2]), (dst[src.size // 2 :], src[src.size // 2 :])]
    with ThreadPoolExecutor(1) as helper:

        def two_threads() -> None:
            other = helper.submit(np.copyto, *halves[1])
            np.copyto(*halves[0])
            other.result()

        times = _common.time_interleaved(
            {"one": lambda: np.copyto(dst, src), "two": two_threads}, max(repeat, 5)
        )
    return 2 * src.nbytes / min(min(t) for t in times.values())


def _numpy_only(call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` with the compiled kernels off (PYACLNN_ACCEL=0 is read at every call)."""

    def run() -> Any:
        saved = os.environ.get("PYACLNN_ACCEL")
        os.environ["PYACLNN_ACCEL"] = "0"
        try:
            return call()
        finally:
            if saved is None:
                del os.environ["PYACLNN_ACCEL"]
            else:
                os.environ["PYACLNN_ACCEL"] = saved

    return run


def _scratch_peak(reset: bool) -> int:
    """Peak scratch of the compiled kernels since the last reset (0 when none is loaded)."""
    from pyaclnn.kernels import _accel

    lib = _accel.library()
    return int(lib.pyaclnn_accel_scratch_peak(int(reset))) if lib is not None else 0


def _preemptions() -> int:
    """Involuntary context switches of this process's threads so far (another process took their
    core), or -1 where the platform does not count them."""
    try:
        import resource
    except ImportError:  # not a Unix
        return -1
    return resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw


def time_settled(
    fns: dict[str, Callable[[], Any]],
    repeat: int,
    settle: float,
    preempted: dict[str, list[bool]] | None = None,
) -> dict[str, list[float]]:
    """:func:`_common.time_interleaved`, with a pause of ``settle`` seconds before every timed call.

    Each call is timed by ``time_interleaved`` itself (one contender, one
    round), so the order (rotating each round) and the timer are the same;
    only the idle machine at the start of every call is added (at least
    ``TORCH_SETTLE_MS`` after a contender whose name starts with "torch", see
    the module docstring). ``preempted``,
    when given, receives for each call whether a thread of the process was
    preempted during it (:func:`_preemptions`; True where unknown).
    """
    for fn in fns.values():
        fn()  # warm-up, as time_interleaved's
    times: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    previous = ""
    for round_ in range(repeat):
        shift = round_ % len(order)
        for name in order[shift:] + order[:shift]:
            time.sleep(max(settle, TORCH_SETTLE_MS / 1e3) if previous.startswith("torch") else settle)
            previous = name
            before = _preemptions()
            times[name] += _common.time_interleaved({name: fns[name]}, 1, warmup=0)[name]
            if preempted is not None:
                preempted.setdefault(name, []).append(before < 0 or _preemptions() != before)
    return times


#: The three paths of pyaclnn: results key, label in the tables.
PATHS = (("numpy", "numpy"), ("numpy_out", "numpy out="), ("device", "device"))


def run_case(case: Case, repeat: int, bandwidth: float, settle: float = SETTLE_MS / 1e3) -> None:
    import pyaclnn

    def finished() -> list:
        # Calls on DeviceArrays return once queued on a stream: the timed region and the memory
        # window must include the kernel itself (calls on NumPy arrays return when it is done).
        arrays = case.device()
        pyaclnn.synchronize(backend="numpy")
        return arrays

    def device_call() -> None:
        for array in finished():
            array.close()

    # the fresh NumPy results are dropped as the call returns (back to the host pool), in the timing
    fns = {"numpy": case.numpy, "numpy_out": case.numpy_out, "device": device_call, "kernel": case.kernel}
    fns["torch"] = case.torch
    if case.compiled:
        fns["numpy_kernel"] = _numpy_only(case.kernel)
    if case.torch_fp32 is not None:
        fns["torch_fp32"] = case.torch_fp32
    if case.torch_out is not None:
        fns["torch_out"] = case.torch_out
    r = case.results
    preempted: dict[str, list[bool]] = {}
    for name, times in time_settled(fns, repeat, settle, preempted).items():
        r[name] = _common.summary(times)
        # On a shared machine a call whose thread lost its core (to another process) takes up to
        # twice as long (the kernels' two threads then share one core); the min over the calls
        # that kept their cores compares the code rather than the neighbours' timing (information).
        calm = [t for t, p in zip(times, preempted[name]) if not p]
        r[name]["unpreempted"] = len(calm)
        if calm:
            r[name]["min_unpreempted"] = min(calm)
    plain = r["torch"]["min"]
    out = r["torch_out"]["min"] if "torch_out" in r else plain  # torch's out= where it has a native one
    r["torch_best"] = min(plain, out)
    r["ratio_numpy"] = r["numpy"]["min"] / plain
    r["ratio_numpy_out"] = r["numpy_out"]["min"] / out
    r["ratio_device"] = r["device"]["min"] / r["torch_best"]
    r["ratio_device_plain"] = r["device"]["min"] / plain
    r["numpy_vs_device"] = r["numpy"]["min"] / r["device"]["min"]
    calm = {name: r[name]["min_unpreempted"] for name in fns if "min_unpreempted" in r[name]}
    if "numpy" in calm and "device" in calm:
        r["numpy_vs_device_unpreempted"] = calm["numpy"] / calm["device"]
    torch_calm = [calm[name] for name in ("torch", "torch_out") if name in calm]
    if "device" in calm and torch_calm:
        r["ratio_device_unpreempted"] = calm["device"] / min(torch_calm)
    r["layer_overhead"] = r["device"]["min"] / r["kernel"]["min"] - 1.0
    if case.floor_bytes:
        r["floor_seconds"] = case.floor_bytes / bandwidth
        r["floor_ratio"] = r["device"]["min"] / r["floor_seconds"]

    def device_outputs(outputs: list) -> Callable[[], list]:
        def measured() -> list:
            outputs.extend(finished())
            return outputs

        return measured

    r["memory"] = {}
    for path, _ in PATHS:
        outputs: list = []
        call = {"numpy": case.numpy, "numpy_out": case.numpy_out, "device": device_outputs(outputs)}[path]
        _scratch_peak(reset=True)
        peak, held = _common.peak_extra_bytes(call)
        scratch = _scratch_peak(reset=False)
        for array in outputs:
            array.close()
        # The outputs count in the peak only when the call allocated them (a memory pool may hand
        # out blocks it already holds, and out= arrays exist before); scratch memory a pool keeps
        # after the call is still extra.
        extra = max(peak - min(held, case.output_bytes), 0) + scratch
        r["memory"][path] = {
            "peak_bytes": peak,
            "held_bytes": held,
            "compiled_scratch_bytes": scratch,
            "peak_extra_bytes": extra,
            "ratio": extra / case.output_bytes,
        }
    r["output_bytes"] = case.output_bytes
    r["memory_ratio"] = max(m["ratio"] for m in r["memory"].values())


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}"


def _min_med(r: dict[str, Any], name: str) -> str:
    return f"{_ms(r[name]['min'])} / {_ms(r[name]['median'])}" if name in r else ""


#: Per-case targets: results key, label, limit.
CASE_TARGETS = (
    ("ratio_numpy", "numpy / torch", CASE_TARGET),
    ("numpy_vs_device", "numpy / device", NUMPY_VS_DEVICE_TARGET),
    ("ratio_numpy_out", "numpy out= / torch out=", CASE_TARGET),
    ("ratio_device", "device / torch best", CASE_TARGET),
    ("memory_ratio", "peak extra memory / output, every path", MEMORY_TARGET),
)


def _ratio(value: float, limit: float) -> str:
    """``value`` with a "!" when it misses its per-case target."""
    return f"{value:.2f}{'!' if value > limit else ''}"


def report(cases: list[Case]) -> dict[str, Any]:
    print("Times (ms, min / median over the rounds):")
    headers = [
        "case",
        "numpy",
        "numpy out=",
        "device",
        "kernel",
        "numpy kernel",
        "torch",
        "torch out=",
        "torch fp32",
    ]
    rows = []
    for case in cases:
        r = case.results
        rows.append(
            [
                case.name,
                _min_med(r, "numpy"),
                _min_med(r, "numpy_out"),
                _min_med(r, "device"),
                _ms(r["kernel"]["min"]),
                _ms(r["numpy_kernel"]["min"]) if "numpy_kernel" in r else "",
                _min_med(r, "torch"),
                _ms(r["torch_out"]["min"]) if "torch_out" in r else "",
                _ms(r["torch_fp32"]["min"]) if "torch_fp32" in r else "",
            ]
        )
    _common.print_table(headers, rows)

    print(
        "\nRatios of the mins (! marks a miss of the case's target); layers: device against the kernel "
        "alone; extra memory per path (numpy, numpy out=, device) over the output; x floor: "
        "information only"
    )
    headers = [
        "case",
        "numpy/torch",
        "numpy/device",
        "numpy out=/torch out=",
        "device/torch best",
        "layers",
        "extra mem/out a, b, c",
        "x floor",
    ]
    rows = []
    for case in cases:
        r = case.results
        rows.append(
            [
                case.name,
                _ratio(r["ratio_numpy"], CASE_TARGET),
                _ratio(r["numpy_vs_device"], NUMPY_VS_DEVICE_TARGET),
                _ratio(r["ratio_numpy_out"], CASE_TARGET),
                _ratio(r["ratio_device"], CASE_TARGET),
                f"{r['layer_overhead'] * 100:+.0f}%",
                ", ".join(_ratio(r["memory"][path]["ratio"], MEMORY_TARGET) for path, _ in PATHS),
                f"{r['floor_ratio']:.2f}" if "floor_ratio" in r else "",
            ]
        )
    _common.print_table(headers, rows)

    gm = {key: _common.geomean([c.results[key] for c in cases]) for key, _, _ in CASE_TARGETS}
    gm["ratio_device_plain"] = _common.geomean([c.results["ratio_device_plain"] for c in cases])
    gm_fp32 = {
        key: _common.geomean([c.results[key] for c in cases if c.dtype == "fp32"])
        for key in ("ratio_numpy", "ratio_device")
    }
    print(
        f"\ngeometric means: numpy/torch {gm['ratio_numpy']:.2f} ({gm_fp32['ratio_numpy']:.2f} over the "
        f"fp32 cases), numpy/device {gm['numpy_vs_device']:.2f}, numpy out=/torch out= "
        f"{gm['ratio_numpy_out']:.2f}, device/torch best {gm['ratio_device']:.2f} "
        f"({gm_fp32['ratio_device']:.2f} over the fp32 cases; {gm['ratio_device_plain']:.2f} against "
        "torch's plain ops only)"
    )

    say = {True: "met", False: "MISSED"}
    checks: dict[str, bool] = {}
    for key, label, limit in CASE_TARGETS:
        worst = max(cases, key=lambda c: c.results[key])
        missed = [c for c in cases if c.results[key] > limit]
        checks[key] = not missed
        print(
            f"target {label} <= {limit} on every case: {say[checks[key]]} "
            f"(worst {worst.results[key]:.2f}: {worst.name}"
            f"{f'; {len(missed)} of {len(cases)} cases above' if missed else ''})"
        )
    for key, label, limit in (
        ("ratio_numpy", "numpy / torch", NUMPY_GEOMEAN_TARGET),
        ("ratio_device", "device / torch best", DEVICE_GEOMEAN_TARGET),
    ):
        checks[f"{key}_geomean"] = gm[key] <= limit
        print(f"target {label} geometric mean <= {limit}: {say[checks[f'{key}_geomean']]} ({gm[key]:.2f})")
    print(
        "\nThe same ratios over the calls during which no thread of this process was preempted "
        "(information, no target: no involuntary context switch; - where a path had no such call)"
    )
    headers = ["case", "numpy/device", "device/torch best", "such calls: numpy, device, torch, torch out="]
    rows = []
    for case in cases:
        r = case.results
        rows.append(
            [
                case.name,
                f"{r['numpy_vs_device_unpreempted']:.2f}" if "numpy_vs_device_unpreempted" in r else "-",
                f"{r['ratio_device_unpreempted']:.2f}" if "ratio_device_unpreempted" in r else "-",
                ", ".join(
                    str(r[name]["unpreempted"]) if name in r else "-"
                    for name in ("numpy", "device", "torch", "torch_out")
                ),
            ]
        )
    _common.print_table(headers, rows)
    print()
    floored = [c for c in cases if "floor_ratio" in c.results]
    if floored:
        floor_worst = max(floored, key=lambda c: c.results["floor_ratio"])
        print(
            f"max-pool backward against the bandwidth floor (information, no target): worst "
            f"{floor_worst.results['floor_ratio']:.2f}x: {floor_worst.name}"
        )
    return {"geomean": gm, "geomean_fp32": gm_fp32, "targets_met": checks}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small shapes, for a smoke run")
    parser.add_argument("--repeat", type=int, default=5, help="timed calls per measurement (default 5)")
    parser.add_argument("--json", metavar="PATH", help="save the results as JSON")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--only", metavar="TEXT", help="run only the cases whose name contains TEXT")
    parser.add_argument(
        "--settle",
        type=float,
        default=SETTLE_MS,
        metavar="MS",
        help=f"idle pause before every timed call (default {SETTLE_MS:g} ms; 0: none)",
    )
    # a bare "--" is what `python -m pyaclnn bench -- ARGS` passes along; it separates nothing here
    args = parser.parse_args([a for a in (sys.argv[1:] if argv is None else argv) if a != "--"])
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    torch = _common.import_torch("bench_kernels")

    from pyaclnn.kernels import _accel, _workers

    info = _common.machine(torch)
    info["pyaclnn_kernel_threads"] = _workers.thread_count()
    info["accel"] = _accel.accel_status()
    info["copy_bandwidth"] = bandwidth = copy_bandwidth(args.repeat)
    _common.print_machine(info)
    compiled = [k for k, v in info["accel"]["kernels"].items() if v == "compiled"]
    print(
        f"pyaclnn numpy backend: max-pool kernels use {info['pyaclnn_kernel_threads']} thread(s) "
        f"(PYACLNN_NUM_THREADS); repeat {args.repeat}, warm-up 1, settle {args.settle:g} ms "
        f"({max(args.settle, TORCH_SETTLE_MS):g} ms after a torch op)"
        f"{', quick shapes' if args.quick else ''}"
    )
    print(
        f"compiled kernels: {', '.join(compiled) or 'none'}"
        f"{'' if compiled else ' (' + info['accel']['reason'] + ')'}; "
        f"copy bandwidth {bandwidth / 1e9:.1f} GB/s (read + written)\n"
    )

    cases = max_pool_cases(torch, args.quick) + grid_cases(torch, args.quick)
    if args.only:
        cases = [c for c in cases if args.only in c.name]
        if not cases:
            parser.error(f"no case name contains {args.only!r}")
    for case in cases:
        print(f"  running {case.name} ...", file=sys.stderr, flush=True)
        run_case(case, args.repeat, bandwidth, args.settle / 1e3)
    summary = report(cases)
    if args.quick:
        print("(quick shapes: a smoke run; the targets are meant for the full shapes)")
    if args.json:
        _common.save_json(
            args.json,
            {
                "machine": info,
                "repeat": args.repeat,
                "quick": args.quick,
                **summary,
                "cases": [{"name": c.name, "dtype": c.dtype, **c.results} for c in cases],
            },
        )
    return 1 if args.strict and not all(summary["targets_met"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
