"""Calls on NumPy arrays without copies: host memory mapped for the device.

On the numpy backend a call whose arrays are all NumPy maps their pages with
aclrtHostRegister and the operator reads and writes them where they are; the
low-level calls follow CANN's rules. The npu backend (and ``PYACLNN_MAP_HOST=0``)
copies; NumPy ``out=`` arrays work on both.
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

import pyaclnn
from pyaclnn import _context, acl, backends
from pyaclnn.constants import (
    ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
    ACL_ERROR_HOST_MEMORY_NOT_REGISTERED,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_RT_CONTEXT_NULL,
    ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
    ACL_ERROR_RT_MEMORY_FREE,
    ACL_ERROR_RT_PARAM_INVALID,
)
from pyaclnn.errors import AclError

PAGE = 4096
RNG = np.random.default_rng(20)


def _pages(count: int) -> np.ndarray:
    """``count`` page-aligned pages of a fresh buffer (it is kept alive by the view)."""
    raw = np.zeros((count + 1) * PAGE, np.uint8)
    start = (-raw.ctypes.data) % PAGE
    return raw[start : start + count * PAGE]


def _status(fn, *args, backend: str = "numpy") -> int:
    with pytest.raises(AclError) as info:
        fn(*args, backend=backend)
    return info.value.status


def _registrations(name: str = "numpy") -> int:
    return backends.get(name).live_counts()["host_registrations"]


def _mapped_by_calls() -> int:
    """Mappings of the numpy backend that a call uses now: not those kept idle for the next call
    (test_a_mapping_stays_idle_for_the_next_call_without_holding_its_arrays), nor those the host
    pool keeps for the buffers of NumPy results (test_a_result_buffer_stays_mapped_until_...)."""
    host = _context.context("numpy").host_memory
    return host.in_use_count() if host is not None else 0


@pytest.fixture
def numpy_backend():
    """The numpy backend, initialised, with its device bound in this thread; nothing left after."""
    pyaclnn.finalize("numpy")  # from nothing: earlier calls on NumPy arrays may leave idle mappings
    pyaclnn.synchronize(backend="numpy")  # initialises and binds device 0
    yield backends.get("numpy")
    pyaclnn.finalize("numpy")
    counts = backends.get("numpy").live_counts()
    assert not any(counts.values()), counts


@pytest.fixture
def emulation(backend):
    """The backend under test (numpy, or npu over the C emulator), its device bound in this thread."""
    pyaclnn.finalize(backend)  # from nothing: earlier calls on NumPy arrays may leave idle mappings
    pyaclnn.synchronize(backend=backend)  # initialises and binds device 0
    return backend


# -- the C calls, as CANN defines them (both emulations) ---------------------------------------------


def test_host_register_checks_its_arguments_in_canns_order(emulation):
    pages = _pages(2)
    status = lambda fn, *args: _status(fn, *args, backend=emulation)  # noqa: E731
    assert status(acl.rt.host_register, None, PAGE) == ACL_ERROR_INVALID_PARAM
    assert status(acl.rt.host_register, pages, 0) == ACL_ERROR_INVALID_PARAM
    assert status(acl.rt.host_register, pages, PAGE, 1) == ACL_ERROR_RT_FEATURE_NOT_SUPPORT
    assert status(acl.rt.host_register, pages[1:], PAGE) == ACL_ERROR_RT_PARAM_INVALID  # not page-aligned
    if emulation == "numpy":  # the numpy backend knows the buffer's end and refuses with a status
        assert status(acl.rt.host_register, pages, 3 * PAGE) == ACL_ERROR_INVALID_PARAM
    else:  # cffi's marshaling refuses a buffer shorter than the size before C runs
        with pytest.raises(ValueError, match="ptr holds 8192 bytes"):
            acl.rt.host_register(pages, 3 * PAGE, backend=emulation)
    assert _registrations(emulation) == 0


def test_an_unaligned_pointer_is_named_in_the_message(emulation):
    with pytest.raises(AclError, match="ptr 0x[0-9a-f]+ is not 4096-byte aligned"):
        acl.rt.host_register(_pages(2)[8:], PAGE, backend=emulation)


def test_a_thread_without_a_device_cannot_register(emulation):
    statuses = []

    def run() -> None:  # a new thread: no aclrtSetDevice in it
        statuses.append(_status(acl.rt.host_register, _pages(1), PAGE, backend=emulation))
        statuses.append(_status(acl.rt.host_unregister, _pages(1), backend=emulation))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert statuses == [ACL_ERROR_RT_CONTEXT_NULL, ACL_ERROR_RT_CONTEXT_NULL]


def test_a_mapping_is_for_operators_only_and_is_ended_once(emulation):
    status = lambda fn, *args: _status(fn, *args, backend=emulation)  # noqa: E731
    pages = _pages(2)
    ptr = acl.rt.host_register(pages, 2 * PAGE, backend=emulation)
    assert ptr and _registrations(emulation) == 1
    # Overlapping ranges are refused, whether inside or across the live one.
    assert status(acl.rt.host_register, pages[:PAGE], PAGE) == ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED
    # The device address is not for memory operations, nor for aclrtFree.
    host = np.zeros(16, np.uint8)
    assert status(acl.rt.memcpy, ptr, 16, host, 16, 1) == ACL_ERROR_INVALID_PARAM
    assert status(acl.rt.memcpy, host, 16, ptr, 16, 2) == ACL_ERROR_INVALID_PARAM
    assert status(acl.rt.memset, ptr, 16, 0, 16) == ACL_ERROR_INVALID_PARAM
    assert status(acl.rt.free, ptr) == ACL_ERROR_RT_MEMORY_FREE
    acl.rt.host_unregister(pages, backend=emulation)
    assert _registrations(emulation) == 0
    assert status(acl.rt.host_unregister, pages) == ACL_ERROR_HOST_MEMORY_NOT_REGISTERED
    assert status(acl.rt.host_unregister, None) == ACL_ERROR_INVALID_PARAM


def test_an_operator_reads_and_writes_through_the_mapping(emulation):
    """The operator's tensors are the mapped device addresses: it reads the host's bytes and
    writes its results into the host's pages."""
    pages = _pages(8)
    x = pages[: 4 * PAGE].view(np.float32).reshape(1, 1, 16, 16, 16)
    x[...] = RNG.standard_normal(x.shape, dtype=np.float32)
    out_host = pages[4 * PAGE : 5 * PAGE].view(np.float32)[:512].reshape(1, 1, 8, 8, 8)
    idx_host = pages[6 * PAGE : 7 * PAGE].view(np.int32)[:512].reshape(1, 1, 8, 8, 8)
    ptr = acl.rt.host_register(pages, 8 * PAGE, backend=emulation)
    arrays = [
        pyaclnn.DeviceArray.from_ptr(ptr + offset, a.shape, a.dtype, backend=emulation)
        for offset, a in ((0, x), (4 * PAGE, out_host), (6 * PAGE, idx_host))
    ]
    pyaclnn.max_pool3d_with_argmax(arrays[0], 2, out=(arrays[1], arrays[2]), backend=emulation)
    pyaclnn.synchronize(backend=emulation)
    for a in arrays:
        a.close()
    acl.rt.host_unregister(pages, backend=emulation)
    expected = x.reshape(1, 1, 8, 2, 8, 2, 8, 2).max(axis=(3, 5, 7))
    np.testing.assert_array_equal(out_host, expected)
    np.testing.assert_array_equal(x.reshape(-1)[idx_host], expected)  # each index finds its maximum


