"""The shortcut of a repeated crafted call (pyaclnn._launch.crafted), on both backends.

A call of max_pool3d_with_argmax_backward or grid_sampler3d_backward on
DeviceArrays with the same parameters and input descriptors as an earlier call
on the same stream skips the Python checks (the general path: ``Launch``). Each
test here changes one thing the checks depend on, or one thing that decides
whether the shortcut may run at all, and asserts both that the general path
ran when it had to and that the values are PyTorch's.
"""

from __future__ import annotations

import numpy as np
import pytest
from running import in_threads

import pyaclnn
from pyaclnn import DeviceArray, functional

POOL_X = (2, 3, 4, 4, 4)
VOLUME = (1, 2, 3, 4, 5)
GRID = (1, 2, 3, 4, 3)
MODES = {"bilinear": 0, "nearest": 1}
PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}


@pytest.fixture
def stream(backend):
    with pyaclnn.Stream(backend=backend) as s:
        yield s


@pytest.fixture
def general(monkeypatch):
    """How many calls took the general path, per operator (a counting wrapper of each)."""
    counts = {"pool": 0, "grid": 0}
    for key, name in (("pool", "_max_pool_backward"), ("grid", "_grid_sampler_backward")):
        original = getattr(functional, name)

        def counting(*args, _original=original, _key=key, **kwargs):
            counts[_key] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(functional, name, counting)
    return counts


# -- max-pool backward ------------------------------------------------------------


def _pool_case(torch, rng, shape=POOL_X, dtype=np.float32, kernel=2, stride=None, padding=0, ceil=False):
    """(grad, x, indices) on NumPy, and the oracle's grad_input."""
    stride = kernel if stride is None else stride
    x = rng.standard_normal(shape).astype(dtype)
    k, s, p = [kernel] * 3, [stride] * 3, [padding] * 3
    tx = torch.from_numpy(x.astype(np.float32))
    out, idx = torch.ops.aten.max_pool3d_with_indices(tx, k, s, p, [1, 1, 1], ceil)
    grad = rng.standard_normal(tuple(out.shape)).astype(dtype)
    want = torch.ops.aten.max_pool3d_with_indices_backward(
        torch.from_numpy(grad.astype(np.float32)), tx, k, s, p, [1, 1, 1], ceil, idx
    ).numpy()
    return (grad, x, idx.numpy().astype(np.int32)), want


def _pool_call(arrays, stream, kernel=2, stride=(), padding=0, ceil=False):
    grad, x, idx = arrays
    return pyaclnn.max_pool3d_with_argmax_backward(
        grad, x, idx, kernel, stride, padding, 1, ceil, backend=stream.backend, stream=stream
    )


def _on(stream, *arrays):
    return [pyaclnn.to_device(a, backend=stream.backend, stream=stream) for a in arrays]


def _check(got, want, dtype=np.float32):
    assert isinstance(got, DeviceArray)
    tol = 1e-2 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got.numpy().astype(np.float32), want, rtol=tol, atol=tol)
    got.close()


def _close(*arrays):
    for a in arrays:
        a.close()


def test_a_repeated_call_skips_the_checks_and_reads_the_new_data(backend, stream, torch, general):
    rng = np.random.default_rng(0)
    (grad, x, idx), want = _pool_case(torch, rng)
    arrays = _on(stream, grad, x, idx)
    for i in range(4):
        if i:  # new values in the same arrays: the shortcut must read them
            (grad, x, idx), want = _pool_case(torch, rng)
            for array, new in zip(arrays, (grad, x, idx)):
                array.copy_(new, stream)
        _check(_pool_call(arrays, stream), want)
    assert general["pool"] == 1  # the first call checked; the others took the shortcut
    assert len(stream._state.executors.checked) == 1
    _close(*arrays)


