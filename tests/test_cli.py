"""The command line: python -m pyaclnn info | selftest | bench."""

from __future__ import annotations

import importlib.metadata
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pyaclnn
from pyaclnn import __main__ as cli
from pyaclnn import _optable, selftest
from pyaclnn.backends.npu import discover

ROOT = Path(__file__).resolve().parent.parent
CANN_VARS = ("PYACLNN_ASCEND_HOME", "ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "PYACLNN_BACKEND")


def _env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CANN_VARS}
    env.update(values)
    return env


def _pyaclnn(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pyaclnn", *args], env=env, capture_output=True, text=True, timeout=120
    )


def _python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``python -c code`` in a fresh interpreter."""
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


# -- info ---------------------------------------------------------------------------


def test_info_without_cann_names_the_numpy_backend_and_why_npu_is_unusable():
    env = _env(PYACLNN_BACKEND="numpy")
    proc = _pyaclnn("info", env=env)
    assert proc.returncode == 0, proc.stderr
    assert f"pyaclnn {pyaclnn.__version__}" in proc.stdout
    assert "active backend: numpy (PYACLNN_BACKEND=numpy)" in proc.stdout
    assert "device 0 emulated device memory:" in proc.stdout and "GiB free of" in proc.stdout
    assert "compiled kernels: " in proc.stdout
    if discover(env).chosen is None:  # no CANN installed at a default location of this machine
        assert "NOT usable: CANN's shared libraries were not found" in proc.stdout
        assert "PYACLNN_ASCEND_HOME" in proc.stdout  # the hint how to fix it


def test_info_with_npu_forced_but_absent_says_so_and_exits_1(tmp_path):
    env = _env(PYACLNN_BACKEND="npu", PYACLNN_ASCEND_HOME=str(tmp_path / "no-cann"))
    if discover(env).chosen is not None:
        pytest.skip("a CANN install exists at a default location of this machine")
    proc = _pyaclnn("info", env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (
        "active backend: npu (PYACLNN_BACKEND=npu) is NOT usable: every operator call will raise"
        in proc.stdout
    )
    assert str(tmp_path / "no-cann" / "lib64") in proc.stdout  # the search report names the place tried
    report = json.loads(_pyaclnn("info", "--json", env=env).stdout)
    assert report["usable"] is False and report["backends"]["npu"]["usable"] is False
    assert report["requested_backend"] == "npu" and "not usable" in report["problem"]
    assert str(tmp_path / "no-cann" / "lib64") in report["backends"]["npu"]["search"]


def test_info_with_a_bogus_backend_name_exits_1_and_names_it():
    proc = _pyaclnn("info", env=_env(PYACLNN_BACKEND="bogus"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "active backend: none: the backend cannot be selected" in proc.stdout
    assert "'bogus'" in proc.stdout
    json_proc = _pyaclnn("info", "--json", env=_env(PYACLNN_BACKEND="bogus"))
    assert json_proc.returncode == 1
    report = json.loads(json_proc.stdout)
    assert report["usable"] is False and report["active_backend"] is None
    assert report["requested_backend"] == "bogus" and "'bogus'" in report["problem"]


def test_info_json_describes_both_backends():
    proc = _pyaclnn("info", "--json", env=_env(PYACLNN_BACKEND="numpy"))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["pyaclnn"] == pyaclnn.__version__ and report["numpy_version"] == np.__version__
    assert (report["active_backend"], report["selection_reason"]) == ("numpy", "PYACLNN_BACKEND=numpy")
    assert report["usable"] is True and report["problem"] is None
    assert report["backends"]["numpy"]["soc"].startswith("Ascend910B")
    npu_keys = {"usable", "reason", "home", "libraries", "search", "device_count", "soc"}
    assert set(report["backends"]["npu"]) >= npu_keys


def test_info_over_the_emulator_reports_home_libraries_soc_and_memory(emulator_home):
    proc = _pyaclnn("info", env=_env(ASCEND_HOME_PATH=str(emulator_home)))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "active backend: npu (auto: CANN loaded from" in out
    assert "NOT usable" not in out
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
    for spec in _optable.operators():
        dtypes = {str(c.dtype) for c in selftest.cases() if c.operator == spec.python_name}
        assert {"float32", "float16", "bfloat16"} <= dtypes, spec.name
    assert any("float64" == str(c.dtype) for c in selftest.cases() if c.name.startswith("grid_sampler3d bwd"))
    for word in ("ceil_mode", "non-contiguous", "NDHWC", "nearest", "reflection", "border", "int64 indices"):
        assert any(word in n for n in names), word
    assert 20 <= len(names) <= 40


def test_selftest_quick_runs_a_subset_with_each_operator():
    code, out = _selftest("--backend", "numpy", "--quick")
    assert code == 0, out
    rows = [line for line in out.splitlines() if line.endswith("PASS")]
    assert 4 <= len(rows) < len(selftest.cases())
    for kind in {c.kind for c in selftest.cases()}:  # one per operator of the table
        assert any(r.startswith(kind) for r in rows), kind


def test_selftest_fails_and_exits_nonzero_when_a_result_is_off_by_more_than_the_tolerance(monkeypatch):
    real = selftest.reference_grid_sampler3d

    def off_by_1e_4(*args, **kwargs):
        ref = real(*args, **kwargs)
        return (ref + np.float32(1e-4) * np.max(np.abs(ref))).astype(ref.dtype)  # 10x the fp32 tolerance

    monkeypatch.setattr(selftest.grid_sampler3d, "reference_grid_sampler3d", off_by_1e_4)
    code, out = _selftest("--backend", "numpy", "-k", "grid_sampler3d fwd bilinear zeros")
    assert code == 1
    row = next(line for line in out.splitlines() if line.startswith("grid_sampler3d fwd bilinear zeros "))
    assert row.endswith("FAIL")
    error, golden_error = float(row.split()[-5]), float(row.split()[-4])
    assert 0.9e-4 < error < 1.1e-4  # the reported worst error is the injected one
    assert golden_error < 1e-5  # PyTorch's golden outputs still agree with the device
    assert " 1 failed" in out  # the bf16 case with the same name prefix tolerates 1e-4


def test_selftest_counts_index_mismatches_of_the_max_pool_forward(monkeypatch):
    real = selftest.reference_max_pool3d_with_argmax

    def first_index_wrong(*args, **kwargs):
        out, indices = real(*args, **kwargs)
        indices = indices.copy()
        indices.flat[0] += 1
        return out, indices

    monkeypatch.setattr(selftest.max_pool3d, "reference_max_pool3d_with_argmax", first_index_wrong)
    code, out = _selftest("--backend", "numpy", "-k", "max_pool3d fwd k2 s2")
    assert code == 1
    row = next(line for line in out.splitlines() if line.startswith("max_pool3d fwd k2 s2"))
    assert row.split()[-2:] == ["1", "FAIL"]


def test_selftest_reports_a_raising_case_as_error(monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("reference exploded")

    monkeypatch.setattr(selftest.max_pool3d, "reference_max_pool3d_with_argmax_backward", broken)
    code, out = _selftest("--backend", "numpy", "-k", "max_pool3d bwd")
    assert code == 1
    assert out.count("ERROR") == sum(c.name.startswith("max_pool3d bwd") for c in selftest.cases())
    assert "ValueError: reference exploded" in out


def test_selftest_json_gives_every_case_with_errors_tolerance_and_counts():
    out = io.StringIO()
    assert selftest.run("numpy", out=out, as_json=True) == 0
    report = json.loads(out.getvalue())  # strict JSON: no NaN or Infinity
    n = len(selftest.cases())
    assert (report["backend"], report["passed"], report["failed"]) == ("numpy", n, 0)
    assert [c["name"] for c in report["cases"]] == [c.name for c in selftest.cases()]
    for case, entry in zip(selftest.cases(), report["cases"]):
        assert entry["tolerance"] == case.tolerance and entry["dtype"] == case.dtype.name
        assert entry["passed"] is True and entry["result"] == "PASS"
        for against in ("reference", "golden"):
            assert 0 <= entry[against]["error"] <= case.tolerance, (case.name, against)
            assert entry[against]["notes"] == []


def test_selftest_json_counts_a_failure_and_maps_an_infinite_error_to_null(monkeypatch):
    # None: "masked out", an infinite error
    monkeypatch.setattr(selftest.grid_sampler3d, "reference_grid_sampler3d", lambda *a, **k: None)
    out = io.StringIO()
    assert selftest.run("numpy", pattern="grid_sampler3d fwd bilinear zeros", out=out, as_json=True) == 1
    report = json.loads(out.getvalue())
    assert report["failed"] == 2 and report["passed"] == 0
    for entry in report["cases"]:
        assert entry["result"] == "FAIL" and entry["reference"]["error"] is None  # inf -> null
        assert "expected None (masked out)" in entry["reference"]["notes"][0]
        assert entry["golden"]["error"] <= entry["tolerance"]


def test_selftest_against_the_golden_outputs_catches_a_kernel_the_reference_shares(monkeypatch):
    """On the numpy backend the device *is* the reference kernels: only PyTorch's outputs see this bug."""
    from pyaclnn.backends.numpy._kernels import _grid_sampler as device_kernels
    from pyaclnn.kernels import grid_sampler3d as kernels

    real = kernels.grid_sampler3d

    def off_by_1e_3(*args, **kwargs):
        real(*args, **kwargs)
        out = args[-1]
        out *= out.dtype.type(1.001)

    # A plan an earlier test cached (the quick selftest runs this case too) keeps the kernel it was
    # bound with: start from nothing, so that every executor is bound with the patched kernel.
    pyaclnn.finalize("numpy")
    monkeypatch.setattr(kernels, "grid_sampler3d", off_by_1e_3)
    # The backend's device runs the reference too (it would choose a faster kernel), so the
    # bug is in both the device and the reference selftest compares it to.
    monkeypatch.setattr(
        device_kernels,
        "grid_sampler3d",
        lambda plan, x, grid, out: kernels.grid_sampler3d(x, grid, *device_kernels._modes(plan), out),
    )
    code, out = _selftest("--backend", "numpy", "-k", "grid_sampler3d fwd bilinear zeros")
    assert code == 1
    row = next(line for line in out.splitlines() if line.startswith("grid_sampler3d fwd bilinear zeros "))
    error, golden_error = float(row.split()[-5]), float(row.split()[-4])
    assert error == 0 and 0.9e-3 < golden_error < 1.1e-3
    assert row.endswith("FAIL")