@pytest.mark.parametrize("name", ["numpy", "npu"])
def test_unregistering_under_queued_work_is_a_hazard(name, request, monkeypatch, hazards_expected, capfd):
    # Not the backend fixture: it fails a test that leaves a hazard, and this one makes one.
    if name == "npu":
        monkeypatch.setenv("PYACLNN_ASCEND_HOME", str(request.getfixturevalue("emulator_home")))
    emulation = name
    pyaclnn.synchronize(backend=name)
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "200000")  # the kernel is still queued below
    pages = _pages(4)
    x = pages[: 2 * PAGE].view(np.float32).reshape(1, 1, 8, 16, 16)
    x[...] = RNG.random(x.shape, dtype=np.float32)
    emulator = backends.get(emulation)
    ptr = acl.rt.host_register(pages, 4 * PAGE, backend=emulation)
    stream = pyaclnn.Stream(backend=emulation)
    inp = pyaclnn.DeviceArray.from_ptr(ptr, x.shape, x.dtype, backend=emulation)
    before = emulator.hazard_count()
    out, idx = pyaclnn.max_pool3d_with_argmax(inp, 2, stream=stream, backend=emulation)
    acl.rt.host_unregister(pages, backend=emulation)
    assert emulator.hazard_count() == before + 1
    assert "unregistered while" in capfd.readouterr().err
    stream.synchronize()
    for a in (out, idx, inp):
        a.close()
    stream.close()
    pyaclnn.finalize(name)
    assert not any(emulator.live_counts().values())


