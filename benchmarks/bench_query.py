"""What a polling loop costs: ``while not s.query(): pass`` after one short kernel.

A query that finds work pending must not keep the GIL from the numpy backend's
worker thread, which needs it to finish the task it runs: otherwise the loop
waits for CPython's switch interval (5 ms) instead of the kernel (0.2 ms). Each
round queues one max-pool call on DeviceArrays with ``PYACLNN_EMU_KERNEL_US``
of simulated device time, then waits for it by one of three means, in turn:

* ``synchronize``: ``Stream.synchronize()`` (the reference: a blocking wait);
* ``stream poll``: ``while not s.query(): pass``;
* ``event poll``: ``while not e.query(): pass`` on an event recorded after the call.

It prints the median time of each, and poll / synchronize; the target is a poll
within 1.5x the synchronize (a poll after a 0.2 ms kernel returns within ~3 ms at
most, where it took ~10 ms). ``--no-yield``
sets the numpy backend's brief wait of a pending query to 0, as before the fix.

Usage::

    python benchmarks/bench_query.py                 # numpy backend, 200 us kernels, 200 rounds
    python benchmarks/bench_query.py --no-yield      # the same without the GIL hand-over
    python benchmarks/bench_query.py --backend npu   # over the CANN emulator (PYACLNN_ASCEND_HOME)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

TARGET = 1.5  # poll / synchronize


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="numpy", choices=("numpy", "npu"))
    parser.add_argument("--kernel-us", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--no-yield", action="store_true", help="a pending query does not give up the GIL")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target is missed")
    args = parser.parse_args(argv)

    os.environ["PYACLNN_EMU_KERNEL_US"] = str(args.kernel_us)
    import pyaclnn
    from pyaclnn.backends.numpy import _streams

    if args.no_yield:
        _streams.POLL_WAIT_S = 0.0
    b = args.backend
    x = np.random.default_rng(0).random((1, 2, 8, 8, 8), dtype=np.float32)
    stream = pyaclnn.Stream(backend=b)
    xd = pyaclnn.to_device(x, backend=b, stream=stream)
    out, idx = pyaclnn.max_pool3d_with_argmax(xd, 2, backend=b, stream=stream)
    stream.synchronize()

    def launch() -> None:
        pyaclnn.max_pool3d_with_argmax(xd, 2, out=(out, idx), backend=b, stream=stream)

    def synchronize() -> None:
        stream.synchronize()

    def stream_poll() -> None:
        while not stream.query():
            pass

    def event_poll() -> None:
        event = stream.record_event()
        while not event.query():
            pass
        event.close()

    ways = {"synchronize": synchronize, "stream poll": stream_poll, "event poll": event_poll}
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, wait in ways.items():
            launch()
            start = time.perf_counter()
            wait()
            times[name].append(time.perf_counter() - start)
            stream.synchronize()  # the bookkeeping of the round: not timed
    for obj in (xd, out, idx, stream):
        obj.close()

    medians = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    print(
        f"backend {b}, kernel {args.kernel_us} us, {args.rounds} rounds"
        + (", no yield" if args.no_yield else "")
    )
    print(f"{'wait':<14}{'median ms':>10}{'p90 ms':>10}{'/ synchronize':>15}")
    for name, t in times.items():
        p90 = sorted(t)[int(0.9 * (len(t) - 1))] * 1e3
        print(f"{name:<14}{medians[name]:>10.3f}{p90:>10.3f}{medians[name] / medians['synchronize']:>15.2f}")
    worst = max(medians["stream poll"], medians["event poll"]) / medians["synchronize"]
    met = worst <= TARGET
    print(f"target: poll / synchronize <= {TARGET}: {'met' if met else 'missed'} ({worst:.2f})")
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
