"""The host emulator of the CANN C ABI (tests/emulator), driven through cffi.

Both layouts are built with CMake (tests/emulator_build.py). Their libraries
share SONAMEs, so each layout is exercised in its own subprocess: this file,
run as a script, performs every check of ``_CHECKS`` against one layout and
prints a JSON report; the pytest tests below read that report, one test per
check and layout. Results that need the PyTorch oracle come back as arrays and
are compared here, in the parent, with the ``torch`` fixture.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import operators  # noqa: E402
from emulator_build import emulator_home  # noqa: E402

from pyaclnn import constants  # noqa: E402

#: the child emulates this many devices (PYACLNN_EMU_DEVICES, read once by the emulator)
_DEVICES = int(os.environ.get("PYACLNN_EMU_DEVICES", "2")) if __name__ == "__main__" else 2

LIBS = {
    "classic": ("libascendcl.so", "libnnopbase.so", "libopapi.so"),
    "split": ("libacl_rt.so", "libnnopbase.so", "libopapi_nn.so", "libopapi_cv.so"),
}
# Each operator's own checks below index the C functions of its family (phase 1, phase 2, backward's 1, 2).
MAXPOOL = tuple(api for api in operators.APIS if api.startswith("aclnnMaxPool3d"))
GRID = tuple(api for api in operators.APIS if api.startswith("aclnnGridSampler3D"))

# ----------------------------------------------------------------------------
# Child side: runs inside the subprocess, one layout per process.
# ----------------------------------------------------------------------------


class _Emu:
    """cffi handles on one emulator layout plus small helpers."""

    def __init__(self, layout: str, home: Path) -> None:
        import cffi

        from pyaclnn import _decl

        self.layout = layout
        self.home = home
        self.ffi = ffi = cffi.FFI()
        ffi.cdef("".join(_decl.read(name) for name in _decl.DECL_FILES))
        flags = ffi.RTLD_GLOBAL | ffi.RTLD_NOW
        # Dependency order, as a real binding loads CANN.
        self.handles = {name: ffi.dlopen(str(home / "lib64" / name), flags) for name in LIBS[layout]}
        names = LIBS[layout]
        self.rt, self.nn = self.handles[names[0]], self.handles[names[1]]
        self.ops = {
            sym: next(h for h in (self.handles[n] for n in names[2:]) if hasattr(h, sym))
            for sym in operators.APIS
        }
        self.c = _decl.status_codes()

    def op(self, name):
        return getattr(self.ops[name], name)

    def counts(self) -> list[int]:
        out = self.ffi.new("int64_t[7]")
        assert self.rt.pyaclnnEmuLiveCounts(out, 7) == 7
        return list(out)

    def msg(self) -> str:
        return self.ffi.string(self.rt.aclGetRecentErrMsg()).decode()

    def malloc(self, size: int):
        p = self.ffi.new("void **")
        assert self.rt.aclrtMalloc(p, size, 0) == 0, self.msg()
        return p[0]

    def device(self, array: np.ndarray, dtype: int, fmt: int = 2):
        """Device copy of a contiguous array and an aclTensor over it: (ptr, tensor)."""
        array = np.ascontiguousarray(array)
        ptr = self.malloc(max(array.nbytes, 1))
        host = self.ffi.from_buffer(array)
        assert self.rt.aclrtMemcpy(ptr, array.nbytes, host, array.nbytes, 1) == 0, self.msg()
        dims = self.ffi.new("int64_t[]", list(array.shape))
        t = self.nn.aclCreateTensor(dims, array.ndim, dtype, self.ffi.NULL, 0, fmt, dims, array.ndim, ptr)
        assert t != self.ffi.NULL, self.msg()
        return ptr, t

    def device_strided(self, view: np.ndarray, dtype: int, fmt: int = 2):
        """aclTensor over `view`'s own strides (in elements) and storage offset: the whole base array
        goes to the device, the descriptor says where the view lies in it."""
        base = view.base if view.base is not None else view
        assert base.flags.c_contiguous
        ptr, t0 = self.device(base, dtype, fmt)
        assert self.nn.aclDestroyTensor(t0) == 0
        item = view.itemsize
        offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // item
        dims = self.ffi.new("int64_t[]", list(view.shape))
        strides = self.ffi.new("int64_t[]", [st // item for st in view.strides])
        storage = self.ffi.new("int64_t[]", [base.size])
        t = self.nn.aclCreateTensor(dims, view.ndim, dtype, strides, offset, fmt, storage, 1, ptr)
        assert t != self.ffi.NULL, self.msg()
        return ptr, t

    def fetch(self, ptr, shape, np_dtype) -> np.ndarray:
        out = np.empty(shape, np_dtype)
        assert self.rt.aclrtMemcpy(self.ffi.from_buffer(out), out.nbytes, ptr, out.nbytes, 2) == 0, self.msg()
        return out

    def int_array(self, values):
        return self.nn.aclCreateIntArray(self.ffi.new("int64_t[]", list(values)), len(values))

    def out_params(self):
        return self.ffi.new("uint64_t *"), self.ffi.new("aclOpExecutor **")

    def run(self, phase2: str, ws_size, executor, stream=None) -> int:
        """Phase 2 with a fresh workspace; synchronizes the stream (the launch is asynchronous) before the
        workspace is freed, as a correct caller must. Returns phase 2's status."""
        stream = stream if stream is not None else self.ffi.NULL
        ws = self.malloc(ws_size) if ws_size else self.ffi.NULL
        status = self.op(phase2)(ws, ws_size, executor, stream)
        assert self.rt.aclrtSynchronizeStream(stream) == 0, self.msg()
        if ws_size:
            assert self.rt.aclrtFree(ws) == 0
        return status

    def hazards(self) -> int:
        return self.rt.pyaclnnEmuHazardCount()

    def stream(self):
        s = self.ffi.new("aclrtStream *")
        assert self.rt.aclrtCreateStream(s) == 0, self.msg()
        return s[0]

    def event(self, flag=None):
        ev = self.ffi.new("aclrtEvent *")
        rc = self.rt.aclrtCreateEvent(ev) if flag is None else self.rt.aclrtCreateEventWithFlag(ev, flag)
        assert rc == 0, self.msg()
        return ev[0]

    def event_status(self, event) -> int:
        st = self.ffi.new("aclrtEventRecordedStatus *")
        assert self.rt.aclrtQueryEventStatus(event, st) == 0, self.msg()
        return st[0]

    def elapsed(self, start, end):
        ms = self.ffi.new("float *")
        rc = self.rt.aclrtEventElapsedTime(ms, start, end)
        return rc, ms[0]


def _check_malloc_alignment_and_live_counters(e: _Emu) -> None:
    base = e.counts()
    ptrs = [e.malloc(n) for n in (1, 33, 1000, 4096 + 5)]
    assert all(int(e.ffi.cast("uintptr_t", p)) % 32 == 0 for p in ptrs)
    host = e.ffi.new("void **")
    assert e.rt.aclrtMallocHost(host, 64) == 0
    stream = e.ffi.new("aclrtStream *")
    assert e.rt.aclrtCreateStream(stream) == 0
    now = e.counts()
    assert now[0] == base[0] + 4 and now[1] == base[1] + 1 and now[6] == base[6] + 1
    free_bytes, total = e.ffi.new("size_t *"), e.ffi.new("size_t *")
    assert e.rt.aclrtGetMemInfo(1, free_bytes, total) == 0 and 0 < free_bytes[0] < total[0]
    for p in ptrs:
        assert e.rt.aclrtFree(p) == 0
    assert e.rt.aclrtFreeHost(host[0]) == 0
    assert e.rt.aclrtDestroyStream(stream[0]) == 0
    assert e.rt.aclrtDestroyStream(stream[0]) == e.c["ACL_ERROR_INVALID_PARAM"]
    assert e.counts() == base


def _check_malloc_and_free_errors(e: _Emu) -> None:
    p = e.malloc(64)
    assert e.rt.aclrtFree(p) == 0
    assert e.rt.aclrtFree(p) == e.c["ACL_ERROR_RT_MEMORY_FREE"]
    assert "aclrtFree" in e.msg()
    out = e.ffi.new("void **")
    assert e.rt.aclrtMalloc(out, 0, 0) == e.c["ACL_ERROR_INVALID_PARAM"]
    assert e.rt.aclrtMalloc(out, 1 << 62, 0) == e.c["ACL_ERROR_RT_MEMORY_ALLOCATION"]
    assert e.rt.aclrtMallocHost(out, 16) == 0
    assert e.rt.aclrtFree(out[0]) == e.c["ACL_ERROR_RT_MEMORY_FREE"]  # host memory via the device free
    assert "aclrtFreeHost" in e.msg()
    assert e.rt.aclrtFreeHost(out[0]) == 0
    assert e.rt.aclrtSetDevice(_DEVICES) == e.c["ACL_ERROR_RT_INVALID_DEVICEID"]
    assert e.rt.aclInit(e.ffi.NULL) in (0, e.c["ACL_ERROR_REPEAT_INITIALIZE"])
    assert e.rt.aclInit(e.ffi.NULL) == e.c["ACL_ERROR_REPEAT_INITIALIZE"]
    e.msg()


