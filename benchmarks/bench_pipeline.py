"""Chains of dependent calls on DeviceArrays: the asynchronous runtime against a synchronize per call.

Each op is called ``--calls`` times in a chain (each call's input is the
previous call's output; shapes kept by "same" pooling, k=3 s=1 p=1, and by a
grid as large as the input) on one stream, through the functional API, over
the host emulator of CANN with simulated device time:

* ``PYACLNN_EMU_KERNEL_US`` (default 20): device time of every kernel;
* ``PYACLNN_EMU_SYNC_US`` (default 60): latency of every synchronize (peers
  measured ~67 µs per op on a 910B3 and ~230 µs per aclrtSynchronizeStream).

Modes, timed in the same run (best of ``--loops``, each ending with one
synchronize):

* default: calls queue their work and return;
* blocking: ``ASCEND_LAUNCH_BLOCKING=1`` (every call waits for its stream);
* host: the default runtime with no kernel time, i.e. the host cost per call.

Targets (from the issue): default / blocking <= 0.4, and default within 1.25x
of the device-bound limit max(kernel time, host time per call).

Replay, on the npu backend and on the numpy backend's emulation: a
chain of ``REPLAY_CALLS`` dependent ``grid_sampler3d`` calls writing outputs
made once (``out=``), captured once in a :class:`pyaclnn.Graph` and replayed.
Timed (best of ``5 * --loops``): the host time of ``g.replay()`` per operation
(until it returns) against the eager host time per call (queueing the same
calls), and the wall time of replay plus synchronize against the device-bound
limit ``REPLAY_CALLS`` x kernel time. Targets: replay host <= 0.1x eager host,
replay wall <= 1.25x the limit. The replayed chain's result must equal the
eager chain's bit for bit (exit 1 otherwise).

Usage: python benchmarks/bench_pipeline.py [--quick] [--calls N] [--loops L] [--kernel-us K]
                                            [--sync-us S] [--json PATH] [--strict]
``--kernel-us`` defaults to ``PYACLNN_EMU_KERNEL_US`` when set (20 otherwise).
Exit status: 0; 1 with --strict when a target is missed; 1 when a replay differs from eager.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
from bench_overhead import progress, use_emulator  # noqa: E402

RATIO_TARGET = 0.4  # default / blocking
LIMIT_TARGET = 1.25  # default / max(kernel time, host time per call)
OPS = (
    "max_pool3d_with_argmax",
    "max_pool3d_with_argmax_backward",
    "grid_sampler3d",
    "grid_sampler3d_backward",
)
REPLAY_CALLS = 100  # the chain length
REPLAY_HOST_TARGET = 0.1  # replay host time per op / eager host time per call
REPLAY_LIMIT_TARGET = 1.25  # replay + synchronize / (REPLAY_CALLS x kernel time)
SHAPE = (1, 1, 2, 2, 2)
SAME = {"kernel_size": 3, "stride": 1, "padding": 1}  # pooling that keeps the shape


def chain(op: str, stream: Any) -> Callable[[int], None]:
    """``run(n)``: ``n`` dependent calls of ``op`` on ``stream`` (each output feeds the next call)."""
    import pyaclnn

    rng = np.random.default_rng(0)
    x = rng.standard_normal(SHAPE, dtype=np.float32)
    grid = rng.uniform(-1, 1, (*SHAPE[:1], *SHAPE[2:], 3)).astype(np.float32)
    _, idx = pyaclnn.max_pool3d_with_argmax(x, backend="numpy", **SAME)
    dx, didx, dgrid = (pyaclnn.to_device(a, backend="npu", stream=stream) for a in (x, idx, grid))
    calls: dict[str, Callable[[Any], Any]] = {
        "max_pool3d_with_argmax": lambda v: _first(
            pyaclnn.max_pool3d_with_argmax(v, backend="npu", stream=stream, **SAME)
        ),
        "max_pool3d_with_argmax_backward": lambda v: pyaclnn.max_pool3d_with_argmax_backward(
            v, dx, didx, backend="npu", stream=stream, **SAME
        ),
        "grid_sampler3d": lambda v: pyaclnn.grid_sampler3d(v, dgrid, backend="npu", stream=stream),
        "grid_sampler3d_backward": lambda v: pyaclnn.grid_sampler3d_backward(
            v, dx, dgrid, output_mask=(True, False), backend="npu", stream=stream
        )[0],
    }
    call = calls[op]

    def run(n: int) -> None:
        value = pyaclnn.to_device(x, backend="npu", stream=stream)
        for _ in range(n):
            result = call(value)
            value.close()  # back to the pool on the stream: the next call reuses it
            value = result
        stream.synchronize()
        value.close()

    return run


def _first(pair: tuple[Any, Any]) -> Any:
    pair[1].close()
    return pair[0]


def time_chain(run: Callable[[int], None], calls: int, loops: int) -> float:
    """Best seconds per call of ``loops`` chains of ``calls`` calls."""
    run(min(calls, 50))  # warm-up: plans cached, pool filled
    best = float("inf")
    for _ in range(loops):
        start = time.perf_counter()
        run(calls)
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def measure(calls: int, loops: int, kernel_us: int, sync_us: int) -> dict[str, dict[str, float]]:
    """Seconds per call of each op in each mode."""
    import pyaclnn
    from pyaclnn import runtime

    ctx = runtime.context("npu")
    results: dict[str, dict[str, float]] = {}
    with pyaclnn.Stream(backend="npu") as stream:
        for op in OPS:
            run = chain(op, stream)
            results[op] = {}
            for mode, kernel, blocking in (
                ("default", kernel_us, False),
                ("blocking", kernel_us, True),
                ("host", 0, False),
            ):
                os.environ["PYACLNN_EMU_KERNEL_US"] = str(kernel)  # the emulator reads it at each launch
                os.environ["PYACLNN_EMU_SYNC_US"] = str(sync_us)
                ctx.launch_blocking = blocking  # what ASCEND_LAUNCH_BLOCKING=1 sets at initialisation
                progress(f"timing {op}, {mode}")
                results[op][mode] = time_chain(run, calls, loops)
        ctx.launch_blocking = False
    return results


def measure_replay(backend: str, loops: int, kernel_us: int, sync_us: int) -> dict[str, Any]:
    """Eager against replayed chains of ``REPLAY_CALLS`` grid_sampler3d calls on ``backend``.

    Returns the best eager host seconds per call, replay host seconds per op,
    replay-plus-synchronize wall seconds, and whether the results matched bit for bit.
    """
    import pyaclnn

    os.environ["PYACLNN_EMU_KERNEL_US"] = str(kernel_us)  # a capture records the kernel time
    os.environ["PYACLNN_EMU_SYNC_US"] = str(sync_us)
    with pyaclnn.Stream(backend=backend) as stream:
        chain = _common.SamplerChain(backend, stream, SHAPE, REPLAY_CALLS)
        queue, outs = chain.queue, chain.outputs
        reps = 5 * loops
        queue()  # warm-up: plans cached
        stream.synchronize()
        eager = float("inf")
        for _ in range(reps):
            start = time.perf_counter()
            queue()
            eager = min(eager, time.perf_counter() - start)
            stream.synchronize()
        want = outs[-1].numpy()
        outs[-1].copy_(np.zeros(SHAPE, np.float32), stream=stream)  # a replay doing nothing shows
        stream.synchronize()
        with pyaclnn.Graph(backend=backend) as g:
            with pyaclnn.graph(g, stream=stream):
                queue()
            g.replay(stream)  # warm-up
            stream.synchronize()
            host = wall = float("inf")
            for _ in range(reps):
                start = time.perf_counter()
                g.replay(stream)
                returned = time.perf_counter()
                stream.synchronize()
                end = time.perf_counter()
                host, wall = min(host, returned - start), min(wall, end - start)
            got = outs[-1].numpy()
        chain.close()
    return {
        "eager_host": eager / REPLAY_CALLS,
        "replay_host": host / REPLAY_CALLS,
        "replay_wall": wall,
        "identical": bool(np.array_equal(want.view(np.uint32), got.view(np.uint32))),
    }


def replay_section(loops: int, kernel_us: int, sync_us: int) -> tuple[dict[str, Any], bool, bool]:
    """Time and print the replay table; returns the results, whether the targets were met,
    and whether every replay matched eager bit for bit."""
    results, rows = {}, []
    for backend in ("npu", "numpy"):
        progress(f"timing replay chain, {backend}")
        r = results[backend] = measure_replay(backend, loops, kernel_us, sync_us)
        limit = REPLAY_CALLS * kernel_us * 1e-6
        r["host_ratio"] = r["replay_host"] / r["eager_host"]
        r["to_limit"] = r["replay_wall"] / limit
        r["met"] = r["host_ratio"] <= REPLAY_HOST_TARGET and r["to_limit"] <= REPLAY_LIMIT_TARGET
        rows.append(
            [
                backend,
                f"{r['eager_host'] * 1e6:.2f}",
                f"{r['replay_host'] * 1e6:.2f}",
                f"{r['host_ratio']:.3f}",
                f"{r['replay_wall'] * 1e6:.0f}",
                f"{limit * 1e6:.0f}",
                f"{r['to_limit']:.2f}",
                "yes" if r["identical"] else "NO",
            ]
        )
    print(
        f"\nReplay: a chain of {REPLAY_CALLS} dependent grid_sampler3d calls (out= made once) captured "
        f"once, best of {5 * loops}; kernel {kernel_us} µs"
    )
    _common.print_table(
        [
            "backend",
            "eager host µs/call",
            "replay host µs/op",
            "replay/eager host",
            "replay+sync µs",
            "limit µs",
            "replay/limit",
            "bit-identical",
        ],
        rows,
    )
    # The targets hold on the npu backend (CANN's runtime, here its emulator); the numpy
    # backend's device is Python threads whose kernels cost far more than the simulated time.
    npu = results["npu"]
    host_met = npu["host_ratio"] <= REPLAY_HOST_TARGET
    limit_met = npu["to_limit"] <= REPLAY_LIMIT_TARGET
    print(
        f"\ntarget replay host/op <= {REPLAY_HOST_TARGET}x eager host/call (npu): "
        f"{'met' if host_met else 'MISSED'}"
    )
    print(
        f"target replay+synchronize <= {REPLAY_LIMIT_TARGET}x {REPLAY_CALLS} x kernel time (npu): "
        f"{'met' if limit_met else 'MISSED'}"
    )
    identical = all(r["identical"] for r in results.values())
    if not identical:
        print("replayed chain differs from the eager chain: FAILED")
    return results, host_met and limit_met, identical


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls, for a smoke run")
    parser.add_argument("--calls", type=int, help="calls per chain (default 1000, 100 with --quick)")
    parser.add_argument(
        "--loops", type=int, help="chains per mode, the best counts (default 3, 1 with --quick)"
    )
    parser.add_argument(
        "--kernel-us",
        type=int,
        default=int(os.environ.get("PYACLNN_EMU_KERNEL_US") or 20),
        help="simulated kernel time (default PYACLNN_EMU_KERNEL_US, or 20)",
    )
    parser.add_argument("--sync-us", type=int, default=60, help="simulated synchronize latency (default 60)")
    parser.add_argument("--json", metavar="PATH", help="save the results as JSON")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--repeat", type=int, help=argparse.SUPPRESS)  # as the other benchmarks take it
    args = parser.parse_args([a for a in (sys.argv[1:] if argv is None else argv) if a != "--"])
    calls = args.calls or (100 if args.quick else 1000)
    loops = args.loops or (1 if args.quick else 3)
    if calls < 1 or loops < 1:
        parser.error("--calls and --loops must be at least 1")

    home = use_emulator()
    info = _common.machine()
    info["emulator_home"] = home
    _common.print_machine(info)
    print(
        f"npu backend over the CANN emulator at {home}; chains of {calls} dependent calls on one "
        f"stream, best of {loops}; kernel {args.kernel_us} µs, synchronize +{args.sync_us} µs\n"
    )
    results = measure(calls, loops, args.kernel_us, args.sync_us)

    rows, verdicts = [], {}
    for op, t in results.items():
        limit = max(args.kernel_us * 1e-6, t["host"])
        ratio, to_limit = t["default"] / t["blocking"], t["default"] / limit
        verdicts[op] = {
            "ratio": ratio,
            "to_limit": to_limit,
            "met": ratio <= RATIO_TARGET and to_limit <= LIMIT_TARGET,
        }
        rows.append(
            [
                op,
                *(f"{t[m] * 1e6:.1f}" for m in ("default", "blocking", "host")),
                f"{ratio:.2f}",
                f"{limit * 1e6:.1f}",
                f"{to_limit:.2f}",
            ]
        )
    _common.print_table(
        [
            "op",
            "default µs/call",
            "blocking µs/call",
            "host µs/call",
            "default/blocking",
            "limit µs",
            "default/limit",
        ],
        rows,
    )
    met = all(v["met"] for v in verdicts.values())
    print(
        f"\ntarget: default/blocking <= {RATIO_TARGET} and default <= {LIMIT_TARGET}x "
        f"max(kernel, host): {'met' if met else 'MISSED'}"
    )
    replay, replay_met, identical = replay_section(loops, args.kernel_us, args.sync_us)
    if args.json:
        _common.save_json(
            args.json,
            {
                "machine": info,
                "calls": calls,
                "loops": loops,
                "kernel_us": args.kernel_us,
                "sync_us": args.sync_us,
                "seconds_per_call": results,
                "verdicts": verdicts,
                "target_met": met,
                "replay": replay,
                "replay_target_met": replay_met,
            },
        )
    import pyaclnn

    pyaclnn.finalize()
    if not identical:
        return 1
    return 1 if args.strict and not (met and replay_met) else 0


if __name__ == "__main__":
    sys.exit(main())
