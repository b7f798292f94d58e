"""Checked environment: every ``PYACLNN_*`` variable is read through ``pyaclnn._env``, and a
malformed value is warned about (or refused), naming the variable and what it accepts.

The C emulator reads its ``PYACLNN_EMU_*`` variables the same way and says so on stderr.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pyaclnn import _context, _env, _executors, _repeat
from pyaclnn.backends.numpy import _device_count, _heap, _streams
from pyaclnn.kernels import _accel, _workers

ROOT = Path(__file__).resolve().parent.parent
#: Reading a PYACLNN_* variable straight from the environment, not through pyaclnn._env.
_DIRECT = re.compile(r"""(environ(\.get)?\s*[\[(]|getenv\s*\()\s*["']PYACLNN_""")


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    """Each test sees its warnings: none was said before (they are said once per value)."""
    monkeypatch.setattr(_env, "_warned", set())


def test_no_module_reads_a_pyaclnn_variable_but_through_the_one_reader():
    direct = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "pyaclnn").rglob("*.py"))
        if path.name != "_env.py" or path.parent.name != "pyaclnn"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if _DIRECT.search(line)
    ]
    assert direct == []


READERS = [
    ("PYACLNN_NUM_THREADS", "abc", _workers.thread_count, "an integer"),
    ("PYACLNN_EMU_KERNEL_US", "fast", lambda: _streams.env_ns("PYACLNN_EMU_KERNEL_US"), "microseconds >= 0"),
    ("PYACLNN_EMU_SYNC_US", "-5", lambda: _streams.env_ns("PYACLNN_EMU_SYNC_US"), "microseconds >= 0"),
    ("PYACLNN_EMU_HAZARD_FATAL", "sure", _streams.hazards_are_fatal, "1, on, true, yes or 0, off"),
    ("PYACLNN_EXECUTOR_CACHE", "maybe", _executors.enabled_by_environment, "1, on, true, yes or 0, off"),
    ("PYACLNN_MAP_HOST", "sometimes", _context.map_host_by_environment, "1, 0 or always"),
    ("PYACLNN_ACCEL", "fast", _accel._disabled, "1, on, true, yes or 0, off"),
    ("PYACLNN_COMPILED_CALLS", "fast", _repeat._disabled, "1, on, true, yes or 0, off"),
    ("PYACLNN_EMU_DEVICES", "many", _device_count, "an integer >= 1"),
    ("PYACLNN_NUMPY_DEVICE_MEMORY", "lots", lambda: _heap.Heap(base=0x1000), "an integer >= 1"),
]


@pytest.mark.parametrize("name, bad, read, accepts", READERS, ids=[r[0] for r in READERS])
def test_a_malformed_value_is_warned_about_naming_the_variable_and_what_it_accepts(
    monkeypatch, name, bad, read, accepts
):
    monkeypatch.setenv(name, bad)
    with pytest.warns(_env.EnvironmentWarning) as caught:
        read()
    text = str(caught[0].message)
    assert text.startswith(f"{name}={bad!r} is ignored: {name} accepts") and accepts in text, text


def test_a_malformed_value_is_warned_about_once_and_the_default_is_used(monkeypatch, recwarn):
    monkeypatch.setenv("PYACLNN_NUM_THREADS", "abc")
    default = max(1, min(len(os.sched_getaffinity(0)), _workers.MAX_DEFAULT_THREADS))
    assert [_workers.thread_count() for _ in range(3)] == [default] * 3
    assert len([w for w in recwarn if issubclass(w.category, _env.EnvironmentWarning)]) == 1
    assert "using the usable cores" in str(recwarn[0].message)


@pytest.mark.parametrize(
    "value, want", [("3", 3), (" 12 ", 12), ("0", 1), ("-2", 1)], ids=["3", "spaces", "0", "negative"]
)
def test_a_well_formed_value_is_taken_without_a_word(monkeypatch, recwarn, value, want):
    monkeypatch.setenv("PYACLNN_NUM_THREADS", value)
    assert _workers.thread_count() == want
    assert not [w for w in recwarn if issubclass(w.category, _env.EnvironmentWarning)]


SPELLINGS = [("1", True), ("ON", True), ("yes", True), ("0", False), ("Off", False)]


@pytest.mark.parametrize("value, want", SPELLINGS)
def test_a_switch_takes_every_spelling_of_on_and_off(monkeypatch, value, want):
    monkeypatch.setenv("PYACLNN_EXECUTOR_CACHE", value)
    assert _executors.enabled_by_environment() is want


def test_an_unknown_backend_is_refused_naming_the_choices(monkeypatch):
    monkeypatch.setenv("PYACLNN_BACKEND", "gpu")
    with pytest.raises(ValueError, match=r"PYACLNN_BACKEND must be auto, npu or numpy, got 'gpu'"):
        _env.choice("PYACLNN_BACKEND", {"auto": 1, "npu": 2, "numpy": 3}, 1, strict=True)


@pytest.mark.parametrize(
    "name, bad, accepts",
    [
        ("PYACLNN_EMU_KERNEL_US", "abc", "a number of microseconds >= 0"),
        ("PYACLNN_EMU_HAZARD_FATAL", "sure", "1, on, true, yes or 0, off, false, no"),
        ("PYACLNN_EMU_DEVICES", "many", "an integer from 1 to"),
        ("PYACLNN_EMU_DEVICE_MEMORY", "-5", "a number of bytes >= 1"),
    ],
)
def test_the_c_emulator_says_what_it_ignores(emulator_home, name, bad, accepts):
    code = (
        "import numpy as np, pyaclnn\n"
        "x = pyaclnn.to_device(np.zeros((1, 1, 4, 4, 4), np.float32), backend='npu')\n"
        "pyaclnn.max_pool3d_with_argmax(x, 2, backend='npu')[0].numpy()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYACLNN_")}
    env.update(PYACLNN_ASCEND_HOME=str(emulator_home), PYTHONPATH=str(ROOT), **{name: bad})
    if name == "PYACLNN_EMU_HAZARD_FATAL":  # read at a hazard: make one (a stream destroyed busy)
        code = (
            "import pyaclnn\nfrom pyaclnn import acl\npyaclnn.synchronize(backend='npu')\n"
            "import os\nos.environ['PYACLNN_EMU_KERNEL_US'] = '100000'\n"
            "s = acl.rt.create_stream(backend='npu')\n"
            "import numpy as np\n"
            "x = pyaclnn.to_device(np.zeros((1, 1, 4, 4, 4), np.float32), backend='npu')\n"
            "st = pyaclnn.ExternalStream(s, backend='npu')\n"
            "pyaclnn.max_pool3d_with_argmax(x, 2, backend='npu', stream=st)\n"
            "acl.rt.destroy_stream(s, backend='npu')\n"
        )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    said = f"pyaclnn emulator: {name}='{bad}' is ignored: {name} accepts {accepts}"
    assert said in proc.stderr, proc.stderr