def _check_memcpy_bounds_and_message_naming_the_argument(e: _Emu) -> None:
    dev = e.malloc(64)
    host = np.arange(32, dtype=np.float32)
    hp = e.ffi.from_buffer(host)
    assert e.rt.aclrtMemcpy(dev, 64, hp, 128, 1) == e.c["ACL_ERROR_INVALID_PARAM"]  # count > destMax
    assert "destMax" in e.msg()
    assert e.rt.aclrtMemcpy(dev, 128, hp, 128, 1) == e.c["ACL_ERROR_INVALID_PARAM"]  # beyond the allocation
    text = e.msg()
    assert "dst" in text and "aclrtMalloc" in text
    assert e.rt.aclrtMemcpy(hp, 128, dev, 128, 2) == e.c["ACL_ERROR_INVALID_PARAM"]
    assert "src" in e.msg()
    assert e.rt.aclrtMemcpy(dev, 64, hp, 64, 1) == 0
    back = e.fetch(dev, (16,), np.float32)
    assert np.array_equal(back, host[:16])
    assert e.rt.aclrtMemset(dev, 64, 0, 64) == 0
    assert not e.fetch(dev, (16,), np.float32).any()
    assert e.rt.aclrtFree(dev) == 0
    # freed memory is no longer a valid device side
    assert e.rt.aclrtMemcpy(dev, 64, hp, 64, 1) == e.c["ACL_ERROR_INVALID_PARAM"]
    e.msg()


def _check_recent_error_message_is_per_thread_and_cleared_by_reading(e: _Emu) -> None:
    assert e.msg() == ""
    assert e.rt.aclrtFree(e.ffi.NULL) != 0
    seen_elsewhere = []
    worker = threading.Thread(target=lambda: seen_elsewhere.append(e.msg()))
    worker.start()
    worker.join()
    assert seen_elsewhere == [""]
    first = e.msg()
    assert "aclrtFree" in first and "NULL" in first
    assert e.msg() == ""  # reading cleared it


def _check_eight_threads_allocate_and_free_concurrently(e: _Emu) -> None:
    base = e.counts()
    errors = []

    def work() -> None:
        try:
            assert e.rt.aclrtSetDevice(0) == 0  # a new thread has no current device
            for _ in range(300):
                p = e.malloc(96)
                dims = e.ffi.new("int64_t[]", [4, 6])
                t = e.nn.aclCreateTensor(dims, 2, 0, e.ffi.NULL, 0, 2, dims, 2, p)
                assert t != e.ffi.NULL
                assert e.nn.aclDestroyTensor(t) == 0
                assert e.rt.aclrtFree(p) == 0
        except Exception as exc:  # reported to the main thread below
            errors.append(repr(exc))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert e.counts() == base


def _check_tensor_create_destroy_and_double_destroy(e: _Emu) -> None:
    base = e.counts()
    ptr, t = e.device(np.zeros((2, 3, 4), np.float32), 0)
    assert e.counts()[2] == base[2] + 1
    fmt, offset = e.ffi.new("aclFormat *"), e.ffi.new("int64_t *")
    assert e.nn.aclGetFormat(t, fmt) == 0 and fmt[0] == 2
    assert e.nn.aclGetViewOffset(t, offset) == 0 and offset[0] == 0
    assert e.nn.aclDestroyTensor(t) == 0
    assert e.nn.aclDestroyTensor(t) == e.c["ACLNN_ERR_PARAM_INVALID"]
    assert e.nn.aclDestroyTensor(e.ffi.NULL) == e.c["ACLNN_ERR_PARAM_NULLPTR"]
    e.msg()
    dims = e.ffi.new("int64_t[]", [2, 3, 4])
    big = e.ffi.new("int64_t[]", [1000])
    assert e.nn.aclCreateTensor(dims, 3, 0, e.ffi.NULL, 0, 2, big, 1, ptr) == e.ffi.NULL  # storage too big
    assert "tensorData" in e.msg()
    assert e.nn.aclCreateTensor(dims, 3, 0, e.ffi.NULL, 5, 2, dims, 3, ptr) == e.ffi.NULL  # view past storage
    assert "storageDims" in e.msg()
    arr = e.int_array([1, 2, 3])
    size = e.ffi.new("uint64_t *")
    assert e.nn.aclGetIntArraySize(arr, size) == 0 and size[0] == 3
    assert e.nn.aclDestroyIntArray(arr) == 0
    assert e.nn.aclDestroyIntArray(arr) == e.c["ACLNN_ERR_PARAM_INVALID"]
    e.msg()
    assert e.rt.aclrtFree(ptr) == 0
    assert e.counts() == base


def _maxpool_backward_seed(e: _Emu, repeatable: bool):
    """The op document's example: returns (status, gradInput, live tensors)."""
    go_ptr, go = e.device(np.array([0.4757], np.float32).reshape(1, 1, 1, 1, 1), 0)
    x = np.array([0.0850, -0.5147, -0.0212, -0.5654, -0.3222, 0.5847, 1.7510, 0.9954], np.float32)
    x_ptr, xt = e.device(x.reshape(1, 1, 2, 2, 2), 0)
    i_ptr, it = e.device(np.array([6], np.int32).reshape(1, 1, 1, 1, 1), 3)
    gi_ptr, git = e.device(np.zeros((1, 1, 2, 2, 2), np.float32), 0)
    arrays = [e.int_array(v) for v in ([2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1])]
    ws, ex = e.out_params()
    status = e.op(MAXPOOL[2])(go, xt, it, *arrays, False, git, ws, ex)
    assert status == 0, e.msg()
    assert ws[0] == 32
    if repeatable:
        assert e.nn.aclSetAclOpExecutorRepeatable(ex[0]) == 0
    # descriptors may go before phase 2
    for t in (go, xt, it, git):
        assert e.nn.aclDestroyTensor(t) == 0
    for a in arrays:
        assert e.nn.aclDestroyIntArray(a) == 0
    return ws[0], ex[0], gi_ptr, [go_ptr, x_ptr, i_ptr, gi_ptr]


def _check_maxpool_backward_seed_example_and_executor_lifetime(e: _Emu) -> None:
    base = e.counts()
    ws, ex, gi_ptr, ptrs = _maxpool_backward_seed(e, repeatable=False)
    assert e.op(MAXPOOL[3])(e.ffi.NULL, 0, ex, e.ffi.NULL) == e.c["ACLNN_ERR_PARAM_INVALID"]  # no workspace
    assert "workspace" in e.msg()
    # the failed phase 2 consumed the non-repeatable executor
    assert e.run(MAXPOOL[3], ws, ex) == e.c["ACLNN_ERR_INNER_NULLPTR"]
    e.msg()
    for p in ptrs:
        assert e.rt.aclrtFree(p) == 0

    ws, ex, gi_ptr, ptrs = _maxpool_backward_seed(e, repeatable=True)
    stream = e.ffi.new("aclrtStream *")
    assert e.rt.aclrtCreateStream(stream) == 0
    for _ in range(2):  # a repeatable executor runs again and again
        assert e.run(MAXPOOL[3], ws, ex, stream[0]) == 0, e.msg()
        assert e.rt.aclrtSynchronizeStream(stream[0]) == 0
        got = e.fetch(gi_ptr, (8,), np.float32)
        assert np.array_equal(got, np.array([0, 0, 0, 0, 0, 0, 0.4757, 0], np.float32)), got
    assert e.nn.aclDestroyAclOpExecutor(ex) == 0
    assert e.nn.aclDestroyAclOpExecutor(ex) == e.c["ACLNN_ERR_INNER_NULLPTR"]
    assert e.rt.aclrtDestroyStream(stream[0]) == 0
    assert e.op(MAXPOOL[3])(e.ffi.NULL, 0, e.ffi.NULL, stream[0]) == 0  # NULL executor, no workspace: no-op
    e.msg()
    for p in ptrs:
        assert e.rt.aclrtFree(p) == 0
    assert e.counts() == base


def _check_maxpool_backward_index_guard_is_a_device_error_reported_by_synchronize(e: _Emu) -> None:
    go_ptr, go = e.device(np.ones((1, 1, 1, 1, 1), np.float32), 0)
    x_ptr, xt = e.device(np.ones((1, 1, 2, 2, 2), np.float32), 0)
    i_ptr, it = e.device(np.array([8], np.int32).reshape(1, 1, 1, 1, 1), 3)
    sentinel = np.full((1, 1, 2, 2, 2), 7.0, np.float32)
    gi_ptr, git = e.device(sentinel, 0)
    arrays = [e.int_array([2]), e.int_array([]), e.int_array([0]), e.int_array([1])]
    ws, ex = e.out_params()
    ws_ptr = e.malloc(32)
    stream = e.stream()
    for sync in ("stream", "device"):
        assert e.rt.aclrtMemset(ws_ptr, 32, 0xFF, 32) == 0
        assert e.op(MAXPOOL[2])(go, xt, it, *arrays, False, git, ws, ex) == 0, e.msg()
        assert e.op(MAXPOOL[3])(ws_ptr, ws[0], ex[0], stream) == 0, e.msg()  # the launch itself succeeds
        assert e.rt.aclrtMemsetAsync(ws_ptr, 32, 0, 32, stream) == 0  # later work on the stream still runs
        rc = e.rt.aclrtSynchronizeStream(stream) if sync == "stream" else e.rt.aclrtSynchronizeDevice()
        assert rc == constants.ACL_ERROR_RT_VECTOR_CORE_EXCEPTION, rc
        address = int(e.ffi.cast("uintptr_t", stream))
        assert e.msg() == (
            "aclnnMaxPool3dWithArgmaxBackward: indices[0, 0, 0, 0, 0] = 8 lies outside its (n, c) plane of 8 "
            f"elements (device error of a launch on stream {address:#x})"
        )
        assert np.array_equal(e.fetch(gi_ptr, sentinel.shape, np.float32), sentinel)  # nothing written
        assert not e.fetch(ws_ptr, (32,), np.uint8).any()
        assert e.rt.aclrtSynchronizeStream(stream) == 0  # reported once
        assert e.msg() == ""
    # the output-size rule is a phase-1 error
    bad = e.int_array([3])
    status = e.op(MAXPOOL[2])(go, xt, it, arrays[0], arrays[1], arrays[2], bad, True, git, ws, ex)
    assert status == e.c["ACLNN_ERR_PARAM_INVALID"], status
    assert "gradOutput" in e.msg()
    assert e.rt.aclrtDestroyStream(stream) == 0
    for t in (go, xt, it, git):
        e.nn.aclDestroyTensor(t)
    for a in arrays + [bad]:
        e.nn.aclDestroyIntArray(a)
    for p in (go_ptr, x_ptr, i_ptr, gi_ptr, ws_ptr):
        e.rt.aclrtFree(p)