def test_the_golden_outputs_cover_every_case_and_ship_with_the_package():
    from importlib import resources

    assert resources.files("pyaclnn").joinpath(selftest.GOLDEN_FILE).is_file()
    table = selftest.golden()
    for case in selftest.cases():
        assert int(table[f"{case.name}::inputs"]) == selftest.inputs_digest(case.inputs()), case.name


def test_selftest_tells_changed_inputs_and_a_missing_golden_file_apart(monkeypatch):
    table = dict(selftest.golden())
    name = "max_pool3d fwd k2 s2"
    table[f"{name}::inputs"] = np.array(0, np.uint32)
    monkeypatch.setattr(selftest.goldens, "golden", lambda: table)
    code, out = _selftest("--backend", "numpy", "-k", name)
    assert code == 1 and "made from other inputs; regenerate it with scripts/make_selftest_golden.py" in out
    monkeypatch.setattr(selftest.goldens, "golden", lambda: None)
    code, out = _selftest("--backend", "numpy", "-k", name)
    assert code == 1 and "selftest_golden.npz) are missing" in out


def test_the_shipped_golden_outputs_are_what_pytorch_computes(torch):
    script = ROOT / "scripts" / "make_selftest_golden.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(PYTHONPATH=str(ROOT)),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "up to date" in proc.stdout