@pytest.mark.parametrize(
    "change",
    ["shape", "dtype", "kernel", "stride", "padding", "ceil_mode", "params as lists"],
)
def test_a_change_of_shape_dtype_or_parameters_takes_the_checks_again(
    backend, stream, torch, general, change
):
    rng = np.random.default_rng(1)
    case, want = _pool_case(torch, rng)
    arrays = _on(stream, *case)
    for _ in range(2):
        _check(_pool_call(arrays, stream), want)
    assert general["pool"] == 1
    params = {"kernel": 2, "stride": (), "padding": 0, "ceil": False}
    case_args: dict = {}
    if change == "shape":
        case_args["shape"] = (1, 2, 6, 4, 2)
    elif change == "dtype":
        case_args["dtype"] = np.float16
    elif change == "kernel":
        params["kernel"] = case_args["kernel"] = 1
    elif change == "stride":
        params["stride"] = case_args["stride"] = 1
    elif change == "padding":
        params["padding"] = case_args["padding"] = 1
        params["kernel"] = case_args["kernel"] = 3
    elif change == "ceil_mode":
        case_args["shape"] = (2, 3, 5, 5, 5)  # (an input the ceil changes the output of)
        case_args["kernel"] = params["kernel"] = 2
        params["ceil"] = case_args["ceil"] = True
    new_case, new_want = _pool_case(torch, rng, **case_args)
    new_arrays = _on(stream, *new_case)
    if change == "params as lists":  # the same values, another type: normalised, then the shortcut
        new_arrays, new_want = arrays, want
        params = {"kernel": [2, 2, 2], "stride": [2, 2, 2], "padding": [0, 0, 0], "ceil": False}
    for _ in range(2):
        _check(_pool_call(new_arrays, stream, **params), new_want, case_args.get("dtype", np.float32))
    assert general["pool"] == 2  # checked once more, then the shortcut again
    _close(*arrays)
    if new_arrays is not arrays:
        _close(*new_arrays)


def test_strides_and_offsets_of_the_same_memory_take_the_checks_again(backend, stream, torch, general):
    rng = np.random.default_rng(2)
    (grad, x, idx), want = _pool_case(torch, rng)
    grad_d, idx_d = _on(stream, grad, idx)
    # x stored twice over, transposed (W, H, D) in the first half and as is in the second
    store = np.concatenate([x.transpose(0, 1, 4, 3, 2).ravel(), x.ravel()])
    (memory,) = _on(stream, store)
    n, c, d, h, w = x.shape
    plain = DeviceArray.from_ptr(memory.ptr, x.shape, np.float32, offset=x.size, backend=backend)
    strided = DeviceArray.from_ptr(
        memory.ptr, x.shape, np.float32, strides=(c * d * h * w, d * h * w, 1, d, d * h), backend=backend
    )
    for array in (plain, strided, plain, strided):
        for _ in range(2):
            _check(_pool_call((grad_d, array, idx_d), stream), want)
    assert general["pool"] == 2  # each layout checked once
    _close(plain, strided, memory, grad_d, idx_d)


def test_equal_parameters_of_a_refused_type_are_refused_after_a_shortcut(backend, stream, torch, general):
    rng = np.random.default_rng(3)
    case, want = _pool_case(torch, rng, kernel=1)
    arrays = _on(stream, *case)
    for _ in range(2):
        _check(_pool_call(arrays, stream, kernel=1), want)
    with pytest.raises(TypeError, match="kernel_size"):
        _pool_call(arrays, stream, kernel=True)  # True == 1, but not an int here
    with pytest.raises(TypeError, match="kernel_size"):
        _pool_call(arrays, stream, kernel=1.0)
    with pytest.raises(TypeError, match="ceil_mode"):
        _pool_call(arrays, stream, kernel=1, ceil=0.0)
    _check(_pool_call(arrays, stream, kernel=1, ceil=0), want)  # an int flag is taken, checked
    _close(*arrays)


def test_numpy_inputs_beside_device_arrays_take_the_general_path(backend, stream, torch, general):
    case, want = _pool_case(torch, np.random.default_rng(14))
    with pyaclnn.Stream(backend=backend) as other:
        grad_d = pyaclnn.to_device(case[0], backend=backend, stream=other)  # not ordered for stream yet
        idx_d = pyaclnn.to_device(case[2], backend=backend, stream=stream)
        for _ in range(3):  # x as NumPy, uploaded by each call
            _check(_pool_call((grad_d, case[1], idx_d), stream), want)
        assert general["pool"] == 3
        assert len(stream._state.executors.checked) == 0  # nothing kept for a NumPy input
        _close(grad_d, idx_d)


def test_a_closed_or_freed_input_is_never_read_through_the_shortcut(backend, stream, torch, general):
    rng = np.random.default_rng(4)
    case, want = _pool_case(torch, rng)
    grad_d, x_d, idx_d = _on(stream, *case)
    for _ in range(2):
        _check(_pool_call((grad_d, x_d, idx_d), stream), want)
    x_d.close()
    with pytest.raises(ValueError, match="input is a closed DeviceArray"):
        _pool_call((grad_d, x_d, idx_d), stream)
    # its block, reused for another input of the same size: the values are the new ones
    case2, want2 = _pool_case(torch, rng)
    arrays2 = _on(stream, *case2)
    _check(_pool_call(arrays2, stream), want2)
    # every block given back to the device: each descriptor goes, and with it what was checked
    _close(grad_d, idx_d, *arrays2)
    stream.synchronize()
    pyaclnn.memory_pool(backend=backend).free_all_blocks()
    assert len(stream._state.executors.checked) == 0
    case3, want3 = _pool_case(torch, rng)
    arrays3 = _on(stream, *case3)
    for _ in range(2):
        _check(_pool_call(arrays3, stream), want3)
    _close(*arrays3)


