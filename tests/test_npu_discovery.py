"""The npu backend's library search and its cffi declarations (nothing is dlopen'ed
here except in the subprocess tests, which open fake libraries that must fail)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pyaclnn import _decl, constants, dtypes, errors
from pyaclnn.backends.npu import discover
from pyaclnn.backends.npu._discovery import DEFAULT_HOMES, ENV_VARS, HOW_TO_FIX

CLASSIC = ("libascendcl.so", "libnnopbase.so", "libopapi.so")
SPLIT = ("libacl_rt.so", "libnnopbase.so", "libopapi_nn.so", "libopapi_cv.so")


def make_home(root: Path, name: str, libs: tuple[str, ...]) -> Path:
    """A fake CANN home whose lib64 holds empty files with the given names."""
    lib64 = root / name / "lib64"
    lib64.mkdir(parents=True)
    for lib in libs:
        (lib64 / lib).write_bytes(b"")
    return root / name


def env(tmp_path: Path, **vars: Path | str) -> dict[str, str]:
    # HOME points at an empty directory so that ~/Ascend/... never matches this machine.
    return {"HOME": str(tmp_path / "no-home"), **{k: str(v) for k, v in vars.items()}}


def test_environment_variables_are_searched_in_priority_order_before_the_defaults(tmp_path):
    homes = {var: make_home(tmp_path, var.lower(), CLASSIC) for var in ENV_VARS}
    found = discover(env(tmp_path, **homes))
    sources = [c.source for c in found.candidates]
    assert sources[: len(ENV_VARS)] == list(ENV_VARS)
    assert sources[len(ENV_VARS) :] == ["default location"] * len(DEFAULT_HOMES)
    assert found.chosen.home == homes["PYACLNN_ASCEND_HOME"]


@pytest.mark.parametrize("winner", ENV_VARS)
def test_each_variable_alone_finds_its_home(tmp_path, winner):
    home = make_home(tmp_path, "cann", CLASSIC)
    found = discover(env(tmp_path, **{winner: home}))
    assert found.chosen.home == home
    assert found.chosen.source == winner


def test_an_incomplete_home_is_skipped_for_the_next_complete_one(tmp_path):
    broken = make_home(tmp_path, "broken", ("libascendcl.so", "libopapi.so"))
    good = make_home(tmp_path, "good", SPLIT)
    found = discover(env(tmp_path, PYACLNN_ASCEND_HOME=broken, ASCEND_TOOLKIT_HOME=good))
    assert found.candidates[0].missing == ("no libnnopbase.so",)
    assert found.chosen.home == good and found.chosen.source == "ASCEND_TOOLKIT_HOME"


def test_default_locations_under_the_user_home_are_searched(tmp_path):
    user = tmp_path / "user"
    home = make_home(user / "Ascend" / "ascend-toolkit", "latest", CLASSIC)
    found = discover({"HOME": str(user)})
    assert found.chosen.home == home
    assert found.chosen.source == "default location"


def test_a_home_named_twice_is_searched_once(tmp_path):
    home = make_home(tmp_path, "cann", CLASSIC)
    found = discover(env(tmp_path, ASCEND_HOME_PATH=home, ASCEND_TOOLKIT_HOME=str(home) + "/"))
    assert [c.source for c in found.candidates].count("ASCEND_TOOLKIT_HOME") == 0


def test_classic_layout_loads_runtime_then_nnopbase_then_libopapi(tmp_path):
    home = make_home(tmp_path, "cann", CLASSIC)
    chosen = discover(env(tmp_path, PYACLNN_ASCEND_HOME=home)).chosen
    assert [p.name for p in chosen.libraries] == ["libascendcl.so", "libnnopbase.so", "libopapi.so"]


def test_split_layout_loads_acl_rt_then_nnopbase_then_both_operator_libraries(tmp_path):
    home = make_home(tmp_path, "cann", SPLIT)
    chosen = discover(env(tmp_path, PYACLNN_ASCEND_HOME=home)).chosen
    assert [p.name for p in chosen.libraries] == [
        "libacl_rt.so",
        "libnnopbase.so",
        "libopapi_nn.so",
        "libopapi_cv.so",
    ]


def test_split_operator_libraries_win_over_libopapi_and_bring_acl_rt_with_them(tmp_path):
    home = make_home(tmp_path, "cann", SPLIT + CLASSIC)
    chosen = discover(env(tmp_path, PYACLNN_ASCEND_HOME=home)).chosen
    assert [p.name for p in chosen.libraries] == [
        "libacl_rt.so",
        "libnnopbase.so",
        "libopapi_nn.so",
        "libopapi_cv.so",
    ]


def test_classic_layout_prefers_ascendcl_and_falls_back_to_acl_rt(tmp_path):
    both = make_home(tmp_path, "both", CLASSIC + ("libacl_rt.so",))
    assert discover(env(tmp_path, PYACLNN_ASCEND_HOME=both)).chosen.runtime.name == "libascendcl.so"
    rt_only = make_home(tmp_path, "rt", ("libacl_rt.so", "libnnopbase.so", "libopapi.so"))
    assert discover(env(tmp_path, PYACLNN_ASCEND_HOME=rt_only)).chosen.runtime.name == "libacl_rt.so"


def test_libmsprofiler_is_optional_and_kept_apart_from_the_required_libraries(tmp_path):
    with_profiler = make_home(tmp_path, "with", CLASSIC + ("libmsprofiler.so",))
    chosen = discover(env(tmp_path, PYACLNN_ASCEND_HOME=with_profiler)).chosen
    assert [p.name for p in chosen.optional] == ["libmsprofiler.so"]
    assert [p.name for p in chosen.libraries] == list(CLASSIC)
    without = discover(env(tmp_path, PYACLNN_ASCEND_HOME=make_home(tmp_path, "without", CLASSIC))).chosen
    assert without.ok and without.optional == ()


def test_one_split_operator_library_is_enough(tmp_path):
    home = make_home(tmp_path, "cann", ("libacl_rt.so", "libnnopbase.so", "libopapi_nn.so"))
    chosen = discover(env(tmp_path, PYACLNN_ASCEND_HOME=home)).chosen
    assert [p.name for p in chosen.op_libs] == ["libopapi_nn.so"]


def test_the_not_found_error_lists_every_place_and_what_each_lacked(tmp_path):
    no_runtime = make_home(tmp_path, "a", ("libnnopbase.so", "libopapi.so"))
    no_ops = make_home(tmp_path, "b", ("libacl_rt.so", "libnnopbase.so"))
    no_lib64 = tmp_path / "c"
    no_lib64.mkdir()
    found = discover(
        env(tmp_path, PYACLNN_ASCEND_HOME=no_runtime, ASCEND_HOME_PATH=no_ops, ASCEND_TOOLKIT_HOME=no_lib64)
    )
    assert found.chosen is None
    error = found.not_found_error()
    assert isinstance(error, ImportError) and error.discovery is found
    text = str(error)
    assert f"{no_runtime}/lib64 (from PYACLNN_ASCEND_HOME): no libascendcl.so or libacl_rt.so" in text
    assert f"{no_ops}/lib64 (from ASCEND_HOME_PATH): no operator library" in text
    assert f"{no_lib64}/lib64 (from ASCEND_TOOLKIT_HOME): no lib64 directory" in text
    for default in DEFAULT_HOMES:
        where = default.replace("~", str(tmp_path / "no-home"))
        assert f"{where}/lib64 (from default location): does not exist" in text
    assert "set_env.sh" in text and "PYACLNN_ASCEND_HOME" in text and HOW_TO_FIX in text


def run_python(code: str, environ: dict[str, str]) -> subprocess.CompletedProcess:
    # Library loading is process-global: anything that dlopens runs in a child.
    child_env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    child_env.update(environ)
    return subprocess.run(
        [sys.executable, "-c", code], env=child_env, capture_output=True, text=True, timeout=120, check=False
    )


def test_constructing_the_backend_without_cann_raises_library_not_found(tmp_path):
    code = (
        "from pyaclnn.backends.npu import NpuBackend, LibraryNotFoundError\n"
        "try:\n    NpuBackend()\nexcept LibraryNotFoundError as e:\n    print('RAISED', e)\n"
    )
    done = run_python(code, env(tmp_path, PYACLNN_ASCEND_HOME=tmp_path / "nothing"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("RAISED CANN's shared libraries were not found")
    assert f"{tmp_path / 'nothing'}/lib64 (from PYACLNN_ASCEND_HOME): does not exist" in done.stdout


def test_a_library_that_fails_to_open_is_named_and_probe_reports_it(tmp_path):
    home = make_home(tmp_path, "cann", CLASSIC)  # empty files: dlopen fails
    code = "from pyaclnn.backends.npu import probe\nr = probe()\nprint(r.ok)\nprint(r.reason)\n"
    done = run_python(code, env(tmp_path, PYACLNN_ASCEND_HOME=home))
    assert done.returncode == 0, done.stderr
    ok, reason = done.stdout.split("\n", 1)
    assert ok == "False"
    assert f"CANN was found in {home}/lib64 (from PYACLNN_ASCEND_HOME) but libascendcl.so could not" in reason


def test_probe_never_raises_when_nothing_is_found(tmp_path, monkeypatch):
    from pyaclnn.backends.npu import _loading, _probe

    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(_loading, "_loaded", None)
    result = _probe.probe(env(tmp_path))
    assert result.ok is False and result.device_count is None and result.libraries == ()
    assert "were not found" in result.reason


def test_importing_the_package_neither_parses_declarations_nor_opens_libraries():
    code = (
        "import sys, pyaclnn.backends.npu\n"
        "print('pyaclnn.backends.npu._ffi' in sys.modules, 'cffi' in sys.modules)\n"
    )
    done = run_python(code, {})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


# -- the declarations as cffi parsed them --------------------------------------


def test_status_names_agree_with_what_cffi_parsed():
    from pyaclnn.backends.npu._ffi import integer_constants

    parsed = integer_constants()
    codes = _decl.status_codes()
    assert codes, "acl_status.h declares no status"
    for name, value in codes.items():
        assert parsed[name] == value, name
    # every name errors.py reports is a code cffi parsed under that name
    for name in ("ACLNN_ERR_PARAM_INVALID", "ACL_ERROR_RT_MEMORY_ALLOCATION", "ACL_ERROR_API_NOT_SUPPORT"):
        assert errors.status_name(parsed[name]) == name
    # errors keeps its old attributes as re-exports of pyaclnn.constants
    assert errors.ACLNN_ERR_PARAM_INVALID is constants.ACLNN_ERR_PARAM_INVALID
    assert constants.ACLNN_ERR_PARAM_INVALID == parsed["ACLNN_ERR_PARAM_INVALID"]


def test_dtype_and_format_values_agree_with_what_cffi_parsed():
    from pyaclnn.backends.npu._ffi import ffi

    assert ffi.typeof("aclDataType").relements == dtypes.DATA_TYPES
    assert ffi.typeof("aclFormat").relements == dtypes.FORMATS
    assert ffi.typeof("aclDataType").relements["ACL_BF16"] == dtypes.ACL_BF16 == 27
    for enum, members in _decl.enums().items():
        assert ffi.typeof(enum).relements == members, enum


def test_every_backend_method_has_a_declared_c_function():
    from pyaclnn.backends._interface import Backend
    from pyaclnn.backends.npu._backend import NpuBackend
    from pyaclnn.backends.npu._ffi import function_names, parameter_names

    declared = set(function_names())
    wanted = {n for n in vars(Backend) if n.startswith("acl")}
    # 36, the 8 event functions, aclrtHostRegister and aclrtHostUnregister, the 6 aclmdlRI*
    # stream-capture functions (acl_mdl.h of CANN 8.1.RC1), the 6 aclprof* profiler functions and
    # the 8 of scalars, float arrays, tensor lists and scalar lists (pyaclnn.ops' arguments), and
    # aclrtStreamQuery, aclrtCreateStreamWithConfig and aclrtSetStreamFailureMode; then the two
    # phases of each operator of the table
    from pyaclnn import _optable

    assert len(wanted) == 69 + 2 * len(_optable.operators())
    assert wanted <= declared
    assert wanted <= set(vars(NpuBackend))
    assert parameter_names()["aclrtMemcpy"] == ("dst", "destMax", "src", "count", "kind")
    assert set(parameter_names()) == declared