@contextlib.contextmanager
def _env(name: str, value: str):
    """The emulator reads PYACLNN_EMU_SOC, PYACLNN_EMU_KERNEL_US and PYACLNN_EMU_SYNC_US at every call."""
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            del os.environ[name]
        else:
            os.environ[name] = saved


def _check_max_pool_follows_a2_a3_rules_unless_told_950(e: _Emu) -> None:
    x_ptr, xt = e.device(np.ones((1, 1, 4, 4, 4), np.float32), 0)
    o_ptr, ot = e.device(np.zeros((1, 1, 2, 2, 2), np.float32), 0)
    i_ptr, it = e.device(np.zeros((1, 1, 2, 2, 2), np.int64), 9)
    arrays = [e.int_array([2]), e.int_array([]), e.int_array([0]), e.int_array([1])]
    ws, ex = e.out_params()
    assert e.ffi.string(e.rt.aclrtGetSocName()) == b"Ascend910B-emulator"
    assert e.op(MAXPOOL[0])(xt, *arrays, False, ot, it, ws, ex) == e.c["ACLNN_ERR_PARAM_INVALID"]
    assert "indices" in e.msg()
    with _env("PYACLNN_EMU_SOC", "950"):
        assert e.ffi.string(e.rt.aclrtGetSocName()) == b"Ascend950-emulator"
        assert e.op(MAXPOOL[0])(xt, *arrays, False, ot, it, ws, ex) == 0, e.msg()
        assert e.run(MAXPOOL[1], ws[0], ex[0]) == 0, e.msg()
    assert np.array_equal(e.fetch(i_ptr, (8,), np.int64), [0, 2, 8, 10, 32, 34, 40, 42])
    i32_ptr, i32 = e.device(np.zeros((1, 1, 2, 2, 2), np.int32), 3)
    dilated = e.int_array([2])
    status = e.op(MAXPOOL[0])(xt, *arrays[:3], dilated, False, ot, i32, ws, ex)
    assert status == e.c["ACLNN_ERR_PARAM_INVALID"]
    assert "dilation" in e.msg()
    for t in (xt, ot, it, i32):
        e.nn.aclDestroyTensor(t)
    for a in arrays + [dilated]:
        e.nn.aclDestroyIntArray(a)
    for p in (x_ptr, o_ptr, i_ptr, i32_ptr):
        e.rt.aclrtFree(p)


def _maxpool_forward_case(e: _Emu) -> dict:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 5, 6, 7)).astype(np.float32)
    x[0, 0, :2, :2, :2] = 1.5  # ties: the first maximum wins
    k, s, p, d = (3, 2, 2), (2, 2, 3), (1, 1, 1), (1, 2, 1)
    out_shape = [2, 3] + [_pool_size(n, *a) for n, a in zip(x.shape[2:], zip(k, s, p, d))]
    # a non-contiguous view with an offset: x lives transposed inside a larger buffer
    storage = np.zeros((2, 3, 2, 7, 6, 5), np.float32)
    storage[1] = x.transpose(1, 0, 4, 3, 2)
    view = storage[1].transpose(1, 0, 4, 3, 2)
    assert np.array_equal(view, x)
    x_ptr, xt = e.device_strided(view, 0)
    o_ptr, ot = e.device(np.zeros(out_shape, np.float32), 0)
    i_ptr, it = e.device(np.zeros(out_shape, np.int64), 9)
    arrays = [e.int_array(v) for v in (k, s, p, d)]
    ws, ex = e.out_params()
    with _env("PYACLNN_EMU_SOC", "950"):  # int64 indices and dilation > 1
        assert e.op(MAXPOOL[0])(xt, *arrays, True, ot, it, ws, ex) == 0, e.msg()
    assert ws[0] == 0
    assert e.run(MAXPOOL[1], 0, ex[0]) == 0, e.msg()
    result = {
        "x": x.tolist(),
        "k": k,
        "s": s,
        "p": p,
        "d": d,
        "out": e.fetch(o_ptr, out_shape, np.float32).tolist(),
        "indices": e.fetch(i_ptr, out_shape, np.int64).tolist(),
    }
    for t in (xt, ot, it):
        e.nn.aclDestroyTensor(t)
    for a in arrays:
        e.nn.aclDestroyIntArray(a)
    for ptr in (x_ptr, o_ptr, i_ptr):
        e.rt.aclrtFree(ptr)
    return result


def _maxpool_half_case(e: _Emu, acl: int) -> dict:
    """fp16 / bf16 through the max-pool ops, as raw bits: every bit pattern
    through a 1x1x1 forward, and random pairs summed in fp32 by the backward
    (both rows' indices point at row 0) and rounded once."""
    rng = np.random.default_rng(acl)
    every = np.arange(1 << 16, dtype=np.uint16).reshape(1, 1, 1, 256, 256)
    ones = [e.int_array([1]), e.int_array([]), e.int_array([0]), e.int_array([1])]
    x_ptr, xt = e.device(every, acl)
    o_ptr, ot = e.device(np.zeros_like(every), acl)
    i_ptr, it = e.device(np.zeros(every.shape, np.int32), 3)
    ws, ex = e.out_params()
    assert e.op(MAXPOOL[0])(xt, *ones, False, ot, it, ws, ex) == 0, e.msg()
    assert e.run(MAXPOOL[1], ws[0], ex[0]) == 0, e.msg()
    forward = e.fetch(o_ptr, every.shape, np.uint16)
    forward_idx = e.fetch(i_ptr, every.shape, np.int32)
    pairs = rng.integers(0, 1 << 16, (1, 1, 1, 2, 4096), dtype=np.uint16)
    go_ptr, got = e.device(pairs, acl)
    idx = np.broadcast_to(np.arange(4096, dtype=np.int32), pairs.shape)
    ix_ptr, ixt = e.device(idx, 3)
    s_ptr, st = e.device(np.zeros_like(pairs), acl)
    gi_ptr, git = e.device(np.zeros_like(pairs), acl)
    assert e.op(MAXPOOL[2])(got, st, ixt, *ones, False, git, ws, ex) == 0, e.msg()
    assert e.run(MAXPOOL[3], ws[0], ex[0]) == 0, e.msg()
    backward = e.fetch(gi_ptr, pairs.shape, np.uint16)
    for t in (xt, ot, it, got, ixt, st, git):
        e.nn.aclDestroyTensor(t)
    for a in ones:
        e.nn.aclDestroyIntArray(a)
    for ptr in (x_ptr, o_ptr, i_ptr, go_ptr, ix_ptr, s_ptr, gi_ptr):
        e.rt.aclrtFree(ptr)
    return {
        "forward": forward.ravel().tolist(),
        "forward_idx": forward_idx.ravel().tolist(),
        "pairs": pairs.reshape(2, -1).tolist(),
        "backward": backward.reshape(2, -1).tolist(),
    }


def _pool_size(n: int, k: int, s: int, p: int, d: int) -> int:
    out = (n + 2 * p - d * (k - 1) - 1 + s - 1) // s + 1  # ceil mode
    return out - 1 if (out - 1) * s >= n + p else out


