"""Backend selection, the determinism switch and the error classes."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import pyaclnn
from pyaclnn import AclError, AclnnError, AclOutOfMemoryError, acl, backends, constants, errors


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PYACLNN_", "ASCEND_"))}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=120
    )


def test_pyaclnn_backend_env_var_picks_numpy():
    result = run_python(
        "import pyaclnn, pyaclnn.backends as b; print(pyaclnn.get_backend(), b.selection_reason())",
        PYACLNN_BACKEND="numpy",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "numpy" and "PYACLNN_BACKEND=numpy" in result.stdout


def test_auto_falls_back_to_numpy_and_says_why_when_cann_is_absent(tmp_path):
    result = run_python(
        "import pyaclnn, pyaclnn.backends as b; print(pyaclnn.get_backend()); print(b.selection_reason())",
        PYACLNN_BACKEND="auto",
        HOME=str(tmp_path),
        PYACLNN_ASCEND_HOME=str(tmp_path / "none"),
    )
    assert result.returncode == 0, result.stderr
    name, reason = result.stdout.splitlines()[:2]
    assert name == "numpy"
    assert "npu not usable" in reason and "set_env.sh" in result.stdout


def test_auto_picks_npu_when_the_libraries_load_and_a_device_exists(emulator_home):
    result = run_python(
        "import pyaclnn, pyaclnn.backends as b; print(pyaclnn.get_backend()); print(b.selection_reason())",
        PYACLNN_BACKEND="auto",
        ASCEND_HOME_PATH=str(emulator_home),
    )
    assert result.returncode == 0, result.stderr
    name, reason = result.stdout.splitlines()[:2]
    assert name == "npu" and str(emulator_home) in reason and "1 device" in reason


def test_an_unknown_backend_name_is_a_value_error():
    result = run_python("import pyaclnn; pyaclnn.get_backend()", PYACLNN_BACKEND="gpu")
    assert result.returncode != 0 and "PYACLNN_BACKEND must be auto, npu or numpy" in result.stderr
    with pytest.raises(ValueError, match="backend must be one of"):
        pyaclnn.max_pool3d_with_argmax(np.ones((1, 1, 2, 2, 2), np.float32), 2, backend="gpu")


def test_npu_requested_without_cann_fails_clearly(tmp_path):
    result = run_python(
        "import pyaclnn; pyaclnn.set_backend('npu')",
        HOME=str(tmp_path),
        PYACLNN_ASCEND_HOME=str(tmp_path / "none"),
    )
    assert result.returncode != 0
    assert "LibraryNotFoundError" in result.stderr and str(tmp_path / "none") in result.stderr


def test_set_backend_switches_the_active_backend():
    before = pyaclnn.get_backend()
    try:
        pyaclnn.set_backend("numpy")
        assert pyaclnn.get_backend() == "numpy"
    finally:
        pyaclnn.set_backend(before)


def test_set_deterministic_sets_the_runtime_option(backend):
    pyaclnn.set_deterministic(True, backend=backend)
    assert acl.rt.ctx_get_sys_param_opt(0, backend=backend) == 1
    pyaclnn.set_deterministic(False, backend=backend)
    assert acl.rt.ctx_get_sys_param_opt(0, backend=backend) == 0


def test_errors_carry_status_name_and_api_and_survive_pickling(backend):
    with pytest.raises(AclnnError) as info:
        pyaclnn.max_pool3d_with_argmax(np.ones((1, 1, 2, 2, 2), np.float64), 2, backend=backend)
    exc = info.value
    assert isinstance(exc, AclError) and isinstance(exc, RuntimeError)
    assert (exc.status, exc.status_name) == (constants.ACLNN_ERR_PARAM_INVALID, "ACLNN_ERR_PARAM_INVALID")
    assert exc.api == "aclnnMaxPool3dWithArgmaxGetWorkspaceSize" and "self" in exc.message
    copy = pickle.loads(pickle.dumps(exc))
    assert type(copy) is AclnnError and str(copy) == str(exc)
    assert copy.status == constants.ACLNN_ERR_PARAM_INVALID


def test_runtime_errors_are_acl_errors_and_out_of_memory_is_a_memory_error(backend):
    acl.rt.set_device(0, backend=backend)  # the low-level API: aclrtMalloc needs a current device
    with pytest.raises(AclError) as info:
        acl.rt.free(0x1234, backend=backend)
    assert not isinstance(info.value, AclnnError) and info.value.api == "aclrtFree"
    assert info.value.status_name.startswith("ACL_ERROR")
    with pytest.raises(MemoryError) as info:
        acl.rt.malloc(1 << 60, backend=backend)
    assert isinstance(info.value, AclOutOfMemoryError) and info.value.api == "aclrtMalloc"


def test_status_names_cover_the_reference_codes():
    assert errors.status_name(constants.ACLNN_ERR_PARAM_NULLPTR) == "ACLNN_ERR_PARAM_NULLPTR"
    assert errors.status_name(constants.ACLNN_ERR_INNER_NULLPTR) == "ACLNN_ERR_INNER_NULLPTR"
    assert errors.status_name(constants.ACL_ERROR_REPEAT_INITIALIZE) == "ACL_ERROR_REPEAT_INITIALIZE"
    assert errors.status_name(constants.ACL_ERROR_RT_MEMORY_ALLOCATION) == "ACL_ERROR_RT_MEMORY_ALLOCATION"
    assert errors.status_name(0) == "ACL_SUCCESS"
    assert errors.status_name(123) == "UNKNOWN_STATUS"


def test_the_recent_error_message_is_read_once(backend):
    with pytest.raises(AclError) as info:
        acl.rt.free(0x1234, backend=backend)
    assert info.value.message  # the text came with the exception ...
    assert acl.get_recent_err_msg(backend=backend) == ""  # ... and reading it cleared it


def test_repeated_init_counts_as_success(backend):
    acl.init(backend=backend)
    acl.init(backend=backend)  # ACL_ERROR_REPEAT_INITIALIZE is not an error
    assert acl.get_recent_err_msg(backend=backend) == ""
    assert backends.get(backend).name == backend
