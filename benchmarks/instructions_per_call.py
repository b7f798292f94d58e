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

``--bytecodes`` counts instead the Python bytecodes a call executes and the
Python functions it calls (``sys.settrace`` with opcode events, in a child per
tree): exact, repeatable and seconds to get, without valgrind. Each bytecode
costs a few dozen instructions here (a call into C, a lock, counts as one), so
it ranks where the Python goes, function by function, rather than replacing
the count above. With one tree it lists the functions that execute the most.

Usage: python benchmarks/instructions_per_call.py [--calls N] [--ops OP ...] [--tree DIR ...]
                                                   [--torch] [--layers | --bytecodes]

``--tree DIR`` measures another checkout (a ``git worktree`` of an older commit,
say) as it is: its own pyaclnn, its own bench_overhead.py calls and its own CANN
emulator (built first, outside callgrind), so a change of the emulator counts
too; several trees are measured in turn, op by op. Needs valgrind; exit status
2 without it.

``--torch`` adds, per op, the same count for PyTorch's call of bench_overhead.py
(``torch.ops.aten`` on CPU tensors of the same tiny shapes, run by this
script's own tree) and the ratio of the two: the benchmark's target as
a ratio of instructions, which the machine's load does not move. (Instructions
are not time: a pyaclnn call runs Python bytecodes, torch's mostly C++, so a
ratio of counts is an estimate of the ratio of times, to be set against a
quiet run of bench_overhead.py.)

``--layers`` splits one call of max_pool3d_with_argmax_backward (a hit of the
executor cache) by layer instead: the same phase 2 entered at each layer in
turn, from the cffi call into the emulator up to the functional call, and the
parts beside that chain (the Launch, one output, the descriptors, the argument
normalisation), each as instructions per call (counted as above) and as
microseconds per call (the best of 7 loops of ``--calls`` calls, in a process
without valgrind). A layer's own share is its figure minus the one below it.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _common  # noqa: E402
import bench_overhead  # noqa: E402

WARMUP = 50
CALLGRIND = ("valgrind", "--tool=callgrind", "--separate-threads=yes")  # a count per thread
_BUILT = "INSTRUCTIONS_PER_CALL_EMULATOR_BUILT"  # set for a child when PYACLNN_ASCEND_HOME is the tree's
LAYERED_OP = "max_pool3d_with_argmax_backward"
#: (piece, what it runs): the chain of one phase 2, innermost first, then the parts beside it.
LAYERS = (
    ("cffi", "the C function of phase 2, cffi's call into the emulator (enqueue + wake)"),
    ("bound", "+ the plan's phase 2, bound once (aclnn.bound_phase2: the status check)"),
    ("cache", "+ ExecutorCache.launch, a hit (stream lock, key, in-flight mark, count)"),
    ("functional", "the whole functional call, its output closed"),
    ("stubbed", "the same with phase 2's C function a stub returning 0: Python alone"),
    ("launch", "beside: Launch enter and exit, no arrays"),
    ("output", "beside: one output made (pool, DeviceArray) and closed"),
    ("descriptors", "beside: the call's four descriptors, cached"),
    ("arguments", "beside: pool_ints, flag, out_one, check_plane_size"),
)