def _grid_case(
    e: _Emu, dtype: str, interp: int, pad: int, align: bool, mask=(True, True), ties=False, ndhwc=False
) -> dict:
    rng = np.random.default_rng(interp * 10 + pad)
    acl_dtypes = {"float32": (np.float32, 0), "float64": (np.float64, 11), "float16": (np.float16, 1)}
    np_dtype, acl = acl_dtypes[dtype]
    x = rng.standard_normal((2, 3, 5, 5, 5) if ties else (2, 3, 4, 5, 6)).astype(np_dtype)
    if ties:  # with align_corners and size 5 these land exactly on .5: nearest rounds half to even
        grid = rng.choice(np.array([-0.75, -0.25, 0.25, 0.75], np_dtype), (2, 3, 2, 4, 3))
    else:
        grid = rng.uniform(-1.3, 1.3, (2, 3, 2, 4, 3)).astype(np_dtype)
    go = rng.standard_normal((2, 3, 3, 2, 4)).astype(np_dtype)
    fmt = 2
    if ndhwc:  # channels last: input and gradOutput are (N, D, H, W, C), chosen by input's format
        x, go, fmt = x.transpose(0, 2, 3, 4, 1).copy(), go.transpose(0, 2, 3, 4, 1).copy(), 27
    ptrs, tensors = zip(*(e.device(a, acl, f) for a, f in ((go, 2), (x, fmt), (grid, 2))))
    ig_ptr, igt = e.device(np.full(x.shape, 5, np_dtype), acl, fmt)
    gg_ptr, ggt = e.device(np.full(grid.shape, 5, np_dtype), acl)
    mask_arr = e.nn.aclCreateBoolArray(e.ffi.new("bool[]", list(mask)), 2)
    ws, ex = e.out_params()
    assert e.op(GRID[2])(*tensors, interp, pad, align, mask_arr, igt, ggt, ws, ex) == 0, e.msg()
    assert e.run(GRID[3], ws[0], ex[0]) == 0, e.msg()
    # forward on the same data
    o_ptr, ot = e.device(np.zeros(go.shape, np_dtype), acl, fmt)
    assert e.op(GRID[0])(tensors[1], tensors[2], interp, pad, align, ot, ws, ex) == 0, e.msg()
    assert e.run(GRID[1], ws[0], ex[0]) == 0, e.msg()
    result = {
        "x": x.tolist(),
        "grid": grid.tolist(),
        "go": go.tolist(),
        "dtype": dtype,
        "ndhwc": ndhwc,
        "interp": interp,
        "pad": pad,
        "align": align,
        "mask": list(mask),
        "input_grad": e.fetch(ig_ptr, x.shape, np_dtype).tolist(),
        "grid_grad": e.fetch(gg_ptr, grid.shape, np_dtype).tolist(),
        "out": e.fetch(o_ptr, go.shape, np_dtype).tolist(),
    }
    for t in tensors + (igt, ggt, ot):
        e.nn.aclDestroyTensor(t)
    e.nn.aclDestroyBoolArray(mask_arr)
    for p in ptrs + (ig_ptr, gg_ptr, o_ptr):
        e.rt.aclrtFree(p)
    return result


def _check_empty_and_maskless_calls_succeed_without_an_executor(e: _Emu) -> None:
    base = e.counts()
    go_ptr, go = e.device(np.zeros((1, 2, 0, 2, 2), np.float32), 0)
    x_ptr, x = e.device(np.zeros((1, 2, 3, 3, 3), np.float32), 0)
    g_ptr, g = e.device(np.zeros((1, 0, 2, 2, 3), np.float32), 0)
    ws, ex = e.out_params()
    mask = e.nn.aclCreateBoolArray(e.ffi.new("bool[]", [True, True]), 2)
    assert e.op(GRID[2])(go, x, g, 0, 0, False, mask, x, g, ws, ex) == 0, e.msg()
    assert ws[0] == 0 and ex[0] == e.ffi.NULL
    assert e.run(GRID[3], 0, e.ffi.NULL) == 0
    assert (
        e.op(GRID[2])(
            e.ffi.NULL, e.ffi.NULL, e.ffi.NULL, 0, 0, False, e.ffi.NULL, e.ffi.NULL, e.ffi.NULL, ws, ex
        )
        == 0
    )  # no mask: nothing is checked
    assert e.op(GRID[2])(go, x, g, 0, 5, False, mask, x, g, ws, ex) == e.c["ACLNN_ERR_PARAM_INVALID"]
    assert "paddingMode" in e.msg()
    assert e.op(GRID[2])(go, e.ffi.NULL, g, 0, 0, False, mask, x, g, ws, ex) == e.c["ACLNN_ERR_PARAM_NULLPTR"]
    assert "input" in e.msg()
    for t in (go, x, g):
        e.nn.aclDestroyTensor(t)
    e.nn.aclDestroyBoolArray(mask)
    for p in (go_ptr, x_ptr, g_ptr):
        e.rt.aclrtFree(p)
    assert e.counts() == base


def _check_phase2_rejects_a_destroyed_stream_and_freed_memory(e: _Emu) -> None:
    base = e.counts()
    x_ptr, xt = e.device(np.ones((1, 2, 2, 2), np.float32), 0)  # 4-D: (C, D, H, W)
    o_ptr, ot = e.device(np.zeros((1, 1, 1, 1), np.float32), 0)
    i_ptr, it = e.device(np.zeros((1, 1, 1, 1), np.int32), 3)
    arrays = [e.int_array([2]), e.int_array([]), e.int_array([0]), e.int_array([1])]
    stream = e.ffi.new("aclrtStream *")
    assert e.rt.aclrtCreateStream(stream) == 0
    assert e.rt.aclrtDestroyStream(stream[0]) == 0
    ws, ex = e.out_params()
    assert e.op(MAXPOOL[0])(xt, *arrays, False, ot, it, ws, ex) == 0, e.msg()
    assert e.op(MAXPOOL[1])(e.ffi.NULL, 0, ex[0], stream[0]) == e.c["ACLNN_ERR_RUNTIME_ERROR"]
    assert "stream" in e.msg()
    assert e.op(MAXPOOL[0])(xt, *arrays, False, ot, it, ws, ex) == 0, e.msg()
    assert e.rt.aclrtFree(o_ptr) == 0
    assert e.op(MAXPOOL[1])(e.ffi.NULL, 0, ex[0], e.ffi.NULL) == e.c["ACLNN_ERR_RUNTIME_ERROR"]
    text = e.msg()
    assert "out" in text and "freed" in text
    for t in (xt, ot, it):
        assert e.nn.aclDestroyTensor(t) == 0
    for a in arrays:
        assert e.nn.aclDestroyIntArray(a) == 0
    for p in (x_ptr, i_ptr):
        assert e.rt.aclrtFree(p) == 0
    assert e.counts() == base


def _check_layout_exports(e: _Emu) -> None:
    if e.layout == "classic":
        opapi = e.handles["libopapi.so"]
        assert all(hasattr(opapi, s) for s in MAXPOOL + GRID)
        return
    nn, cv = e.handles["libopapi_nn.so"], e.handles["libopapi_cv.so"]
    assert all(hasattr(nn, s) for s in MAXPOOL) and not any(hasattr(nn, s) for s in GRID)
    assert all(hasattr(cv, s) for s in GRID) and not any(hasattr(cv, s) for s in MAXPOOL)
    # libascendcl.so is the same runtime as libacl_rt.so: one state
    compat = e.ffi.dlopen(str(e.home / "lib64" / "libascendcl.so"), e.ffi.RTLD_GLOBAL | e.ffi.RTLD_NOW)
    before = e.counts()[0]
    p = e.ffi.new("void **")
    assert compat.aclrtMalloc(p, 64, 0) == 0
    assert e.counts()[0] == before + 1
    assert e.rt.aclrtFree(p[0]) == 0


# ---- the asynchronous device (docs/architecture.md) -------------------------------------------------------

SLOW_US = 100_000  # simulated kernel time: long against the calls' own cost, short for the suite
SLOW_S = SLOW_US / 1e6
COMPLETE, NOT_READY = 1, 0
D2H, D2D = 2, 3


def _forward(e: _Emu, repeatable: bool = False):
    """Phase 1 of a 2x2x2 max pool of 1..8 (its result: 8 at flat index 7) into out = 0.
    Returns (executor, out pointer, every pointer, the descriptors)."""
    x_ptr, xt = e.device(np.arange(1, 9, dtype=np.float32).reshape(1, 1, 2, 2, 2), 0)
    o_ptr, ot = e.device(np.zeros((1, 1, 1, 1, 1), np.float32), 0)
    i_ptr, it = e.device(np.zeros((1, 1, 1, 1, 1), np.int32), 3)
    arrays = [e.int_array([2]), e.int_array([]), e.int_array([0]), e.int_array([1])]
    ws, ex = e.out_params()
    assert e.op(MAXPOOL[0])(xt, *arrays, False, ot, it, ws, ex) == 0, e.msg()
    if repeatable:
        assert e.nn.aclSetAclOpExecutorRepeatable(ex[0]) == 0
    return ex[0], o_ptr, [x_ptr, o_ptr, i_ptr], ([xt, ot, it], arrays)


def _destroy(e: _Emu, descriptors) -> None:
    tensors, arrays = descriptors
    for t in tensors:
        assert e.nn.aclDestroyTensor(t) == 0
    for a in arrays:
        assert e.nn.aclDestroyIntArray(a) == 0


def _free(e: _Emu, ptrs) -> None:
    for p in ptrs:
        assert e.rt.aclrtFree(p) == 0, e.msg()


def _slow_launch(e: _Emu, executor, stream) -> float:
    """Phase 2 taking SLOW_US of device time; returns when it was called (time.monotonic)."""
    with _env("PYACLNN_EMU_KERNEL_US", str(SLOW_US)):
        start = time.monotonic()
        assert e.op(MAXPOOL[1])(e.ffi.NULL, 0, executor, stream) == 0, e.msg()
    assert time.monotonic() - start < SLOW_S / 2  # it only enqueued the kernel
    return start


def _value(e: _Emu, ptr) -> float:
    return float(e.fetch(ptr, (1,), np.float32)[0])


