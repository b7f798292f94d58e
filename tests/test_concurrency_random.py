"""The randomized concurrent workload (``tests/concurrency_workload.py``) in a child process.

Four worker threads and a consumer thread run random chains of the four
operators on two emulated devices, with Streams closed under queued work,
ExternalStreams, Events, ``out=`` reuse, ``from_ptr`` views, ``free_all_blocks``
racing the others and results read by a thread that never called pyaclnn.
Every result is checked against the reference kernels; the child ends with
``pyaclnn.finalize`` and fails on any live object or new hazard.

A child process because the emulations read ``PYACLNN_EMU_DEVICES`` once per
process (and the npu backend loads one CANN home per process), and because a
hung or crashed run must not take the test session with it. Each run is bounded
in wall time: ``PYACLNN_CONCURRENCY_SECONDS`` (default 20) for the main runs, a
fifth of it under a slow simulated kernel. ``PYACLNN_CONCURRENCY_SEED`` picks
another seed; the seed is in every failure message.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import operators
import pytest

HERE = pathlib.Path(__file__).resolve().parent
WORKLOAD = HERE / "concurrency_workload.py"
SECONDS = float(os.environ.get("PYACLNN_CONCURRENCY_SECONDS", "20"))
SEED = int(os.environ.get("PYACLNN_CONCURRENCY_SEED", "20240"))
THREADS = 4
#: environment of the parent that would change what the child runs
_CLEARED = (
    "PYACLNN_BACKEND",
    "PYACLNN_ASCEND_HOME",
    "ASCEND_HOME_PATH",
    "ASCEND_TOOLKIT_HOME",
    "ASCEND_LAUNCH_BLOCKING",
    "PYACLNN_EXECUTOR_CACHE",
    "PYACLNN_EMU_DEVICES",
    "PYACLNN_EMU_KERNEL_US",
    "PYACLNN_EMU_SYNC_US",
)


def _run(request: pytest.FixtureRequest, backend: str, seconds: float, **env: str) -> dict:
    """Run the workload in a child; return its figures after checking the child's own verdict."""
    environ = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    environ.update(PYACLNN_EMU_DEVICES="2", PYACLNN_BACKEND=backend, **env)
    if backend == "npu":
        environ["PYACLNN_ASCEND_HOME"] = str(request.getfixturevalue("emulator_home"))
    environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(HERE.parent), os.environ.get("PYTHONPATH", "")) if p
    )
    command = [
        sys.executable,
        str(WORKLOAD),
        "--backend",
        backend,
        "--seconds",
        str(seconds),
        "--threads",
        str(THREADS),
        "--seed",
        str(SEED),
    ]
    # The child's own hang report (faulthandler, threads' stacks) comes well before this.
    proc = subprocess.run(command, capture_output=True, text=True, env=environ, timeout=seconds + 400)
    where = f"{' '.join(command)} ({', '.join(f'{k}={v}' for k, v in env.items()) or 'no extra env'})"
    code = proc.returncode  # not proc itself in the assertion: pytest would print all of its output again
    assert code == 0, f"{where} exited with {code}:\n{proc.stderr[-12000:]}"
    assert "HAZARD" not in proc.stderr, f"{where} reported hazards:\n{proc.stderr[-12000:]}"
    lines = proc.stdout.strip().splitlines()
    assert lines, f"{where} printed no figures; stderr:\n{proc.stderr[-4000:]}"
    figures = json.loads(lines[-1])
    assert figures["backend"] == backend and figures["devices"] == 2, figures
    assert figures["failures"] == 0 and figures["new_hazards"] == 0, figures
    return figures


def _assert_exercised(figures: dict, checked: int) -> None:
    """Enough results were checked, and every part of the runtime the workload aims at was used."""
    assert figures["checked"] >= checked, f"only {figures['checked']} results checked: {figures}"
    assert figures["checked"] >= figures["calls"], figures  # each call checks one result at least
    for op in operators.NAMES:
        assert figures.get(f"calls_{op}", 0) > 0, f"{op} never ran: {figures}"
    for key in (
        "stream_closes",
        "closes_with_work_queued",
        "stream_external",
        "events",
        "event_waits",
        "event_synchronizes",
        "out_reused",
        "views_in",
        "views_out",
        "free_all_blocks",
        "checked_by_consumer",
        "consumer_event_waits",
    ):
        assert figures.get(key, 0) > 0, f"the workload never did {key}: {figures}"


@pytest.mark.parametrize("backend", ["numpy", "npu"])
def test_random_concurrent_workload_gives_reference_results_and_leaves_nothing(request, backend):
    figures = _run(request, backend, SECONDS)
    # About 1,000 calls/s on both backends here (2 cores); a tenth of that still says it ran.
    _assert_exercised(figures, checked=int(60 * SECONDS))
    assert figures.get("mixed_device_refusals", 0) > 0, figures


@pytest.mark.parametrize("backend", ["numpy", "npu"])
def test_random_concurrent_workload_under_a_slow_kernel(request, backend):
    """200 µs of simulated device time per kernel: work is really pending when streams close,
    free_all_blocks runs and other threads read."""
    figures = _run(request, backend, max(2.0, SECONDS / 5), PYACLNN_EMU_KERNEL_US="200")
    _assert_exercised(figures, checked=int(20 * max(2.0, SECONDS / 5)))