# -- calls on NumPy arrays ---------------------------------------------------------------------------


def _count_copies(monkeypatch, name: str) -> list[int]:
    """Count the backend's host<->device copies from now on."""
    count = [0]
    emulation = backends.get(name)
    for api in ("aclrtMemcpy", "aclrtMemcpyAsync"):
        original = getattr(emulation, api)

        def counted(*args, _original=original):
            count[0] += 1
            return _original(*args)

        monkeypatch.setattr(emulation, api, counted)
    return count


def _pool_case():
    x = RNG.random((2, 3, 6, 10, 10), dtype=np.float32)
    return x, pyaclnn.max_pool3d_with_argmax(x, 3, 2, 1, backend="numpy")


def test_a_numpy_call_on_the_numpy_backend_copies_nothing(numpy_backend, monkeypatch, torch):
    x, (values, indices) = _pool_case()  # the first call compiles and warms up
    g = RNG.random(values.shape, dtype=np.float32)
    copies = _count_copies(monkeypatch, "numpy")
    got = pyaclnn.max_pool3d_with_argmax_backward(g, x, indices, 3, 2, 1, backend="numpy")
    v, i = pyaclnn.max_pool3d_with_argmax(x, 3, 2, 1, backend="numpy")
    assert copies[0] == 0
    assert _mapped_by_calls() == 0  # every mapping ended with its call
    tx = torch.from_numpy(x)
    tv, ti = torch.ops.aten.max_pool3d_with_indices(tx, [3] * 3, [2] * 3, [1] * 3, [1] * 3, False)
    tg = torch.ops.aten.max_pool3d_with_indices_backward(
        torch.from_numpy(g), tx, [3] * 3, [2] * 3, [1] * 3, [1] * 3, False, ti
    )
    assert np.array_equal(v, tv.numpy()) and np.array_equal(i, ti.numpy())
    assert np.array_equal(got, tg.numpy())


def test_without_mapping_the_same_call_copies(numpy_backend, monkeypatch):
    x, (values, indices) = _pool_case()
    mapped = pyaclnn.max_pool3d_with_argmax(x, 3, 2, 1, backend="numpy")
    ctx = _context.context("numpy")
    monkeypatch.setattr(ctx, "host_memory", None)  # what PYACLNN_MAP_HOST=0 sets up
    copies = _count_copies(monkeypatch, "numpy")
    copied = pyaclnn.max_pool3d_with_argmax(x, 3, 2, 1, backend="numpy")
    assert copies[0] >= 3  # the input in, both outputs out
    assert all(np.array_equal(a, b) for a, b in zip(mapped, copied))


@pytest.mark.parametrize(("value", "min_bytes"), [("0", None), ("1", 1 << 20), ("always", 0)])
def test_map_host_in_the_environment_sets_when_calls_map(monkeypatch, value, min_bytes):
    pyaclnn.finalize("numpy")
    monkeypatch.setenv("PYACLNN_MAP_HOST", value)
    try:
        host = _context.context("numpy").host_memory
        if min_bytes is None:
            assert host is None
        else:
            assert host is not None and host.min_bytes == min_bytes
    finally:
        pyaclnn.finalize("numpy")


def test_by_default_small_calls_copy_and_large_ones_map(numpy_backend, monkeypatch):
    host = _context.context("numpy").host_memory
    assert host is not None
    monkeypatch.setattr(host, "min_bytes", 1 << 20)
    small = RNG.random((1, 2, 8, 8, 8), dtype=np.float32)
    large = RNG.random((1, 4, 16, 64, 64), dtype=np.float32)  # 1 MiB
    copies = _count_copies(monkeypatch, "numpy")
    pyaclnn.max_pool3d_with_argmax(small, 2, backend="numpy")
    assert copies[0] == 3
    pyaclnn.max_pool3d_with_argmax(large, 2, backend="numpy")
    assert copies[0] == 3


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a[:, :, ::2],  # strided
        lambda a: a.transpose(0, 1, 2, 4, 3),  # permuted
        lambda a: a[:, :, :, ::-1],  # negative stride: copied
        lambda a: np.asfortranarray(a),
    ],
)
def test_views_give_what_their_dense_copies_give(numpy_backend, view):
    base = RNG.random((1, 2, 8, 12, 12), dtype=np.float32)
    x = view(base)
    before = x.copy()
    got = pyaclnn.max_pool3d_with_argmax(x, 2, backend="numpy")
    want = pyaclnn.max_pool3d_with_argmax(np.ascontiguousarray(x), 2, backend="numpy")
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    assert np.array_equal(x, before)  # the input was read where it is, never written
    assert _mapped_by_calls() == 0


