"""Helpers shared by the benchmark scripts: timing, the machine, torch, output.

Not part of the package: the scripts add this directory to ``sys.path``
themselves (Python does so for the script being run).
"""

from __future__ import annotations

import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Exit status when PyTorch, the speed anchor, is missing (as ``python -m pyaclnn bench``).
EXIT_NO_TORCH = 2


def import_torch(script: str) -> Any:
    """PyTorch, or exit 2 with a message saying why the benchmark cannot run."""
    try:
        import torch
    except ImportError:
        print(
            f"{script}: PyTorch is not installed; the benchmarks compare against PyTorch CPU "
            '(its CPU build: pip install ".[test,oracle]" in a checkout, not a plain pip install torch)',
            file=sys.stderr,
        )
        raise SystemExit(EXIT_NO_TORCH) from None
    return torch


def time_calls(fn: Callable[[], Any], repeat: int, warmup: int = 1) -> list[float]:
    """Seconds taken by each of ``repeat`` calls of ``fn``, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def time_interleaved(
    fns: dict[str, Callable[[], Any]],
    repeat: int,
    warmup: int = 1,
    after: Callable[[], Any] | None = None,
    shuffle: bool = False,
) -> dict[str, list[float]]:
    """Seconds of each call of each of ``fns``, timed in turn within each of ``repeat`` rounds.

    Taking turns exposes every contender to the same background load on a
    shared machine, so comparing their mins stays fair when the load changes;
    the order rotates from round to round. ``after``, if given, runs untimed
    after every call (a synchronize, so that the next call starts on an idle device).
    ``shuffle`` draws each round's order at random (a fixed seed) instead: rotating
    keeps each contender after the same one, which matters when one contender leaves
    work behind for the next (a garbage collection, a device thread still winding down).
    """
    rng = random.Random(0)
    for fn in fns.values():
        for _ in range(warmup):
            fn()
            if after is not None:
                after()
    times: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    for round_ in range(repeat):
        # rotate who goes first: the first of a round finds the caches full of another op's data
        shift = round_ % len(order)
        turns = rng.sample(order, len(order)) if shuffle else order[shift:] + order[:shift]
        for name in turns:
            start = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - start)
            if after is not None:
                after()
    return times


def time_loops(fn: Callable[[], Any], calls: int, loops: int, warmup: int = 50) -> list[float]:
    """Seconds per call of ``fn`` in each of ``loops`` loops of ``calls`` calls."""
    for _ in range(warmup):
        fn()
    per_call = []
    for _ in range(loops):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter() - start) / calls)
    return per_call


def summary(times: Sequence[float]) -> dict[str, float]:
    return {"min": min(times), "median": statistics.median(times)}


def peak_extra_bytes(fn: Callable[[], Any]) -> tuple[int, int]:
    """(peak bytes allocated during one call of ``fn``, bytes still held after it).

    Counts what Python and NumPy allocate (NumPy reports its data buffers to
    tracemalloc), from every thread. ``fn`` should return what it allocated
    for the caller so that it is still alive when "held" is measured; it is
    released after measuring.
    """
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = fn()
        current, peak = tracemalloc.get_traced_memory()
        del result
    finally:
        tracemalloc.stop()
    return peak - base, current - base


class SamplerChain:
    """``calls`` dependent ``grid_sampler3d`` calls on DeviceArrays of one stream, each call's output
    the next call's input: the chain bench_pipeline and bench_replay replay and timeline_picture draws.

    Its arrays (``input``, ``grid``, ``outputs``) are made on ``stream`` from fixed random data;
    :meth:`queue` queues the calls, :meth:`close` closes the arrays. The calls write ``ring``
    outputs in turn (by default each call its own): with a ring small enough, every call finds
    its plan in the stream's executor cache, as calls repeated eagerly do.
    """

    def __init__(
        self, backend: str, stream: Any, shape: tuple[int, ...], calls: int, ring: int | None = None
    ) -> None:
        import pyaclnn

        rng = np.random.default_rng(1)
        x = rng.standard_normal(shape, dtype=np.float32)
        grid = rng.uniform(-1, 1, (*shape[:1], *shape[2:], 3)).astype(np.float32)
        self.backend, self.stream, self.calls = backend, stream, calls
        self.input = pyaclnn.to_device(x, backend=backend, stream=stream)
        self.grid = pyaclnn.to_device(grid, backend=backend, stream=stream)
        count = calls if ring is None else min(ring, calls)
        self.outputs = [pyaclnn.zeros(shape, backend=backend, stream=stream) for _ in range(count)]
        self._op = pyaclnn.grid_sampler3d

    @property
    def last(self) -> Any:
        """The output of the last call."""
        return self.outputs[(self.calls - 1) % len(self.outputs)]

    def queue(self) -> None:
        value, outputs = self.input, self.outputs
        for i in range(self.calls):
            out = outputs[i % len(outputs)]
            self._op(value, self.grid, out=out, backend=self.backend, stream=self.stream)
            value = out

    def close(self) -> None:
        for array in (self.input, self.grid, *self.outputs):
            array.close()


def verdict(met: bool) -> str:
    """How a target line ends: "met" or "not met"."""
    return "met" if met else "not met"


def geomean(values: Sequence[float]) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def machine(torch: Any | None = None) -> dict[str, Any]:
    """What the figures were measured on."""
    info: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpus": os.cpu_count(),
        "cpu": _cpu_model(),
        "ram_gib": _ram_gib(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
    try:
        import pyaclnn

        info["pyaclnn"] = pyaclnn.__version__
    except ImportError:
        pass
    info["commit"] = _commit()
    if torch is not None:
        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    return info


def _commit() -> str | None:
    """The checkout's commit, with "+changes" when pyaclnn/ has uncommitted edits (None outside git)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10
        )
        if head.returncode:
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "pyaclnn"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return head.stdout.strip() + ("+changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def print_machine(info: dict[str, Any]) -> None:
    load = info.get("load_average")
    load_text = ", ".join(f"{x:.2f}" for x in load) if load else "n/a"
    print(f"{info['date']}  {info['cpus']} CPUs ({info['cpu']}), {info['ram_gib']} GiB RAM, load {load_text}")
    versions = [f"Python {info['python']}", f"NumPy {info['numpy']}"]
    if "torch" in info:
        versions.append(f"torch {info['torch']} ({info['torch_threads']} threads)")
    if "pyaclnn" in info:
        at = f" at {info['commit']}" if info.get("commit") else ""
        versions.append(f"pyaclnn {info['pyaclnn']}{at}")
    print(", ".join(versions))


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A plain-text table; the first column left-aligned, the others right-aligned."""
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        cols = enumerate(zip(cells, widths))
        return "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in cols)

    print(line(headers))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(line(row))


def save_json(path: str, payload: dict[str, Any]) -> None:
    with open(path, "w") as f:
        json.dump(payload, f, indent=2, default=str)
        f.write("\n")
    print(f"results saved to {path}")
