"""The samples: every Python sample on both backends, and the C++ samples, against known values.

Expected values come from the operator document (max-pool: 0.4757 at index 6)
or from PyTorch on the same inputs, never from pyaclnn. The C++ samples must
print exactly the lines the Python ports print.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pyaclnn import constants

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"
CANN_VARS = ("PYACLNN_ASCEND_HOME", "ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "PYACLNN_BACKEND")
LINE = re.compile(r"^(\w+)\[(\d+)\] is: (\S+)$")

# The document's max-pool example: the gradient 0.4757 goes to the maximum 1.7510 at index 6.
MAX_POOL_GOLDEN = [0, 0, 0, 0, 0, 0, 0.4757, 0, 0]


def _env(backend: str, emulator: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CANN_VARS}
    env["PYACLNN_BACKEND"] = backend
    if emulator is not None:
        env["ASCEND_HOME_PATH"] = str(emulator)
    return env


@pytest.fixture(params=["numpy", "npu"])
def run_sample(request):
    """Runs a Python sample on the numpy backend (``--backend numpy``) or on the npu
    backend over the emulator (PYACLNN_BACKEND=npu, ASCEND_HOME_PATH, no flag); returns stdout."""
    backend = request.param
    emulator = request.getfixturevalue("emulator_home") if backend == "npu" else None

    def run(name: str) -> str:
        args = ["--backend", "numpy"] if backend == "numpy" else []
        proc = subprocess.run(
            [sys.executable, str(SAMPLES / name), *args],
            env=_env(backend, emulator),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    return run


def _parse(stdout: str) -> dict[str, np.ndarray]:
    """``name[i] is: value`` lines -> {name: values in index order}; every line must match."""
    values: dict[str, list[float]] = {}
    for line in stdout.splitlines():
        match = LINE.match(line)
        assert match, f"unexpected output line {line!r}"
        name, index, value = match.group(1), int(match.group(2)), float(match.group(3))
        assert index == len(values.setdefault(name, [])), f"{name}[{index}] out of order"
        values[name].append(value)
    return {name: np.array(v) for name, v in values.items()}


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, SAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _document_grid_sampler_expected(torch) -> dict[str, np.ndarray]:
    """PyTorch's gradients for the grid-sampler document's inputs."""
    grad = torch.ones(1, 1, 1, 2, 2)
    x = torch.arange(1, 10, dtype=torch.float32).reshape(1, 1, 1, 3, 3)
    grid = torch.tensor([-1, -1, 0, -1, 1, -1, -1, 0, 0, 0, 1, 0], dtype=torch.float32).reshape(1, 1, 2, 2, 3)
    input_grad, grid_grad = torch.ops.aten.grid_sampler_3d_backward(grad, x, grid, 0, 0, False, [True, True])
    return {
        "inputGradResultData": input_grad.numpy().ravel(),
        "gridGradResultData": grid_grad.numpy().ravel(),
    }


def _close(got: np.ndarray, want: np.ndarray, rel: float = 1e-5) -> None:
    assert got.shape == want.shape
    # %f prints 6 decimals: allow half a unit of the last one on top of the relative tolerance.
    np.testing.assert_allclose(got, want, rtol=0, atol=rel * max(np.max(np.abs(want)), 1.0) + 5e-7)


# -- the ports of the documents' samples ------------------------------------------


def test_max_pool_backward_port_prints_the_documents_result(run_sample):
    out = run_sample("max_pool3d_with_argmax_backward.py")
    assert out.splitlines() == [f"result[{i}] is: {v:f}" for i, v in enumerate(MAX_POOL_GOLDEN[:8])]
    assert "result[6] is: 0.475700" in out


def test_grid_sampler_backward_port_prints_pytorchs_gradients(run_sample, torch):
    got = _parse(run_sample("grid_sampler3d_backward.py"))
    want = _document_grid_sampler_expected(torch)
    assert list(got) == ["inputGradResultData", "gridGradResultData"]
    for name in want:
        _close(got[name], want[name])


def test_functional_sample_prints_the_same_as_the_low_level_ports(run_sample, torch):
    out = run_sample("functional_backward.py")
    got = _parse(out)
    assert list(got) == ["result", "inputGradResultData", "gridGradResultData"]
    np.testing.assert_allclose(got["result"], MAX_POOL_GOLDEN[:8], rtol=0, atol=5e-7)
    want = _document_grid_sampler_expected(torch)
    for name in want:
        _close(got[name], want[name])


# -- the forward + backward examples ------------------------------------------------


def test_max_pool_forward_backward_sample_matches_pytorch(run_sample, torch):
    sample = _load("max_pool3d_forward_backward")
    x, grad_output = sample.make_inputs()
    k, s, p = sample.KERNEL_SIZE, sample.STRIDE, sample.PADDING
    tx = torch.from_numpy(x)
    out, indices = torch.ops.aten.max_pool3d_with_indices(tx, [k] * 3, [s] * 3, [p] * 3, [1] * 3, False)
    grad_input = torch.ops.aten.max_pool3d_with_indices_backward(
        torch.from_numpy(grad_output), tx, [k] * 3, [s] * 3, [p] * 3, [1] * 3, False, indices
    )

    got = _parse(run_sample("max_pool3d_forward_backward.py"))
    assert list(got) == ["out", "indices", "gradInput"]
    _close(got["out"], out.numpy().ravel(), rel=0)
    np.testing.assert_array_equal(got["indices"], indices.numpy().ravel())
    _close(got["gradInput"], grad_input.numpy().ravel())
    # Overlapping windows: some input cell received the gradient of several windows.
    assert len(set(indices.numpy().ravel().tolist())) < indices.numel()


def test_grid_sampler_forward_backward_sample_matches_pytorch(run_sample, torch):
    sample = _load("grid_sampler3d_forward_backward")
    x, grid, grad_output = (torch.from_numpy(a) for a in sample.make_inputs())
    interpolation = {"bilinear": 0, "nearest": 1}[sample.MODES["interpolation_mode"]]
    padding = {"zeros": 0, "border": 1, "reflection": 2}[sample.MODES["padding_mode"]]
    align = sample.MODES["align_corners"]
    out = torch.ops.aten.grid_sampler_3d(x, grid, interpolation, padding, align)
    input_grad, grid_grad = torch.ops.aten.grid_sampler_3d_backward(
        grad_output, x, grid, interpolation, padding, align, [True, True]
    )

    got = _parse(run_sample("grid_sampler3d_forward_backward.py"))
    assert list(got) == ["out", "inputGrad", "gridGrad"]
    _close(got["out"], out.numpy().ravel())
    _close(got["inputGrad"], input_grad.numpy().ravel())
    _close(got["gridGrad"], grid_grad.numpy().ravel())
    assert (np.abs(grid.numpy()) > 1).any()  # some points lie outside, so border padding is exercised


_FAILING_RUN = """
import importlib.util, json, sys
import pyaclnn
from pyaclnn import acl, backends

