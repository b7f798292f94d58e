"""Lifetimes: flat memory over long loops, misuse of the low-level API, and who frees what.

* Soak: each of the four ops runs PYACLNN_SOAK_ITERATIONS times (default 1000)
  per backend; the process RSS after a warm-up and at the end stay within a
  small bound and the backend's live counters do not move.
* Misuse of the low-level API (double free / destroy, use after free, foreign
  handles, destroyed streams, consumed executors) raises AclError /
  AclnnError / TypeError on both backends instead of crashing.
* DeviceArray and Stream free what they own on close(), on garbage collection
  and at interpreter exit (a child process that never closes anything).
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import operators
import pytest

import pyaclnn
from pyaclnn import AclError, AclnnError, acl, aclnn, backends, runtime
from pyaclnn._array import _CLOSED
from pyaclnn.dtypes import ACL_FLOAT, ACL_FORMAT_ND, ACL_INT32

SOAK_ITERATIONS = int(os.environ.get("PYACLNN_SOAK_ITERATIONS", "1000"))
WARMUP = 30
# Allowed RSS growth between the end of the warm-up and the end of the loop.
# A leak of one input copy per call (>= 64 KiB) over the default 1000
# iterations would exceed it several times over.
RSS_BOUND = 8 << 20
RNG = np.random.default_rng(55)

_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    """Resident set size of this process in bytes (/proc/self/statm)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def counts(backend: str) -> dict[str, int]:
    return dict(backends.get(backend).live_counts())


@pytest.fixture
def npu(emulator_home):
    """The npu backend over the emulator, for tests that also need numpy in the same process."""
    os.environ["PYACLNN_ASCEND_HOME"] = str(emulator_home)
    yield "npu"
    pyaclnn.finalize("npu")
    left = backends.get("npu").live_counts()
    assert not any(left.values()), f"live objects left on npu: {left}"


# -- soak ------------------------------------------------------------------------


def _soak_cases():
    x = RNG.standard_normal((2, 4, 16, 16, 16)).astype(np.float32)  # 128 KiB
    out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend="numpy")
    gout = RNG.standard_normal(out.shape).astype(np.float32)
    inp = RNG.standard_normal((1, 4, 8, 8, 8)).astype(np.float32)
    grid = RNG.uniform(-1.1, 1.1, (1, 16, 16, 16, 3)).astype(np.float32)  # 48 KiB
    gs_gout = RNG.standard_normal((1, 4, 16, 16, 16)).astype(np.float32)
    cases = {
        "max_pool3d_with_argmax": lambda b, **kw: pyaclnn.max_pool3d_with_argmax(x, 2, backend=b, **kw),
        "max_pool3d_with_argmax_backward": lambda b, **kw: pyaclnn.max_pool3d_with_argmax_backward(
            gout, x, idx, 2, backend=b, **kw
        ),
        "grid_sampler3d": lambda b, **kw: pyaclnn.grid_sampler3d(
            inp, grid, "bilinear", "border", backend=b, **kw
        ),
        "grid_sampler3d_backward": lambda b, **kw: pyaclnn.grid_sampler3d_backward(
            gs_gout, inp, grid, "bilinear", "reflection", True, backend=b, **kw
        ),
    }
    return operators.per_operator(cases, "the lifetime soak")


#: How many more of one kind of live object (blocks, descriptors, plans) the soak may leave than
#: its warm-up did. A call that finds the other stream's blocks still in use takes a new one (with
#: its descriptor and plans), and the pool keeps it: how often depends on timing (a fence queried
#: before the other stream's worker ran it), so the working set may grow a little at any time,
#: up to the pool's and the plan cache's limits. A leak of one object per call passes it by the
#: first count (50 calls).
SOAK_SLACK = 24


def _grown(before: dict[str, int], after: dict[str, int]) -> int:
    """The largest growth of one kind of live object from ``before`` to ``after``."""
    return max(after[kind] - before.get(kind, 0) for kind in after)


def _as_tuple(result) -> tuple:
    return result if isinstance(result, tuple) else (result,)