def _layer_pieces() -> tuple[dict[str, Callable[[], Any]], Callable[[], None], Any]:
    """One zero-argument function per piece of LAYERS, the synchronize of their stream, and the
    context manager the "stubbed" piece runs under."""
    _use_emulator()
    import numpy as np

    import pyaclnn
    from pyaclnn import _arguments, _operators
    from pyaclnn._executors import Call
    from pyaclnn._launch import Launch

    stream = pyaclnn.Stream(backend="npu")
    state = stream._state
    rng = np.random.default_rng(0)
    x = rng.standard_normal(bench_overhead.POOL_SHAPE, dtype=np.float32)
    _, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend="numpy")
    go, dx, di = (pyaclnn.to_device(a, backend="npu") for a in (np.ones((1, 1, 1, 1, 1), np.float32), x, idx))

    def functional() -> None:
        pyaclnn.max_pool3d_with_argmax_backward(go, dx, di, 2, backend="npu", stream=stream).close()

    for _ in range(WARMUP):
        functional()
    (((_, args), plan),) = state.executors._entries.items()  # the one plan, cached by the calls above
    op = _operators.OPERATORS[LAYERED_OP]
    backend = pyaclnn.backends.get("npu")
    c_function, c_args = backend.phase2_call(
        op.phase2_api, state.workspace(plan.size), plan.size, plan.executor, state.handle
    )
    call = Call(op, args, True, ())
    nd = pyaclnn.dtypes.ACL_FORMAT_ND

    def launch() -> None:
        with Launch("npu", stream, (), "max_pool3d_with_argmax_backward"):
            pass

    def output() -> None:
        with Launch("npu", stream, (), "max_pool3d_with_argmax_backward") as launch:
            out = launch.output(dx.shape, dx.dtype)
        out.close()

    def descriptors() -> None:
        go.descriptor(nd), dx.descriptor(nd), di.descriptor(nd), dx.descriptor(nd)

    def arguments() -> None:
        _arguments.pool_ints(2, (), 0, 1), _arguments.flag("ceil_mode", False), _arguments.out_one(None)
        _operators.check_plane_size(op, dx.shape)

    @contextlib.contextmanager
    def stub() -> Iterator[None]:
        """The backend's namespace of C functions with phase 2's a stub returning 0 (nothing queued);
        the stream's plans are dropped on the way in and out (each binds its C function once)."""
        real = backend._c
        backend._c = types.SimpleNamespace(**{**vars(real), op.phase2_api: lambda *args: 0})
        state.executors.clear()
        try:
            yield
        finally:
            backend._c = real
            state.executors.clear()

    pieces: dict[str, Callable[[], Any]] = {
        "cffi": lambda: c_function(*c_args),
        "bound": plan.launch,
        "cache": lambda: state.executors.launch(call),
        "functional": functional,
        "stubbed": functional,  # under stub()
        "launch": launch,
        "output": output,
        "descriptors": descriptors,
        "arguments": arguments,
    }
    return pieces, stream.synchronize, stub


_homes: dict[Path, str] = {}  # tree -> the home of its emulator, built by main()


def _child(op: str, calls: int) -> None:
    """Warm up, then ``calls`` calls of ``op`` (run under callgrind); ``op`` "layer:PIECE" runs
    one piece of LAYERS instead, between two synchronizes (so that the exit waits for nothing).

    The cyclic garbage collector is off from here on: a collection runs in whichever thread's
    allocation crosses its threshold, so with it on, the main thread's count moved by tens of
    millions (a negative figure per call) when a change of the package's imports shifted a full
    collection from the main thread into a stream thread."""
    gc.disable()
    if op.startswith("layer:"):
        pieces, synchronize, stub = _layer_pieces()
        name = op.split(":", 1)[1]
        piece = pieces[name]
        synchronize()
        with stub() if name == "stubbed" else contextlib.nullcontext():
            for _ in range(calls):
                piece()
        synchronize()
        return
    if op.startswith("torch:"):
        import torch

        call = bench_overhead.torch_calls(torch)[op.split(":", 1)[1]]
    else:
        _use_emulator()
        call = bench_overhead.pyaclnn_calls("npu")[op]
    for _ in range(WARMUP + calls):
        call()
    # Leave without the exit hook: what it does while work is still queued follows the machine's
    # load (tens of millions of instructions apart between two runs of 0 calls), and a wait here
    # would count the device's time in the main thread's instructions.
    sys.stdout.flush()
    os._exit(0)