def test_another_stream_checks_for_itself_and_is_ordered_after_the_write(
    backend, torch, general, monkeypatch
):
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "200")  # queued work lags: a missing wait shows
    rng = np.random.default_rng(5)
    case, want = _pool_case(torch, rng)
    with pyaclnn.Stream(backend=backend) as s1, pyaclnn.Stream(backend=backend) as s2:
        arrays = _on(s1, *case)
        for _ in range(2):
            _check(_pool_call(arrays, s1), want)
        assert general["pool"] == 1
        for _ in range(2):
            _check(_pool_call(arrays, s2), want)
        assert general["pool"] == 2  # s2 keeps its own checks
        # new values of grad written on s2 by a slow kernel there, then read on s1: it must wait
        grad_d, x_d, idx_d = arrays
        source = rng.standard_normal(POOL_X, dtype=np.float32)
        (source_d,) = _on(s2, source)
        scratch = pyaclnn.empty(grad_d.shape, np.int32, backend=backend)
        pyaclnn.max_pool3d_with_argmax(source_d, 2, out=(grad_d, scratch), backend=backend, stream=s2)
        new_grad = torch.ops.aten.max_pool3d_with_indices(torch.from_numpy(source), [2] * 3, [2] * 3)[0]
        x, idx = torch.from_numpy(case[1]), torch.from_numpy(case[2].astype(np.int64))
        want = torch.ops.aten.max_pool3d_with_indices_backward(
            new_grad, x, [2] * 3, [2] * 3, [0] * 3, [1] * 3, False, idx
        ).numpy()
        _check(_pool_call(arrays, s1), want)  # grad's last write is s2's: the general path
        assert general["pool"] == 3
        _check(_pool_call(arrays, s1), want)  # ordered for s1 since: the shortcut
        assert general["pool"] == 3
        _close(*arrays, source_d, scratch)


def test_a_stream_of_another_backend_or_closed_is_refused_after_a_shortcut(backend, torch, general):
    case, want = _pool_case(torch, np.random.default_rng(12))
    stream = pyaclnn.Stream(backend=backend)
    arrays = _on(stream, *case)
    for _ in range(2):
        _check(_pool_call(arrays, stream), want)
    other = "numpy" if backend == "npu" else "npu"
    if other == "numpy":  # (loading the npu backend is the npu fixture's business)
        with pytest.raises(ValueError, match="stream must be a pyaclnn.Stream of backend 'numpy'"):
            pyaclnn.max_pool3d_with_argmax_backward(*arrays, 2, backend=other, stream=stream)
    stream.close()
    with pytest.raises(ValueError, match="stream is closed"):
        _pool_call(arrays, stream)
    _close(*arrays)


def test_a_capture_records_the_call_and_its_replay_reads_the_new_data(backend, torch, general):
    rng = np.random.default_rng(6)
    case, want = _pool_case(torch, rng)
    arrays = [pyaclnn.to_device(a, backend=backend) for a in case]
    for _ in range(2):
        pyaclnn.max_pool3d_with_argmax_backward(*arrays, 2, backend=backend).close()
    calls = general["pool"]
    with pyaclnn.Graph(backend=backend) as g:
        with pyaclnn.graph(g):
            out = pyaclnn.max_pool3d_with_argmax_backward(*arrays, 2, backend=backend)
        assert general["pool"] == calls + 1  # captured through the general path
        case, want = _pool_case(torch, rng)
        for array, new in zip(arrays, case):
            array.copy_(new)
        g.replay()
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)
        # after the capture: the inputs are the graph's (a replay may write them), no shortcut
        _check(pyaclnn.max_pool3d_with_argmax_backward(*arrays, 2, backend=backend), want)
        assert general["pool"] == calls + 2
        out.close()
    _close(*arrays)


def test_threads_calling_at_once_each_get_their_own_values(backend, torch, monkeypatch):
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "200")
    rng = np.random.default_rng(7)
    cases = [_pool_case(torch, rng, shape=(1, 2, 4, 4, 2 * (i + 1))) for i in range(4)]
    shared = pyaclnn.Stream(backend=backend)

    def work(i: int) -> None:
        case, want = cases[i]
        own = pyaclnn.Stream(backend=backend)
        for stream in (own, shared, own, shared):
            arrays = _on(stream, *case)
            for _ in range(3):
                _check(_pool_call(arrays, stream), want)
            _close(*arrays)
        own.close()

    errors = in_threads(work, 4)
    shared.close()
    assert not errors, errors


