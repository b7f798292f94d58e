"""How close a max-pool backward can come to the memory-bandwidth floor on this machine.

bench_kernels.py shows the pyaclnn call against the floor (bytes read and
written over the copy bandwidth), as information: on this kind of machine no
kernel summing in float32 reaches it (what follows). This script measures, in the
same run and on the same threads, what no implementation of the op can skip,
each part alone:

- **write**: grad_input's bytes written with streaming stores (zeros);
- **scatter**: the gradients and indices read and added into float32 sums,
  two planes at a time with their gradients interleaved as in pyaclnn's
  kernel, nothing written out, no index checked (on one thread as well:
  ``scatter 1t``);
- **kernel**: the kernel the numpy backend chooses (the compiled one where it
  is built), on host arrays, with the plan phase 1 makes (no layers);
- **call**: the pyaclnn call on device arrays, as bench_kernels times it.

Each part is given as a multiple of the floor. The parts on two threads
start their threads on every call (tens of microseconds). **bound** is the
larger of write and the faster scatter: the least a kernel that adds each
gradient into a float32 sum and writes grad_input once can take here; as the
two share the cores' load and store units, such a kernel needs about their
sum in practice. The script also measures how much a
second thread adds to a loop of independent integer adds: about 2x on two
cores, about 1.1x when the two CPUs are hardware threads of one core, where a
second thread cannot halve a scatter either.

The parts come from ``floor_probe.c`` next to this file, built with the
system's C compiler ($CC or cc) on each run; not part of pyaclnn.

Usage: python benchmarks/bench_floor.py [--quick] [--repeat R] [--settle MS]
Exit status: 0; 2 when no C compiler is found or the probe does not build.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
from bench_kernels import SETTLE_MS, copy_bandwidth, max_pool_specs, time_settled  # noqa: E402

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "floor_probe.c")
CDEF = """
void probe_write(intptr_t dst, int64_t bytes, int threads);
void probe_scatter(intptr_t grad, int half, intptr_t index, int index_size, int64_t planes,
                   int64_t per_plane, int64_t plane, int threads);