def _child_bytecodes(op: str, calls: int) -> None:
    """Print, as one JSON object, the bytecodes and Python calls per call of ``op`` (after the
    warm-up), in all and per function ("file:line:name", most bytecodes first)."""
    _use_emulator()
    call = bench_overhead.pyaclnn_calls("npu")[op]
    for _ in range(WARMUP):
        call()
    bytecodes: collections.Counter[types.CodeType] = collections.Counter()
    entered: collections.Counter[types.CodeType] = collections.Counter()

    def trace(frame: types.FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            bytecodes[frame.f_code] += 1
        elif event == "call":
            entered[frame.f_code] += 1
            frame.f_trace_opcodes = True
        return trace

    sys.settrace(trace)
    try:
        for _ in range(calls):
            call()
    finally:
        sys.settrace(None)
    functions = [
        [f"{Path(c.co_filename).name}:{c.co_firstlineno}:{c.co_name}", n / calls, entered[c] / calls]
        for c, n in bytecodes.most_common()
    ]
    total, called = sum(bytecodes.values()) / calls, sum(entered.values()) / calls
    print(json.dumps({"bytecodes": total, "calls": called, "functions": functions}))


def _run_child(tree: Path, *args: str, under: tuple[str, ...] = ()) -> str:
    """Run ``tree``'s own copy of this script (its pyaclnn, its calls, its built emulator) with
    ``args``, under the command ``under`` if any; its standard output."""
    # One hash seed for every child: a random one moves the count by millions of instructions
    # from run to run (dict and set layouts), which the difference of two runs would keep.
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONHASHSEED="0", PYACLNN_ASCEND_HOME=_homes[tree])
    env[_BUILT] = "1"
    script = str(tree / "benchmarks" / "instructions_per_call.py")
    proc = subprocess.run(
        [*under, sys.executable, script, *args], check=True, capture_output=True, text=True, env=env, cwd=tree
    )
    return proc.stdout


def bytecodes_per_call(tree: Path, op: str, calls: int) -> dict[str, Any]:
    """The child's count of ``op`` in ``tree`` (its own pyaclnn and emulator)."""
    output = _run_child(tree, "--child-bytecodes", op, str(calls))
    result: dict[str, Any] = json.loads(output.splitlines()[-1])
    return result


def _child_times(calls: int) -> None:
    """Print ``PIECE SECONDS`` per piece of LAYERS: the best of 7 loops of ``calls`` calls."""
    pieces, synchronize, stub = _layer_pieces()
    for name, piece in pieces.items():
        synchronize()
        with stub() if name == "stubbed" else contextlib.nullcontext():
            print(name, min(_common.time_loops(piece, calls, 7)))
        synchronize()


def main_thread_instructions(tree: Path, op: str, calls: int) -> int:
    """Instructions the main thread of one child run executed (warm-up and start-up included)."""
    with tempfile.TemporaryDirectory() as out:
        pattern = os.path.join(out, "cg.%p")
        _run_child(tree, "--child", op, str(calls), under=(*CALLGRIND, f"--callgrind-out-file={pattern}"))
        (main,) = Path(out).glob("cg.*-01")  # thread 1: the main thread
        for line in main.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"no instruction total in callgrind's output for {op} in {tree}")


def build_emulator(tree: Path) -> str:
    """Build ``tree``'s emulator now and return its home, so that no child run under callgrind
    builds it: the incremental build a child would run reads CMake's output in a loop whose
    instructions follow the machine's load (millions, against a few for 20 calls)."""
    code = "import emulator_build; print(emulator_build.emulator_home('classic'))"
    env = dict(os.environ, PYTHONPATH=str(tree / "tests"))
    proc = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env, cwd=tree
    )
    return proc.stdout.strip().splitlines()[-1]


def _use_emulator() -> None:
    """The emulator the parent built (its home in the environment), else bench_overhead's."""
    if os.environ.get(_BUILT) != "1":
        bench_overhead.use_emulator()


def per_call(tree: Path, op: str, calls: int) -> float:
    """Instructions per call of ``op``: (``calls`` calls - 0 calls) / ``calls``."""
    return (main_thread_instructions(tree, op, calls) - main_thread_instructions(tree, op, 0)) / calls