def test_arrays_in_one_mapping_share_it_and_a_partial_overlap_is_copied(numpy_backend):
    buffer = _pages(64).view(np.float32)
    x = buffer[: 2 * 8 * 8 * 8].reshape(1, 2, 8, 8, 8)
    grid = buffer[4096 : 4096 + 4 * 4 * 4 * 3].reshape(1, 4, 4, 4, 3)
    grid[...] = RNG.uniform(-1, 1, grid.shape)
    x[...] = RNG.random(x.shape, dtype=np.float32)
    host = _context.context("numpy").host_memory
    assert host is not None
    # The first array's pages are mapped; the second lies in other pages of the same buffer.
    whole = host.map([buffer.reshape(-1)], 0)[0]
    assert whole is not None
    try:
        got = pyaclnn.grid_sampler3d(x, grid, backend="numpy")  # both inside the whole mapping
        assert _mapped_by_calls() == 1 and whole[0].users == 1
        want = pyaclnn.grid_sampler3d(x.copy(), grid.copy(), backend="numpy")
        assert np.array_equal(got, want)
    finally:
        host.release([whole[0]])
    # A range that straddles a live mapping's end is copied, not mapped.
    first = _pages(3)
    mapping = host.map([first[: PAGE + 10]], 0)[0]  # pages 0 and 1
    assert mapping is not None
    assert host.map([first[PAGE - 8 : PAGE + 8]], 0)[0] is not None  # inside: shared
    assert host.map([first[PAGE : 3 * PAGE]], 0)[0] is None  # pages 1 and 2: straddles its end
    host.release([mapping[0], mapping[0]])
    assert _mapped_by_calls() == 0


def test_out_numpy_is_written_in_place_and_returned(backend):
    x, _ = RNG.random((1, 2, 6, 8, 8), dtype=np.float32), None
    values, indices = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend)
    out = (np.full(values.shape, 7.0, np.float32), np.full(values.shape, 7, np.int32))
    got = pyaclnn.max_pool3d_with_argmax(x, 2, out=out, backend=backend)
    assert got[0] is out[0] and got[1] is out[1]
    assert np.array_equal(out[0], values) and np.array_equal(out[1], indices)
    g = RNG.random(values.shape, dtype=np.float32)
    grad = np.full_like(x, 5.0)
    assert pyaclnn.max_pool3d_with_argmax_backward(g, x, indices, 2, out=grad, backend=backend) is grad
    assert np.array_equal(grad, pyaclnn.max_pool3d_with_argmax_backward(g, x, indices, 2, backend=backend))
    grid = RNG.uniform(-1, 1, (1, 3, 3, 3, 3)).astype(np.float32)
    sampled = np.empty((1, 2, 3, 3, 3), np.float32)
    assert pyaclnn.grid_sampler3d(x, grid, out=sampled, backend=backend) is sampled
    assert np.array_equal(sampled, pyaclnn.grid_sampler3d(x, grid, backend=backend))
    grads = (np.empty_like(x), np.empty_like(grid))
    got = pyaclnn.grid_sampler3d_backward(sampled, x, grid, out=grads, backend=backend)
    assert got[0] is grads[0] and got[1] is grads[1]
    want = pyaclnn.grid_sampler3d_backward(sampled, x, grid, backend=backend)
    assert np.array_equal(grads[0], want[0]) and np.array_equal(grads[1], want[1])


def test_a_numpy_out_of_a_call_with_nothing_to_compute_is_zeroed(backend):
    x = RNG.random((1, 2, 4, 4, 4), dtype=np.float32)
    empty = np.zeros((1, 2, 0, 2, 2), np.float32)  # grad_output of a pooling with no window
    indices = np.zeros(empty.shape, np.int32)
    grad = np.full_like(x, 3.0)
    got = pyaclnn.max_pool3d_with_argmax_backward(empty, x, indices, 2, out=grad, backend=backend)
    assert got is grad and not grad.any()