def _check_launch_returns_before_the_kernel_ran_and_synchronize_waits_for_it(e: _Emu) -> None:
    ex, o_ptr, ptrs, descriptors = _forward(e)
    start = _slow_launch(e, ex, e.ffi.NULL)
    _destroy(e, descriptors)  # descriptors may go right after phase 2 (op-plugin does): not a hazard
    assert _value(e, o_ptr) == 0  # aclrtMemcpy copies at once: it does not wait for the stream
    assert e.rt.aclrtSynchronizeStream(e.ffi.NULL) == 0
    assert time.monotonic() - start >= SLOW_S
    assert _value(e, o_ptr) == 8
    with _env("PYACLNN_EMU_SYNC_US", str(SLOW_US)):  # synchronize adds the simulated latency
        start = time.monotonic()
        assert e.rt.aclrtSynchronizeStream(e.ffi.NULL) == 0
        assert time.monotonic() - start >= SLOW_S
    _free(e, ptrs)


def _check_one_stream_runs_its_tasks_in_submission_order(e: _Emu) -> None:
    ex, o_ptr, ptrs, descriptors = _forward(e)
    copy = e.malloc(4)
    assert e.rt.aclrtMemset(copy, 4, 0, 4) == 0
    stream = e.stream()
    _slow_launch(e, ex, stream)
    assert e.rt.aclrtMemcpyAsync(copy, 4, o_ptr, 4, D2D, stream) == 0  # after the kernel
    assert e.rt.aclrtMemsetAsync(o_ptr, 4, 0, 4, stream) == 0  # after the copy
    assert e.rt.aclrtSynchronizeStream(stream) == 0
    assert _value(e, copy) == 8 and _value(e, o_ptr) == 0
    assert e.rt.aclrtDestroyStream(stream) == 0
    _destroy(e, descriptors)
    _free(e, ptrs + [copy])


def _check_two_streams_run_concurrently_and_synchronize_device_waits_for_all(e: _Emu) -> None:
    launches = [_forward(e) for _ in range(3)]
    streams = [e.stream(), e.stream()]
    start = time.monotonic()
    for (ex, *_), stream in zip(launches, streams):
        _slow_launch(e, ex, stream)
    for stream in streams:
        assert e.rt.aclrtSynchronizeStream(stream) == 0
    took = time.monotonic() - start
    assert SLOW_S <= took < 1.8 * SLOW_S, took  # one after the other would take 2 * SLOW_S
    for (_, o_ptr, *_), stream in zip(launches, [streams[0], e.ffi.NULL]):
        assert e.rt.aclrtMemsetAsync(o_ptr, 4, 0, 4, stream) == 0
    _slow_launch(e, launches[2][0], e.ffi.NULL)  # the default stream is one of the device's streams
    assert e.rt.aclrtSynchronizeDevice() == 0
    assert [_value(e, o) for _, o, *_ in launches] == [0, 0, 8]
    for stream in streams:
        assert e.rt.aclrtDestroyStream(stream) == 0
    for _, _, ptrs, descriptors in launches:
        _destroy(e, descriptors)
        _free(e, ptrs)


def _check_stream_wait_event_orders_work_across_streams(e: _Emu) -> None:
    ex, o_ptr, ptrs, descriptors = _forward(e)
    waited, unordered = e.malloc(4), e.malloc(4)
    for p in (waited, unordered):
        assert e.rt.aclrtMemset(p, 4, 0, 4) == 0
    producer, consumer, other = e.stream(), e.stream(), e.stream()
    done = e.event()
    _slow_launch(e, ex, producer)
    assert e.rt.aclrtRecordEvent(done, producer) == 0
    assert e.rt.aclrtStreamWaitEvent(consumer, done) == 0  # does not block the caller
    assert e.rt.aclrtDestroyEvent(done) == 0  # allowed while pending: the queued wait still works
    assert e.rt.aclrtMemcpyAsync(waited, 4, o_ptr, 4, D2D, consumer) == 0
    assert e.rt.aclrtMemcpyAsync(unordered, 4, o_ptr, 4, D2D, other) == 0
    assert e.rt.aclrtSynchronizeStream(other) == 0
    assert _value(e, unordered) == 0  # no wait: it ran while the kernel was still sleeping
    assert e.rt.aclrtSynchronizeStream(consumer) == 0
    assert _value(e, waited) == 8
    for stream in (producer, consumer, other):
        assert e.rt.aclrtSynchronizeStream(stream) == 0
        assert e.rt.aclrtDestroyStream(stream) == 0
    _destroy(e, descriptors)
    _free(e, ptrs + [waited, unordered])


def _check_event_query_synchronize_and_elapsed_time(e: _Emu) -> None:
    ex, o_ptr, ptrs, descriptors = _forward(e)
    start, end = e.event(), e.event()
    assert e.event_status(start) == COMPLETE  # never recorded
    assert e.elapsed(start, end)[0] == e.c["ACL_ERROR_INVALID_PARAM"]
    assert "never recorded" in e.msg()
    assert e.rt.aclrtSynchronizeEvent(start) == 0  # never recorded: at once
    stream = e.stream()
    assert e.rt.aclrtRecordEvent(start, stream) == 0
    _slow_launch(e, ex, stream)
    assert e.rt.aclrtRecordEvent(end, stream) == 0
    assert e.event_status(end) == NOT_READY
    assert e.elapsed(start, end)[0] == constants.ACL_ERROR_RT_EVENT_NOT_COMPLETE
    e.msg()
    assert e.rt.aclrtSynchronizeEvent(end) == 0
    assert e.event_status(end) == COMPLETE and e.event_status(start) == COMPLETE
    rc, ms = e.elapsed(start, end)
    assert rc == 0 and ms >= SLOW_US / 1000 * 0.999, ms
    assert _value(e, o_ptr) == 8  # the end marker ran after the kernel
    for ev in (start, end):
        assert e.rt.aclrtDestroyEvent(ev) == 0
    assert (
        e.rt.aclrtQueryEventStatus(start, e.ffi.new("aclrtEventRecordedStatus *"))
        == e.c["ACL_ERROR_INVALID_PARAM"]
    )
    assert e.rt.aclrtDestroyEvent(start) == e.c["ACL_ERROR_INVALID_PARAM"]
    assert "event" in e.msg()
    assert e.rt.aclrtDestroyStream(stream) == 0
    _destroy(e, descriptors)
    _free(e, ptrs)


def _check_event_flags_decide_waits_and_timestamps(e: _Emu) -> None:
    ev = e.ffi.new("aclrtEvent *")
    for bad in (4, 64, 32 | 1, 0x100):
        assert e.rt.aclrtCreateEventWithFlag(ev, bad) == e.c["ACL_ERROR_INVALID_PARAM"], bad
        assert "flag" in e.msg()
    external = e.event(32)
    sync_only, timeline_only, both = e.event(1), e.event(8), e.event(1 | 8 | 2 | 16)
    stream = e.stream()
    for event in (sync_only, timeline_only, both):
        assert e.rt.aclrtRecordEvent(event, stream) == 0
    assert e.rt.aclrtSynchronizeStream(stream) == 0
    assert e.elapsed(sync_only, sync_only)[0] == constants.ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID
    assert "ACL_EVENT_TIME_LINE" in e.msg()
    assert e.elapsed(timeline_only, both) == (0, e.elapsed(timeline_only, both)[1])
    assert e.elapsed(timeline_only, both)[1] >= 0
    assert e.rt.aclrtStreamWaitEvent(stream, timeline_only) == e.c["ACL_ERROR_INVALID_PARAM"]
    assert "ACL_EVENT_SYNC" in e.msg()
    for event in (sync_only, both):
        assert e.rt.aclrtStreamWaitEvent(stream, event) == 0
    assert e.rt.aclrtSynchronizeStream(stream) == 0
    for event in (external, sync_only, timeline_only, both):
        assert e.rt.aclrtDestroyEvent(event) == 0
    assert e.rt.aclrtDestroyStream(stream) == 0


def _check_pageable_memcpy_async_waits_and_pinned_does_not(e: _Emu) -> None:
    ex, o_ptr, ptrs, descriptors = _forward(e, repeatable=True)
    stream = e.stream()
    start = _slow_launch(e, ex, stream)
    pageable = np.zeros(1, np.float32)
    assert e.rt.aclrtMemcpyAsync(e.ffi.from_buffer(pageable), 4, o_ptr, 4, D2H, stream) == 0
    assert time.monotonic() - start >= SLOW_S and pageable[0] == 8  # returned once the copy had run
    pinned = e.ffi.new("void **")
    assert e.rt.aclrtMallocHost(pinned, 4) == 0
    value = e.ffi.cast("float *", pinned[0])
    value[0] = -1.0
    assert e.rt.aclrtMemsetAsync(o_ptr, 4, 0, 4, stream) == 0
    _slow_launch(e, ex, stream)
    start = time.monotonic()
    assert e.rt.aclrtMemcpyAsync(pinned[0], 4, o_ptr, 4, D2H, stream) == 0
    assert time.monotonic() - start < SLOW_S / 2 and value[0] == -1.0  # queued, not run yet
    assert e.rt.aclrtSynchronizeStream(stream) == 0
    assert value[0] == 8
    assert e.rt.aclrtFreeHost(pinned[0]) == 0
    assert e.nn.aclDestroyAclOpExecutor(ex) == 0
    assert e.rt.aclrtDestroyStream(stream) == 0
    _destroy(e, descriptors)
    _free(e, ptrs)


