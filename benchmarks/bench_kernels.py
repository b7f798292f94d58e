"""Speed of the numpy backend against PyTorch CPU on realistic shapes.

Each case runs the same op three ways, on inputs made once before timing:

* pyaclnn: the public functional API on the numpy backend with device-resident
  inputs (``pyaclnn.to_device(x, backend="numpy")``), followed by
  ``pyaclnn.synchronize`` (calls return once queued on a stream); the outputs
  are closed after every call, inside the timed region;
* kernel: the kernel alone (``pyaclnn.kernels.*`` on host arrays, into
  outputs allocated once, as pyaclnn's memory pool reuses its blocks), so the
  cost of the layers above it shows; it runs the compiled kernel where one is
  active (``pyaclnn.kernels._accel``), as the pyaclnn call does;
* numpy kernel: for the cases a compiled kernel takes, the pure NumPy kernel
  (``PYACLNN_ACCEL=0``), the reference it replaces;
* torch: ``torch.ops.aten.*`` on CPU tensors with torch's default thread count;
  for max pooling also its ``out=`` overload into outputs made once ("torch
  out="), since torch allocates (and the OS page-faults) fresh output memory
  on every call, while pyaclnn's memory pool reuses its blocks. Whether glibc
  hands torch fresh pages (mmap, page faults on every call) or reused ones
  depends on the process's allocation history, and a 32 MiB output sits right
  at glibc's largest mmap threshold, so the plain op alone swings by 10x.

The ratio is pyaclnn / torch's best (the faster of the plain op and out=,
min over repeats); the targets use it. ``ratio_plain`` in the JSON uses the
plain op only.

Warm-up 1 call, then ``--repeat`` rounds in which each contender is timed
once in turn (so all see the same background load on a shared machine); the
table shows the min and median. Every timed call starts after a pause of
``--settle`` ms (default 25): after each op PyTorch's OpenMP threads keep
spinning for about 10 ms (measured here: the process burns 8-10 ms of CPU in
a 20 ms sleep after a torch op), and on a 2-core machine whatever runs next
shares the cores with them. Without the pause the contender that follows a
torch op in the round (pyaclnn, always: the rotation keeps the cyclic order)
paid for torch's spinning.
Peak extra memory of one pyaclnn call (tracemalloc, which sees NumPy's buffers:
the peak during the call minus the outputs it returns when it allocated them,
plus the peak scratch the compiled kernels report, which tracemalloc cannot
see) is reported relative to the output size.

For max-pool backward the script also prints the ratio of the pyaclnn time to
the memory-bandwidth floor: bytes read (gradients, indices) plus bytes written
(grad_input) over the copy bandwidth measured in the same run (the faster of a
one- and a two-thread ``np.copyto`` of 64 MiB, counting read and written bytes).

Targets (issue 13): geometric mean of pyaclnn/torch <= 0.7, no case above
1.0, peak extra memory <= 2x the output, max-pool backward <= 1.5x the
bandwidth floor.

Usage: python benchmarks/bench_kernels.py [--quick] [--repeat R] [--json PATH] [--strict]
Exit status: 0; 2 when PyTorch is missing; 1 with --strict when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

GEOMEAN_TARGET = 0.7
CASE_TARGET = 1.0
MEMORY_TARGET = 2.0
FLOOR_TARGET = 1.5
SETTLE_MS = 25.0  # pause before every timed call (see the module docstring)

INTERP = {"bilinear": 0, "nearest": 1}
PADDING = {"zeros": 0, "border": 1, "reflection": 2}


@dataclass
class Case:
    """One benchmark case: three zero-argument callables over inputs made once."""

    name: str
    dtype: str
    pyaclnn: Callable[[], list]  # returns the DeviceArrays it produced (closed by the caller)
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
    ]


def max_pool_cases(torch: Any, quick: bool) -> list[Case]:
    import pyaclnn
    from pyaclnn.kernels import max_pool3d as kmp

    rng = np.random.default_rng(0)
    cases = []
    for name, shape, k, s, p, ceil, dname, backward in max_pool_specs(quick):
        dt = _dtype(dname)
        x32 = rng.standard_normal(shape, dtype=np.float32)
        x = x32.astype(dt)
        ks, st, pd, dl = (k,) * 3, (s,) * 3, (p,) * 3, (1,) * 3

        def torch_tensors(tdt: Any, x32: np.ndarray = x32, ks=ks, st=st, pd=pd, ceil=ceil) -> tuple:
            tx = torch.from_numpy(x32).to(tdt)
            tout, tidx = torch.ops.aten.max_pool3d_with_indices(tx, ks, st, pd, [1, 1, 1], ceil)
            tgo = torch.from_numpy(rng.standard_normal(tuple(tout.shape), dtype=np.float32)).to(tdt)
            return tx, tgo, tidx

        if backward:
            out, idx = pyaclnn.max_pool3d_with_argmax(x, ks, st, pd, 1, ceil, backend="numpy")
            go = rng.standard_normal(out.shape, dtype=np.float32).astype(dt)
            d_go, d_x, d_idx = (pyaclnn.to_device(a, backend="numpy") for a in (go, x, idx))

            def call(d_go=d_go, d_x=d_x, d_idx=d_idx, ks=ks, st=st, pd=pd, ceil=ceil):
                return pyaclnn.max_pool3d_with_argmax_backward(
                    d_go, d_x, d_idx, ks, st, pd, 1, ceil, backend="numpy"
                )

            def kernel(go=go, idx=idx, gi=np.empty(x.shape, x.dtype)):
                kmp.max_pool3d_with_argmax_backward(go, idx, gi)
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

            def call(d_x=d_x, ks=ks, st=st, pd=pd, ceil=ceil):
                return pyaclnn.max_pool3d_with_argmax(d_x, ks, st, pd, 1, ceil, backend="numpy")

            oshape = shape[:2] + kmp.pool_output_shape(shape[2:], ks, st, pd, dl, ceil)

            def kernel(
                x=x,
                ks=ks,
                st=st,
                pd=pd,
                dl=dl,
                ceil=ceil,
                o=np.empty(oshape, x.dtype),
                i=np.empty(oshape, np.int32),
            ):
                kmp.max_pool3d_with_argmax(x, ks, st, pd, dl, ceil, o, i)
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
                _closing(call),
                kernel,
                make_torch(_torch_dtype(torch, dname)),
                make_torch(torch.float32) if dname != "fp32" else None,
                out_bytes,
                torch_out=make_torch(_torch_dtype(torch, dname), out=True),
                floor_bytes=floor_bytes,
                compiled=True,
            )
        )
    return cases


# -- grid sampling ----------------------------------------------------------------------


def grid_cases(torch: Any, quick: bool) -> list[Case]:
    import pyaclnn
    from pyaclnn.kernels import grid_sampler3d as kgs

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

            def call(d_go=d_go, d_x=d_x, d_g=d_g, interp=interp, pad=pad, ac=ac, layout=layout):
                return pyaclnn.grid_sampler3d_backward(
                    d_go, d_x, d_g, interp, pad, ac, (True, True), layout=layout, backend="numpy"
                )

            def kernel(
                kgo=kgo,
                kx=kx,
                g=g,
                im=im,
                pm=pm,
                ac=ac,
                last=last,
                ig=np.empty(x.shape, x.dtype),
                gg=np.empty(g.shape, g.dtype),
            ):
                kig = np.moveaxis(ig, 4, 1) if last else ig
                kgs.grid_sampler3d_backward(kgo, kx, g, im, pm, ac, kig, gg)
                return ig, gg

            def make_torch(tdt: Any, im=im, pm=pm, ac=ac) -> Callable[[], Any]:
                tx, tg, tgo = torch_inputs(tdt)
                return lambda: torch.ops.aten.grid_sampler_3d_backward(tgo, tx, tg, im, pm, ac, [True, True])

            out_bytes = x.nbytes + g.nbytes
        else:

            def call(d_x=d_x, d_g=d_g, interp=interp, pad=pad, ac=ac, layout=layout):
                return pyaclnn.grid_sampler3d(d_x, d_g, interp, pad, ac, layout=layout, backend="numpy")

            def kernel(kx=kx, g=g, im=im, pm=pm, ac=ac, o=np.empty(out_shape, dt)):
                kgs.grid_sampler3d(kx, g, im, pm, ac, o)
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
                _closing(call),
                kernel,
                make_torch(_torch_dtype(torch, dname)),
                make_torch(torch.float32) if dname != "fp32" else None,
                out_bytes,
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


def time_settled(fns: dict[str, Callable[[], Any]], repeat: int, settle: float) -> dict[str, list[float]]:
    """:func:`_common.time_interleaved`, with a pause of ``settle`` seconds before every timed call.

    Each call is timed by ``time_interleaved`` itself (one contender, one
    round), so the order (rotating each round) and the timer are the same;
    only the idle machine at the start of every call is added.
    """
    for fn in fns.values():
        fn()  # warm-up, as time_interleaved's
    times: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    for round_ in range(repeat):
        shift = round_ % len(order)
        for name in order[shift:] + order[:shift]:
            time.sleep(settle)
            times[name] += _common.time_interleaved({name: fns[name]}, 1, warmup=0)[name]
    return times


def run_case(case: Case, repeat: int, bandwidth: float, settle: float = SETTLE_MS / 1e3) -> None:
    import pyaclnn

    def finished() -> list:
        # Calls return once queued on a stream: the timed region and the memory window must
        # include the kernel itself.
        arrays = case.pyaclnn()
        pyaclnn.synchronize(backend="numpy")
        return arrays

    def pyaclnn_call() -> None:
        for array in finished():
            array.close()

    fns = {"pyaclnn": pyaclnn_call, "kernel": case.kernel, "torch": case.torch}
    if case.compiled:
        fns["numpy_kernel"] = _numpy_only(case.kernel)
    if case.torch_fp32 is not None:
        fns["torch_fp32"] = case.torch_fp32
    if case.torch_out is not None:
        fns["torch_out"] = case.torch_out
    r = case.results
    for name, times in time_settled(fns, repeat, settle).items():
        r[name] = _common.summary(times)
    # against torch's best: its plain op, or out= when reusing output memory is faster
    r["torch_best"] = min(r["torch"]["min"], r["torch_out"]["min"] if "torch_out" in r else float("inf"))
    r["ratio"] = r["pyaclnn"]["min"] / r["torch_best"]
    r["ratio_plain"] = r["pyaclnn"]["min"] / r["torch"]["min"]
    r["layer_overhead"] = r["pyaclnn"]["min"] / r["kernel"]["min"] - 1.0
    if case.floor_bytes:
        r["floor_seconds"] = case.floor_bytes / bandwidth
        r["floor_ratio"] = r["pyaclnn"]["min"] / r["floor_seconds"]

    outputs: list = []

    def measured() -> list:
        outputs.extend(finished())
        return outputs

    _scratch_peak(reset=True)
    peak, held = _common.peak_extra_bytes(measured)
    scratch = _scratch_peak(reset=False)
    for array in outputs:
        array.close()
    # The outputs count in the peak only when the call allocated them (a memory pool may hand
    # out blocks it already holds); scratch memory a pool keeps after the call is still extra.
    r["output_bytes"] = case.output_bytes
    r["peak_bytes"] = peak
    r["held_bytes"] = held
    r["compiled_scratch_bytes"] = scratch
    r["peak_extra_bytes"] = max(peak - min(held, case.output_bytes), 0) + scratch
    r["memory_ratio"] = r["peak_extra_bytes"] / case.output_bytes


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}"


def report(cases: list[Case]) -> dict[str, Any]:
    headers = [
        "case",
        "pyaclnn ms min/med",
        "kernel ms",
        "layers",
        "numpy kernel ms",
        "torch ms min/med",
        "ratio",
        "torch fp32 ms",
        "torch out= ms",
        "extra mem/out",
        "x floor",
    ]
    rows = []
    for case in cases:
        r = case.results
        rows.append(
            [
                case.name,
                f"{_ms(r['pyaclnn']['min'])} / {_ms(r['pyaclnn']['median'])}",
                _ms(r["kernel"]["min"]),
                f"{r['layer_overhead'] * 100:+.0f}%",
                _ms(r["numpy_kernel"]["min"]) if "numpy_kernel" in r else "",
                f"{_ms(r['torch']['min'])} / {_ms(r['torch']['median'])}",
                f"{r['ratio']:.2f}",
                _ms(r["torch_fp32"]["min"]) if "torch_fp32" in r else "",
                _ms(r["torch_out"]["min"]) if "torch_out" in r else "",
                f"{r['memory_ratio']:.2f}x",
                f"{r['floor_ratio']:.2f}" if "floor_ratio" in r else "",
            ]
        )
    _common.print_table(headers, rows)
    ratios = [c.results["ratio"] for c in cases]
    fp32 = [c.results["ratio"] for c in cases if c.dtype == "fp32"]
    gm, gm32 = _common.geomean(ratios), _common.geomean(fp32)
    worst = max(cases, key=lambda c: c.results["ratio"])
    mem_worst = max(cases, key=lambda c: c.results["memory_ratio"])
    gm_plain = _common.geomean([c.results["ratio_plain"] for c in cases])
    print(
        f"\ngeometric mean of pyaclnn/torch: {gm:.2f} over all cases ({gm32:.2f} over the fp32 cases); "
        f"{gm_plain:.2f} against torch's plain ops only"
    )
    floored = [c for c in cases if "floor_ratio" in c.results]
    floor_worst = max(floored, key=lambda c: c.results["floor_ratio"]) if floored else None
    checks = {
        "geomean": gm <= GEOMEAN_TARGET,
        "worst_case": worst.results["ratio"] <= CASE_TARGET,
        "memory": mem_worst.results["memory_ratio"] <= MEMORY_TARGET,
        "bandwidth_floor": floor_worst is None or floor_worst.results["floor_ratio"] <= FLOOR_TARGET,
    }
    say = {True: "met", False: "MISSED"}
    print(f"target geometric mean <= {GEOMEAN_TARGET}: {say[checks['geomean']]} ({gm:.2f})")
    print(
        f"target no case > {CASE_TARGET}: {say[checks['worst_case']]} "
        f"(worst {worst.results['ratio']:.2f}: {worst.name})"
    )
    print(
        f"target peak extra memory <= {MEMORY_TARGET}x output: {say[checks['memory']]} "
        f"(worst {mem_worst.results['memory_ratio']:.2f}x: {mem_worst.name})"
    )
    if floor_worst is not None:
        print(
            f"target max-pool backward <= {FLOOR_TARGET}x the bandwidth floor: "
            f"{say[checks['bandwidth_floor']]} (worst {floor_worst.results['floor_ratio']:.2f}x: "
            f"{floor_worst.name})"
        )
    return {"geomean": gm, "geomean_fp32": gm32, "geomean_plain": gm_plain, "targets_met": checks}


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

    from pyaclnn.kernels import _accel
    from pyaclnn.kernels import max_pool3d as kmp

    info = _common.machine(torch)
    info["pyaclnn_kernel_threads"] = kmp._thread_count()
    info["accel"] = _accel.accel_status()
    info["copy_bandwidth"] = bandwidth = copy_bandwidth(args.repeat)
    _common.print_machine(info)
    compiled = [k for k, v in info["accel"]["kernels"].items() if v == "compiled"]
    print(
        f"pyaclnn numpy backend: max-pool kernels use {info['pyaclnn_kernel_threads']} thread(s) "
        f"(PYACLNN_NUM_THREADS); repeat {args.repeat}, warm-up 1, settle {args.settle:g} ms"
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