@pytest.mark.parametrize("op", list(_soak_cases()))
def test_soak_memory_and_live_objects_stay_bounded(backend, op):
    call = _soak_cases()[op]
    first = _as_tuple(call(backend))
    stream = pyaclnn.Stream(backend=backend)
    for i in range(WARMUP):  # an even count: the loop below goes on with the same pattern
        # As in the loop below, each result is alive during the next call: the host pool's buffers
        # (kept mapped for the device between results) and the plans made for them, per stream,
        # reach their working set here (but see SOAK_SLACK).
        result = _as_tuple(call(backend, stream=stream if i % 2 else None))
    gc.collect()
    base_counts, base_rss = counts(backend), rss()
    for i in range(SOAK_ITERATIONS):
        # alternate the calling thread's default stream and an explicit one
        result = _as_tuple(call(backend, stream=stream if i % 2 else None))
        if i % 50 == 49:
            now = counts(backend)
            assert _grown(base_counts, now) <= SOAK_SLACK, (
                f"live objects grew after {i + 1} calls of {op}: {now}"
            )
    gc.collect()
    grown = rss() - base_rss
    assert _grown(base_counts, counts(backend)) <= SOAK_SLACK
    assert grown <= RSS_BOUND, f"RSS grew by {grown / 2**20:.1f} MiB over {SOAK_ITERATIONS} calls of {op}"
    for a, b in zip(first, result):  # and the answer did not drift
        np.testing.assert_array_equal(a, b)
    stream.close()