def _check_hazard_device_memory_freed_while_a_queued_kernel_uses_it(e: _Emu) -> None:
    before = e.hazards()
    ex, o_ptr, ptrs, descriptors = _forward(e)
    _slow_launch(e, ex, e.ffi.NULL)
    assert e.rt.aclrtFree(o_ptr) == 0
    assert e.hazards() == before + 1
    host = np.zeros(1, np.float32)
    assert e.rt.aclrtMemcpy(o_ptr, 4, e.ffi.from_buffer(host), 4, 1) == e.c["ACL_ERROR_INVALID_PARAM"]  # gone
    e.msg()
    assert e.rt.aclrtSynchronizeStream(e.ffi.NULL) == 0  # the kernel wrote into quarantined memory
    _destroy(e, descriptors)
    _free(e, [p for p in ptrs if p != o_ptr])


def _check_hazard_pinned_memory_freed_while_a_queued_copy_uses_it(e: _Emu) -> None:
    before = e.hazards()
    ex, o_ptr, ptrs, descriptors = _forward(e)
    stream = e.stream()
    _slow_launch(e, ex, stream)
    pinned = e.ffi.new("void **")
    assert e.rt.aclrtMallocHost(pinned, 4) == 0
    assert e.rt.aclrtMemcpyAsync(pinned[0], 4, o_ptr, 4, D2H, stream) == 0
    assert e.rt.aclrtFreeHost(pinned[0]) == 0
    assert e.hazards() == before + 1
    assert e.rt.aclrtSynchronizeStream(stream) == 0
    assert e.rt.aclrtDestroyStream(stream) == 0
    _destroy(e, descriptors)
    _free(e, ptrs)


def _check_hazard_stream_destroyed_with_tasks_pending(e: _Emu) -> None:
    before = e.hazards()
    ex, o_ptr, ptrs, descriptors = _forward(e)
    stream = e.stream()
    _slow_launch(e, ex, stream)
    assert e.rt.aclrtDestroyStream(stream) == 0  # waits for the tasks, then destroys
    assert e.hazards() == before + 1
    assert _value(e, o_ptr) == 8
    _destroy(e, descriptors)
    _free(e, ptrs)


def _check_hazard_repeatable_executor_destroyed_while_its_launch_is_queued(e: _Emu) -> None:
    before = e.hazards()
    ex, o_ptr, ptrs, descriptors = _forward(e, repeatable=True)
    _slow_launch(e, ex, e.ffi.NULL)
    assert e.nn.aclDestroyAclOpExecutor(ex) == 0
    assert e.hazards() == before + 1
    assert e.rt.aclrtSynchronizeStream(e.ffi.NULL) == 0
    assert _value(e, o_ptr) == 8  # the launch still had its plan
    assert e.nn.aclDestroyAclOpExecutor(ex) == e.c["ACLNN_ERR_INNER_NULLPTR"]
    e.msg()
    _destroy(e, descriptors)
    _free(e, ptrs)


def _in_thread(work, e: _Emu | None = None, device: int | None = None):
    """Run work() in a new thread and return its result; the thread first makes ``device``
    current (``e``'s aclrtSetDevice: it is per thread), or sets none if ``device`` is None."""
    result, errors = [], []

    def body() -> None:
        try:
            if device is not None:
                assert e is not None
                assert e.rt.aclrtSetDevice(device) == 0, e.msg()
            result.append(work())
        except Exception:
            errors.append(traceback.format_exc())

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert errors == [], errors[0]
    return result[0]


def _on_device(e: _Emu, device: int, work):
    """Run work() in a new thread whose current device is `device` (it is per thread)."""
    return _in_thread(work, e, device)


def _device_counts(e: _Emu, device: int) -> list[int]:
    """The per-device kinds of pyaclnnEmuDeviceLiveCounts: device and host allocations, streams."""
    out = e.ffi.new("int64_t[7]")
    assert e.rt.pyaclnnEmuDeviceLiveCounts(device, out, 7) == 7
    return [out[0], out[1], out[6]]


def _check_several_devices_count_their_own_objects(e: _Emu) -> None:
    count = e.ffi.new("uint32_t *")
    assert e.rt.aclrtGetDeviceCount(count) == 0 and count[0] == _DEVICES == 2
    base0, base1 = _device_counts(e, 0), _device_counts(e, 1)
    stream1 = _on_device(e, 1, e.stream)
    mem1 = _on_device(e, 1, lambda: e.malloc(64))
    assert _device_counts(e, 1) == [base1[0] + 1, base1[1], base1[2] + 1]
    assert _device_counts(e, 0) == base0
    _on_device(e, 1, lambda: e.rt.aclrtDestroyStream(stream1))
    assert e.rt.aclrtFree(mem1) == 0  # aclrtFree of another device's memory works (ApiImpl::DevFree)
    assert _device_counts(e, 1) == base1


CONTEXT_NULL, STREAM_CONTEXT = constants.ACL_ERROR_RT_CONTEXT_NULL, constants.ACL_ERROR_RT_STREAM_CONTEXT


def _no_context(e: _Emu, api: str, rc: int) -> None:
    assert rc == CONTEXT_NULL, (api, rc)
    text = e.msg()
    assert text.startswith(api + ": no device is set in this thread") and "aclrtSetDevice" in text, text


def _check_a_thread_that_set_no_device_has_no_context(e: _Emu) -> None:
    """CANN's current context is thread-local: a new thread has none until aclrtSetDevice."""
    ex, o_ptr, ptrs, descriptors = _forward(e)
    stream, event = e.stream(), e.event()
    assert e.rt.aclrtRecordEvent(event, stream) == 0
    assert e.rt.aclrtSynchronizeStream(stream) == 0
    host = np.zeros(1, np.float32)
    hp = e.ffi.from_buffer(host)
    pinned = e.ffi.new("void **")
    assert e.rt.aclrtMallocHost(pinned, 4) == 0

    def without_a_device() -> None:
        out, s_out, ev_out = e.ffi.new("void **"), e.ffi.new("aclrtStream *"), e.ffi.new("aclrtEvent *")
        dev, free_bytes, total = e.ffi.new("int32_t *"), e.ffi.new("size_t *"), e.ffi.new("size_t *")
        calls = {
            "aclrtMalloc": lambda: e.rt.aclrtMalloc(out, 64, 0),
            "aclrtMallocHost": lambda: e.rt.aclrtMallocHost(out, 64),
            "aclrtCreateStream": lambda: e.rt.aclrtCreateStream(s_out),
            "aclrtDestroyStream": lambda: e.rt.aclrtDestroyStream(stream),
            "aclrtSynchronizeStream": lambda: e.rt.aclrtSynchronizeStream(stream),  # even a valid one
            "aclrtSynchronizeDevice": lambda: e.rt.aclrtSynchronizeDevice(),
            "aclrtCreateEvent": lambda: e.rt.aclrtCreateEvent(ev_out),
            "aclrtCreateEventWithFlag": lambda: e.rt.aclrtCreateEventWithFlag(ev_out, 1),
            "aclrtRecordEvent": lambda: e.rt.aclrtRecordEvent(event, stream),
            "aclrtStreamWaitEvent": lambda: e.rt.aclrtStreamWaitEvent(stream, event),
            "aclrtMemcpy": lambda: e.rt.aclrtMemcpy(hp, 4, o_ptr, 4, D2H),
            "aclrtMemcpyAsync": lambda: e.rt.aclrtMemcpyAsync(pinned[0], 4, o_ptr, 4, D2H, stream),
            "aclrtMemset": lambda: e.rt.aclrtMemset(o_ptr, 4, 0, 4),
            "aclrtMemsetAsync": lambda: e.rt.aclrtMemsetAsync(o_ptr, 4, 0, 4, stream),
            "aclrtGetDevice": lambda: e.rt.aclrtGetDevice(dev),
            "aclrtGetMemInfo": lambda: e.rt.aclrtGetMemInfo(1, free_bytes, total),
        }
        for api, call in calls.items():
            _no_context(e, api, call())
        assert e.rt.aclrtSynchronizeStream(e.ffi.NULL) == CONTEXT_NULL  # the default stream: none either
        e.msg()
        # phase 2 fails as a launch does; the (non-repeatable) executor is consumed
        assert e.op(MAXPOOL[1])(e.ffi.NULL, 0, ex, stream) == e.c["ACLNN_ERR_RUNTIME_ERROR"]
        assert "ACL_ERROR_RT_CONTEXT_NULL" in e.msg()
        # what needs a handle only works: events, nnopbase, phase 1, aclrtFree
        assert e.rt.aclrtSynchronizeEvent(event) == 0 and e.event_status(event) == COMPLETE
        assert e.elapsed(event, event) == (0, 0.0)
        p = e.ffi.new("void **")
        assert e.rt.aclrtGetDeviceCount(e.ffi.new("uint32_t *")) == 0
        assert e.ffi.string(e.rt.aclrtGetSocName()).startswith(b"Ascend")
        dims = e.ffi.new("int64_t[]", [1, 1, 1, 1, 1])
        t = e.nn.aclCreateTensor(dims, 5, 0, e.ffi.NULL, 0, 2, dims, 5, o_ptr)
        assert t != e.ffi.NULL, e.msg()
        assert e.nn.aclDestroyTensor(t) == 0
        ws, ex2 = e.out_params()
        tensors, arrays = descriptors
        assert e.op(MAXPOOL[0])(tensors[0], *arrays, False, tensors[1], tensors[2], ws, ex2) == 0, e.msg()
        assert e.nn.aclSetAclOpExecutorRepeatable(ex2[0]) == 0
        assert e.nn.aclDestroyAclOpExecutor(ex2[0]) == 0
        assert e.rt.aclrtDestroyEvent(event) == 0
        assert e.rt.aclrtFreeHost(pinned[0]) == 0
        assert e.rt.aclrtFree(o_ptr) == 0  # allocated by the main thread
        # aclrtSetDevice gives the thread a context; aclrtResetDevice of it takes it away
        assert e.rt.aclrtSetDevice(0) == 0
        assert e.rt.aclrtMalloc(p, 64, 0) == 0 and e.rt.aclrtFree(p[0]) == 0
        assert e.rt.aclrtGetDevice(dev) == 0 and dev[0] == 0
        assert e.rt.aclrtResetDevice(1) == 0  # not its device: nothing changes
        assert e.rt.aclrtGetDevice(dev) == 0
        assert e.rt.aclrtResetDevice(0) == 0
        _no_context(e, "aclrtMalloc", e.rt.aclrtMalloc(p, 64, 0))

    _in_thread(without_a_device)
    assert e.rt.aclrtDestroyStream(stream) == 0  # it was still live
    _destroy(e, descriptors)
    _free(e, [p for p in ptrs if p != o_ptr])


