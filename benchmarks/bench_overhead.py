"""Host overhead per call: the four ops on a few elements, against PyTorch CPU.

With inputs of a handful of elements the op's math costs next to nothing, so
the time per call is what pyaclnn's layers cost: argument normalisation,
descriptors, the two phases, the stream, output allocation and freeing. Each
op is called through the functional API with device-resident inputs (outputs
closed after every call) on

* npu: the npu backend (cffi over CANN's C ABI) loading the host emulator of
  CANN built from tests/emulator (``tests/emulator_build.py``), so the whole
  Python-to-C path an Atlas host runs is measured, with a C "device" that
  does almost no work. Repeated calls reuse their first call's repeatable
  executor (pyaclnn/_executors.py), so they skip phase 1, and the backward
  ops' repeated calls skip the Python checks too (pyaclnn._launch.crafted);
* npu no-cache: the same on a stream with that cache off: every call runs
  phase 1, as the first call with new shapes or parameters does;
* numpy: the numpy backend;

and compared with ``torch.ops.aten.*`` on CPU tensors of the same tiny shapes.
Each measurement is the best of ``--loops`` loops of ``--calls`` calls. The
contenders of an op take turns: each round runs one loop of every contender,
the order rotating from round to round, so background load on a shared
machine lands on all of them alike and the ratios of their bests stay fair.

Target (for the two backward ops): npu over the emulator per
call <= 1.5x PyTorch per call (the earlier target was 2x). The forwards are
measured too, without a target.

``--profile [OP]`` runs cProfile over a loop of one op on the npu backend
(default grid_sampler3d_backward) and prints the top 25 functions by tottime.

``--cold N`` adds a table of the same calls on cold caches: each call comes
after a 32 MiB copy and a 20 ms pause (as a call after a large kernel, or
after anything else ran on a shared machine), the minimum of N calls. A
warm call is what a loop of tiny ops costs; a cold one is what each call of
bench_kernels.py pays on top of its kernel.

Usage: python benchmarks/bench_overhead.py [--quick] [--calls N] [--loops L] [--cold N]
                                            [--json PATH] [--profile [OP]] [--strict]
Exit status: 0; 2 when PyTorch is missing; 1 with --strict when the target is missed.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

TARGET = 1.5  # npu-over-emulator per call / torch per call, for the backward ops
OPS = (
    "max_pool3d_with_argmax",
    "max_pool3d_with_argmax_backward",
    "grid_sampler3d",
    "grid_sampler3d_backward",
)
TARGET_OPS = ("max_pool3d_with_argmax_backward", "grid_sampler3d_backward")
POOL_SHAPE = (1, 1, 2, 2, 2)
GRID_INPUT_SHAPE = (1, 1, 2, 2, 2)
GRID_SHAPE = (1, 1, 1, 1, 3)


def progress(step: str) -> None:
    """One line on stderr as ``step`` starts: a run is quiet for seconds otherwise, and stdout
    holds only the results (their format stays as it is)."""
    print(f"  {step} ...", file=sys.stderr, flush=True)


def use_emulator() -> str:
    """Build the emulator (if needed) and point the npu backend at it; returns its home.

    Must run before the first npu use: the npu backend loads one CANN per process.
    """
    sys.path.insert(0, os.path.join(_common.REPO, "tests"))
    from emulator_build import emulator_home

    progress("building the CANN emulator (tests/emulator_build.py; incremental)")

    home = str(emulator_home("classic"))
    os.environ["PYACLNN_ASCEND_HOME"] = home
    return home


def pyaclnn_calls(backend: str, executor_cache: bool = True) -> dict[str, Callable[[], None]]:
    """One zero-argument call per op on ``backend``, inputs already on the device.

    With ``executor_cache=False`` the calls run on a stream whose executor cache is
    off, so every call runs phase 1 (what a call with new shapes costs).
    """
    import pyaclnn

    stream = pyaclnn.Stream(backend=backend)
    stream._state.executors.enabled = executor_cache

    rng = np.random.default_rng(0)
    x = rng.standard_normal(POOL_SHAPE, dtype=np.float32)
    _, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend="numpy")
    go_pool = np.ones((1, 1, 1, 1, 1), np.float32)
    gx = rng.standard_normal(GRID_INPUT_SHAPE, dtype=np.float32)
    grid = rng.uniform(-1, 1, GRID_SHAPE).astype(np.float32)
    go_grid = np.ones((1, 1, *GRID_SHAPE[1:4]), np.float32)
    d = {
        name: pyaclnn.to_device(a, backend=backend)
        for name, a in (
            ("x", x),
            ("idx", idx),
            ("go_pool", go_pool),
            ("gx", gx),
            ("grid", grid),
            ("go_grid", go_grid),
        )
    }

    def closing(call: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            result = call()
            for array in result if isinstance(result, tuple) else (result,):
                if array is not None:
                    array.close()

        return run

    return {
        "max_pool3d_with_argmax": closing(
            lambda: pyaclnn.max_pool3d_with_argmax(d["x"], 2, backend=backend, stream=stream)
        ),
        "max_pool3d_with_argmax_backward": closing(
            lambda: pyaclnn.max_pool3d_with_argmax_backward(
                d["go_pool"], d["x"], d["idx"], 2, backend=backend, stream=stream
            )
        ),
        "grid_sampler3d": closing(
            lambda: pyaclnn.grid_sampler3d(d["gx"], d["grid"], backend=backend, stream=stream)
        ),
        "grid_sampler3d_backward": closing(
            lambda: pyaclnn.grid_sampler3d_backward(
                d["go_grid"], d["gx"], d["grid"], backend=backend, stream=stream
            )
        ),
    }


def torch_calls(torch: Any) -> dict[str, Callable[[], Any]]:
    aten = torch.ops.aten
    x = torch.randn(POOL_SHAPE)
    _, idx = aten.max_pool3d_with_indices(x, [2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1], False)
    go_pool = torch.ones((1, 1, 1, 1, 1))
    gx = torch.randn(GRID_INPUT_SHAPE)
    grid = torch.rand(GRID_SHAPE) * 2 - 1
    go_grid = torch.ones((1, 1, *GRID_SHAPE[1:4]))
    k, s, p, dl = [2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1]
    return {
        "max_pool3d_with_argmax": lambda: aten.max_pool3d_with_indices(x, k, s, p, dl, False),
        "max_pool3d_with_argmax_backward": lambda: aten.max_pool3d_with_indices_backward(
            go_pool, x, k, s, p, dl, False, idx
        ),
        "grid_sampler3d": lambda: aten.grid_sampler_3d(gx, grid, 0, 0, False),
        "grid_sampler3d_backward": lambda: aten.grid_sampler_3d_backward(
            go_grid, gx, grid, 0, 0, False, [True, True]
        ),
    }


# Where a profiled function lives -> the layer it belongs to (first match wins).
_LAYERS = (
    ("pyaclnn/functional.py", "functional API"),
    ("pyaclnn/runtime.py", "runtime (DeviceArray, Stream)"),
    ("pyaclnn/_pool.py", "device-memory pool"),
    ("pyaclnn/acl/", "low-level API (pyaclnn.acl)"),
    ("pyaclnn/aclnn.py", "low-level API (pyaclnn.aclnn)"),
    ("pyaclnn/backends/npu/", "npu backend (incl. C time of its cffi calls)"),
    ("pyaclnn/backends/numpy/", "numpy backend"),
    ("pyaclnn/kernels/", "kernels"),
    ("pyaclnn/", "pyaclnn, other"),
    ("cffi", "cffi Python helpers (ffi.new, ffi.cast)"),
    ("weakref", "weakref.finalize"),
)


def time_loops_interleaved(
    fns: dict[str, Callable[[], Any]], calls: int, loops: int, warmup: int = 50
) -> dict[str, list[float]]:
    """Seconds per call of each of ``fns`` in each of ``loops`` rounds; a round runs one loop of
    ``calls`` calls of every contender, in an order that rotates from round to round."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()

    def loop(fn: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(calls):
                fn()

        return run

    rounds = _common.time_interleaved({name: loop(fn) for name, fn in fns.items()}, loops, warmup=0)
    return {name: [seconds / calls for seconds in times] for name, times in rounds.items()}


COLD_FLUSH_BYTES = 32 << 20
COLD_PAUSE = 0.020


def time_cold(fns: dict[str, Callable[[], Any]], calls: int) -> dict[str, float]:
    """Seconds of each of ``fns``'s calls on cold caches: the minimum of ``calls`` calls, each after
    a copy of COLD_FLUSH_BYTES and a pause of COLD_PAUSE; the contenders take turns."""
    import time

    src = np.ones(COLD_FLUSH_BYTES // 8)
    dst = np.empty_like(src)
    best = {name: float("inf") for name in fns}
    for fn in fns.values():
        fn()  # warm-up: first-call costs are not what this measures
    for _ in range(calls):
        for name, fn in fns.items():
            np.copyto(dst, src)
            time.sleep(COLD_PAUSE)
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def _layer(filename: str) -> str:
    path = filename.replace(os.sep, "/")
    for marker, name in _LAYERS:
        if marker in path:
            return name
    if filename == "~" or path.startswith("<"):
        return "Python builtins / other"
    return f"other ({os.path.basename(path)})"


def profile(call: Callable[[], None], calls: int, top: int = 25) -> tuple[str, dict[str, float]]:
    """cProfile of ``calls`` calls: the ``top`` functions by tottime as text, and tottime per layer (s/call).

    The C time of a cffi call counts in the Python function that makes it
    (cProfile does not see cffi's C functions as calls).
    """
    for _ in range(50):
        call()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        call()
    profiler.disable()
    stats = pstats.Stats(profiler)
    layers: dict[str, float] = {}
    for (filename, _line, _func), (_cc, _nc, tottime, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        name = _layer(filename)
        layers[name] = layers.get(name, 0.0) + tottime / calls
    out = io.StringIO()
    stats.stream = out  # type: ignore[attr-defined]
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    return out.getvalue(), dict(sorted(layers.items(), key=lambda kv: -kv[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls, for a smoke run")
    parser.add_argument("--calls", type=int, help="calls per loop (default 2000, 200 with --quick)")
    parser.add_argument("--loops", type=int, help="loops, the best one counts (default 5, 3 with --quick)")
    parser.add_argument("--json", metavar="PATH", help="save the results as JSON")
    parser.add_argument(
        "--profile",
        nargs="?",
        const="grid_sampler3d_backward",
        choices=OPS,
        metavar="OP",
        help="cProfile OP on the npu backend (default grid_sampler3d_backward)",
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target is missed")
    parser.add_argument(
        "--cold", type=int, default=0, metavar="N", help="also time each call on cold caches (min of N)"
    )
    # accepted so that `python -m pyaclnn bench --repeat N` can pass the same options to both scripts
    parser.add_argument("--repeat", type=int, help=argparse.SUPPRESS)
    # a bare "--" is what `python -m pyaclnn bench -- ARGS` passes along; it separates nothing here
    args = parser.parse_args([a for a in (sys.argv[1:] if argv is None else argv) if a != "--"])
    calls = args.calls or (200 if args.quick else 2000)
    loops = args.loops or (3 if args.quick else 5)
    if calls < 1 or loops < 1:
        parser.error("--calls and --loops must be at least 1")
    progress("importing PyTorch")
    torch = _common.import_torch("bench_overhead")

    home = use_emulator()
    info = _common.machine(torch)
    info["emulator_home"] = home
    _common.print_machine(info)
    print(f"npu backend over the CANN emulator at {home}")
    print(
        f"best of {loops} loops of {calls} calls; inputs: max-pool {POOL_SHAPE} k2, "
        f"grid input {GRID_INPUT_SHAPE} grid {GRID_SHAPE}, float32\n"
    )

    timings: dict[str, dict[str, float]] = {op: {} for op in OPS}
    progress("putting the inputs on each backend")
    sources = {
        "npu": pyaclnn_calls("npu"),
        "npu_uncached": pyaclnn_calls("npu", executor_cache=False),
        "numpy": pyaclnn_calls("numpy"),
        "torch": torch_calls(torch),
    }
    for op in OPS:
        progress(f"timing {op} on {', '.join(sources)}, interleaved")
        per_call = time_loops_interleaved({source: fns[op] for source, fns in sources.items()}, calls, loops)
        timings[op] = {source: min(times) for source, times in per_call.items()}

    rows, ratios = [], {}
    compared = ("npu", "npu_uncached", "numpy")
    for op in OPS:
        t = timings[op]
        ratios[op] = {source: t[source] / t["torch"] for source in compared}
        rows.append(
            [
                op,
                *(f"{t[source] * 1e6:.1f}" for source in (*compared, "torch")),
                *(f"{ratios[op][source]:.2f}" for source in compared),
            ]
        )
    _common.print_table(
        [
            "op",
            "npu µs/call",
            "npu no-cache",
            "numpy µs/call",
            "torch µs/call",
            "npu/torch",
            "no-cache/torch",
            "numpy/torch",
        ],
        rows,
    )
    print(
        "(npu: repeated calls reuse their executor; no-cache: every call runs phase 1, as a call with "
        "new shapes does)"
    )
    worst = max(TARGET_OPS, key=lambda op: ratios[op]["npu"])
    met = ratios[worst]["npu"] <= TARGET
    print(
        f"\ntarget for the backward ops, npu-over-emulator per call <= {TARGET}x torch: "
        f"{'met' if met else 'MISSED'} (worst {ratios[worst]['npu']:.2f}x: {worst})"
    )

    cold: dict[str, dict[str, float]] = {}
    if args.cold > 0:
        for op in OPS:
            progress(f"timing {op} on cold caches")
            cold[op] = time_cold({source: fns[op] for source, fns in sources.items()}, args.cold)
        print(
            f"\ncold caches: each call after a {COLD_FLUSH_BYTES >> 20} MiB copy and a "
            f"{COLD_PAUSE * 1e3:g} ms pause, min of {args.cold} calls:"
        )
        _common.print_table(
            ["op", "npu µs/call", "npu no-cache", "numpy µs/call", "torch µs/call", "numpy/torch"],
            [
                [
                    op,
                    *(f"{cold[op][source] * 1e6:.1f}" for source in (*compared, "torch")),
                    f"{cold[op]['numpy'] / cold[op]['torch']:.2f}",
                ]
                for op in OPS
            ],
        )

    report, layers = None, None
    if args.profile:
        progress(f"profiling {args.profile} on npu")
        report, layers = profile(sources["npu"][args.profile], calls)
        print(f"\ncProfile of {calls} calls of {args.profile} on npu (top 25 by tottime):")
        print(report)
        total = sum(layers.values())
        print(
            f"tottime per call by layer (under cProfile, which inflates Python time; "
            f"{total * 1e6:.1f} µs in all):"
        )
        for name, seconds in layers.items():
            print(f"  {seconds * 1e6:7.1f} µs  {seconds / total * 100:4.0f}%  {name}")
    if args.json:
        _common.save_json(
            args.json,
            {
                "machine": info,
                "calls": calls,
                "loops": loops,
                "seconds_per_call": timings,
                "cold_seconds_per_call": cold,
                "ratios": ratios,
                "target_met": met,
                "profile": report,
                "profile_layers": layers,
            },
        )
    import pyaclnn

    pyaclnn.finalize()
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