# Kernel size 0 instead of the sample's (2, 2, 2): phase 1 must reject it.
real = acl.create_int_array
acl.create_int_array = lambda values, **kw: real([0, 0, 0] if list(values) == [2, 2, 2] else values, **kw)
spec = importlib.util.spec_from_file_location("sample", sys.argv[1])
sample = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sample)
try:
    sample.main([])
except pyaclnn.AclnnError as exc:
    print("status", exc.status)
print(json.dumps(backends.get().live_counts()))
"""


def test_a_low_level_sample_frees_everything_when_a_call_fails(run_sample_env):
    script = str(SAMPLES / "max_pool3d_with_argmax_backward.py")
    proc = subprocess.run(
        [sys.executable, "-c", _FAILING_RUN, script],
        env=run_sample_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"status {constants.ACLNN_ERR_PARAM_INVALID}"
    live = json.loads(lines[1])  # {kind: count} of the backend's live objects
    assert live and not any(live.values()), live


@pytest.fixture(params=["numpy", "npu"])
def run_sample_env(request):
    """Environment selecting the numpy backend, or the npu backend over the emulator."""
    emulator = request.getfixturevalue("emulator_home") if request.param == "npu" else None
    return _env(request.param, emulator)


# -- the C++ samples ------------------------------------------------------------------

CPP_SAMPLES = ("max_pool3d_with_argmax_backward", "grid_sampler3d_backward")


def _python_output(name: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(SAMPLES / f"{name}.py"), "--backend", "numpy"],
        env=_env("numpy", None),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def top_level_samples(emulator_home) -> Path:
    """build/samples/cpp of the top-level project, whose build emulator_home ran."""
    # emulator_home configured and built the top-level project into build/, samples/cpp
    # included; building the two targets again (a no-op when up to date) guards against
    # another process having reconfigured build/ meanwhile.
    build = emulator_home.parent
    with open(build / ".emulator.lock", "w") as lock:  # the lock emulator_build takes around its builds
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            proc = subprocess.run(
                [shutil.which("cmake"), "--build", str(build), "--target", *CPP_SAMPLES],
                capture_output=True,
                text=True,
                timeout=300,
            )
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return build / "samples" / "cpp"


@pytest.mark.parametrize("name", CPP_SAMPLES)
def test_cpp_sample_of_the_top_level_build_prints_what_the_python_port_prints(name, top_level_samples):
    binary = top_level_samples / name
    assert binary.is_file(), f"{binary} was not built by the top-level CMake project"
    proc = subprocess.run([str(binary)], env=_env("numpy", None), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == _python_output(name)


def test_cpp_samples_build_standalone_against_a_split_layout_home(tmp_path):
    """samples/cpp on its own, with -DASCEND_HOME_PATH naming a CANN >= 8.5 style home."""
    from emulator_build import emulator_home

    home = emulator_home("split")
    cmake = shutil.which("cmake")
    build = tmp_path / "build-samples"
    for cmd in (
        [cmake, "-S", str(SAMPLES / "cpp"), "-B", str(build), f"-DASCEND_HOME_PATH={home}"],
        [cmake, "--build", str(build), "--parallel", "2"],
    ):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_env("numpy", None))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        if "-S" in cmd:
            assert f"CANN home {home}" in proc.stdout
            assert "libopapi_nn.so" in proc.stdout and "libopapi_cv.so" in proc.stdout
    for name in CPP_SAMPLES:
        # No LD_LIBRARY_PATH: the RPATH must find the home's libraries.
        proc = subprocess.run(
            [str(build / name)], env=_env("numpy", None), capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == _python_output(name)


# -- without CANN -------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in SAMPLES.glob("*.py")))
def test_a_sample_on_npu_without_cann_says_so_in_one_line(name, tmp_path):
    env = _env("numpy", None)  # PYACLNN_BACKEND=numpy: --backend npu must still win
    env.update(PYACLNN_ASCEND_HOME=str(tmp_path / "no-cann"), HOME=str(tmp_path))
    from pyaclnn.backends.npu import discover

    if discover(env).chosen is not None:
        pytest.skip("a CANN install exists at a default location of this machine")
    proc = subprocess.run(
        [sys.executable, str(SAMPLES / name), "--backend", "npu"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1, proc.stderr  # no traceback, no list of places
    assert proc.stderr.startswith(f"{SAMPLES / name}: CANN's shared libraries were not found."), proc.stderr
    assert "python -m pyaclnn info" in proc.stderr and "set PYACLNN_ASCEND_HOME" in proc.stderr