def _check_streams_and_events_belong_to_the_device_current_at_their_creation(e: _Emu) -> None:
    ex, o_ptr, ptrs, descriptors = _forward(e, repeatable=True)  # device 0, the current one here
    stream1, event1, mem1 = _on_device(e, 1, lambda: (e.stream(), e.event(), e.malloc(64)))
    stream0, event0 = e.stream(), e.event()
    before = e.hazards()

    def refused(api: str, rc: int) -> None:
        assert rc == STREAM_CONTEXT, (api, rc)
        text = e.msg()
        assert text.startswith(api + ": ") and "ACL_ERROR_RT_STREAM_CONTEXT" in text, text

    refused("aclrtMemsetAsync", e.rt.aclrtMemsetAsync(mem1, 64, 0, 64, stream1))
    refused("aclrtMemcpyAsync", e.rt.aclrtMemcpyAsync(mem1, 4, o_ptr, 4, D2D, stream1))
    refused("aclrtRecordEvent", e.rt.aclrtRecordEvent(event0, stream1))
    refused("aclrtRecordEvent", e.rt.aclrtRecordEvent(event1, stream0))  # the event's device differs
    refused("aclrtStreamWaitEvent", e.rt.aclrtStreamWaitEvent(stream1, event0))
    refused("aclrtDestroyStream", e.rt.aclrtDestroyStream(stream1))
    assert e.op(MAXPOOL[1])(e.ffi.NULL, 0, ex, stream1) == e.c["ACLNN_ERR_RUNTIME_ERROR"]
    assert "ACL_ERROR_RT_STREAM_CONTEXT" in e.msg()
    assert e.rt.aclrtSynchronizeStream(stream1) == 0  # another device's stream may be synchronized
    assert e.hazards() == before  # errors, not hazards
    # the same calls from device 1 work
    assert _on_device(e, 1, lambda: e.rt.aclrtMemsetAsync(mem1, 64, 0, 64, stream1)) == 0
    assert _on_device(e, 1, lambda: e.rt.aclrtRecordEvent(event1, stream1)) == 0
    assert _on_device(e, 1, lambda: e.rt.aclrtSynchronizeStream(stream1)) == 0
    assert _on_device(e, 1, lambda: e.rt.aclrtDestroyStream(stream1)) == 0
    for ev in (event0, event1):
        assert e.rt.aclrtDestroyEvent(ev) == 0  # any device's event
    assert e.rt.aclrtDestroyStream(stream0) == 0
    assert e.rt.aclrtFree(mem1) == 0
    assert e.nn.aclDestroyAclOpExecutor(ex) == 0
    _destroy(e, descriptors)
    _free(e, ptrs)


def _check_hazard_a_kernel_using_memory_of_another_device(e: _Emu) -> None:
    ex, o_ptr, ptrs, descriptors = _forward(e)  # device 0 memory
    before = e.hazards()
    status = _on_device(e, 1, lambda: e.op(MAXPOOL[1])(e.ffi.NULL, 0, ex, e.ffi.NULL))  # device 1's stream
    assert status == 0
    assert e.hazards() == before + 1
    assert _on_device(e, 1, e.rt.aclrtSynchronizeDevice) == 0
    assert _value(e, o_ptr) == 8  # the launch still ran
    _destroy(e, descriptors)
    _free(e, ptrs)


def _check_a_stream_waits_for_an_event_of_another_device(e: _Emu) -> None:
    """Atlas A2/A3's cross-device wait: accepted, and the waiting stream really waits."""

    def produce():
        ex, o_ptr, ptrs, descriptors = _forward(e)  # device 1 memory and kernel
        stream1, done = e.stream(), e.event()
        start = _slow_launch(e, ex, stream1)
        assert e.rt.aclrtRecordEvent(done, stream1) == 0
        return start, o_ptr, ptrs, descriptors, stream1, done

    start, o_ptr, ptrs, descriptors, stream1, done = _on_device(e, 1, produce)
    stream0 = e.stream()
    mark = e.malloc(4)
    assert e.rt.aclrtMemset(mark, 4, 0, 4) == 0
    assert e.rt.aclrtStreamWaitEvent(stream0, done) == 0  # stream of device 0, event of device 1
    assert e.rt.aclrtMemsetAsync(mark, 4, 1, 4, stream0) == 0
    assert e.rt.aclrtSynchronizeStream(stream0) == 0
    assert time.monotonic() - start >= SLOW_S  # it waited for device 1's kernel
    assert _value(e, o_ptr) == 8 and e.event_status(done) == COMPLETE
    assert e.fetch(mark, (4,), np.uint8).tolist() == [1, 1, 1, 1]
    assert e.rt.aclrtDestroyStream(stream0) == 0
    assert _on_device(e, 1, lambda: e.rt.aclrtDestroyStream(stream1)) == 0
    assert e.rt.aclrtDestroyEvent(done) == 0
    _destroy(e, descriptors)
    _free(e, ptrs + [mark])


def _failing_backward(e: _Emu):
    """Phase 1 of a max-pool backward whose index lies outside its plane (a device error when it
    runs): (executor, workspace size, pointers, descriptors)."""
    go_ptr, go = e.device(np.ones((1, 1, 1, 1, 1), np.float32), 0)
    x_ptr, xt = e.device(np.ones((1, 1, 2, 2, 2), np.float32), 0)
    i_ptr, it = e.device(np.array([8], np.int32).reshape(1, 1, 1, 1, 1), 3)
    gi_ptr, git = e.device(np.zeros((1, 1, 2, 2, 2), np.float32), 0)
    arrays = [e.int_array([2]), e.int_array([]), e.int_array([0]), e.int_array([1])]
    ws, ex = e.out_params()
    assert e.op(MAXPOOL[2])(go, xt, it, *arrays, False, git, ws, ex) == 0, e.msg()
    assert e.nn.aclSetAclOpExecutorRepeatable(ex[0]) == 0
    ws_ptr = e.malloc(ws[0])
    return ex[0], ws[0], ws_ptr, [go_ptr, x_ptr, i_ptr, gi_ptr, ws_ptr], ([go, xt, it, git], arrays)


def _check_a_device_error_continues_on_failure(e: _Emu) -> None:
    """CANN's default CONTINUE_ON_FAILURE mode (Stream::GetError, src/runtime/core/src/stream/stream.cc):
    the error is the failing stream's, reported once; events after it complete, waiters go on."""
    vector_core = constants.ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
    ex, ws, ws_ptr, ptrs, descriptors = _failing_backward(e)
    failing, waiting = e.stream(), e.stream()
    after, seen = e.malloc(4), e.malloc(4)
    after_fail = e.event()
    for p in (after, seen):
        assert e.rt.aclrtMemset(p, 4, 0, 4) == 0
    assert e.op(MAXPOOL[3])(ws_ptr, ws, ex, failing) == 0, e.msg()
    assert e.rt.aclrtRecordEvent(after_fail, failing) == 0
    assert e.rt.aclrtMemsetAsync(after, 4, 1, 4, failing) == 0  # later work on the stream
    assert e.rt.aclrtStreamWaitEvent(waiting, after_fail) == 0
    assert e.rt.aclrtMemsetAsync(seen, 4, 2, 4, waiting) == 0
    assert e.rt.aclrtSynchronizeEvent(after_fail) == 0  # the event does not carry the error
    assert e.event_status(after_fail) == COMPLETE
    assert e.rt.aclrtSynchronizeStream(waiting) == 0  # the waiter proceeds, without the error
    assert e.fetch(seen, (4,), np.uint8).tolist() == [2] * 4
    assert e.rt.aclrtSynchronizeStream(failing) == vector_core  # reported once ...
    assert "device error of a launch on stream" in e.msg()
    assert e.rt.aclrtSynchronizeStream(failing) == 0  # ... and cleared
    assert e.rt.aclrtSynchronizeDevice() == 0
    assert e.fetch(after, (4,), np.uint8).tolist() == [1] * 4  # later work ran
    # aclrtSynchronizeDevice reports a failure not reported yet, and clears every stream's
    for s in (failing, waiting):
        assert e.op(MAXPOOL[3])(ws_ptr, ws, ex, s) == 0, e.msg()
    assert e.rt.aclrtSynchronizeDevice() == vector_core
    e.msg()
    for s in (failing, waiting):
        assert e.rt.aclrtSynchronizeStream(s) == 0
    assert e.rt.aclrtSynchronizeDevice() == 0
    # the stream keeps working
    assert e.rt.aclrtMemsetAsync(after, 4, 3, 4, failing) == 0
    assert e.rt.aclrtSynchronizeStream(failing) == 0
    assert e.fetch(after, (4,), np.uint8).tolist() == [3] * 4
    assert e.rt.aclrtDestroyEvent(after_fail) == 0
    for s in (failing, waiting):
        assert e.rt.aclrtDestroyStream(s) == 0
    assert e.nn.aclDestroyAclOpExecutor(ex) == 0
    _destroy(e, descriptors)
    _free(e, ptrs + [after, seen])


