"""The benchmark scripts still run (``--quick``: small shapes, no targets judged)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(script: str, *args: str, emulator_home) -> subprocess.CompletedProcess[str]:
    """benchmarks/``script`` with ``args``, over the emulator, without the caller's PYACLNN_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYACLNN_")}
    env.update(PYACLNN_ASCEND_HOME=str(emulator_home), PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.mark.parametrize("script", ["bench_kernels.py", "bench_overhead.py", "bench_pipeline.py"])
def test_benchmark_runs_quick_through_the_command_line(script, torch, emulator_home):
    quick = {
        "bench_kernels.py": ("--quick", "--repeat", "1"),
        "bench_overhead.py": ("--quick", "--cold", "2"),
    }.get(script, ("--quick",))
    proc = _run(script, *quick, emulator_home=emulator_home)
    # a table against torch (the pipeline's: against a synchronize per call), and the verdict
    assert ("default/blocking" if script == "bench_pipeline.py" else "torch") in proc.stdout
    assert "target" in proc.stdout
    if script == "bench_overhead.py":  # and the calls on cold caches, one row per op
        cold = proc.stdout.split("cold caches:")[1].splitlines()
        assert sum(line.startswith(("max_pool3d", "grid_sampler3d")) for line in cold) == 4, proc.stdout
    if script == "bench_kernels.py":
        _check_three_paths(proc.stdout)
    if script == "bench_pipeline.py":
        _check_replay(proc.stdout)
    if script in PROGRESS:  # a line on stderr as each measurement starts, not seconds of silence
        timing = [line for line in proc.stderr.splitlines() if line.startswith("  timing ")]
        assert timing == [f"  timing {step} ..." for step in PROGRESS[script]], proc.stderr
        assert "  building the CANN emulator" in proc.stderr


def _table(stdout: str, title: str) -> tuple[list[str], list[list[str]]]:
    """The header and rows of the table printed under the line starting with ``title``
    (cells are separated by two spaces or more; a case name has single spaces)."""
    lines = stdout.split("\n" + title, 1)[1].splitlines()[1:]
    header = re.split(r"\s{2,}", lines[0].strip())
    rows = []
    for line in lines[2:]:
        if not line.strip():
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return header, rows


def _check_replay(stdout: str) -> None:
    """bench_pipeline replays a captured chain of 100 calls on both backends: host
    time per replayed op against eager per call, wall time against the device-bound limit,
    the replay's result bit-identical to eager's, and the two targets judged."""
    header, rows = _table(stdout, "Replay: a chain of 100")
    assert header == [
        "backend",
        "eager host µs/call",
        "replay host µs/op",
        "replay/eager host",
        "replay+sync µs",
        "limit µs",
        "replay/limit",
        "bit-identical",
    ], header
    assert [row[0] for row in rows] == ["npu", "numpy"], stdout
    for row in rows:
        assert all(re.fullmatch(r"[\d.]+", cell) for cell in row[1:7]), row
        assert row[7] == "yes", row
    targets = [
        r"target replay host/op <= 0\.1x eager host/call \(npu\)",
        r"target replay\+synchronize <= 1\.25x 100 x kernel time \(npu\)",
    ]
    for target in targets:
        assert re.search(f"^{target}: (met|MISSED)$", stdout, re.M), stdout


def _check_three_paths(stdout: str) -> None:
    """bench_kernels times each case on the three paths (NumPy in and out, NumPy with out=,
    device-resident), gives each path's ratio, the NumPy path against the device one, and
    judges the targets of benchmarks/README.md for these paths."""
    header, rows = _table(stdout, "Times (ms")
    assert header[:4] == ["case", "numpy", "numpy out=", "device"], header
    assert len(rows) == 12, stdout  # six max-pool cases, six grid-sampler cases
    for row in rows:  # min / median of each path, measured
        assert all(re.fullmatch(r"[\d.]+ / [\d.]+", cell) for cell in row[1:4]), row
    header, rows = _table(stdout, "Ratios of the mins")
    ratios = ["numpy/torch", "numpy/device", "numpy out=/torch out=", "device/torch best"]
    assert header[1:5] == ratios, header
    assert header[6] == "extra mem/out a, b, c", header
    assert len(rows) == 12, stdout
    for row in rows:
        assert all(re.fullmatch(r"\d+\.\d\d!?", cell) for cell in row[1:5]), row
        assert re.fullmatch(r"\d+\.\d\d!?, \d+\.\d\d!?, \d+\.\d\d!?", row[6]), row
    for target in (
        "numpy / torch <= 1.0 on every case",
        "numpy / device <= 1.15 on every case",
        "numpy out= / torch out= <= 1.0 on every case",
        "device / torch best <= 1.0 on every case",
        "peak extra memory / output, every path <= 2.0 on every case",
        "numpy / torch geometric mean <= 0.6",
        "device / torch best geometric mean <= 0.5",
    ):
        assert re.search(f"^target {re.escape(target)}: (met|MISSED) ", stdout, re.M), target
    # the ratios again over the calls no thread of the process was preempted in, as information
    header, rows = _table(stdout, "The same ratios over the calls")
    calls = "such calls: numpy, device, torch, torch out="
    assert header == ["case", "numpy/device", "device/torch best", calls], header
    assert len(rows) == 12, stdout
    for row in rows:
        assert all(re.fullmatch(r"\d+\.\d\d|-", cell) for cell in row[1:3]), row
        assert re.fullmatch(r"\d+, \d+, \d+, (\d+|-)", row[3]), row
    # the bandwidth floor is shown, no longer judged
    assert "target max-pool backward" not in stdout
    assert "bandwidth floor (information, no target)" in stdout


OPS = (
    "max_pool3d_with_argmax",
    "max_pool3d_with_argmax_backward",
    "grid_sampler3d",
    "grid_sampler3d_backward",
)
#: The measurements each script announces on stderr, in order (bench_overhead with --cold).
PROGRESS = {
    "bench_overhead.py": [
        *(f"{op} on npu, npu_uncached, numpy, torch, interleaved" for op in OPS),
        *(f"{op} on cold caches" for op in OPS),
    ],
    "bench_pipeline.py": [f"{op}, {mode}" for op in OPS for mode in ("default", "blocking", "host")]
    + [f"replay chain, {backend}" for backend in ("npu", "numpy")],
}


def test_overhead_contenders_take_turns_one_loop_each_in_a_rotating_order(monkeypatch):
    """bench_overhead times each round one loop of every contender (not all loops of one, then
    the next), so that background load lands on all of them; who goes first rotates."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import bench_overhead

    seen: list[str] = []
    fns = {name: (lambda name=name: seen.append(name)) for name in ("a", "b", "c")}
    times = bench_overhead.time_loops_interleaved(fns, calls=4, loops=3, warmup=2)
    assert seen[:6] == ["a", "a", "b", "b", "c", "c"]  # the warm-up
    loops = [seen[i] for i in range(6, len(seen), 4)]
    assert all(seen[i : i + 4] == [seen[i]] * 4 for i in range(6, len(seen), 4))
    assert loops == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert {name: len(t) for name, t in times.items()} == {"a": 3, "b": 3, "c": 3}
    assert all(t > 0 for per_call in times.values() for t in per_call)


def test_bench_command_passes_options_on(monkeypatch):
    from pyaclnn import __main__ as cli

    seen = []
    monkeypatch.setattr(cli, "bench", lambda extra: seen.append(list(extra)) or 0)
    assert cli.main(["bench", "--quick", "--repeat", "2"]) == 0
    assert cli.main(["bench", "--", "--quick"]) == 0
    assert seen == [["--quick", "--repeat", "2"], ["--quick"]]
    with pytest.raises(SystemExit):
        cli.main(["info", "--quick"])


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_instruction_counter_reports_a_plausible_count_per_call(emulator_home):
    proc = _run(
        "instructions_per_call.py",
        "--calls",
        "20",
        "--ops",
        "grid_sampler3d_backward",
        emulator_home=emulator_home,
    )
    (row,) = [line for line in proc.stdout.splitlines() if line.startswith("grid_sampler3d_backward")]
    count = int(row.split()[1].replace(",", ""))
    # A call runs the functional layer, the runtime and cffi: tens of thousands of instructions,
    # far from the millions that would mean the start-up or the warm-up leaked into the figure.
    assert 10_000 < count < 1_000_000, row


def test_bytecode_counter_counts_a_call_and_names_its_functions(emulator_home):
    """--bytecodes (no valgrind): per call, hundreds of bytecodes in dozens of Python calls (the
    warm-up or the start-up leaking in would be far more), the functional call among them."""
    proc = _run(
        "instructions_per_call.py",
        "--bytecodes",
        "--calls",
        "5",
        "--ops",
        "grid_sampler3d_backward",
        emulator_home=emulator_home,
    )
    lines = proc.stdout.splitlines()
    (row,) = [line for line in lines if line.startswith("grid_sampler3d_backward")]
    words = row.split()
    bytecodes, calls = int(words[1].replace(",", "")), int(words[3])
    assert 300 < bytecodes < 20_000 and 10 < calls < 500, row
    listed = [line.split() for line in lines if line.startswith("    ")]
    assert any(where.endswith(":grid_sampler3d_backward") for *_, where in listed), proc.stdout
    assert sum(float(n) for n, *_ in listed) <= bytecodes + 1, proc.stdout  # a part of the whole


def test_layers_of_a_call_each_time_their_piece(emulator_home):
    """instructions_per_call.py --layers runs each piece of the split call in a child; the
    timing child (no valgrind) gives every piece of LAYERS, in order, a time per call."""
    proc = _run("instructions_per_call.py", "--child-times", "5", emulator_home=emulator_home)
    rows = [line.split() for line in proc.stdout.splitlines()]
    assert [name for name, _ in rows] == [
        *("cffi", "bound", "cache", "functional", "stubbed"),  # the chain of a cache hit
        *("launch", "output", "descriptors", "arguments"),  # beside it
    ], proc.stdout
    assert all(float(seconds) > 0 for _, seconds in rows), proc.stdout


@pytest.mark.skipif(shutil.which(os.environ.get("CC") or "cc") is None, reason="no C compiler for the probe")
def test_floor_probe_gives_every_part_of_each_backward_case(emulator_home):
    proc = _run("bench_floor.py", "--quick", "--repeat", "1", emulator_home=emulator_home)
    rows = [line for line in proc.stdout.splitlines() if line.startswith("maxpool bwd")]
    assert len(rows) == 5, proc.stdout  # the forward has no floor
    for row in rows:
        figures = [float(word) for word in row.split()[-7:]]  # floor ms, five parts, bound
        assert all(f > 0 for f in figures[1:]), row
        write, scatter, scatter_1t, bound = figures[1], figures[2], figures[3], figures[6]
        assert bound == pytest.approx(max(write, min(scatter, scatter_1t)), abs=0.011), row
    assert "a second thread adds" in proc.stdout


def test_bench_query_compares_each_polling_loop_with_a_synchronize(emulator_home):
    for backend in ("numpy", "npu"):
        proc = _run("bench_query.py", "--backend", backend, "--rounds", "3", emulator_home=emulator_home)
        rows = [line.split()[0:2] for line in proc.stdout.splitlines()[2:5]]
        assert rows == [["synchronize", rows[0][1]], ["stream", "poll"], ["event", "poll"]], proc.stdout
        assert "target: poll / synchronize <= 1.5" in proc.stdout, proc.stdout


def test_bench_replay_times_replays_of_three_graph_sizes_and_judges_both_targets(emulator_home, tmp_path):
    """bench_replay: the eager launches and the replays of graphs of 10, 100 and 1000 calls on both
    backends, the two ratios, the replay's result bit-identical to eager's, and each target stated
    with its figure and verdict (the JSON says the same)."""
    out = tmp_path / "replay.json"
    args = ("--quick", "--rounds", "3", "--json", str(out))
    proc = _run("bench_replay.py", *args, emulator_home=emulator_home)
    header, rows = _table(proc.stdout, "Replay host time")
    assert header == [
        "backend",
        "eager 100 calls µs",
        "replay 10 µs",
        "replay 100 µs",
        "replay 1000 µs",
        "replay 100/eager",
        "replay 1000/replay 10",
        "bit-identical",
    ]
    assert [row[0] for row in rows] == ["npu", "numpy"]
    for row in rows:
        assert all(float(cell) > 0 for cell in row[1:7]), row
        assert row[7] == "yes", row
    for backend in ("npu", "numpy"):
        for target in (
            f"replay of 100 calls <= 0.05x their eager launches ({backend})",
            f"replay of 1000 calls <= 3x replay of 10 ({backend})",
        ):
            assert re.search(f"^target {re.escape(target)}: \\d+\\.\\d+, (met|not met)$", proc.stdout, re.M)
    saved = json.loads(out.read_text())
    assert set(saved["results"]) == {"npu", "numpy"}
    assert all(isinstance(r["met"], bool) for r in saved["results"].values())