int64_t probe_spin(int64_t iterations, int threads);
"""
EXIT_NO_PROBE = 2


def build_probe(directory: str) -> Any:
    """floor_probe.c compiled into ``directory`` and opened (cffi ``lib``); exits 2 if it cannot be."""
    import cffi

    words = shlex.split(os.environ.get("CC", "") or "cc")
    if not shutil.which(words[0]):
        print(f"bench_floor: no C compiler ({words[0]} is not on PATH)", file=sys.stderr)
        raise SystemExit(EXIT_NO_PROBE)
    target = os.path.join(directory, "floor_probe.so")
    proc = subprocess.run(
        [*words, "-O3", "-std=c11", "-fPIC", "-shared", "-pthread", "-o", target, PROBE],
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        print(f"bench_floor: the probe does not build here:\n{proc.stderr}", file=sys.stderr)
        raise SystemExit(EXIT_NO_PROBE)
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    return ffi.dlopen(target)


def second_thread_gain(lib: Any) -> float:
    """Throughput of the add loop on two threads over one (2.0: two cores; about 1.1: one core's threads)."""
    iterations = 20_000_000
    times = _common.time_interleaved(
        {1: lambda: lib.probe_spin(iterations, 1), 2: lambda: lib.probe_spin(iterations, 2)}, 5
    )
    return 2 * min(times[1]) / min(times[2])


def parts(lib: Any, spec: tuple, threads: int) -> tuple[dict[str, Callable[[], Any]], int]:
    """The timed parts of one max-pool backward case, and the bytes of its floor."""
    import pyaclnn
    from pyaclnn.backends.numpy import _kernels as backend
    from pyaclnn.dtypes import compute_dtype
    from pyaclnn.kernels import checks

    _, shape, k, s, p, ceil, dname, _ = spec
    dtype = np.dtype(np.float16 if dname == "fp16" else np.float32)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape, dtype=np.float32).astype(dtype)
    ks, st, pd = (k,) * 3, (s,) * 3, (p,) * 3
    params = checks.pool_params(ks, st, pd, (1,) * 3, ceil)
    plan = checks.MaxPoolPlan(params, True, shape, shape[:2] + params.pooled(shape[2:]), compute_dtype(dtype))  # type: ignore[arg-type]
    _, idx = pyaclnn.max_pool3d_with_argmax(x, ks, st, pd, 1, ceil, backend="numpy")
    go = rng.standard_normal(idx.shape, dtype=np.float32).astype(dtype)
    gi = np.zeros_like(x)
    planes, per_plane, plane = shape[0] * shape[1], int(np.prod(idx.shape[2:])), int(np.prod(shape[2:]))
    d_go, d_x, d_idx = (pyaclnn.to_device(a, backend="numpy") for a in (go, x, idx))

    def scatter(n: int) -> Callable[[], Any]:
        return lambda: lib.probe_scatter(
            go.ctypes.data,
            int(dtype == np.float16),
            idx.ctypes.data,
            idx.itemsize,
            planes,
            per_plane,
            plane,
            n,
        )

    def call() -> None:
        grad_input = pyaclnn.max_pool3d_with_argmax_backward(
            d_go, d_x, d_idx, ks, st, pd, 1, ceil, backend="numpy"
        )
        pyaclnn.synchronize(backend="numpy")
        grad_input.close()

    fns = {
        "write": lambda: lib.probe_write(gi.ctypes.data, gi.nbytes, threads),
        "scatter": scatter(threads),
        "scatter 1t": scatter(1),
        "kernel": lambda: backend.max_pool3d_with_argmax_backward(plan, go, idx, gi),
        "call": call,
    }
    return fns, go.nbytes + idx.nbytes + x.nbytes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small shapes, for a smoke run")
    parser.add_argument("--repeat", type=int, default=15, help="timed calls of each part (default 15)")
    parser.add_argument(
        "--settle", type=float, default=SETTLE_MS, metavar="MS", help="idle pause before each call"
    )
    args = parser.parse_args([a for a in (sys.argv[1:] if argv is None else argv) if a != "--"])
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    from pyaclnn.kernels import max_pool3d as kmp

    with tempfile.TemporaryDirectory() as directory:
        lib = build_probe(directory)
        info = _common.machine()
        _common.print_machine(info)
        threads = kmp._thread_count()
        bandwidth = copy_bandwidth(args.repeat)
        gain = second_thread_gain(lib)
        print(
            f"copy bandwidth {bandwidth / 1e9:.1f} GB/s (read + written); {threads} thread(s) "
            f"(PYACLNN_NUM_THREADS); a second thread adds {gain:.2f}x to an add loop's throughput "
            f"(2 CPUs: about 2 on two cores, about 1.1 on one core's two hardware threads)\n"
        )
        names = ["write", "scatter", "scatter 1t", "kernel", "call"]
        print("multiples of the floor:")
        print(f"{'case':36s} {'floor ms':>8s}  " + "  ".join(f"{n:>10s}" for n in [*names, "bound"]))
        for spec in max_pool_specs(args.quick):
            if not spec[-1]:
                continue  # the floor is the backward's
            fns, floor_bytes = parts(lib, spec, threads)
            times = time_settled(fns, args.repeat, args.settle / 1e3)
            floor = floor_bytes / bandwidth
            ratio = {n: min(times[n]) / floor for n in names}
            ratio["bound"] = max(ratio["write"], min(ratio["scatter"], ratio["scatter 1t"]))
            cells = [f"{ratio[n]:10.2f}" for n in [*names, "bound"]]
            print(f"{spec[0] + ' ' + spec[6]:36s} {floor * 1e3:8.2f}  " + "  ".join(cells), flush=True)
        print(
            "\nwrite and scatter are parts of the op alone (see the module docstring); bound, the larger "
            "of write and the faster scatter, is the least a kernel summing in float32 can take, and it "
            "needs about write + scatter."
        )
        if args.quick:
            print("(quick shapes: a smoke run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