_CHECKS = [f for name, f in sorted(globals().items()) if name.startswith("_check_")]
_CHECK_NAMES = [f.__name__[len("_check_") :] for f in _CHECKS]
_CASES = {
    "maxpool_forward": lambda e: _maxpool_forward_case(e),
    "maxpool_float16_bits": lambda e: _maxpool_half_case(e, 1),
    "maxpool_bfloat16_bits": lambda e: _maxpool_half_case(e, 27),
    "grid_bilinear_zeros": lambda e: _grid_case(e, "float32", 0, 0, False),
    "grid_bilinear_reflection_align": lambda e: _grid_case(e, "float32", 0, 2, True),
    "grid_nearest_border_double": lambda e: _grid_case(e, "float64", 1, 1, False),
    "grid_partial_mask": lambda e: _grid_case(e, "float32", 0, 1, True, mask=(False, True)),
    "grid_nearest_ties": lambda e: _grid_case(e, "float32", 1, 0, True, ties=True),
    "grid_ndhwc": lambda e: _grid_case(e, "float32", 0, 2, False, ndhwc=True),
    "grid_float16": lambda e: _grid_case(e, "float16", 0, 0, True),
}


def _child_main(layout: str, home: str) -> None:
    report: dict = {"checks": {}, "cases": {}}
    e = _Emu(layout, Path(home))
    assert e.rt.aclrtSetDevice(0) == 0, e.msg()  # the checks run in this thread, on device 0
    report["hazards"] = {}
    for name, check in zip(_CHECK_NAMES, _CHECKS):
        before = e.hazards()
        try:
            check(e)
            report["checks"][name] = None
        except Exception:
            report["checks"][name] = traceback.format_exc()
        report["hazards"][name] = e.hazards() - before
    for name, case in _CASES.items():
        try:
            report["cases"][name] = case(e)
        except Exception:
            report["cases"][name] = {"error": traceback.format_exc()}
    report["final_counts"] = e.counts()
    report["final_hazards"] = e.hazards()
    json.dump(report, sys.stdout)


# ----------------------------------------------------------------------------
# Parent side: pytest.
# ----------------------------------------------------------------------------

_reports: dict[str, dict] = {}


def _report(layout: str) -> dict:
    if layout not in _reports:
        home = emulator_home(layout)
        path = os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])
        # The checks provoke hazards on purpose and count them: not fatal in this child.
        env = dict(
            os.environ, PYTHONPATH=path, PYACLNN_EMU_DEVICES=str(_DEVICES), PYACLNN_EMU_HAZARD_FATAL="0"
        )
        proc = subprocess.run(
            [sys.executable, __file__, layout, str(home)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert proc.returncode == 0, (
            f"emulator child ({layout}) crashed:\n{proc.stderr}\n{proc.stdout[-2000:]}"
        )
        _reports[layout] = json.loads(proc.stdout)
    return _reports[layout]


LAYOUT_PARAMS = pytest.mark.parametrize("layout", ["classic", "split"])


@LAYOUT_PARAMS
@pytest.mark.parametrize("check", _CHECK_NAMES)
def test_emulator_behaviour(layout: str, check: str) -> None:
    failure = _report(layout)["checks"][check]
    assert failure is None, failure


@LAYOUT_PARAMS
def test_everything_the_checks_created_was_released(layout: str) -> None:
    assert _report(layout)["final_counts"] == [0] * 7


@LAYOUT_PARAMS
def test_only_the_hazard_checks_count_hazards(layout: str) -> None:
    """A correct program counts none: every check but the hazard_ ones (which assert their own count)."""
    report = _report(layout)
    clean = {name: n for name, n in report["hazards"].items() if "hazard_" not in name}
    assert clean == dict.fromkeys(clean, 0)
    assert sum(report["hazards"].values()) == report["final_hazards"]  # the cases count none either


def _case(layout: str, name: str) -> dict:
    case = _report(layout)["cases"][name]
    assert "error" not in case, case.get("error")
    return case


@LAYOUT_PARAMS
def test_maxpool_forward_matches_torch(layout: str, torch) -> None:
    c = _case(layout, "maxpool_forward")
    x = torch.tensor(c["x"])
    out, idx = torch.ops.aten.max_pool3d_with_indices(x, c["k"], c["s"], c["p"], c["d"], True)
    np.testing.assert_array_equal(np.array(c["out"], np.float32), out.numpy())
    np.testing.assert_array_equal(np.array(c["indices"]), idx.numpy())


@LAYOUT_PARAMS
@pytest.mark.parametrize("name", ["maxpool_float16_bits", "maxpool_bfloat16_bits"])
def test_half_types_are_read_exactly_and_rounded_once_to_nearest_even(layout: str, name: str) -> None:
    import ml_dtypes

    half = np.float16 if name == "maxpool_float16_bits" else ml_dtypes.bfloat16
    c = _case(layout, name)
    every = np.arange(1 << 16, dtype=np.uint16).view(half)
    forward = np.array(c["forward"], np.uint16).view(half)
    nan = np.isnan(every.astype(np.float32))
    assert np.array_equal(np.isnan(forward.astype(np.float32)), nan)
    assert np.array_equal(forward.view(np.uint16)[~nan], every.view(np.uint16)[~nan])  # -0.0 and inf kept
    assert np.array_equal(np.array(c["forward_idx"]), np.arange(1 << 16))
    a, b = np.array(c["pairs"], np.uint16).view(half).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf and overflow are part of the test
        want = (a + b).astype(half)  # fp32 sum, one round-to-nearest-even cast (NumPy / ml_dtypes)
    got = np.array(c["backward"], np.uint16)[0].view(half)
    want_nan = np.isnan(want.astype(np.float32))
    assert np.array_equal(np.isnan(got.astype(np.float32)), want_nan)
    assert np.array_equal(got.view(np.uint16)[~want_nan], want.view(np.uint16)[~want_nan])
    assert not np.array(c["backward"], np.uint16)[1].any()  # row 1 received nothing: +0.0


@LAYOUT_PARAMS
@pytest.mark.parametrize(
    "name",
    [
        "grid_bilinear_zeros",
        "grid_bilinear_reflection_align",
        "grid_nearest_border_double",
        "grid_partial_mask",
        "grid_nearest_ties",
        "grid_ndhwc",
        "grid_float16",
    ],
)
def test_grid_sampler_matches_torch(layout: str, name: str, torch) -> None:
    c = _case(layout, name)
    # float16 data is computed in fp32 and rounded once: the oracle is torch in fp32, cast to fp16
    dt = torch.float64 if c["dtype"] == "float64" else torch.float32
    x, grid, go = (torch.tensor(c[k], dtype=dt) for k in ("x", "grid", "go"))
    if c["ndhwc"]:
        x, go = x.permute(0, 4, 1, 2, 3), go.permute(0, 4, 1, 2, 3)
    out = torch.ops.aten.grid_sampler_3d(x, grid, c["interp"], c["pad"], c["align"])
    mask = [True, True]
    gi, gg = torch.ops.aten.grid_sampler_3d_backward(go, x, grid, c["interp"], c["pad"], c["align"], mask)
    if c["ndhwc"]:  # back to the emulator's (N, D, H, W, C)
        out, gi = out.permute(0, 2, 3, 4, 1), gi.permute(0, 2, 3, 4, 1)
    if c["dtype"] == "float16":
        out, gi, gg = (t.half().float() for t in (out, gi, gg))
    tol = {
        "float64": {"rtol": 1e-12, "atol": 1e-12},
        "float32": {"rtol": 1e-5, "atol": 1e-5},
        "float16": {"rtol": 2e-3, "atol": 2e-3},
    }[c["dtype"]]  # fp16: one ulp for fp32 order effects
    np.testing.assert_allclose(np.array(c["out"]), out.numpy(), **tol)
    if c["mask"][0]:
        np.testing.assert_allclose(np.array(c["input_grad"]), gi.numpy(), **tol)
    else:  # unmasked output keeps its previous contents
        assert np.all(np.array(c["input_grad"]) == 5)
    np.testing.assert_allclose(np.array(c["grid_grad"]), gg.numpy(), **tol)


if __name__ == "__main__":
    _child_main(sys.argv[1], sys.argv[2])
