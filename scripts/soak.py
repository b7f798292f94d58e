"""Soak the asynchronous runtime: the randomized concurrent workload for minutes, then its figures.

Usage::

    python scripts/soak.py --minutes 10 [--backend numpy|npu] [--threads 4] [--seed 0]

Runs ``tests/concurrency_workload.py`` in this process, in rounds of at most
``--round-seconds`` (default 60): each round ends with ``pyaclnn.finalize`` and
the checks for live objects and hazards, so a leak or a hazard is caught in the
round that made it, and the peak RSS after each round shows whether memory
stays flat. Round ``r`` uses seed ``seed + 1000 * r``. The npu backend runs
over the host emulator of CANN (built on first use) unless
``PYACLNN_ASCEND_HOME`` names another CANN home.

The emulations read ``PYACLNN_EMU_DEVICES`` once per process: the script sets
it to 2 and starts itself again if the environment said otherwise. It prints
one line per round and a table of the totals at the end; a failing round ends
the run (its report on stderr) and the exit status is then 1, otherwise 0.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time
from collections import Counter
from typing import Any

REPO = pathlib.Path(__file__).resolve().parent.parent
DEVICES = "2"
#: figures of a round that are not counts to add up
_NOT_COUNTS = frozenset(
    (
        "backend",
        "seed",
        "threads",
        "devices",
        "seconds",
        "calls_per_s",
        "max_rss_kib",
        "new_hazards",
        "failures",
    )
)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--minutes", type=float, required=True, help="total wall time of the workload")
    parser.add_argument("--backend", choices=("numpy", "npu"), default="numpy")
    parser.add_argument("--threads", type=int, default=4, help="worker threads (plus one consumer)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--round-seconds", type=float, default=60.0, help="length of one round")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.threads < 1 or args.round_seconds <= 0:
        parser.error("--minutes and --round-seconds must be > 0, --threads >= 1")
    return args


def _table(rows: list[tuple[str, str]]) -> str:
    width = max(len(name) for name, _ in rows)
    rule = "-" * (width + 2 + max(len(value) for _, value in rows))
    return "\n".join([rule, *(f"{name:<{width}}  {value:>}" for name, value in rows), rule])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parse(argv)
    if os.environ.get("PYACLNN_EMU_DEVICES") != DEVICES:
        # Read once per process by both emulations: set it before anything can have read it.
        os.environ["PYACLNN_EMU_DEVICES"] = DEVICES
        os.execv(sys.executable, [sys.executable, str(pathlib.Path(__file__).resolve()), *argv])
    sys.path.insert(0, str(REPO / "tests"))
    if args.backend == "npu" and not os.environ.get("PYACLNN_ASCEND_HOME"):
        from emulator_build import emulator_home

        os.environ["PYACLNN_ASCEND_HOME"] = str(emulator_home("classic"))
    os.environ.setdefault("PYACLNN_BACKEND", args.backend)

    from concurrency_workload import WorkloadError, run_workload

    total: Counter[str] = Counter()
    began = time.monotonic()
    left = args.minutes * 60.0
    round_index, rss, failures = 0, 0, 0
    while left > 0.5 and not failures:
        seconds = min(args.round_seconds, left)
        seed = args.seed + 1000 * round_index
        try:
            figures: dict[str, Any] = run_workload(args.backend, seconds, args.threads, seed)
        except WorkloadError as exc:
            print(f"round {round_index + 1} (seed {seed}) FAILED:\n{exc}", file=sys.stderr, flush=True)
            figures = exc.figures  # empty if it hung
            failures = max(1, figures.get("failures", 0))
        total.update({k: v for k, v in figures.items() if k not in _NOT_COUNTS})
        rss = figures.get("max_rss_kib", rss)
        print(
            f"round {round_index + 1}: {figures.get('seconds', 0):.0f} s, seed {seed}, "
            f"{figures.get('calls', 0)} calls ({figures.get('calls_per_s', 0):.0f}/s), "
            f"{figures.get('checked', 0)} checked, max RSS {rss / 1024:.1f} MiB"
            + (", FAILED" if failures else ""),
            flush=True,
        )
        left -= seconds
        round_index += 1
    wall = time.monotonic() - began
    rows = [
        ("backend", args.backend),
        ("threads", f"{args.threads} + 1 consumer"),
        ("rounds", str(round_index)),
        ("wall time", f"{wall:.1f} s"),
        ("calls", str(total["calls"])),
        ("calls/s", f"{total['calls'] / wall:.1f}" if wall else "0"),
        ("results checked", str(total["checked"])),
        ("  by the consumer thread", str(total["checked_by_consumer"])),
        ("closes (arrays, events, streams)", str(total["closes"])),
        ("stream closes", str(total["stream_closes"])),
        ("  with work queued", str(total["closes_with_work_queued"])),
        ("external streams", str(total["stream_external"])),
        ("events", str(total["events"])),
        ("  waited on by another stream", str(total["event_waits"])),
        ("out= reused", str(total["out_reused"])),
        ("from_ptr views", str(total["views_in"] + total["views_out"])),
        ("free_all_blocks", str(total["free_all_blocks"])),
        ("max RSS", f"{rss / 1024:.1f} MiB"),
        ("failures", str(failures)),
    ]
    print(_table(rows), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
