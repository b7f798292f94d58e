"""Host cost of a generic call (``pyaclnn.ops.add`` on tiny device arrays) against
``torch.add(..., out=)`` on tiny CPU tensors, and the time to read a whole catalogue of
operator headers.

Target: ops.add per call <= 2.0x torch's, on the npu backend over the CANN emulator (the
host work an NPU host does: argument checks, descriptors, a scalar, both phases). The
numpy backend's figure is printed too (it also runs the NumPy reference's check).

``--headers DIR`` also times ``python -m pyaclnn ops --headers DIR --json`` in a new
interpreter (start included; target <= 3 s) and prints how many operators it binds and
refuses, e.g. over an installed CANN 8.1.RC1 tree.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import _common
import numpy as np

TARGET = 2.0
CATALOGUE_TARGET_S = 3.0
SHAPE = (2, 2)


def add_call(backend: str) -> Callable[[], Any]:
    """ops.add on tiny DeviceArrays of ``backend``, on a stream of its own."""
    import pyaclnn
    from pyaclnn import ops

    pyaclnn.set_backend(backend)
    stream = pyaclnn.Stream(backend=backend)
    x = pyaclnn.to_device(np.ones(SHAPE, np.float32), backend=backend, stream=stream)
    y = pyaclnn.to_device(np.ones(SHAPE, np.float32), backend=backend, stream=stream)
    out = pyaclnn.empty(SHAPE, np.float32, backend=backend, stream=stream)
    add = ops.add

    def call() -> None:
        add(x, y, 1, out, stream=stream)

    call()
    call()  # (the second call leaves the record the next ones take)
    stream.synchronize()
    call.stream = stream  # type: ignore[attr-defined]
    return call


def phases_alone(stream: Any) -> Callable[[], Any] | None:
    """One loop of the two C phases of the last ``ops.add`` recorded on ``stream`` (its words), run
    ``calls`` times from C by phases_probe.c: the emulated device's own host cost. None where
    the probe cannot be built or the call has no words (no compiler, the Python path)."""
    import ctypes

    from pyaclnn import _compile

    records = [r for r in stream._state.executors.checked.values() if getattr(r, "c_form", None)]
    if len(records) != 1:
        return None
    words = np.frombuffer(records[0].c_form, np.uint64).copy()
    try:
        source = Path(__file__).with_name("phases_probe.c")
        path = _compile.build(source, "phases_probe", ".so", ("-O2", "-shared", "-fPIC"))
    except (_compile.NoCompiler, _compile.CompilerFailed):
        return None
    probe = ctypes.CDLL(str(path)).probe_phases
    probe.argtypes = [ctypes.c_void_p, ctypes.c_long]
    return lambda calls: probe(words.ctypes.data, calls)


def torch_call(torch: Any) -> Callable[[], Any]:
    x, y, out = torch.ones(SHAPE), torch.ones(SHAPE), torch.empty(SHAPE)
    return lambda: torch.add(x, y, alpha=1, out=out)


def interleaved(
    contenders: dict[str, Callable[..., Any]],
    calls: int,
    loops: int,
    before: dict[str, Callable[[], Any]],
    batched: frozenset[str] = frozenset(),
) -> dict[str, float]:
    """The best seconds per call of each contender over ``loops`` rounds, each round one loop of
    ``calls`` calls of every contender in turn (``before[name]()`` ahead of its loop, untimed;
    a ``batched`` one is called once with ``calls``, and runs them itself), the order rotated
    from round to round: on a shared machine a change of load then touches all of them, not
    one."""
    names = list(contenders)
    best = {name: float("inf") for name in names}
    for round_ in range(loops + 1):  # the first round warms up
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            before.get(name, lambda: None)()
            if name in batched:  # one call runs the whole loop (no Python per call)
                start = time.perf_counter()
                contenders[name](calls)
                seconds = (time.perf_counter() - start) / calls
            else:
                seconds = _common.time_loops(contenders[name], calls, 1, warmup=0)[0]
            if round_:
                best[name] = min(best[name], seconds)
    return best


def catalogue(directory: str) -> dict[str, Any]:
    """Seconds to list ``directory``'s catalogue in a new interpreter, and its counts."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pyaclnn", "ops", "--headers", directory, "--json"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": _common.REPO},
    )
    seconds = time.perf_counter() - start
    report = json.loads(done.stdout)
    return {"seconds": seconds, "bound": len(report["operators"]), "refused": len(report["refused"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls, for a smoke run")
    parser.add_argument("--calls", type=int, help="calls per loop (default 2000, 200 with --quick)")
    parser.add_argument("--loops", type=int, help="loops, the best one counts (default 5, 3 with --quick)")
    parser.add_argument("--headers", metavar="DIR", help="also time reading this catalogue of headers")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    calls = args.calls or (200 if args.quick else 2000)
    loops = args.loops or (3 if args.quick else 5)
    torch = _common.import_torch("bench_ops")
    from bench_overhead import progress, use_emulator

    home = use_emulator()
    _common.print_machine(_common.machine(torch))
    print(f"npu backend over the CANN emulator at {home}")
    print(f"best of {loops} loops of {calls} calls, {SHAPE} float32\n")
    import pyaclnn

    contenders: dict[str, Callable[..., Any]] = {"npu": add_call("npu")}
    phases = phases_alone(contenders["npu"].stream)  # type: ignore[attr-defined]
    if phases is not None:
        contenders["npu phases"] = phases
    contenders.update(numpy=add_call("numpy"), torch=torch_call(torch))
    active = {name: partial(pyaclnn.set_backend, name) for name in ("npu", "numpy")}  # ops follow it
    progress("timing ops.add on npu and numpy, and torch.add(out=), in turns")
    timings = interleaved(contenders, calls, loops, active, frozenset({"npu phases"}))
    rows = [
        [source, f"{timings[source] * 1e6:.1f}", f"{timings[source] / timings['torch']:.2f}"]
        for source in contenders
    ]
    _common.print_table(["ops.add on", "µs/call", "/torch"], rows)
    ratio = timings["npu"] / timings["torch"]
    met = ratio <= TARGET
    verdict = "met" if met else "not met"
    print(f"\ntarget, ops.add per call on npu <= {TARGET}x torch.add(out=): {verdict} ({ratio:.2f}x)")
    if phases is not None:
        own = (timings["npu"] - timings["npu phases"]) / timings["torch"]
        print(
            "npu phases: aclnnAdd's two phases alone, called from C on the same arguments (the emulated "
            f"device's own host cost); pyaclnn's own, ops.add minus those: {own:.2f}x torch"
        )
    if args.headers:
        progress(f"reading the catalogue of {args.headers}")
        found = catalogue(args.headers)
        catalogue_met = found["seconds"] <= CATALOGUE_TARGET_S
        met = met and catalogue_met
        print(
            f"catalogue of {args.headers}: {found['bound']} operators bound, {found['refused']} refused, "
            f"{found['seconds']:.2f} s with interpreter start (target <= {CATALOGUE_TARGET_S} s: "
            f"{'met' if catalogue_met else 'not met'})"
        )
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
