"""The typed API as a user's type checker sees it: ``mypy --strict`` on a user script.

tests/typing/user_script.py must type-check (NumPy in gives ``numpy.ndarray``
out, DeviceArray in or ``out=`` gives DeviceArrays, each of the input's scalar
type, checked by its ``assert_type`` lines); a script that treats a NumPy result
as a DeviceArray, or a float32 result as float16, must not. The package's own ``mypy --strict
pyaclnn`` runs in .ci/run; here imported modules are checked but their errors
silenced (``--follow-imports=silent``), as for an installed package, so that
only the user's code is judged.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
USER_SCRIPT = ROOT / "tests" / "typing" / "user_script.py"

needs_mypy = pytest.mark.skipif(
    importlib.util.find_spec("mypy") is None,
    reason="mypy is not installed (pip install -e '.[test]' brings it)",
)


def _mypy(path: Path) -> subprocess.CompletedProcess[str]:
    # From the checkout's root: mypy finds pyaclnn there (an editable install is invisible to it).
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--follow-imports=silent",
            "--no-error-summary",
            str(path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


@needs_mypy
def test_user_script_type_checks() -> None:
    result = _mypy(USER_SCRIPT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_user_script_runs() -> None:
    # The script is real code: what it claims about the results also holds at run time.
    # PYTHONPATH: this checkout's pyaclnn, not an installed one.
    env = dict(os.environ, PYACLNN_BACKEND="numpy", PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, str(USER_SCRIPT)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr


@needs_mypy
def test_numpy_result_is_not_a_device_array(tmp_path: Path) -> None:
    script = tmp_path / "wrong_script.py"
    script.write_text(
        textwrap.dedent(
            """\
            import numpy as np

            import pyaclnn

            x = np.zeros((1, 1, 4, 4, 4), np.float32)
            out, indices = pyaclnn.max_pool3d_with_argmax(x, kernel_size=2)
            host = out.numpy()  # wrong: NumPy in gives NumPy out
            """
        )
    )
    result = _mypy(script)
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'wrong_script.py:7: error: "ndarray[' in result.stdout, result.stdout
    assert 'has no attribute "numpy"  [attr-defined]' in result.stdout, result.stdout


@needs_mypy
def test_a_result_of_another_scalar_type_fails_type_checking(tmp_path: Path) -> None:
    # The dtype is in the type: without DeviceArray's type parameter every line here would pass.
    script = tmp_path / "wrong_dtype.py"
    script.write_text(
        textwrap.dedent(
            """\
            import numpy as np
            import numpy.typing as npt

            import pyaclnn

            x = pyaclnn.to_device(np.zeros((1, 1, 2, 2, 2), np.float32))
            a: npt.NDArray[np.float16] = x.numpy()
            b: pyaclnn.DeviceArray[np.float16] = pyaclnn.empty((2,), np.float32)
            out, idx = pyaclnn.max_pool3d_with_argmax(x, 2)
            c: pyaclnn.DeviceArray[np.float16] = out
            d: pyaclnn.DeviceArray[np.int64] = idx
            _, idx64 = pyaclnn.max_pool3d_with_argmax(x, 2, indices_dtype=np.int64)
            e: pyaclnn.DeviceArray[np.int32] = idx64
            f: pyaclnn.DeviceArray[np.float16] = pyaclnn.grid_sampler3d(x, x)
            g: pyaclnn.DeviceArray[np.float32] = pyaclnn.DeviceArray((2,), np.float16)
            """
        )
    )
    result = _mypy(script)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = sorted({int(line.split(":")[1]) for line in result.stdout.splitlines() if ": error:" in line})
    assert lines == [7, 8, 10, 11, 13, 14, 15], result.stdout
    assert "[assignment]" in result.stdout, result.stdout


def test_device_array_is_subscripted_at_run_time() -> None:
    # Users write DeviceArray[np.float32] in annotations that run (no __future__ import, aliases,
    # get_type_hints); the class itself is unchanged by it.
    from typing import get_args, get_origin, get_type_hints

    import numpy as np

    import pyaclnn

    alias = pyaclnn.DeviceArray[np.float32]
    assert get_origin(alias) is pyaclnn.DeviceArray and get_args(alias) == (np.float32,)

    def f(x: pyaclnn.DeviceArray[np.float16]) -> pyaclnn.DeviceArray:
        return x

    hints = get_type_hints(f, localns={"pyaclnn": pyaclnn, "np": np})  # evaluates the strings
    assert hints == {"x": pyaclnn.DeviceArray[np.float16], "return": pyaclnn.DeviceArray}
    with alias((2,), np.float32, backend="numpy") as made:
        assert type(made) is pyaclnn.DeviceArray and made.dtype == np.float32


@needs_mypy
@pytest.mark.parametrize("module", ["functional", "aclnn"])
def test_the_implementation_behind_the_generated_stub_type_checks(tmp_path: Path, module: str) -> None:
    # Type checkers read functional.pyi and aclnn.pyi (generated by scripts/generate_interface.py),
    # so the package's own mypy run never sees the modules' bodies: check each in a copy without
    # its stub.
    copy = tmp_path / "pyaclnn"
    shutil.copytree(
        ROOT / "pyaclnn", copy, ignore=shutil.ignore_patterns("__pycache__", "*.so", f"{module}.pyi")
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--follow-imports=silent",
            "--no-error-summary",
            str(copy / f"{module}.py"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@needs_mypy
def test_a_mode_or_layout_that_does_not_exist_fails_type_checking(tmp_path: Path) -> None:
    script = tmp_path / "wrong_modes.py"
    script.write_text(
        textwrap.dedent(
            """\
            import numpy as np

            import pyaclnn

            x = np.zeros((1, 1, 2, 2, 2), np.float32)
            grid = np.zeros((1, 1, 1, 1, 3), np.float32)
            pyaclnn.grid_sampler3d(x, grid, "bilinear", "border", layout="NDHWC")
            pyaclnn.grid_sampler3d(x, grid, 0, 1)
            pyaclnn.grid_sampler3d(x, grid, "trilinear")
            pyaclnn.grid_sampler3d(x, grid, padding_mode="mirror")
            pyaclnn.grid_sampler3d_backward(x, x, grid, layout="ndhwc")
            """
        )
    )
    result = _mypy(script)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = sorted({int(line.split(":")[1]) for line in result.stdout.splitlines() if ": error:" in line})
    assert lines == [9, 10, 11], result.stdout  # the names and integers of lines 7-8 are right


def test_the_typed_modes_and_layouts_are_the_accepted_names() -> None:
    from typing import get_args

    from pyaclnn import _arguments

    def names(alias: object) -> set[str]:
        return {a for part in get_args(alias) for a in (get_args(part) or (part,)) if isinstance(a, str)}

    assert names(_arguments.InterpolationMode) == set(_arguments.INTERPOLATION)
    assert names(_arguments.PaddingMode) == set(_arguments.PADDING)
    assert names(_arguments.Layout) == set(_arguments.LAYOUTS)