def test_a_wrong_numpy_out_is_refused_naming_it(backend):
    x = RNG.random((1, 2, 4, 4, 4), dtype=np.float32)
    grid = np.zeros((1, 2, 2, 2, 3), np.float32)
    with pytest.raises(
        ValueError, match=r"out has shape \[1, 2, 2, 2, 3\] and dtype float32; this call writes"
    ):
        pyaclnn.grid_sampler3d(x, grid, out=np.empty((1, 2, 2, 2, 3), np.float32), backend=backend)
    with pytest.raises(ValueError, match="out has shape .* and dtype float16"):
        pyaclnn.grid_sampler3d(x, grid, out=np.empty((1, 2, 2, 2, 2), np.float16), backend=backend)
    readonly = np.empty((1, 2, 2, 2, 2), np.float32)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="out is a read-only NumPy array"):
        pyaclnn.grid_sampler3d(x, grid, out=readonly, backend=backend)
    with pytest.raises(ValueError, match="out shares memory with input"):
        pyaclnn.grid_sampler3d(x, grid, out=x[:, :, :2, :2, :2], backend=backend)
    both = np.empty((1, 2, 2, 2, 2), np.float32)
    with pytest.raises(ValueError, match=r"out\[1\] shares memory with out\[0\]"):
        pyaclnn.max_pool3d_with_argmax(x, 2, out=(both, both.view(np.int32)), backend=backend)
    device = pyaclnn.to_device(x, backend=backend)
    with pytest.raises(TypeError, match="out is a NumPy array, but the call's inputs include a DeviceArray"):
        pyaclnn.grid_sampler3d(device, grid, out=np.empty((1, 2, 2, 2, 2), np.float32), backend=backend)
    device.close()


def test_an_interrupted_wait_keeps_the_mapping_until_the_stream_is_past_it(numpy_backend, monkeypatch):
    from pyaclnn._stream import StreamState

    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "100000")
    x = RNG.random((1, 2, 8, 8, 8), dtype=np.float32)
    original = StreamState.wait_queued
    interrupted = []

    def interrupt(self):
        if not interrupted:
            interrupted.append(self)
            raise KeyboardInterrupt  # Ctrl-C in the wait: the kernel is still queued
        return original(self)

    monkeypatch.setattr(StreamState, "wait_queued", interrupt)
    with pytest.raises(KeyboardInterrupt):
        pyaclnn.max_pool3d_with_argmax(x, 2, backend="numpy")
    # The kernel may still write the outputs and read x: the mappings (and arrays) stay.
    assert _mapped_by_calls() >= 1
    monkeypatch.setattr(StreamState, "wait_queued", original)
    pyaclnn.synchronize(backend="numpy")
    interrupted[0].wait_queued()
    got = pyaclnn.max_pool3d_with_argmax(x, 2, backend="numpy")  # retires what waited
    assert _mapped_by_calls() == 0
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "0")
    assert np.array_equal(got[0], pyaclnn.max_pool3d_with_argmax(x.copy(), 2, backend="numpy")[0])


def test_one_array_given_twice_holds_its_mapping_once_per_use(numpy_backend):
    x = RNG.random((1, 2, 4, 4, 4), dtype=np.float32)
    grid = RNG.uniform(-1, 1, (1, 4, 4, 4, 3)).astype(np.float32)
    got = pyaclnn.grid_sampler3d_backward(x, x, grid, backend="numpy")  # grad_output is input
    want = pyaclnn.grid_sampler3d_backward(x.copy(), x, grid, backend="numpy")
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert _mapped_by_calls() == 0


def test_threads_on_one_numpy_input_share_its_mapping(numpy_backend, monkeypatch):
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "200")
    x = RNG.random((1, 4, 8, 16, 16), dtype=np.float32)
    want = pyaclnn.max_pool3d_with_argmax(x, 3, 1, 1, backend="numpy")
    results: list[object] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for _ in range(10):
                got = pyaclnn.max_pool3d_with_argmax(x, 3, 1, 1, backend="numpy")
                results.append(all(np.array_equal(a, b) for a, b in zip(got, want)))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 40 and all(results)
    assert _mapped_by_calls() == 0


# -- repeated calls: the executor cache serves mapped arrays -----------------------------------------


def test_the_same_pages_mapped_again_get_the_same_device_address(numpy_backend):
    """The numpy backend's device address of mapped memory is a function of the host address,
    and an address of pages not mapped now is refused."""
    pages, other = _pages(2), _pages(2)
    ptr = acl.rt.host_register(pages, 2 * PAGE, backend="numpy")
    acl.rt.host_unregister(pages, backend="numpy")
    with pytest.raises(ValueError, match="is not inside one allocation"):
        pyaclnn.DeviceArray.from_ptr(ptr, (16,), np.float32, backend="numpy")
    assert acl.rt.host_register(pages, 2 * PAGE, backend="numpy") == ptr
    other_ptr = acl.rt.host_register(other, 2 * PAGE, backend="numpy")
    assert other_ptr != ptr
    for a in (pages, other):
        acl.rt.host_unregister(a, backend="numpy")


