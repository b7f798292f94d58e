"""pyaclnn's warnings point at the user's line, not at pyaclnn's (pyaclnn._warn).

Each warning raised from a user call carries the location of that call (here:
this file); one raised at interpreter exit, when no user line runs, names what
was left and where it was made, and points there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

import pyaclnn
from pyaclnn import _env, _warn
from pyaclnn.kernels import _workers

ROOT = Path(__file__).resolve().parent.parent
X = np.arange(2 * 4 * 4 * 4, dtype=np.float32).reshape(1, 2, 4, 4, 4)


def queue_a_failing_call(backend: str, stream: pyaclnn.Stream) -> list[pyaclnn.DeviceArray]:
    """Queue on ``stream`` a backward call whose indices leave their plane: it fails on the device."""
    out = X[..., 1::2, 1::2, 1::2]
    idx = np.zeros(out.shape, np.int32)
    idx[0, 0, 0, 0, 1] = 99
    args = [pyaclnn.to_device(a, backend=backend, stream=stream) for a in (np.ones_like(out), X, idx)]
    return [*args, pyaclnn.max_pool3d_with_argmax_backward(*args, 2, backend=backend, stream=stream)]


def test_a_malformed_variable_is_warned_about_at_the_line_that_read_it(monkeypatch):
    monkeypatch.setenv("PYACLNN_NUM_THREADS", "lines")
    with pytest.warns(_env.EnvironmentWarning, match="PYACLNN_NUM_THREADS='lines'") as caught:
        line = sys._getframe().f_lineno + 1
        _workers.thread_count()  # reads the variable two calls deep
    assert (caught[0].filename, caught[0].lineno) == (__file__, line)


def test_finalize_warns_about_a_pending_device_error_at_the_line_that_called_it(backend):
    made = sys._getframe().f_lineno + 1
    stream = pyaclnn.Stream(backend=backend)
    arrays = queue_a_failing_call(backend, stream)
    with pytest.warns(RuntimeWarning, match=r"pyaclnn.finalize: a device error was still pending") as caught:
        line = sys._getframe().f_lineno + 1
        pyaclnn.finalize(backend)
    (warning,) = [w for w in caught if "still pending" in str(w.message)]
    assert (warning.filename, warning.lineno) == (__file__, line)
    assert f"(made at {__file__}:{made})" in str(warning.message)
    del stream, arrays


def test_a_profile_that_fails_to_end_warns_at_the_with_line(backend, tmp_path, monkeypatch):
    def failing_stop(config, *, backend=None):
        raise RuntimeError("stop failed (test)")

    monkeypatch.setattr(pyaclnn.acl.prof, "stop", failing_stop)
    with pytest.raises(ZeroDivisionError), pytest.warns(RuntimeWarning, match="stop failed") as caught:
        with pyaclnn.profile(tmp_path, backend=backend):
            1 / 0  # noqa: B018
    assert caught[0].filename == __file__


def test_with_no_user_line_running_the_warning_goes_where_the_thing_was_made():
    made_at = (__file__, 7)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _warn_from_a_thread_of_pyaclnns_own(made_at)
    assert [(w.filename, w.lineno) for w in caught] == [made_at]


def _warn_from_a_thread_of_pyaclnns_own(made_at: tuple[str, int]) -> None:
    # A thread whose only frames are pyaclnn's and the thread start's: no user line runs.
    worker = threading.Thread(target=_warn.warn, args=("left", RuntimeWarning), kwargs={"made_at": made_at})
    worker.start()
    worker.join()


def test_at_interpreter_exit_the_warning_names_what_was_left_and_where_it_was_made(tmp_path):
    script = tmp_path / "leaves_a_failed_stream.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(ROOT / "tests")!r})
            import pyaclnn
            from test_warning_locations import queue_a_failing_call
            stream = pyaclnn.Stream()
            arrays = queue_a_failing_call("numpy", stream)
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYACLNN_BACKEND": "numpy"}
    result = subprocess.run(
        [sys.executable, "-W", "always", str(script)], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    made_here = f"{script}:6"  # the line of pyaclnn.Stream()
    assert "at interpreter exit: a device error was still pending on <pyaclnn.Stream" in result.stderr
    assert f"(made at {made_here})" in result.stderr, result.stderr
    assert result.stderr.startswith(f"{made_here}: RuntimeWarning"), result.stderr
