"""How much ``import pyaclnn`` costs on top of ``import numpy``, in fresh processes.

Each run is a new interpreter timing one import with ``time.perf_counter``;
the two imports take turns so that both see the same background load. Prints
the medians and their difference (the figure in benchmarks/README.md).

Usage: python scripts/import_time.py [--runs N] [--module NAME]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

_TIMER = "import time; t = time.perf_counter(); import {0}; print(time.perf_counter() - t)"


def import_seconds(module: str) -> float:
    """Seconds one fresh interpreter takes to import ``module``."""
    proc = subprocess.run(
        [sys.executable, "-c", _TIMER.format(module)], capture_output=True, text=True, check=True
    )
    return float(proc.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11, help="fresh processes per module (default 11)")
    parser.add_argument("--module", default="pyaclnn", help="the module to time against numpy")
    args = parser.parse_args(argv)
    times: dict[str, list[float]] = {"numpy": [], args.module: []}
    for _ in range(args.runs):
        for module in times:
            times[module].append(import_seconds(module))
    medians = {module: statistics.median(values) * 1e3 for module, values in times.items()}
    for module, ms in medians.items():
        print(f"import {module}: median {ms:.1f} ms over {args.runs} runs")
    print(f"{args.module} costs {medians[args.module] - medians['numpy']:.1f} ms more than numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