def _count_plans(monkeypatch) -> list[int]:
    """Count the launches that run phase 1 (executor-cache misses) from now on."""
    from pyaclnn import _executors

    count = [0]
    original = _executors.ExecutorCache._plan_and_launch

    def counted(self, call, key):
        count[0] += 1
        return original(self, call, key)

    monkeypatch.setattr(_executors.ExecutorCache, "_plan_and_launch", counted)
    return count


def test_a_repeated_call_on_the_same_arrays_skips_phase_1_and_other_arrays_miss(
    numpy_backend, monkeypatch, torch
):
    """A plan is reused only for the arrays it was made for: two inputs and two out= arrays in
    turn each get their own plan, every result is the oracle's, and the out= array a call was
    not given keeps its bytes (a stale plan would have written it)."""
    shape, k, s, p = (1, 2, 6, 10, 10), [3] * 3, [2] * 3, [1] * 3
    xs = [RNG.random(shape, dtype=np.float32) for _ in range(2)]
    want = []
    for x in xs:
        tx = torch.from_numpy(x)
        tv, ti = torch.ops.aten.max_pool3d_with_indices(tx, k, s, p, [1] * 3, False)
        g = RNG.random(tuple(tv.shape), dtype=np.float32)
        tg = torch.ops.aten.max_pool3d_with_indices_backward(
            torch.from_numpy(g), tx, k, s, p, [1] * 3, False, ti
        )
        want.append((x, g, ti.numpy().astype(np.int32), tg.numpy()))
    outs = [np.empty(shape, np.float32) for _ in range(2)]
    pyaclnn.max_pool3d_with_argmax_backward(*want[0][1::-1], want[0][2], 3, 2, 1, backend="numpy")  # warm-up
    plans = _count_plans(monkeypatch)
    for round in range(3):
        for i, (x, g, idx, grad) in enumerate(want):
            for j, out in enumerate(outs):
                other = outs[1 - j]
                out[...] = np.nan
                other[...] = -1.0
                got = pyaclnn.max_pool3d_with_argmax_backward(g, x, idx, 3, 2, 1, out=out, backend="numpy")
                assert got is out and np.array_equal(out, grad), (round, i, j)
                assert np.all(other == -1.0), (round, i, j)
    assert plans[0] == 4  # one per (inputs, out) pair: the other eight calls ran phase 2 only
    # Fresh results: kept alive, each is new memory with its own plan; dropped, the next call reuses
    # the buffer and the plan.
    kept = [
        pyaclnn.max_pool3d_with_argmax_backward(g, x, idx, 3, 2, 1, backend="numpy") for x, g, idx, _ in want
    ]
    assert all(np.array_equal(r, w[3]) for r, w in zip(kept, want))
    before = plans[0]
    for _ in range(3):
        x, g, idx, grad = want[0]
        assert np.array_equal(
            pyaclnn.max_pool3d_with_argmax_backward(g, x, idx, 3, 2, 1, backend="numpy"), grad
        )
    assert plans[0] <= before + 1
    assert _mapped_by_calls() == 0


# -- the memory of NumPy results --------------------------------------------------------------------


def test_a_results_memory_is_reused_once_it_is_garbage_and_never_before(numpy_backend):
    x = RNG.random((1, 2, 8, 16, 16), dtype=np.float32)
    values, indices = pyaclnn.max_pool3d_with_argmax(x, 2, backend="numpy")
    held, freed = values.ctypes.data, indices.ctypes.data
    assert held % PAGE == 0 and freed % PAGE == 0  # pages of their own
    view = values[0, 1]
    kept = view.copy()
    del values, indices  # the view still holds the values' buffer; the indices' is garbage
    again = pyaclnn.max_pool3d_with_argmax(x + 1, 2, backend="numpy")
    lent = {a.ctypes.data for a in again}
    assert freed in lent and held not in lent
    assert np.array_equal(view, kept)  # not written by the second call
    assert np.array_equal(again[0], pyaclnn.max_pool3d_with_argmax(x + 1, 2, backend="numpy")[0])