def test_without_the_executor_cache_every_call_still_runs_phase_1(backend, torch, monkeypatch, general):
    from pyaclnn import backends

    b = backends.get(backend)
    phase1 = []
    original = b.aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize

    def counting(*args):
        phase1.append(1)
        return original(*args)

    monkeypatch.setattr(b, "aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize", counting)
    case, want = _pool_case(torch, np.random.default_rng(8))
    with pyaclnn.Stream(backend=backend) as stream:
        stream._state.executors.enabled = False
        arrays = _on(stream, *case)
        for _ in range(3):
            _check(_pool_call(arrays, stream), want)
        assert general["pool"] == 1 and len(phase1) == 3  # the checks skipped, never phase 1
        _close(*arrays)


def test_a_blocking_launch_still_waits_after_a_shortcut(backend, stream, torch, monkeypatch, general):
    case, want = _pool_case(torch, np.random.default_rng(9))
    arrays = _on(stream, *case)
    _check(_pool_call(arrays, stream), want)
    ctx = stream._state._ctx
    monkeypatch.setattr(ctx, "launch_blocking", True)
    waits = []
    original = pyaclnn.Stream.synchronize
    monkeypatch.setattr(pyaclnn.Stream, "synchronize", lambda self: waits.append(1) or original(self))
    _check(_pool_call(arrays, stream), want)
    assert general["pool"] == 1 and waits
    _close(*arrays)


# -- grid sampler backward --------------------------------------------------------


def _grid_case(torch, rng, mode="bilinear", padding="zeros", corners=False, mask=(True, True), ndhwc=False):
    """(grad_output, input, grid) on NumPy (input and grad_output NDHWC with ``ndhwc``), and the
    oracle's (input_grad, grid_grad), None where not asked for."""
    x = rng.standard_normal(VOLUME, dtype=np.float32)
    grid = rng.uniform(-1.1, 1.1, GRID).astype(np.float32)
    grad = rng.standard_normal((VOLUME[0], VOLUME[1], *GRID[1:4]), dtype=np.float32)
    gi, gg = torch.ops.aten.grid_sampler_3d_backward(
        torch.from_numpy(grad),
        torch.from_numpy(x),
        torch.from_numpy(grid),
        MODES[mode],
        PADDINGS[padding],
        corners,
        [True, True],
    )
    gi, gg = gi.numpy(), gg.numpy()
    if ndhwc:
        x, grad, gi = (np.ascontiguousarray(a.transpose(0, 2, 3, 4, 1)) for a in (x, grad, gi))
    if mode == "nearest":
        gg = np.zeros_like(gg)
    return (grad, x, grid), (gi if mask[0] else None, gg if mask[1] else None)


def _grid_call(
    arrays, stream, mode="bilinear", padding="zeros", corners=False, mask=(True, True), ndhwc=False
):
    grad, x, grid = arrays
    return pyaclnn.grid_sampler3d_backward(
        grad,
        x,
        grid,
        mode,
        padding,
        corners,
        mask,
        layout="NDHWC" if ndhwc else "NCDHW",
        backend=stream.backend,
        stream=stream,
    )


def _check_pair(got, want):
    for g, w in zip(got, want):
        if w is None:
            assert g is None
        else:
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-4, atol=1e-4)
            g.close()


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"mode": "nearest"},
        {"padding": "border"},
        {"corners": True},
        {"mask": (True, False)},
        {"mask": (False, True)},
        {"ndhwc": True},
    ],
    ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "same",
)
def test_grid_backward_takes_the_checks_again_for_each_new_parameter(backend, stream, torch, general, change):
    rng = np.random.default_rng(10)
    case, want = _grid_case(torch, rng)
    arrays = _on(stream, *case)
    for _ in range(2):
        _check_pair(_grid_call(arrays, stream), want)
    assert general["grid"] == 1
    new_case, new_want = _grid_case(torch, rng, **change)
    new_arrays = _on(stream, *new_case)
    allocated = pyaclnn.memory_allocated(backend=backend)
    for _ in range(3):
        _check_pair(_grid_call(new_arrays, stream, **change), new_want)
    assert general["grid"] == 2  # checked once more (new inputs), then the shortcut again
    # an output not asked for is computed and given back: nothing is left allocated
    assert pyaclnn.memory_allocated(backend=backend) == allocated
    _close(*arrays, *new_arrays)