def layers(tree: Path, calls: int) -> None:
    """Print LAYERS for ``tree``: instructions and microseconds per call of each piece."""
    times = _run_child(tree, "--child-times", str(calls))
    seconds = {name: float(value) for name, value in (line.split() for line in times.splitlines())}
    base = main_thread_instructions(tree, "layer:cffi", 0)
    print(f"{LAYERED_OP} by layer, {tree} (a hit of the executor cache; {calls} calls)")
    print(f"{'piece':12s} {'instr/call':>10s} {'µs/call':>8s}  what it runs")
    for name, what in LAYERS:
        count = (main_thread_instructions(tree, f"layer:{name}", calls) - base) / calls
        print(f"{name:12s} {count:>10,.0f} {seconds[name] * 1e6:>8.2f}  {what}")


def _built_trees(trees: list[Path]) -> list[Path]:
    """``trees`` resolved, each with its emulator built (outside any measurement)."""
    resolved = [tree.resolve() for tree in trees]
    for tree in resolved:
        _homes[tree] = build_emulator(tree)
    return resolved


def _bytecodes(args: argparse.Namespace) -> int:
    """--bytecodes: a row per op and tree; with one tree, the functions of each op."""
    trees = _built_trees(args.tree)
    print(f"Python bytecodes and function calls per call, {args.calls} calls (sys.settrace)")
    for op in args.ops:
        for tree in trees:
            counted = bytecodes_per_call(tree, op, args.calls)
            print(f"{op:34s} {counted['bytecodes']:>8,.0f} bytecodes {counted['calls']:>5.0f} calls  {tree}")
            if len(trees) == 1:
                for where, n, entered in counted["functions"][:25]:
                    print(f"    {n:>7.1f} {entered:>5.1f}  {where}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls counted per op (default 1000)")
    parser.add_argument("--ops", nargs="+", default=list(bench_overhead.TARGET_OPS), metavar="OP")
    parser.add_argument("--tree", nargs="+", type=Path, default=[HERE.parent], metavar="DIR")
    parser.add_argument(
        "--torch", action="store_true", help="also count PyTorch's call of each op, and the ratio"
    )
    parser.add_argument(
        "--layers", action="store_true", help=f"split one call of {LAYERED_OP} by layer instead"
    )
    parser.add_argument(
        "--bytecodes",
        action="store_true",
        help="count Python bytecodes and calls per call instead (no valgrind)",
    )
    parser.add_argument("--child", nargs=2, metavar=("OP", "CALLS"), help=argparse.SUPPRESS)
    parser.add_argument("--child-bytecodes", nargs=2, metavar=("OP", "CALLS"), help=argparse.SUPPRESS)
    parser.add_argument("--child-times", type=int, metavar="CALLS", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], int(args.child[1]))
        return 0
    if args.child_times:
        _child_times(args.child_times)
        return 0
    if args.child_bytecodes:
        _child_bytecodes(args.child_bytecodes[0], int(args.child_bytecodes[1]))
        return 0
    unknown = set(args.ops) - set(bench_overhead.OPS)
    if unknown:
        parser.error(f"unknown ops {sorted(unknown)}; choose from {list(bench_overhead.OPS)}")
    if args.bytecodes:
        return _bytecodes(args)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: nothing counted", file=sys.stderr)
        return 2
    trees = _built_trees(args.tree)
    if args.layers:
        for tree in trees:
            layers(tree, args.calls)
        return 0
    print(f"instructions per call of the main thread, {args.calls} calls (valgrind --tool=callgrind)")
    own = _built_trees([HERE.parent])[0] if args.torch else None  # its child runs "torch:OP"
    for op in args.ops:
        counts = [per_call(tree, op, args.calls) for tree in trees]
        for tree, count in zip(trees, counts):
            print(f"{op:34s} {count:>10,.0f}  {tree}")
        if own is not None:
            torch_count = per_call(own, f"torch:{op}", args.calls)
            ratios = " ".join(f"{count / torch_count:.2f}x" for count in counts)
            print(f"{op:34s} {torch_count:>10,.0f}  torch (pyaclnn / torch: {ratios})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
