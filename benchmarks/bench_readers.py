"""Readers run together: two streams reading one array, against two streams with inputs of their own.

Each round queues ``--launches`` max-pool calls (``PYACLNN_EMU_KERNEL_US`` of simulated
device time each) on each of two streams, all reading the same DeviceArray ("shared") or
each stream its own copy ("separate"), then synchronizes both. When a read is ordered
after the last write only, the shared case takes as long as the separate one (one
stream's work); when every use orders after the array's last stream, the two streams run
one after the other (twice that). The target: shared / separate <= 1.25 (two streams that only read an
array run together).

Usage::

    python benchmarks/bench_readers.py                   # numpy backend, 5 x 20 ms per stream, 5 rounds
    python benchmarks/bench_readers.py --backend npu     # over the CANN emulator (PYACLNN_ASCEND_HOME)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

TARGET = 1.25  # shared / separate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="numpy", choices=("numpy", "npu"))
    parser.add_argument("--kernel-us", type=int, default=20_000)
    parser.add_argument("--launches", type=int, default=5, help="calls per stream and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target is missed")
    args = parser.parse_args(argv)
    os.environ["PYACLNN_EMU_KERNEL_US"] = str(args.kernel_us)
    import pyaclnn

    backend = args.backend
    x = np.arange(2 * 8 * 8 * 8, dtype=np.float32).reshape(1, 2, 8, 8, 8)
    streams = [pyaclnn.Stream(backend=backend) for _ in range(2)]
    shared = pyaclnn.to_device(x, backend=backend, stream=streams[0])
    own = [pyaclnn.to_device(x, backend=backend, stream=s) for s in streams]

    def round_ms(inputs: list[pyaclnn.DeviceArray]) -> float:
        for s in streams:
            s.synchronize()
        start = time.perf_counter()
        outs = []
        for _ in range(args.launches):
            for s, a in zip(streams, inputs):
                outs.extend(pyaclnn.max_pool3d_with_argmax(a, 2, backend=backend, stream=s))
        for s in streams:
            s.synchronize()
        elapsed = (time.perf_counter() - start) * 1000
        for o in outs:
            o.close()
        return elapsed

    round_ms([shared, shared])  # warm-up: executors, pool
    times: dict[str, list[float]] = {"shared": [], "separate": []}
    for _ in range(args.rounds):
        times["shared"].append(round_ms([shared, shared]))
        times["separate"].append(round_ms(own))
    medians = {k: statistics.median(v) for k, v in times.items()}
    one_stream = args.launches * args.kernel_us / 1000
    print(
        f"backend {backend}: {args.launches} x {args.kernel_us / 1000:g} ms per stream, two streams, "
        f"{args.rounds} rounds (one stream's kernels alone: {one_stream:g} ms)"
    )
    for name, ms in medians.items():
        print(f"  {name:9s} median {ms:7.1f} ms  (all: {', '.join(f'{t:.1f}' for t in times[name])})")
    ratio = medians["shared"] / medians["separate"]
    met = ratio <= TARGET
    print(f"  shared / separate = {ratio:.2f} (target <= {TARGET}): {'met' if met else 'MISSED'}")
    for obj in (shared, *own, *streams):
        obj.close()
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
