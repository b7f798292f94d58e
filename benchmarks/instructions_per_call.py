"""Instructions per call of the npu backend's host path, counted by callgrind.

On a shared machine the wall-clock times of bench_overhead.py move by 2x
between runs; the instructions the calling thread executes repeat within a
few percent whatever else runs. So this script compares two trees (a change
and the commit before it) by what they execute, not by how long it takes:
each op runs ``--calls`` times and 0 times after the same warm-up, in a child
process under ``valgrind --tool=callgrind --separate-threads=yes``, and the
difference of the main thread's totals over ``--calls`` is the figure. (The
emulator's stream threads spin while they wait for work, so their counts
follow the load; the main thread's do not.) The calls are bench_overhead.py's:
device-resident inputs on the npu backend over the CANN emulator, outputs
closed after each call, the executor cache on.

Usage: python benchmarks/instructions_per_call.py [--calls N] [--ops OP ...] [--tree DIR ...]

``--tree DIR`` measures another checkout (a ``git worktree`` of an older commit,
say) as it is: its own pyaclnn, its own bench_overhead.py calls and its own CANN
emulator (built first, outside callgrind), so a change of the emulator counts
too; several trees are measured in turn, op by op. Needs valgrind; exit status
2 without it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_overhead  # noqa: E402

WARMUP = 50


def _child(op: str, calls: int) -> None:
    """Warm up, then ``calls`` calls of ``op`` (run under callgrind)."""
    bench_overhead.use_emulator()
    call = bench_overhead.pyaclnn_calls("npu")[op]
    for _ in range(WARMUP + calls):
        call()


def main_thread_instructions(tree: Path, op: str, calls: int) -> int:
    """Instructions the main thread of one child run executed (warm-up and start-up included)."""
    with tempfile.TemporaryDirectory() as out:
        pattern = os.path.join(out, "cg.%p")
        env = dict(os.environ, PYTHONPATH=str(tree))
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--separate-threads=yes",
                f"--callgrind-out-file={pattern}",
                sys.executable,
                str(tree / "benchmarks" / "instructions_per_call.py"),  # the tree's own calls and emulator
                "--child",
                op,
                str(calls),
            ],
            check=True,
            capture_output=True,
            env=env,
            cwd=tree,
        )
        (main,) = Path(out).glob("cg.*-01")  # thread 1: the main thread
        for line in main.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"no instruction total in callgrind's output for {op} in {tree}")


def build_emulator(tree: Path) -> None:
    """Build ``tree``'s emulator now, so that no child run under callgrind builds it."""
    code = "import emulator_build; emulator_build.emulator_home('classic')"
    env = dict(os.environ, PYTHONPATH=str(tree / "tests"))
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, env=env, cwd=tree)


def per_call(tree: Path, op: str, calls: int) -> float:
    """Instructions per call of ``op``: (``calls`` calls - 0 calls) / ``calls``."""
    return (main_thread_instructions(tree, op, calls) - main_thread_instructions(tree, op, 0)) / calls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls counted per op (default 1000)")
    parser.add_argument("--ops", nargs="+", default=list(bench_overhead.TARGET_OPS), metavar="OP")
    parser.add_argument("--tree", nargs="+", type=Path, default=[HERE.parent], metavar="DIR")
    parser.add_argument("--child", nargs=2, metavar=("OP", "CALLS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], int(args.child[1]))
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: nothing counted", file=sys.stderr)
        return 2
    unknown = set(args.ops) - set(bench_overhead.OPS)
    if unknown:
        parser.error(f"unknown ops {sorted(unknown)}; choose from {list(bench_overhead.OPS)}")
    trees = [tree.resolve() for tree in args.tree]
    for tree in trees:
        build_emulator(tree)
    print(f"instructions per call of the main thread, {args.calls} calls (valgrind --tool=callgrind)")
    for op in args.ops:
        for tree in trees:
            print(f"{op:34s} {per_call(tree, op, args.calls):>10,.0f}  {tree}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
