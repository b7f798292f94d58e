"""The command line: python -m pyaclnn info | selftest | bench."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import numpy as np
import pytest

import pyaclnn
from pyaclnn import __main__ as cli
from pyaclnn import selftest
from pyaclnn.backends.npu import discover

CANN_VARS = ("PYACLNN_ASCEND_HOME", "ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "PYACLNN_BACKEND")


def _env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CANN_VARS}
    env.update(values)
    return env


def _pyaclnn(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pyaclnn", *args], env=env, capture_output=True, text=True,
                          timeout=120)


# -- info ---------------------------------------------------------------------------


def test_info_without_cann_names_the_numpy_backend_and_why_npu_is_unusable():
    env = _env(PYACLNN_BACKEND="numpy")
    proc = _pyaclnn("info", env=env)
    assert proc.returncode == 0, proc.stderr
    assert f"pyaclnn {pyaclnn.__version__}" in proc.stdout
    assert "active backend: numpy (PYACLNN_BACKEND=numpy)" in proc.stdout
    assert "emulated device memory:" in proc.stdout and "GiB free of" in proc.stdout
    if discover(env).chosen is None:  # no CANN installed at a default location of this machine
        assert "NOT usable: CANN's shared libraries were not found" in proc.stdout
        assert "PYACLNN_ASCEND_HOME" in proc.stdout  # the hint how to fix it


def test_info_with_npu_forced_but_absent_warns_instead_of_crashing(tmp_path):
    env = _env(PYACLNN_BACKEND="npu", PYACLNN_ASCEND_HOME=str(tmp_path / "no-cann"))
    if discover(env).chosen is not None:
        pytest.skip("a CANN install exists at a default location of this machine")
    proc = _pyaclnn("info", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "active backend: npu (PYACLNN_BACKEND=npu)" in proc.stdout
    assert "WARNING: npu is the active backend but unusable" in proc.stdout
    assert str(tmp_path / "no-cann" / "lib64") in proc.stdout  # the search report names the place tried


def test_info_over_the_emulator_reports_home_libraries_soc_and_memory(emulator_home):
    proc = _pyaclnn("info", env=_env(ASCEND_HOME_PATH=str(emulator_home)))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "active backend: npu (auto: CANN loaded from" in out
    assert f"CANN home: {emulator_home}" in out
    for lib in ("libascendcl.so", "libnnopbase.so", "libopapi.so"):
        assert f"library: {emulator_home / 'lib64' / lib}" in out
    assert "devices: 1" in out
    assert "SoC: Ascend910B-emulator" in out
    assert "device 0 memory: 64.0 GiB free of 64.0 GiB" in out


# -- selftest -------------------------------------------------------------------------


def _selftest(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    parser = cli.argparse.ArgumentParser()
    selftest.add_arguments(parser)
    args = parser.parse_args(argv)
    code = selftest.run(args.backend, args.quick, args.k, out=out)
    return code, out.getvalue()


def test_selftest_passes_every_case_on_numpy():
    code, out = _selftest("--backend", "numpy")
    n = len(selftest.cases())
    assert code == 0, out
    assert out.count(" PASS") == n
    assert f"{n} passed, 0 failed" in out


def test_the_selftest_matrix_covers_every_op_dtype_and_layout_asked_for():
    names = [c.name for c in selftest.cases()]
    for op in ("max_pool3d fwd", "max_pool3d bwd", "grid_sampler3d fwd", "grid_sampler3d bwd"):
        dtypes = {str(c.dtype) for c in selftest.cases() if c.name.startswith(op)}
        assert {"float32", "float16", "bfloat16"} <= dtypes, op
    assert any("float64" == str(c.dtype) for c in selftest.cases() if c.name.startswith("grid_sampler3d bwd"))
    for word in ("ceil_mode", "non-contiguous", "NDHWC", "nearest", "reflection", "border", "int64 indices"):
        assert any(word in n for n in names), word
    assert 20 <= len(names) <= 40


def test_selftest_quick_runs_a_subset_with_each_operator():
    code, out = _selftest("--backend", "numpy", "--quick")
    assert code == 0, out
    rows = [line for line in out.splitlines() if line.endswith("PASS")]
    assert 4 <= len(rows) < len(selftest.cases())
    for op in ("max_pool3d fwd", "max_pool3d bwd", "grid_sampler3d fwd", "grid_sampler3d bwd"):
        assert any(r.startswith(op) for r in rows), op


def test_selftest_fails_and_exits_nonzero_when_a_result_is_off_by_more_than_the_tolerance(monkeypatch):
    real = selftest.reference_grid_sampler3d

    def off_by_1e_4(*args, **kwargs):
        ref = real(*args, **kwargs)
        return ref + np.float32(1e-4) * np.max(np.abs(ref))  # 10x the fp32 tolerance

    monkeypatch.setattr(selftest, "reference_grid_sampler3d", off_by_1e_4)
    code, out = _selftest("--backend", "numpy", "-k", "grid_sampler3d fwd bilinear zeros")
    assert code == 1
    row = next(line for line in out.splitlines() if line.startswith("grid_sampler3d fwd bilinear zeros "))
    assert row.endswith("FAIL")
    error = float(row.split()[-4])
    assert 0.9e-4 < error < 1.1e-4  # the reported worst error is the injected one
    assert " 1 failed" in out  # the bf16 case with the same name prefix tolerates 1e-4


def test_selftest_counts_index_mismatches_of_the_max_pool_forward(monkeypatch):
    real = selftest.reference_max_pool3d_with_argmax

    def first_index_wrong(*args, **kwargs):
        out, indices = real(*args, **kwargs)
        indices = indices.copy()
        indices.flat[0] += 1
        return out, indices

    monkeypatch.setattr(selftest, "reference_max_pool3d_with_argmax", first_index_wrong)
    code, out = _selftest("--backend", "numpy", "-k", "max_pool3d fwd k2 s2")
    assert code == 1
    row = next(line for line in out.splitlines() if line.startswith("max_pool3d fwd k2 s2"))
    assert row.split()[-2:] == ["1", "FAIL"]


def test_selftest_reports_a_raising_case_as_error(monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("reference exploded")

    monkeypatch.setattr(selftest, "reference_max_pool3d_with_argmax_backward", broken)
    code, out = _selftest("--backend", "numpy", "-k", "max_pool3d bwd")
    assert code == 1
    assert out.count("ERROR") == sum(c.name.startswith("max_pool3d bwd") for c in selftest.cases())
    assert "ValueError: reference exploded" in out


def test_selftest_with_no_matching_case_fails():
    code, out = _selftest("--backend", "numpy", "-k", "no such case")
    assert code == 1 and "no case matches" in out


def test_selftest_passes_on_npu_over_the_emulator(emulator_home):
    proc = _pyaclnn("selftest", env=_env(ASCEND_HOME_PATH=str(emulator_home), PYACLNN_BACKEND="npu"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "backend 'npu' (PYACLNN_BACKEND=npu)" in proc.stdout
    assert f"{len(selftest.cases())} passed, 0 failed" in proc.stdout


def test_selftest_exits_nonzero_when_the_npu_backend_cannot_load(tmp_path):
    env = _env(PYACLNN_ASCEND_HOME=str(tmp_path / "no-cann"))
    if discover(env).chosen is not None:
        pytest.skip("a CANN install exists at a default location of this machine")
    proc = _pyaclnn("selftest", "--backend", "npu", env=env)
    assert proc.returncode == 1
    assert "backend 'npu' is not usable" in proc.stdout


# -- bench and the entry point ----------------------------------------------------------


def test_bench_runs_each_script_and_returns_the_first_failure(tmp_path, monkeypatch, capfd):
    (tmp_path / "bench_kernels.py").write_text("print('kernels ran')\n")
    (tmp_path / "bench_overhead.py").write_text(
        "import sys\nprint('overhead ran', sys.argv[1:])\nsys.exit(3)\n")
    monkeypatch.setattr(cli, "_have_torch", lambda: True)
    assert cli.bench(["--quick"], directory=tmp_path) == 3
    out, err = capfd.readouterr()
    assert "kernels ran" in out and "overhead ran ['--quick']" in out
    assert "bench_overhead.py exited with 3" in err


def test_bench_says_what_is_missing(tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(cli, "_have_torch", lambda: True)
    assert cli.bench(directory=tmp_path) == 2
    assert f"{tmp_path / 'bench_kernels.py'} is missing" in capfd.readouterr().err
    monkeypatch.setattr(cli, "_have_torch", lambda: False)
    assert cli.bench(directory=tmp_path) == 2
    assert "PyTorch CPU, which is not installed" in capfd.readouterr().err


def test_main_without_a_command_prints_help_and_returns_2(capsys):
    assert cli.main([]) == 2
    assert "{info,selftest,bench}" in capsys.readouterr().out