def test_soak_with_device_arrays_frees_every_result(backend):
    x = RNG.standard_normal((1, 2, 8, 8, 8)).astype(np.float32)
    d = pyaclnn.to_device(x, backend=backend)
    base = None
    for i in range(WARMUP + SOAK_ITERATIONS // 2):
        out, idx = pyaclnn.max_pool3d_with_argmax(d, 2, backend=backend)
        grad = pyaclnn.max_pool3d_with_argmax_backward(out, d, idx, 2, backend=backend)
        assert isinstance(grad, pyaclnn.DeviceArray)
        for a in (out, idx, grad):
            a.close()
        if i == WARMUP:
            base = counts(backend)
        elif i > WARMUP:
            assert counts(backend) == base
    d.close()


@pytest.mark.parametrize(
    ("out_shape", "call"),
    [
        pytest.param(  # out= for the values; the made int32 indices are widened, not returned
            (1, 2, 2, 2, 2),
            lambda d, given, backend: pyaclnn.max_pool3d_with_argmax(
                d, 2, indices_dtype=np.int64, out=(given, None), backend=backend
            ),
            id="max_pool_int64_indices_with_out",
        ),
        pytest.param(  # out= for grad_input; the grid gradient is made but masked off
            (1, 2, 4, 4, 4),
            lambda d, given, backend: pyaclnn.grid_sampler3d_backward(
                d,
                d,
                np.zeros((1, 4, 4, 4, 3), np.float32),
                output_mask=(True, False),
                out=(given, None),
                backend=backend,
            ),
            id="grid_backward_masked_output_with_out",
        ),
    ],
)
def test_an_output_the_call_made_and_does_not_return_is_closed_by_the_call(
    backend, monkeypatch, out_shape, call
):
    """An output a call allocated but does not hand back goes back to the pool when the call
    ends, not whenever the garbage collector finalizes it (as many returned arrays as made ones
    must not pass for "all of them returned")."""
    finalized_open = []
    real_del = pyaclnn.DeviceArray.__del__

    def recording_del(self):
        if getattr(self, "_block", _CLOSED) is not _CLOSED:  # still holding memory
            finalized_open.append(self.shape)
        real_del(self)

    monkeypatch.setattr(pyaclnn.DeviceArray, "__del__", recording_del)
    d = pyaclnn.to_device(RNG.standard_normal((1, 2, 4, 4, 4)).astype(np.float32), backend=backend)
    given = pyaclnn.empty(out_shape, np.float32, backend=backend)
    results = call(d, given, backend)
    assert results[0] is given
    gc.collect()
    assert finalized_open == []
    for r in results:
        if r is not None:
            r.close()
    d.close()


def test_device_arrays_compare_by_identity(backend):
    # A call tells the outputs it returns from those it gives back by membership (`in`),
    # which is identity only while DeviceArray defines no __eq__ of its own.
    zeros = np.zeros((2, 3), np.float32)
    with pyaclnn.to_device(zeros, backend=backend) as a, pyaclnn.to_device(zeros, backend=backend) as b:
        assert a == a and a != b and a not in [b] and a in [b, a]


# -- misuse of the low-level API ---------------------------------------------------


def _tensor(backend: str, ptr: int, n: int = 4):
    return acl.create_tensor((n,), ACL_FLOAT, None, 0, ACL_FORMAT_ND, (n,), ptr, backend=backend)


def test_double_free_raises(backend):
    runtime.context(backend)
    ptr = acl.rt.malloc(64, backend=backend)
    acl.rt.free(ptr, backend=backend)
    with pytest.raises(AclError) as info:
        acl.rt.free(ptr, backend=backend)
    assert info.value.status_name == "ACL_ERROR_RT_MEMORY_FREE"


def test_double_destroy_raises_for_every_handle_kind(backend):
    runtime.context(backend)
    ptr = acl.rt.malloc(16, backend=backend)
    try:
        cases = [
            (_tensor(backend, ptr), acl.destroy_tensor, AclnnError),
            (acl.create_int_array((1, 2), backend=backend), acl.destroy_int_array, AclnnError),
            (acl.create_bool_array((True,), backend=backend), acl.destroy_bool_array, AclnnError),
            (acl.rt.create_stream(backend=backend), acl.rt.destroy_stream, AclError),
        ]
        for handle, destroy, error in cases:
            destroy(handle, backend=backend)
            with pytest.raises(error) as info:
                destroy(handle, backend=backend)
            assert info.value.message, f"{destroy.__name__}: no message"
    finally:
        acl.rt.free(ptr, backend=backend)


def _pool_phase1(backend: str, x_ptr: int, arrays: list):
    """Phase 1 of a (1, 1, 2, 2, 2) max pool over x_ptr; returns (size, executor, out ptr)."""
    out_ptr = acl.rt.malloc(8, backend=backend)
    arrays.append(out_ptr)
    x = acl.create_tensor((1, 1, 2, 2, 2), ACL_FLOAT, None, 0, ACL_FORMAT_ND, (8,), x_ptr, backend=backend)
    o = acl.create_tensor((1, 1, 1, 1, 1), ACL_FLOAT, None, 0, ACL_FORMAT_ND, (1,), out_ptr, backend=backend)
    i = acl.create_tensor(
        (1, 1, 1, 1, 1), ACL_INT32, None, 0, ACL_FORMAT_ND, (1,), out_ptr + 4, backend=backend
    )
    k = acl.create_int_array((2,), backend=backend)
    s, p = acl.create_int_array((), backend=backend), acl.create_int_array((0,), backend=backend)
    d = acl.create_int_array((1,), backend=backend)
    size, executor = aclnn.max_pool3d_with_argmax_get_workspace_size(
        x, k, s, p, d, False, o, i, backend=backend
    )

    def cleanup():
        for t in (x, o, i):
            acl.destroy_tensor(t, backend=backend)
        for a in (k, s, p, d):
            acl.destroy_int_array(a, backend=backend)

    return size, executor, cleanup


def test_use_after_free_raises(backend):
    runtime.context(backend)
    stream = pyaclnn.Stream(backend=backend)
    x_ptr = acl.rt.malloc(32, backend=backend)
    held: list[int] = []
    size, executor, cleanup = _pool_phase1(backend, x_ptr, held)
    acl.rt.free(x_ptr, backend=backend)  # self's memory goes away between the phases
    with pytest.raises(AclnnError) as info:
        aclnn.max_pool3d_with_argmax(0, size, executor, stream.handle, backend=backend)
    assert info.value.status_name == "ACLNN_ERR_RUNTIME_ERROR" and "free" in info.value.message
    host = np.zeros(32, np.uint8)
    with pytest.raises(AclError) as info:  # memcpy from the freed pointer
        acl.rt.memcpy(host, 32, x_ptr, 32, 2, backend=backend)
    assert info.value.status_name == "ACL_ERROR_INVALID_PARAM" and "src" in info.value.message
    assert not host.any()
    cleanup()
    for ptr in held:
        acl.rt.free(ptr, backend=backend)
    stream.close()


def test_stream_used_after_destroy_raises(backend):
    runtime.context(backend)
    handle = acl.rt.create_stream(backend=backend)
    acl.rt.destroy_stream(handle, backend=backend)
    with pytest.raises(AclError):
        acl.rt.synchronize_stream(handle, backend=backend)
    x_ptr = acl.rt.malloc(32, backend=backend)
    held: list[int] = [x_ptr]
    size, executor, cleanup = _pool_phase1(backend, x_ptr, held)
    with pytest.raises(AclError) as info:  # launching on it
        aclnn.max_pool3d_with_argmax(0, size, executor, handle, backend=backend)
    assert "stream" in info.value.message
    assert counts(backend)["executors"] == 0  # the failed launch consumed the executor
    cleanup()
    for ptr in held:
        acl.rt.free(ptr, backend=backend)
    # the Python Stream object refuses use after close
    s = pyaclnn.Stream(backend=backend)
    s.close()
    s.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        s.synchronize()


CLOSED_STREAM_SCRIPT = textwrap.dedent(
    """
    import numpy as np, pyaclnn
    from pyaclnn import backends
    s = pyaclnn.Stream()
    s.close()
    try:
        pyaclnn.max_pool3d_with_argmax(np.zeros((1, 1, 2, 2, 2), np.float32), 2, stream=s)
    except ValueError as exc:
        assert "stream" in str(exc), exc
    else:
        raise SystemExit("a closed stream was accepted")
    pyaclnn.finalize()
    print(backends.get().live_counts()["executors"])
    """
)


@pytest.mark.parametrize("name", ["numpy", "npu"])
def test_a_closed_stream_is_refused_before_phase_1(name, emulator_home):
    out = run_child(CLOSED_STREAM_SCRIPT, name, emulator_home)
    assert out.strip() == "0", f"{out.strip()} executor(s) leaked"


def run_child(script: str, name: str, emulator_home, timeout: float = 120) -> str:
    """Run ``script`` in a fresh interpreter on backend ``name``; its stdout.

    The exit code must be 0 and stderr empty.
    """
    env = dict(os.environ, PYACLNN_BACKEND=name, PYACLNN_ASCEND_HOME=str(emulator_home))
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False, timeout=timeout
    )
    assert proc.returncode == 0, f"exit code {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert proc.stderr == "", proc.stderr
    return proc.stdout


