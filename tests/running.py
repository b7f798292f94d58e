"""Test helper: work run in several threads at once, and scripts run in a child interpreter
with several emulated devices (the emulations read ``PYACLNN_EMU_DEVICES`` once per process)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def in_threads(work: Callable[[int], None], count: int) -> list[BaseException]:
    """``work(i)`` for each ``i`` of ``range(count)``, each in a thread of its own, all started
    before any is joined; what they raised (the caller asserts it is nothing)."""
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def on_two_devices(script: str, backend: str, emulator_home: Path) -> subprocess.CompletedProcess[str]:
    """``script`` run by a new interpreter on ``backend`` with two emulated devices (the emulator
    of ``emulator_home`` for the npu backend)."""
    env = dict(
        os.environ,
        PYACLNN_EMU_DEVICES="2",
        PYACLNN_BACKEND=backend,
        PYACLNN_ASCEND_HOME=str(emulator_home),
        PYTHONPATH=str(ROOT),
    )
    command = [sys.executable, "-c", script]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