def test_grid_backward_refuses_after_a_shortcut_what_it_refuses_before(backend, stream, torch, general):
    case, want = _grid_case(torch, np.random.default_rng(11))
    arrays = _on(stream, *case)
    for _ in range(2):
        _check_pair(_grid_call(arrays, stream), want)
    with pytest.raises(TypeError, match="align_corners"):
        _grid_call(arrays, stream, corners=0.0)  # 0.0 == False, but not a flag
    with pytest.raises(TypeError, match="output_mask"):
        _grid_call(arrays, stream, mask=(1.0, 1.0))
    with pytest.raises(ValueError, match="interpolation_mode"):
        _grid_call(arrays, stream, mode="bilinear ")
    # two bad arguments: the first in the signature's order is the one reported, as without a shortcut
    with pytest.raises(ValueError, match="interpolation_mode"):
        _grid_call(arrays, stream, mode="bilinear ", mask=(1.0, 1.0))
    with pytest.raises(ValueError, match="layout"):
        pyaclnn.grid_sampler3d_backward(*arrays, layout="ncdhw", backend=backend, stream=stream)
    # the shape rule of the op, for a grid of another size: the general path reports it
    bad = pyaclnn.to_device(np.zeros((1, 2, 3, 5, 3), np.float32), backend=backend, stream=stream)
    with pytest.raises(pyaclnn.AclnnError):
        _grid_call((arrays[0], arrays[1], bad), stream)
    _check_pair(_grid_call(arrays, stream), want)
    _close(*arrays, bad)


def test_an_output_descriptor_evicted_since_is_never_reused(backend, stream, torch, general):
    """A hit's output gets the descriptor an earlier output got on the same block, unless that
    descriptor was evicted since (a block keeps a few): then the entry is gone with it."""
    case, want = _grid_case(torch, np.random.default_rng(13))
    arrays = _on(stream, *case)
    shape = want[0].shape
    # a block of input_grad's size with seven descriptors already: input_grad's will be its eighth
    assert int(np.prod(shape)) == 120
    block = pyaclnn.empty((120,), np.float32, backend=backend, stream=stream)
    views = [block.reshape(s) for s in [(120,), (2, 60), (60, 2), (3, 40), (40, 3), (4, 30), (30, 4)]]
    for view in views:
        view.descriptor(pyaclnn.dtypes.ACL_FORMAT_ND)
        view.close()
    block.close()
    for _ in range(3):
        input_grad, grid_grad = _grid_call(arrays, stream)
        _check_pair((grid_grad, input_grad), (want[1], want[0]))  # closed last: taken first next
    assert general["grid"] == 1 and len(stream._state.executors.checked) == 1
    # that block again, and one more descriptor of it: the newest, input_grad's, is evicted
    again = pyaclnn.empty((120,), np.float32, backend=backend, stream=stream)
    again.reshape(5, 24).descriptor(pyaclnn.dtypes.ACL_FORMAT_ND)
    again.close()
    assert len(stream._state.executors.checked) == 0  # forgotten with it
    for _ in range(2):  # checked again (twice when the first evicts another descriptor on the way)
        input_grad, grid_grad = _grid_call(arrays, stream)
        _check_pair((grid_grad, input_grad), (want[1], want[0]))
    checked = general["grid"]
    assert checked in (2, 3)
    input_grad, grid_grad = _grid_call(arrays, stream)
    _check_pair((grid_grad, input_grad), (want[1], want[0]))
    assert general["grid"] == checked  # then the shortcut, with the new descriptor
    _close(*arrays)


class _Interrupted(Exception):
    pass


def test_a_failure_while_the_outputs_are_made_gives_their_blocks_back(
    backend, stream, torch, general, monkeypatch
):
    """The shortcut takes both outputs' blocks at once: one not yet an array's goes back too."""
    case, want = _grid_case(torch, np.random.default_rng(15))
    arrays = _on(stream, *case)
    for _ in range(2):
        _check_pair(_grid_call(arrays, stream), want)
    allocated = pyaclnn.memory_allocated(backend=backend)
    original = DeviceArray._setup
    made = []

    def second_fails(self, *args, **kwargs):
        if made:
            raise _Interrupted
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(DeviceArray, "_setup", second_fails)
    with pytest.raises(_Interrupted):
        _grid_call(arrays, stream)
    assert made and made[0].closed  # the first output, closed
    assert pyaclnn.memory_allocated(backend=backend) == allocated  # and the second's block back
    monkeypatch.setattr(DeviceArray, "_setup", original)
    _check_pair(_grid_call(arrays, stream), want)
    assert general["grid"] == 1  # the shortcut throughout
    _close(*arrays)