def test_phase2_with_a_consumed_executor_raises(backend):
    runtime.context(backend)
    stream = pyaclnn.Stream(backend=backend)
    x_ptr = acl.rt.malloc(32, backend=backend)
    held: list[int] = [x_ptr]
    size, executor, cleanup = _pool_phase1(backend, x_ptr, held)
    aclnn.max_pool3d_with_argmax(0, size, executor, stream.handle, backend=backend)
    with pytest.raises(AclnnError) as info:
        aclnn.max_pool3d_with_argmax(0, size, executor, stream.handle, backend=backend)
    assert info.value.status_name == "ACLNN_ERR_INNER_NULLPTR" and "executor" in info.value.message
    with pytest.raises(AclnnError):  # nor can it be destroyed now
        acl.destroy_acl_op_executor(executor, backend=backend)
    # a repeatable executor runs twice and is destroyed once
    size, executor, cleanup2 = _pool_phase1(backend, x_ptr, held)
    acl.set_acl_op_executor_repeatable(executor, backend=backend)
    for _ in range(2):
        aclnn.max_pool3d_with_argmax(0, size, executor, stream.handle, backend=backend)
    stream.synchronize()  # the launches are queued: the executor and the memory they use must outlive them
    acl.destroy_acl_op_executor(executor, backend=backend)
    with pytest.raises(AclnnError):
        acl.destroy_acl_op_executor(executor, backend=backend)
    cleanup()
    cleanup2()
    for ptr in held:
        acl.rt.free(ptr, backend=backend)
    stream.close()


def test_destroying_a_non_repeatable_executor_never_leaves_it_runnable(backend):
    """numpy refuses (161002: phase 2 owns it); the emulator destroys it. Either way
    the executor cannot run afterwards and nothing crashes or leaks."""
    runtime.context(backend)
    stream = pyaclnn.Stream(backend=backend)
    x_ptr = acl.rt.malloc(32, backend=backend)
    held: list[int] = [x_ptr]
    size, executor, cleanup = _pool_phase1(backend, x_ptr, held)
    try:
        acl.destroy_acl_op_executor(executor, backend=backend)
        destroyed = True
    except AclnnError as exc:
        assert exc.status_name == "ACLNN_ERR_PARAM_INVALID" and "repeatable" in exc.message
        destroyed = False
    if destroyed:
        with pytest.raises(AclnnError):
            aclnn.max_pool3d_with_argmax(0, size, executor, stream.handle, backend=backend)
    else:
        aclnn.max_pool3d_with_argmax(0, size, executor, stream.handle, backend=backend)  # phase 2 frees it
    assert counts(backend)["executors"] == 0
    stream.synchronize()  # the launch is queued: its memory must outlive it
    cleanup()
    for ptr in held:
        acl.rt.free(ptr, backend=backend)
    stream.close()