def test_a_result_buffer_stays_mapped_until_the_pool_lets_it_go(numpy_backend, monkeypatch):
    """A result's buffer is registered once and stays so between results; the registration ends
    when the pool drops the buffer (limit, free_all) or at shutdown, and not before."""
    registered = []
    emulation = backends.get("numpy")
    original = emulation.aclrtHostRegister

    def counted(ptr, size, type):
        registered.append(size)
        return original(ptr, size, type)

    monkeypatch.setattr(emulation, "aclrtHostRegister", counted)
    pool = _context.context("numpy").host_pool
    assert pool is not None
    x = RNG.random((1, 2, 8, 16, 16), dtype=np.float32)
    want = [a.copy() for a in pyaclnn.max_pool3d_with_argmax(x.copy(), 2, backend="numpy")]
    registered.clear()  # the results died: their buffers are idle, and mapped
    for _ in range(3):  # the results die at once: the next call writes into the same buffers
        got = pyaclnn.max_pool3d_with_argmax(x, 2, backend="numpy")
        assert all(np.array_equal(a, b) for a, b in zip(got, want))
        del got
    # The buffers were mapped by the first call; x by the first of the three (it stays idle between)
    assert len(registered) == 1
    host = _context.context("numpy").host_memory
    assert host is not None
    assert host.held_count() == 2 and _mapped_by_calls() == 0  # the two idle buffers
    before = _registrations()  # the buffers', x's idle one, and the idle one of x.copy()'s pages
    pool.free_all()  # dropped: their registrations end first
    assert host.held_count() == 0 and _registrations() == before - 2  # the idle ones stay
    pool.limit = 0  # nothing is kept idle: a result's buffer goes once it is garbage
    got = pyaclnn.max_pool3d_with_argmax(x, 2, backend="numpy")
    assert host.held_count() == 2  # the results' buffers, lent
    del got
    assert pool.idle_bytes() == 0 and host.held_count() == 0
    kept = pyaclnn.max_pool3d_with_argmax(x, 2, backend="numpy")  # alive at shutdown
    pyaclnn.finalize("numpy")  # ends every registration (the fixture checks none is left)
    assert _registrations() == 0
    assert all(np.array_equal(a, b) for a, b in zip(kept, want))  # still the caller's memory


def test_a_mapping_stays_idle_for_the_next_call_without_holding_its_arrays(numpy_backend, monkeypatch):
    """A call's mapping outlives the call, idle, for the next call on the same array, but holds no
    reference to it (so ``resize`` works and dropping it frees it); it ends beyond the idle limit,
    or when a new range overlaps it."""
    import weakref

    from pyaclnn import _host_memory

    registered = []
    emulation = backends.get("numpy")
    original = emulation.aclrtHostRegister

    def counted(ptr, size, type):
        registered.append(ptr)
        return original(ptr, size, type)

    monkeypatch.setattr(emulation, "aclrtHostRegister", counted)
    host = _context.context("numpy").host_memory
    assert host is not None
    x = RNG.random((1, 2, 8, 16, 16), dtype=np.float32)
    want = [a.copy() for a in pyaclnn.max_pool3d_with_argmax(x.copy(), 2, backend="numpy")]
    registered.clear()
    for _ in range(3):  # the results die at once: their buffers stay mapped too
        got = pyaclnn.max_pool3d_with_argmax(x, 2, backend="numpy")
        assert all(np.array_equal(a, b) for a, b in zip(got, want))
        del got
    assert len(registered) == 1 and _mapped_by_calls() == 0  # x once, idle since
    assert sys.getrefcount(x) == 2  # the name x and getrefcount's argument: nothing of pyaclnn's
    gone = weakref.ref(x)
    del x
    assert gone() is None  # freed at once, its pages still registered (idle: no work uses them)
    y = RNG.random((1, 2, 8, 16, 16), dtype=np.float32)
    want = [a.copy() for a in pyaclnn.max_pool3d_with_argmax(y.copy(), 2, backend="numpy")]
    got = pyaclnn.max_pool3d_with_argmax(y, 2, backend="numpy")  # in x's old pages or not: right
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    del got
    # At most _IDLE_MAPPINGS stay idle (and _IDLE_BYTES: here as many as those), the oldest go first.
    monkeypatch.setattr(_host_memory, "_IDLE_BYTES", _host_memory._IDLE_MAPPINGS * 2 * PAGE)
    arrays = [
        _pages(2).view(np.float32).reshape(1, 1, 8, 16, 16) for _ in range(_host_memory._IDLE_MAPPINGS + 2)
    ]
    for a in arrays:  # pages of their own: none lies in another's mapping
        a[...] = RNG.random(a.shape, dtype=np.float32)
        pyaclnn.max_pool3d_with_argmax(a, 2, backend="numpy")
    for _ in range(3):  # evictions must not count the bytes of the evicted ones
        for a in arrays:
            pyaclnn.max_pool3d_with_argmax(a, 2, backend="numpy")
    idle = _registrations() - host.held_count()
    assert idle == _host_memory._IDLE_MAPPINGS
    # An idle mapping in the way of a new range ends, so the range is mapped, not copied.
    pages = _pages(3)
    first = host.map([pages[: PAGE + 10]], 0)[0]  # pages 0 and 1
    assert first is not None
    host.release([first[0]])  # idle now
    straddling = host.map([pages[PAGE : 3 * PAGE]], 0)[0]  # pages 1 and 2
    assert straddling is not None and straddling[0] is not first[0]
    host.release([straddling[0]])