def test_selftest_header_is_one_line_and_leaves_the_library_search_to_info(tmp_path):
    env = _env(PYACLNN_ASCEND_HOME=str(tmp_path / "no-cann"))
    if discover(env).chosen is not None:
        pytest.skip("a CANN install exists at a default location of this machine")
    proc = _pyaclnn("selftest", "--quick", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    header, table_header = proc.stdout.splitlines()[:2]
    assert header.startswith("pyaclnn selftest on backend 'numpy' (auto: npu not usable")
    assert "`python -m pyaclnn info` shows where it looked" in header
    assert table_header.startswith("case ")
    assert str(tmp_path / "no-cann") not in proc.stdout
    assert str(tmp_path / "no-cann") in _pyaclnn("info", env=env).stdout


def test_python_m_pyaclnn_selftest_prints_what_python_m_pyaclnn_selftest_prints():
    env = _env(PYACLNN_BACKEND="numpy")
    as_command = _pyaclnn("selftest", "--quick", env=env)
    as_package = subprocess.run(
        [sys.executable, "-m", "pyaclnn.selftest", "--quick"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert as_package.returncode == as_command.returncode == 0, as_package.stdout + as_package.stderr
    # every line but the summary's seconds
    assert as_package.stdout.splitlines()[:-1] == as_command.stdout.splitlines()[:-1]


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
    proc = _pyaclnn("selftest", "--backend", "npu", "--json", env=env)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["usable"] is False and report["cases"] == []
    assert "backend 'npu' is not usable" in report["problem"]


# -- bench and the entry point ----------------------------------------------------------


def test_bench_runs_each_script_and_returns_the_first_failure(tmp_path, monkeypatch, capfd):
    (tmp_path / "bench_kernels.py").write_text("print('kernels ran')\n")
    (tmp_path / "bench_overhead.py").write_text(
        "import sys\nprint('overhead ran', sys.argv[1:])\nsys.exit(3)\n"
    )
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


def _fake_benchmarks(directory: Path, missed: str | None = None) -> None:
    """Scripts that write ``--json PATH`` and exit 1 with ``--strict`` when ``missed`` is their name."""
    for script in cli.BENCHMARKS:
        code = 1 if script == missed else 0
        directory.joinpath(script).write_text(
            "import json, sys\n"
            "args = sys.argv[1:]\n"
            "if '--json' in args:\n"
            "    path = args[args.index('--json') + 1]\n"
            f"    json.dump({{'script': {script!r}, 'args': args}}, open(path, 'w'))\n"
            f"sys.exit({code} if '--strict' in args else 0)\n"
        )


def test_bench_json_dir_gets_one_file_per_benchmark(tmp_path, monkeypatch):
    _fake_benchmarks(tmp_path)
    monkeypatch.setattr(cli, "_have_torch", lambda: True)
    out_dir = tmp_path / "results" / "new"
    assert cli.bench(["--quick", "--json", str(out_dir)], directory=tmp_path) == 0
    files = sorted(p.name for p in out_dir.iterdir())
    assert files == ["bench_kernels.json", "bench_overhead.json", "bench_pipeline.json"]
    for name in files:
        payload = json.loads((out_dir / name).read_text())
        assert payload["script"] == name.replace(".json", ".py")
        assert payload["args"][0] == "--quick"  # the other options still reach the script


def test_bench_strict_exits_nonzero_on_a_missed_target(tmp_path, monkeypatch):
    _fake_benchmarks(tmp_path, missed="bench_overhead.py")
    monkeypatch.setattr(cli, "_have_torch", lambda: True)
    assert cli.bench([], directory=tmp_path) == 0  # without --strict a miss is only reported
    assert cli.bench(["--strict"], directory=tmp_path) == 1


def test_bench_fails_when_a_script_writes_no_json(tmp_path, monkeypatch, capfd):
    for script in cli.BENCHMARKS:
        (tmp_path / script).write_text("pass\n")
    monkeypatch.setattr(cli, "_have_torch", lambda: True)
    assert cli.bench(["--json", str(tmp_path / "out")], directory=tmp_path) == 1
    assert "wrote no" in capfd.readouterr().err


def test_version_is_the_package_metadata_version():
    proc = _pyaclnn("--version", env=_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"pyaclnn {pyaclnn.__version__}"
    assert importlib.metadata.version("pyaclnn") == pyaclnn.__version__


def test_importing_pyaclnn_does_not_load_ml_dtypes_cffi_or_torch():
    code = "import pyaclnn, sys; print([m in sys.modules for m in ('ml_dtypes', 'cffi', 'torch')])"
    proc = _python(code, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[False, False, False]"


def test_bfloat16_is_still_there_and_loads_ml_dtypes_on_first_use():
    code = (
        "import sys, numpy as np, pyaclnn; before = 'ml_dtypes' in sys.modules; "
        "import ml_dtypes; print(before, pyaclnn.bfloat16 is ml_dtypes.bfloat16)"
    )
    proc = _python(code, env=_env())
    assert proc.stdout.split() == ["False", "True"], proc.stderr
    assert "bfloat16" in pyaclnn.__all__ and np.dtype(pyaclnn.bfloat16).itemsize == 2


def test_float32_work_does_not_load_ml_dtypes_and_the_name_bfloat16_still_resolves():
    code = (
        "import sys, numpy as np, pyaclnn; from pyaclnn import dtypes; "
        "pyaclnn.max_pool3d_with_argmax(np.ones((1, 1, 4, 4, 4), np.float32), 2, backend='numpy'); "
        "before = 'ml_dtypes' in sys.modules; "
        "print(before, dtypes.from_numpy('bfloat16') == dtypes.ACL_BF16, "
        "dtypes.as_dtype('bfloat16').itemsize)"
    )
    proc = _python(code, env=_env())
    assert proc.stdout.split() == ["False", "True", "2"], proc.stderr


def test_info_does_not_load_ml_dtypes():
    code = (
        "import sys, io, pyaclnn.__main__ as cli; cli.info(out=io.StringIO()); "
        "print('ml_dtypes' in sys.modules)"
    )
    proc = _python(code, env=_env(PYACLNN_BACKEND="numpy"))
    assert proc.stdout.strip() == "False", proc.stderr


def test_main_without_a_command_prints_help_and_returns_2(capsys):
    assert cli.main([]) == 2
    assert "{info,ops,selftest,bench}" in capsys.readouterr().out