def _failed_phase2_leaves_no_executor(backend: str) -> None:
    runtime.context(backend)
    dead = acl.rt.create_stream(backend=backend)
    acl.rt.destroy_stream(dead, backend=backend)
    x_ptr = acl.rt.malloc(32, backend=backend)
    held: list[int] = [x_ptr]
    size, executor, cleanup = _pool_phase1(backend, x_ptr, held)
    try:
        with pytest.raises(AclError):
            aclnn.max_pool3d_with_argmax(0, size, executor, dead, backend=backend)
        live = counts(backend)["executors"]
    finally:
        cleanup()
        for ptr in held:
            acl.rt.free(ptr, backend=backend)
    assert live == 0, "a failed phase 2 left the non-repeatable executor alive (leaked)"


def test_a_failed_phase2_consumes_the_executor(backend):
    _failed_phase2_leaves_no_executor(backend)


def test_handles_and_pointers_of_the_other_backend_are_refused(npu):
    """A tensor, int array, stream or device pointer of one backend given to the other."""
    runtime.context("numpy")
    runtime.context(npu)
    made = {}
    for b in ("numpy", npu):
        ptr = acl.rt.malloc(32, backend=b)
        made[b] = {
            "ptr": ptr,
            "tensor": _tensor(b, ptr),
            "ints": acl.create_int_array((2,), backend=b),
            "stream": acl.rt.create_stream(backend=b),
        }
    try:
        for b, other in (("numpy", npu), (npu, "numpy")):
            mine, theirs = made[b], made[other]
            with pytest.raises(AclError):
                acl.rt.free(theirs["ptr"], backend=b)
            with pytest.raises((AclnnError, TypeError)) as info:
                acl.destroy_tensor(theirs["tensor"], backend=b)
            assert "tensor" in str(info.value)
            with pytest.raises((AclnnError, TypeError)):
                acl.destroy_int_array(theirs["ints"], backend=b)
            with pytest.raises((AclError, TypeError)) as info:
                acl.rt.synchronize_stream(theirs["stream"], backend=b)
            assert "stream" in str(info.value)
            with pytest.raises((AclnnError, TypeError)) as info:
                aclnn.max_pool3d_with_argmax_get_workspace_size(
                    theirs["tensor"],
                    mine["ints"],
                    mine["ints"],
                    mine["ints"],
                    mine["ints"],
                    False,
                    mine["tensor"],
                    mine["tensor"],
                    backend=b,
                )
            assert "self" in str(info.value)
            with pytest.raises((AclError, TypeError)):  # a tensor over the other backend's memory
                acl.destroy_tensor(_tensor(b, theirs["ptr"]), backend=b)
    finally:
        for b, m in made.items():
            acl.destroy_tensor(m["tensor"], backend=b)
            acl.destroy_int_array(m["ints"], backend=b)
            acl.rt.destroy_stream(m["stream"], backend=b)
            acl.rt.free(m["ptr"], backend=b)
    pyaclnn.finalize("numpy")
    assert not any(counts("numpy").values())


def test_a_pointer_beyond_64_bits_is_not_wrapped(backend):
    runtime.context(backend)
    ptr = acl.rt.malloc(64, backend=backend)
    before = counts(backend)["device_allocs"]
    try:
        for bad in (ptr + 2**64, ptr - 2**64):
            with pytest.raises((AclError, ValueError)):
                acl.rt.free(bad, backend=backend)
        assert counts(backend)["device_allocs"] == before  # ptr itself was not freed
    finally:
        acl.rt.free(ptr, backend=backend)


# -- runtime objects free what they own ---------------------------------------------


def in_use(backend: str) -> int:
    return runtime.memory_pool(backend=backend).stats()["in_use_bytes"]


