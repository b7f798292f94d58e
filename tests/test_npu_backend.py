"""The npu backend against the host emulator of CANN (tests/emulator).

dlopen'ed libraries are process-global, so this process loads only the classic
emulator home (shared by every in-process test); the split layout, a home with
an operator library missing and the probe of a fresh process run in children.
After every test the emulator's live counters must be back to zero.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pyaclnn import constants, dtypes, errors
from pyaclnn.backends.npu._discovery import ENV_VARS

emulator_build = pytest.importorskip(
    "emulator_build", reason="tests/emulator_build.py (the emulator's builder) is not in this checkout"
)

F32, I32 = dtypes.ACL_FLOAT, dtypes.ACL_INT32
H2D = 1  # ACL_MEMCPY_HOST_TO_DEVICE
D2H = 2  # ACL_MEMCPY_DEVICE_TO_HOST
ND = dtypes.ACL_FORMAT_ND


@pytest.fixture(scope="module")
def npu():
    import pyaclnn
    from pyaclnn.backends.npu import NpuBackend

    # The module counts the emulator's live objects, which include what pyaclnn's own npu context
    # holds (its default stream, cached blocks and descriptors) when an earlier test ran calls on
    # the default backend: free them, so the counts are this module's alone.
    pyaclnn.finalize("npu")
    home = emulator_build.emulator_home("classic")
    backend = NpuBackend({"PYACLNN_ASCEND_HOME": str(home)})
    assert backend.live_counts() is not None, f"npu backend not the emulator: {backend.home}"
    assert backend.aclInit(None) in (constants.ACL_SUCCESS, constants.ACL_ERROR_REPEAT_INITIALIZE)
    assert backend.aclrtSetDevice(0) == constants.ACL_SUCCESS
    yield backend


@pytest.fixture(autouse=True)
def no_leaks(request):
    yield
    if "npu" in request.fixturenames:
        counts = request.getfixturevalue("npu").live_counts()
        assert counts == dict.fromkeys(counts, 0), f"live objects left behind: {counts}"


@pytest.fixture
def stream(npu):
    status, handle = npu.aclrtCreateStream()
    assert status == 0 and handle is not None
    yield handle
    assert npu.aclrtDestroyStream(handle) == 0


def to_device(npu, array: np.ndarray) -> int:
    array = np.ascontiguousarray(array)
    status, ptr = npu.aclrtMalloc(max(array.nbytes, 1), 0)
    assert status == 0 and ptr != 0
    assert npu.aclrtMemcpy(ptr, array.nbytes, array, array.nbytes, H2D) == 0
    return ptr


def tensor(npu, ptr: int, shape, data_type: int):
    strides = [int(np.prod(shape[i + 1 :])) for i in range(len(shape))]
    handle = npu.aclCreateTensor(shape, data_type, strides, 0, ND, shape, ptr)
    assert handle is not None, npu.aclGetRecentErrMsg()
    return handle


# -- runtime -------------------------------------------------------------------


def test_host_to_device_and_back_round_trips_the_bytes(npu):
    data = np.arange(10, dtype=np.float32) * 1.5
    ptr = to_device(npu, data)
    back = np.zeros_like(data)
    assert npu.aclrtMemcpy(back, back.nbytes, ptr, data.nbytes, D2H) == 0
    assert npu.aclrtMemset(ptr, data.nbytes, 0, 8) == 0
    again = bytearray(data.nbytes)
    assert npu.aclrtMemcpy(again, len(again), ptr, data.nbytes, D2H) == 0
    assert npu.aclrtFree(ptr) == 0
    np.testing.assert_array_equal(back, data)
    np.testing.assert_array_equal(np.frombuffer(bytes(again), np.float32), np.r_[0, 0, data[2:]])


def test_pinned_host_memory_is_addressed_by_int(npu):
    status, host = npu.aclrtMallocHost(16)
    assert status == 0 and host != 0
    status, dev = npu.aclrtMalloc(16, 0)
    assert status == 0
    src = np.array([1, 2, 3, 4], np.int32)
    assert npu.aclrtMemcpy(dev, 16, src, 16, H2D) == 0
    assert npu.aclrtMemcpy(host, 16, dev, 16, D2H) == 0
    out = np.zeros(4, np.int32)
    assert npu.aclrtMemcpy(out, 16, host, 16, 0) == 0  # host to host
    assert npu.aclrtFree(dev) == 0 and npu.aclrtFreeHost(host) == 0
    np.testing.assert_array_equal(out, src)


def test_a_failed_allocation_returns_its_status_and_a_null_pointer(npu):
    status, ptr = npu.aclrtMalloc(1 << 62, 0)
    assert status != 0 and ptr == 0
    assert isinstance(errors.make_error(status), errors.AclOutOfMemoryError)
    assert npu.aclGetRecentErrMsg() != ""


def test_recent_error_message_is_copied_and_cleared_by_reading(npu):
    assert npu.aclrtFree(0x10) != 0  # not an allocation
    first = npu.aclGetRecentErrMsg()
    assert isinstance(first, str) and "aclrtFree" in first
    assert npu.aclGetRecentErrMsg() == ""


def test_device_queries_and_the_determinism_switch(npu):
    status, count = npu.aclrtGetDeviceCount()
    assert status == 0 and count >= 1
    assert npu.aclrtGetDevice() == (0, 0)
    assert npu.aclrtGetSocName().startswith("Ascend")
    assert npu.aclDataTypeSize(dtypes.ACL_FLOAT16) == 2 and npu.aclDataTypeSize(dtypes.ACL_DOUBLE) == 8
    status, free, total = npu.aclrtGetMemInfo(1)
    assert status == 0 and 0 < free <= total
    assert npu.aclrtCtxSetSysParamOpt(0, 1) == 0
    assert npu.aclrtCtxGetSysParamOpt(0) == (0, 1)
    assert npu.aclrtCtxSetSysParamOpt(0, 0) == 0
    assert npu.aclrtCtxGetSysParamOpt(0) == (0, 0)
    assert npu.aclrtSynchronizeDevice() == 0


def test_memset_and_memcpy_async_run_on_a_stream(npu, stream):
    status, ptr = npu.aclrtMalloc(8, 0)
    assert status == 0
    assert npu.aclrtMemsetAsync(ptr, 8, 0x7F, 8, stream) == 0
    out = np.zeros(8, np.uint8)
    assert npu.aclrtMemcpyAsync(out, 8, ptr, 8, D2H, stream) == 0
    assert npu.aclrtSynchronizeStream(stream) == 0
    assert npu.aclrtFree(ptr) == 0
    assert out.tolist() == [0x7F] * 8


# -- descriptors and the operators --------------------------------------------


def test_seed_example_of_max_pool_backward_through_the_raw_interface(npu, stream):
    grad_out = to_device(npu, np.array([0.4757], np.float32))
    x_host = np.array([0.0850, -0.5147, -0.0212, -0.5654, -0.3222, 0.5847, 1.7510, 0.9954], np.float32)
    x = to_device(npu, x_host)
    idx = to_device(npu, np.array([6], np.int32))
    grad_in = to_device(npu, np.zeros(8, np.float32))
    t_grad_out = tensor(npu, grad_out, [1, 1, 1, 1, 1], F32)
    t_x = tensor(npu, x, [1, 1, 2, 2, 2], F32)
    t_idx = tensor(npu, idx, [1, 1, 1, 1, 1], I32)
    t_grad_in = tensor(npu, grad_in, [1, 1, 2, 2, 2], F32)
    arrays = [npu.aclCreateIntArray(v) for v in ([2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1])]
    status, ws_size, executor = npu.aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize(
        t_grad_out, t_x, t_idx, *arrays, False, t_grad_in
    )
    assert status == 0, npu.aclGetRecentErrMsg()
    assert executor is not None
    ws = 0
    if ws_size:
        status, ws = npu.aclrtMalloc(ws_size, 0)
    assert npu.aclnnMaxPool3dWithArgmaxBackward(ws, ws_size, executor, stream) == 0
    assert npu.aclrtSynchronizeStream(stream) == 0
    result = np.zeros(8, np.float32)
    assert npu.aclrtMemcpy(result, result.nbytes, grad_in, result.nbytes, D2H) == 0
    for handle in (t_grad_out, t_x, t_idx, t_grad_in):
        assert npu.aclDestroyTensor(handle) == 0
    for array in arrays:
        assert npu.aclDestroyIntArray(array) == 0
    for ptr in (grad_out, x, idx, grad_in) + ((ws,) if ws else ()):
        assert npu.aclrtFree(ptr) == 0
    np.testing.assert_allclose(result, [0, 0, 0, 0, 0, 0, 0.4757, 0], rtol=0, atol=1e-7)


def test_phase_one_failure_gives_the_status_the_text_and_no_executor(npu):
    ptr = to_device(npu, np.zeros(8, np.float32))
    x = tensor(npu, ptr, [1, 1, 2, 2, 2], F32)
    k = npu.aclCreateIntArray([2, 2, 2])
    status, _, executor = npu.aclnnMaxPool3dWithArgmaxGetWorkspaceSize(x, k, k, k, k, False, None, x)
    message = npu.aclGetRecentErrMsg()
    assert (npu.aclDestroyTensor(x), npu.aclDestroyIntArray(k), npu.aclrtFree(ptr)) == (0, 0, 0)
    assert status == constants.ACLNN_ERR_PARAM_NULLPTR
    assert executor is None
    assert message != ""


def test_a_repeatable_executor_runs_twice_and_is_destroyed_by_the_caller(npu, stream):
    x_ptr = to_device(npu, np.array([[[[[1.0, 5.0], [3.0, 2.0]]]]], np.float32))
    out_ptr = to_device(npu, np.zeros(1, np.float32))
    idx_ptr = to_device(npu, np.zeros(1, np.int32))
    x = tensor(npu, x_ptr, [1, 1, 1, 2, 2], F32)
    out = tensor(npu, out_ptr, [1, 1, 1, 1, 1], F32)
    idx = tensor(npu, idx_ptr, [1, 1, 1, 1, 1], I32)
    k, s, p, d = (npu.aclCreateIntArray(v) for v in ([1, 2, 2], [1, 2, 2], [0, 0, 0], [1, 1, 1]))
    status, ws_size, executor = npu.aclnnMaxPool3dWithArgmaxGetWorkspaceSize(x, k, s, p, d, False, out, idx)
    assert status == 0, npu.aclGetRecentErrMsg()
    assert npu.aclSetAclOpExecutorRepeatable(executor) == 0
    ws = npu.aclrtMalloc(ws_size, 0)[1] if ws_size else 0
    for _ in range(2):
        assert npu.aclnnMaxPool3dWithArgmax(ws, ws_size, executor, stream) == 0
    assert npu.aclrtSynchronizeStream(stream) == 0
    assert npu.aclDestroyAclOpExecutor(executor) == 0
    got = np.zeros(1, np.float32), np.zeros(1, np.int32)
    for host, dev in zip(got, (out_ptr, idx_ptr)):
        assert npu.aclrtMemcpy(host, 4, dev, 4, D2H) == 0
    for h in (x, out, idx):
        npu.aclDestroyTensor(h)
    for a in (k, s, p, d):
        npu.aclDestroyIntArray(a)
    for ptr in (x_ptr, out_ptr, idx_ptr) + ((ws,) if ws else ()):
        npu.aclrtFree(ptr)
    assert (got[0][0], got[1][0]) == (5.0, 1)


def test_bool_arrays_accept_python_and_numpy_bools(npu):
    for values in ([True, False], (np.bool_(True), np.bool_(True)), [1, 0]):
        array = npu.aclCreateBoolArray(values)
        assert array is not None
        assert npu.aclDestroyBoolArray(array) == 0


def test_create_tensor_accepts_numpy_integers_and_null_strides(npu):
    ptr = to_device(npu, np.zeros(6, np.float32))
    handle = npu.aclCreateTensor(np.array([2, 3]), F32, None, np.int64(0), ND, (6,), np.uint64(ptr))
    message = npu.aclGetRecentErrMsg()
    assert npu.aclDestroyTensor(handle) == 0 and npu.aclrtFree(ptr) == 0
    assert handle is not None, message


def test_create_tensor_failure_returns_none_with_a_reason(npu):
    assert npu.aclCreateTensor([2], F32, [1], 0, ND, [2], 0) is None  # no storage
    assert npu.aclGetRecentErrMsg() != ""


def test_destroying_null_handles_reports_a_status_not_a_crash(npu):
    assert npu.aclDestroyTensor(None) != 0
    assert npu.aclDestroyIntArray(None) != 0
    assert npu.aclDestroyAclOpExecutor(None) != 0
    assert "NULL" in npu.aclGetRecentErrMsg()


# -- values that cannot be passed to C ------------------------------------------


class ForeignTensor:
    """Stands in for a handle of another backend."""


def test_a_foreign_object_as_a_tensor_is_a_type_error_naming_the_parameter(npu):
    k = npu.aclCreateIntArray([2])
    try:
        with pytest.raises(TypeError, match=r"MaxPool3dWithArgmaxGetWorkspaceSize: self \(aclTensor \*\)"):
            npu.aclnnMaxPool3dWithArgmaxGetWorkspaceSize(ForeignTensor(), k, k, k, k, False, None, None)
        with pytest.raises(TypeError, match=r"aclDestroyTensor: tensor .*ForeignTensor"):
            npu.aclDestroyTensor(ForeignTensor())
    finally:
        npu.aclDestroyIntArray(k)


def test_handles_of_the_wrong_kind_are_type_errors(npu, stream):
    k = npu.aclCreateIntArray([2])
    ptr = to_device(npu, np.zeros(1, np.float32))
    handle = tensor(npu, ptr, [1], F32)
    try:
        with pytest.raises(TypeError, match=r"aclDestroyTensor: tensor .*aclIntArray"):
            npu.aclDestroyTensor(k)
        with pytest.raises(TypeError, match="kernelSize"):
            npu.aclnnMaxPool3dWithArgmaxGetWorkspaceSize(handle, handle, k, k, k, False, handle, handle)
        with pytest.raises(TypeError, match=r"aclDestroyIntArray: array"):
            npu.aclDestroyIntArray(stream)  # a stream is no array
        with pytest.raises(TypeError, match=r"aclnnMaxPool3dWithArgmax: stream must be a stream"):
            npu.aclnnMaxPool3dWithArgmax(0, 0, None, handle)
        with pytest.raises(TypeError, match=r"aclrtSynchronizeStream: stream must be a stream"):
            npu.aclrtSynchronizeStream(0)
        with pytest.raises(TypeError, match=r"aclnnMaxPool3dWithArgmaxBackward: executor"):
            npu.aclnnMaxPool3dWithArgmaxBackward(0, 0, handle, stream)
    finally:
        npu.aclDestroyTensor(handle)
        npu.aclDestroyIntArray(k)
        npu.aclrtFree(ptr)


def test_phase_two_checks_every_stream_object_and_workspace_type_after_a_launch(npu, stream):
    """Phase 2 checks a stream object once (a cdata's type never changes) and casts a recurring
    workspace address once: another object at the same address, or a workspace address of
    another type, is still refused as it was before any launch."""
    from pyaclnn.backends.npu._ffi import ffi

    ptr = to_device(npu, np.zeros(128, np.float32))
    try:
        assert npu.aclnnMaxPool3dWithArgmax(ptr, 512, None, stream) != 0  # no executor; both accepted
        with pytest.raises(TypeError, match=r"aclnnMaxPool3dWithArgmax: stream must be a stream"):
            npu.aclnnMaxPool3dWithArgmax(ptr, 512, None, ffi.cast("void *", stream))
        with pytest.raises(TypeError, match=r"aclnnMaxPool3dWithArgmax: workspace must be an int"):
            npu.aclnnMaxPool3dWithArgmax(float(ptr), 512, None, stream)  # equal to the cached address
        assert npu.aclnnMaxPool3dWithArgmax(0, 0, None, None) == 0  # None is still NULL: nothing to launch
    finally:
        npu.aclrtFree(ptr)


def test_bad_scalars_pointers_and_buffers_are_named(npu):
    with pytest.raises(TypeError, match="aclrtSetDevice: deviceId"):
        npu.aclrtSetDevice("0")
    with pytest.raises(OverflowError, match="aclrtMalloc: size"):
        npu.aclrtMalloc(-1, 0)
    with pytest.raises(TypeError, match="aclrtFree: ptr must be an int address"):
        npu.aclrtFree("0x10")
    with pytest.raises(TypeError, match="aclCreateTensor: view_dims"):
        npu.aclCreateTensor([1.5], F32, None, 0, ND, [1], 0)
    with pytest.raises(TypeError, match="aclCreateTensor: data must be an int address"):
        npu.aclCreateTensor([1], F32, None, 0, ND, [1], np.zeros(1))
    with pytest.raises(TypeError, match="aclCreateBoolArray: values"):
        npu.aclCreateBoolArray(["yes"])
    with pytest.raises(TypeError, match="aclInit: config_path"):
        npu.aclInit(3.5)
    status, ptr = npu.aclrtMalloc(16, 0)
    assert status == 0
    try:
        with pytest.raises(TypeError, match="aclrtMemcpy: dst must be an int address or a writable"):
            npu.aclrtMemcpy(b"\0" * 16, 16, ptr, 16, D2H)
        with pytest.raises(TypeError, match="aclrtMemcpy: dst .*C-contiguous"):
            npu.aclrtMemcpy(np.zeros((4, 4), np.float32)[:, ::4], 16, ptr, 16, D2H)
        with pytest.raises(ValueError, match="aclrtMemcpy: dst holds 8 bytes but the call would access 16"):
            npu.aclrtMemcpy(np.zeros(2, np.float32), 16, ptr, 16, D2H)
        with pytest.raises(ValueError, match="aclrtMemcpy: src holds 4 bytes"):
            npu.aclrtMemcpy(ptr, 16, np.zeros(1, np.float32), 16, H2D)
    finally:
        npu.aclrtFree(ptr)


# -- layouts, missing symbols and probe, each in a fresh process ---------------

CHILD_PRELUDE = """
import json, sys
import numpy as np
from pyaclnn import constants, errors
from pyaclnn.backends.npu import NpuBackend
npu = NpuBackend()
assert npu.aclInit(None) in (0, constants.ACL_ERROR_REPEAT_INITIALIZE) and npu.aclrtSetDevice(0) == 0
def dev(a):
    a = np.ascontiguousarray(a); st, p = npu.aclrtMalloc(a.nbytes, 0); assert st == 0
    assert npu.aclrtMemcpy(p, a.nbytes, a, a.nbytes, 1) == 0; return p
def ten(p, shape, dt):
    strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    return npu.aclCreateTensor(shape, dt, strides, 0, 2, shape, p)
def max_pool():
    xp, op = dev(np.array([1, 5, 3, 2], np.float32)), dev(np.zeros(1, np.float32))
    ip = dev(np.zeros(1, np.int32))
    x, o, i = ten(xp, [1, 1, 1, 2, 2], 0), ten(op, [1, 1, 1, 1, 1], 0), ten(ip, [1, 1, 1, 1, 1], 3)
    arrs = [npu.aclCreateIntArray(v) for v in ([1, 2, 2], [1, 2, 2], [0, 0, 0], [1, 1, 1])]
    st, ws, ex = npu.aclnnMaxPool3dWithArgmaxGetWorkspaceSize(x, *arrs, False, o, i)
    assert st == 0 and ws == 0, (st, npu.aclGetRecentErrMsg())
    assert npu.aclnnMaxPool3dWithArgmax(0, 0, ex, None) == 0 and npu.aclrtSynchronizeDevice() == 0
    got = np.zeros(1, np.float32); npu.aclrtMemcpy(got, 4, op, 4, 2)
    for h in (x, o, i): npu.aclDestroyTensor(h)
    for a in arrs: npu.aclDestroyIntArray(a)
    for p in (xp, op, ip): npu.aclrtFree(p)
    return float(got[0])
def grid_sampler():
    ip, gp = dev(np.arange(8, dtype=np.float32)), dev(np.zeros(3, np.float32))
    op = dev(np.zeros(1, np.float32))
    x, g, o = ten(ip, [1, 1, 2, 2, 2], 0), ten(gp, [1, 1, 1, 1, 3], 0), ten(op, [1, 1, 1, 1, 1], 0)
    try:
        st, ws, ex = npu.aclnnGridSampler3DGetWorkspaceSize(x, g, 0, 0, True, o)
        assert st == 0 and ws == 0, (st, npu.aclGetRecentErrMsg())
        assert npu.aclnnGridSampler3D(0, 0, ex, None) == 0 and npu.aclrtSynchronizeDevice() == 0
        got = np.zeros(1, np.float32); npu.aclrtMemcpy(got, 4, op, 4, 2)
        return float(got[0])
    finally:
        for h in (x, g, o): npu.aclDestroyTensor(h)
        for p in (ip, gp, op): npu.aclrtFree(p)
def report(**values):
    counts = npu.live_counts()
    leaks = {k: v for k, v in counts.items() if v}
    print(json.dumps(dict(values, libraries=[str(p) for p in npu.libraries], leaks=leaks)))
"""


def run_child(body: str, home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env["PYACLNN_ASCEND_HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-c", CHILD_PRELUDE + textwrap.dedent(body)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_split_layout_loads_acl_rt_and_both_operator_libraries_and_runs_both_ops():
    home = emulator_build.emulator_home("split")
    result = run_child("report(pool=max_pool(), grid=grid_sampler())", home)
    assert [Path(p).name for p in result["libraries"]] == [
        "libacl_rt.so",
        "libnnopbase.so",
        "libopapi_nn.so",
        "libopapi_cv.so",
        "libmsprofiler.so",  # optional, opened last when present
    ]
    # grid (0,0,0) with align_corners is the volume's centre: the mean of 0..7
    assert result["pool"] == 5.0 and result["grid"] == pytest.approx(3.5)
    assert result["leaks"] == {}


def test_a_missing_operator_library_fails_only_its_own_calls(tmp_path):
    split = emulator_build.emulator_home("split")
    home = tmp_path / "cann"
    shutil.copytree(split / "lib64", home / "lib64", symlinks=True)
    (home / "lib64" / "libopapi_cv.so").unlink()
    result = run_child(
        """
        try:
            grid_sampler()
        except errors.AclnnError as exc:
            error = dict(type=type(exc).__name__, status=exc.status, api=exc.api, text=str(exc))
        report(pool=max_pool(), error=error, missing=sorted(npu.missing_functions))
    """,
        home,
    )
    assert result["pool"] == 5.0
    error = result["error"]
    assert error["status"] == constants.ACL_ERROR_API_NOT_SUPPORT and error["type"] == "AclnnError"
    assert error["api"] == "aclnnGridSampler3DGetWorkspaceSize"
    assert "aclnnGridSampler3DGetWorkspaceSize is not exported by any loaded CANN library" in error["text"]
    for lib in ("libacl_rt.so", "libnnopbase.so", "libopapi_nn.so"):
        assert str(home / "lib64" / lib) in error["text"]
    assert {"aclnnGridSampler3D", "aclnnGridSampler3DBackwardGetWorkspaceSize"} <= set(result["missing"])
    assert not any(name.startswith("aclnnMaxPool") for name in result["missing"])
    assert result["leaks"] == {}


def test_probe_in_a_fresh_process_loads_the_emulator_and_counts_its_devices():
    home = emulator_build.emulator_home("classic")
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env["PYACLNN_ASCEND_HOME"] = str(home)
    code = (
        "import json, dataclasses\nfrom pyaclnn.backends.npu import probe\n"
        "print(json.dumps(dataclasses.asdict(probe())))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["ok"] is True and result["reason"] == ""
    assert result["home"] == str(home) and result["device_count"] >= 1
    assert result["soc_name"].startswith("Ascend")
    assert [Path(p).name for p in result["libraries"]] == [
        "libascendcl.so",
        "libnnopbase.so",
        "libopapi.so",
        "libmsprofiler.so",  # optional, opened last when present
    ]
    assert result["missing_functions"] == []


def test_without_libmsprofiler_the_aclprof_calls_are_stubs_and_the_rest_works(tmp_path):
    home = tmp_path / "cann"
    shutil.copytree(emulator_build.emulator_home("classic"), home, symlinks=True)
    (home / "lib64" / "libmsprofiler.so").unlink()
    result = run_child(
        """
        from pyaclnn import acl
        from pyaclnn.errors import AclError
        try:
            acl.prof.init("unused", backend="npu")
        except AclError as exc:
            status, message = exc.status, str(exc)
        report(status=status, message=message, pool=max_pool(),
               missing=sorted(n for n in npu._loaded.missing if n.startswith("aclprof")))
        """,
        home,
    )
    assert result["status"] == constants.ACL_ERROR_API_NOT_SUPPORT and "aclprofInit" in result["message"]
    calls = ("Init", "Finalize", "Start", "Stop", "CreateConfig", "DestroyConfig")
    assert result["missing"] == sorted("aclprof" + call for call in calls)
    assert result["pool"] == 5.0 and result["leaks"] == {}
    assert [Path(p).name for p in result["libraries"]] == ["libascendcl.so", "libnnopbase.so", "libopapi.so"]


# -- probe's decisions and the missing-symbol error, in this process ------------


def probe_with(monkeypatch, npu, counts):
    """probe() over the loaded emulator with aclrtGetDeviceCount answering ``counts`` in turn."""
    from pyaclnn.backends.npu import _probe

    answers = list(counts)
    calls = []

    class Scripted(_probe.NpuBackend):
        def aclrtGetDeviceCount(self):
            return answers.pop(0)

        def aclInit(self, config_path):
            calls.append(config_path)
            return super().aclInit(config_path)

    monkeypatch.setattr(_probe, "NpuBackend", Scripted)
    return _probe.probe(), calls


def test_probe_says_so_when_no_device_is_visible(monkeypatch, npu):
    result, _ = probe_with(monkeypatch, npu, [(0, 0)])
    assert result.ok is False and result.device_count == 0
    assert "reports no NPU device" in result.reason
    assert result.home == str(npu.home) and result.soc_name is None


def test_probe_initializes_acl_only_when_the_count_needs_it(monkeypatch, npu):
    result, calls = probe_with(monkeypatch, npu, [(constants.ACL_ERROR_UNINITIALIZE, 0), (0, 2)])
    assert calls == [None]
    assert result.ok is True and result.device_count == 2 and result.soc_name.startswith("Ascend")
    result, calls = probe_with(monkeypatch, npu, [(0, 1)])
    assert calls == [] and result.ok is True


def test_probe_reports_a_failing_device_count_with_its_status_name(monkeypatch, npu):
    result, _ = probe_with(monkeypatch, npu, [(constants.ACL_ERROR_RT_NO_DEVICE, 0)])
    assert result.ok is False and result.device_count is None
    assert "aclrtGetDeviceCount failed: ACL_ERROR_RT_NO_DEVICE (207004)" in result.reason


def test_a_missing_runtime_function_raises_acl_error_and_an_operator_aclnn_error():
    from pyaclnn.backends.npu._loading import _missing_stub

    libs = [Path("/opt/cann/lib64/libascendcl.so"), Path("/opt/cann/lib64/libnnopbase.so")]
    with pytest.raises(errors.AclError) as info:
        _missing_stub("aclFinalizeReference", libs)(None)
    assert type(info.value) is errors.AclError
    assert info.value.status == constants.ACL_ERROR_API_NOT_SUPPORT
    assert info.value.api == "aclFinalizeReference"
    assert "/opt/cann/lib64/libascendcl.so, /opt/cann/lib64/libnnopbase.so" in str(info.value)
    with pytest.raises(errors.AclnnError):
        _missing_stub("aclnnGridSampler3D", libs)(0, 0, None, None)


def test_a_launch_bound_once_is_checked_once_with_the_messages_of_the_method(npu, stream):
    """phase2_call checks and marshals phase 2's arguments for the executor cache's repeated
    launches: what the method would refuse at each call is refused there, once."""
    api = "aclnnGridSampler3D"
    with pytest.raises(TypeError, match=f"{api}: workspace must be an int address"):
        npu.phase2_call(api, np.zeros(2), 0, None, stream)
    with pytest.raises(TypeError, match=f"{api}: stream must be a stream from aclrtCreateStream"):
        npu.phase2_call(api, 0, 0, None, 5)
    array = npu.aclCreateIntArray([1])  # a handle of another type
    try:
        with pytest.raises(TypeError, match=rf"{api}: executor \(aclOpExecutor \*\) needs a handle"):
            npu.phase2_call(api, 0, 0, array, stream)
    finally:
        assert npu.aclDestroyIntArray(array) == 0
    with pytest.raises(errors.ArgumentOverflowError, match=f"{api}: workspaceSize"):
        npu.phase2_call(api, 0, -1, None, stream)
    function, args = npu.phase2_call(api, 0, 0, None, stream)  # nothing to launch: status 0
    assert function(*args) == 0 and function(*args) == 0


def test_arrays_where_scalars_belong_are_type_errors(npu, stream):
    with pytest.raises(TypeError, match="aclCreateBoolArray: values"):
        npu.aclCreateBoolArray([np.array([True, False])])
    with pytest.raises(TypeError, match="aclnnGridSampler3D: workspace must be an int address"):
        npu.aclnnGridSampler3D(np.zeros(2), 0, None, stream)
