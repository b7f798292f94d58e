"""Building the compiled kernels (pyaclnn.kernels._accel) says what it does on stderr.

* A build into an empty cache prints one line (it takes a second or two); a
  warm cache prints nothing.
* ``CC`` names the compiler: when it is not on PATH, or fails, no other
  compiler is used in its place; the NumPy kernels run and one stderr line
  says that CC did not work. Without ``CC`` and without any compiler the
  NumPy kernels run silently, as before.

Each test starts from "nothing loaded" (``_loaded = None``) over a cache of
its own, as a fresh process would.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from pyaclnn.kernels import _accel
from pyaclnn.kernels.max_pool3d import max_pool3d_with_argmax_backward


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """Nothing loaded, an empty cache in tmp_path, the compiled kernels allowed; the cache path."""
    monkeypatch.delenv("PYACLNN_ACCEL", raising=False)
    monkeypatch.setenv("PYACLNN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_accel, "_loaded", None)
    return tmp_path


def _have_compiler() -> None:
    if _accel._compiler() is None:
        if os.environ.get("PYACLNN_REQUIRE_ACCEL") == "1":
            pytest.fail("PYACLNN_REQUIRE_ACCEL=1 but no C compiler is on PATH")
        pytest.skip("no C compiler on PATH")


def _numpy_kernels_still_work() -> None:
    go = np.ones((1, 1, 1, 1, 2), np.float32)
    gi = np.empty((1, 1, 1, 1, 2), np.float32)
    max_pool3d_with_argmax_backward(go, np.zeros(go.shape, np.int32), gi)
    assert gi.reshape(-1).tolist() == [2.0, 0.0]


def test_a_cold_cache_says_it_compiles_in_one_line_and_a_warm_one_says_nothing(fresh, monkeypatch, capfd):
    monkeypatch.delenv("CC", raising=False)
    _have_compiler()
    assert _accel.library() is not None
    assert capfd.readouterr().err == f"pyaclnn: compiling the C kernels (once, into {fresh}) ...\n"
    monkeypatch.setattr(_accel, "_loaded", None)  # as the next process: the library is in the cache
    assert _accel.library() is not None
    assert capfd.readouterr().err == ""


def test_a_process_with_a_warm_cache_prints_nothing(fresh, monkeypatch):
    monkeypatch.delenv("CC", raising=False)
    _have_compiler()
    _accel.build()
    code = "from pyaclnn.kernels import _accel; assert _accel.library() is not None"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_a_cc_not_on_path_is_not_replaced_and_says_so(fresh, monkeypatch, capfd):
    _have_compiler()  # there is a compiler that could be used instead: it must not be
    monkeypatch.setenv("CC", "nosuchcc")
    assert _accel.library() is None
    err = capfd.readouterr().err
    assert err == (
        "pyaclnn: CC=nosuchcc did not work (nosuchcc is not on PATH): the NumPy kernels run instead "
        "(unset CC or name a working C compiler)\n"
    )
    status = _accel.accel_status()
    assert status["active"] is False and status["reason"] == "CC=nosuchcc: nosuchcc is not on PATH"
    assert not list(fresh.glob("*.so"))  # nothing was built with another compiler
    _numpy_kernels_still_work()
    assert _accel.library() is None and capfd.readouterr().err == ""  # said once per process


def test_a_cc_that_fails_is_not_replaced_and_says_so(fresh, monkeypatch, capfd):
    monkeypatch.setenv("CC", "/bin/false")
    assert _accel.library() is None
    lines = capfd.readouterr().err.splitlines()
    assert lines == [
        f"pyaclnn: compiling the C kernels (once, into {fresh}) ...",
        "pyaclnn: CC=/bin/false did not work (/bin/false failed (1)): the NumPy kernels run instead "
        "(unset CC or name a working C compiler)",
    ]
    assert not list(fresh.glob("*.so"))
    _numpy_kernels_still_work()


def test_a_cc_that_is_not_a_command_says_so(fresh, monkeypatch, capfd):
    monkeypatch.setenv("CC", 'gcc "-O2')
    assert _accel.library() is None
    assert capfd.readouterr().err.startswith('pyaclnn: CC=gcc "-O2 did not work (not a command (No closing')


def test_without_cc_and_without_a_compiler_the_numpy_kernels_run_silently(fresh, monkeypatch, capfd):
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(fresh))  # no compiler there
    assert _accel.library() is None
    assert "no C compiler" in _accel.accel_status()["reason"]
    assert capfd.readouterr().err == ""
    _numpy_kernels_still_work()