def test_the_pool_keeps_at_most_its_limit_idle():
    from pyaclnn._host_pool import HostPool

    pool = HostPool(limit=3 << 20)
    arrays = [pool.empty((1 << 20,), np.dtype(np.float32)) for _ in range(2)]  # 4 MiB each
    small = pool.empty((100,), np.dtype(np.float32))
    assert small.ctypes.data % PAGE == 0 and small.base is not None
    del arrays
    assert pool.idle_bytes() == 0  # 4 MiB buffers exceed the 3 MiB limit: freed
    del small
    assert pool.idle_bytes() == 512
    again = pool.empty((100,), np.dtype(np.float32))
    assert pool.idle_bytes() == 0 and again.size == 100
    pool.free_all()


@pytest.mark.parametrize("dtype", [np.float16, np.float32, pyaclnn.bfloat16, np.int32, np.int64, np.bool_])
def test_a_lent_result_is_its_shape_and_dtype_and_its_buffer_comes_back_when_the_last_view_dies(dtype):
    """A result is a writable C-contiguous array of its shape and dtype on its own pages (built in
    one step for the dtypes the array interface names, through bytes for bfloat16); the buffer is
    reused only once no array over it is left, views included."""
    from pyaclnn._host_pool import HostPool

    pool = HostPool()
    shape = (2, 3, 5, 7)
    dt = np.dtype(dtype)
    result, buffer = pool.lend(shape, dt)
    assert result.shape == shape and result.dtype == dt and result.flags.c_contiguous
    assert result.flags.writeable and result.ctypes.data % PAGE == 0
    assert result.ctypes.data == buffer.ctypes.data and buffer.nbytes >= result.nbytes
    result[...] = np.arange(result.size).reshape(shape).astype(dt)
    view = result[1, ::2]
    del result
    assert pool.idle_bytes() == 0  # a view still sees the buffer
    other, other_buffer = pool.lend(shape, dt)
    assert other_buffer.ctypes.data != buffer.ctypes.data
    assert np.array_equal(view, np.arange(2 * 3 * 5 * 7).reshape(shape).astype(dt)[1, ::2])
    del view
    assert pool.idle_bytes() == buffer.nbytes
    again, again_buffer = pool.lend(shape, dt)
    assert again_buffer.ctypes.data == buffer.ctypes.data and again.dtype == dt and again.shape == shape
    del other, again
    pool.free_all()
    scalar, _ = pool.lend((), dt)
    assert scalar.shape == () and scalar.dtype == dt


def test_a_bad_numpy_index_is_told_as_the_host_check_tells_it_and_nothing_is_written(backend):
    x = RNG.random((1, 2, 4, 4, 4), dtype=np.float32)
    values, indices = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend)
    indices[0, 1, 1, 1, 0] = 99
    out = np.full_like(x, 5.0)
    with pytest.raises(pyaclnn.AclnnError, match=r"indices\[0, 1, 1, 1, 0\] = 99 is outside its") as info:
        pyaclnn.max_pool3d_with_argmax_backward(values, x, indices, 2, out=out, backend=backend)
    assert info.value.status == 161002 and info.value.__cause__ is None
    assert np.all(out == 5.0)
    indices[0, 1, 1, 1, 0] = 0  # the stream goes on: the kernel's error was reported once
    got = pyaclnn.max_pool3d_with_argmax_backward(values, x, indices, 2, backend=backend)
    assert got.shape == x.shape