def test_close_and_garbage_collection_free_device_arrays_and_streams(backend):
    """close() and GC give an array's block back to the memory pool (in use -> cached) and free a
    stream; free_all_blocks() then returns the cached blocks, and the backend's counters are back."""
    runtime.default_stream(backend=backend)  # uploads are queued on it: it is there before and after
    pool = runtime.memory_pool(backend=backend)
    pool.free_all_blocks()
    base, base_in_use = counts(backend), in_use(backend)
    a = pyaclnn.to_device(np.arange(24, dtype=np.float32).reshape(2, 3, 4), backend=backend)
    a.descriptor(ACL_FORMAT_ND)  # a cached aclTensor
    s = pyaclnn.Stream(backend=backend)
    s._state.workspace(4096)  # the stream's workspace buffer
    assert counts(backend) != base and in_use(backend) > base_in_use
    a.close()
    s.close()
    assert in_use(backend) == base_in_use and counts(backend)["streams"] == base["streams"]
    a.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        a.numpy()
    # garbage collection, including reference cycles
    b = pyaclnn.zeros((5, 5), backend=backend)
    b.descriptor(ACL_FORMAT_ND)
    t = pyaclnn.Stream(backend=backend)
    t._state.workspace(100)
    t.cycle = t
    b.cycle = b
    assert in_use(backend) > base_in_use
    del b, t
    gc.collect()
    assert in_use(backend) == base_in_use
    pool.free_all_blocks()
    assert counts(backend) == base


def test_finalize_closes_open_arrays_and_they_refuse_use_afterwards(backend):
    a = pyaclnn.to_device(np.ones(3, np.float32), backend=backend)
    pyaclnn.finalize(backend)
    assert a.closed and not any(counts(backend).values())
    with pytest.raises(ValueError, match="closed"):
        a.numpy()
    # and the library works again afterwards
    np.testing.assert_array_equal(pyaclnn.to_device(np.ones(3, np.float32), backend=backend).numpy(), 1)


EXIT_SCRIPT = textwrap.dedent(
    """
    import numpy as np, pyaclnn
    from pyaclnn import acl
    kept = [pyaclnn.to_device(np.ones((2, 3), np.float32)) for _ in range(3)]
    kept[0].descriptor(2)
    streams = [pyaclnn.Stream() for _ in range(2)]
    streams[0]._state.workspace(1024)
    out, idx = pyaclnn.max_pool3d_with_argmax(pyaclnn.to_device(np.ones((1, 1, 2, 2, 2), np.float32)), 2)
    cycle = pyaclnn.zeros((4,)); cycle.me = cycle
    print("ok", pyaclnn.get_backend(), flush=True)
    # exit without closing anything
    """
)


@pytest.mark.parametrize("name", ["numpy", "npu"])
def test_interpreter_exit_without_closing_is_clean(name, emulator_home):
    assert run_child(EXIT_SCRIPT, name, emulator_home).strip() == f"ok {name}"


GC_IN_DESCRIPTOR_SCRIPT = textwrap.dedent(
    """
    import gc
    import pyaclnn
    from pyaclnn import acl
    from pyaclnn.dtypes import ACL_FORMAT_ND

    original = acl.create_tensor

    def create_tensor_with_a_collection(*args, **kwargs):
        garbage = pyaclnn.zeros((3,))
        garbage.cycle = garbage  # only the cycle collector can free it
        del garbage
        gc.collect()  # its finalizer gives the block back while descriptor() holds the pool lock
        return original(*args, **kwargs)

    acl.create_tensor = create_tensor_with_a_collection
    before = pyaclnn.memory_pool().stats()["in_use_bytes"]
    array = pyaclnn.empty((5,))
    array.descriptor(ACL_FORMAT_ND)
    array.close()
    print(pyaclnn.memory_pool().stats()["in_use_bytes"] - before)
    """
)


@pytest.mark.parametrize("name", ["numpy", "npu"])
def test_garbage_collected_arrays_freed_while_a_descriptor_is_made_do_not_deadlock(name, emulator_home):
    """A collection can run inside any allocation, also while the pool's lock is held; the
    DeviceArrays it finalizes give their blocks back to that same pool. A child process, so
    that a deadlock is a timeout here rather than a hung suite."""
    try:
        out = run_child(GC_IN_DESCRIPTOR_SCRIPT, name, emulator_home, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("deadlock: a finalizer waited for the pool lock its own thread held")
    assert out.strip() == "0", f"{out.strip()} bytes still in use"
