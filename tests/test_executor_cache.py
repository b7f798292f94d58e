"""The per-stream cache of repeatable executors (pyaclnn/_executors.py), on both backends.

A repeated call skips phase 1 but must still read the arrays' current data;
a plan must never outlive a descriptor it uses, a parameter array owned by one
call, a deterministic switch or its stream; a failed launch must not leave a
plan behind. The live-object check of the ``backend`` fixture catches any
executor these paths leak.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import pyaclnn
from pyaclnn import _context, _decl, acl, backends, errors

KERNEL = [2, 2, 2]
X_SHAPE = (2, 3, 4, 4, 4)
GRAD_SHAPE = (2, 3, 2, 2, 2)


def _count_phase1(monkeypatch, backend: str, api: str) -> list[int]:
    """Count the calls of the C function ``api`` on ``backend`` (phase 1 looks it up per call)."""
    calls: list[int] = []
    b = backends.get(backend)
    original = getattr(b, api)

    def counting(*args):
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(b, api, counting)
    return calls


def _live_executors(backend: str) -> int:
    return backends.get(backend).live_counts()["executors"]


@pytest.fixture
def stream(backend):
    with pyaclnn.Stream(backend=backend) as s:
        yield s


def _pool_inputs(torch, rng, shape=X_SHAPE):
    """An input and its argmax indices (from PyTorch: a forward here would cache a plan too)."""
    x = rng.standard_normal(shape, dtype=np.float32)
    _, idx = torch.ops.aten.max_pool3d_with_indices(torch.from_numpy(x), KERNEL, KERNEL, [0, 0, 0], [1, 1, 1])
    return x, idx.numpy().astype(np.int32)


def _pool_backward_oracle(torch, grad, x, idx):
    return torch.ops.aten.max_pool3d_with_indices_backward(
        torch.from_numpy(grad),
        torch.from_numpy(x),
        KERNEL,
        KERNEL,
        [0, 0, 0],
        [1, 1, 1],
        False,
        torch.from_numpy(idx.astype(np.int64)),
    ).numpy()


def _pool_backward_case(backend, stream, torch, seed: int):
    """(grad, x, idx) of a max-pool backward on NumPy, and the three on the device for ``stream``."""
    rng = np.random.default_rng(seed)
    x, idx = _pool_inputs(torch, rng)
    grad = rng.standard_normal(GRAD_SHAPE, dtype=np.float32)
    arrays = [pyaclnn.to_device(a, backend=backend, stream=stream) for a in (grad, x, idx)]
    return (grad, x, idx), arrays


def _repeat_pool_backward(backend, stream, torch, seed: int, times: int) -> None:
    """``times`` max-pool backward calls on the same device arrays, each equal to the oracle."""
    (grad, x, idx), arrays = _pool_backward_case(backend, stream, torch, seed)
    for _ in range(times):
        with pyaclnn.max_pool3d_with_argmax_backward(*arrays, 2, backend=backend, stream=stream) as got:
            np.testing.assert_array_equal(got.numpy(), _pool_backward_oracle(torch, grad, x, idx))


def test_a_repeated_call_skips_phase_1_and_reads_the_new_data(backend, stream, torch, monkeypatch):
    calls = _count_phase1(monkeypatch, backend, "aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize")
    rng = np.random.default_rng(1)
    x, idx = _pool_inputs(torch, rng)
    dx, di = (
        pyaclnn.to_device(x, backend=backend, stream=stream),
        pyaclnn.to_device(idx, backend=backend, stream=stream),
    )
    for _ in range(4):
        grad = rng.standard_normal(GRAD_SHAPE, dtype=np.float32)
        with pyaclnn.to_device(
            grad, backend=backend, stream=stream
        ) as dg:  # new values in the recycled block
            got = pyaclnn.max_pool3d_with_argmax_backward(dg, dx, di, 2, backend=backend, stream=stream)
            with got:
                np.testing.assert_array_equal(got.numpy(), _pool_backward_oracle(torch, grad, x, idx))
    assert len(calls) == 1, "the same descriptors and parameters must reuse the first call's executor"
    assert len(stream._state.executors) == 1


def test_grid_sampler_backward_hits_give_the_oracle_values(backend, stream, torch, monkeypatch):
    calls = _count_phase1(monkeypatch, backend, "aclnnGridSampler3DBackwardGetWorkspaceSize")
    rng = np.random.default_rng(2)
    x = pyaclnn.to_device(
        rng.standard_normal((1, 2, 3, 3, 3), dtype=np.float32), backend=backend, stream=stream
    )
    grid = pyaclnn.to_device(
        rng.uniform(-1, 1, (1, 2, 2, 2, 3)).astype(np.float32), backend=backend, stream=stream
    )
    for _ in range(3):
        grad = rng.standard_normal((1, 2, 2, 2, 2), dtype=np.float32)
        with pyaclnn.to_device(grad, backend=backend, stream=stream) as dg:
            dx, dgrid = pyaclnn.grid_sampler3d_backward(dg, x, grid, backend=backend, stream=stream)
            want_x, want_grid = torch.ops.aten.grid_sampler_3d_backward(
                torch.from_numpy(grad),
                torch.from_numpy(x.numpy()),
                torch.from_numpy(grid.numpy()),
                0,
                0,
                False,
                [True, True],
            )
            with dx, dgrid:
                np.testing.assert_allclose(dx.numpy(), want_x.numpy(), rtol=1e-5, atol=1e-6)
                np.testing.assert_allclose(dgrid.numpy(), want_grid.numpy(), rtol=1e-5, atol=1e-6)
    # the two outputs share a size class, so the pool hands their blocks back swapped: two plans
    assert len(calls) <= 2


def test_a_plan_dies_before_its_descriptors(backend, stream, torch):
    """Freeing the blocks destroys their descriptors; the plans using them must go first,
    and a new array at a recycled address with another shape must get a plan of its own."""
    base = _live_executors(backend)  # what earlier tests left on other streams
    (grad, x, idx), arrays = _pool_backward_case(backend, stream, torch, 3)
    pyaclnn.max_pool3d_with_argmax_backward(*arrays, 2, backend=backend, stream=stream).close()
    assert len(stream._state.executors) == 1 and _live_executors(backend) == base + 1
    for array in arrays:
        array.close()
    pyaclnn.memory_pool(backend=backend).free_all_blocks()
    assert len(stream._state.executors) == 0
    stream.synchronize()  # a dropped plan's executor is destroyed once its launches have run
    # (other streams' plans on freed blocks may go too, hence <=)
    assert _live_executors(backend) <= base

    # another shape, very likely at the same addresses
    rng = np.random.default_rng(30)
    x2, idx2 = _pool_inputs(torch, rng, (1, 2, 4, 4, 6))
    grad2 = rng.standard_normal((1, 2, 2, 2, 3), dtype=np.float32)
    arrays = [pyaclnn.to_device(a, backend=backend, stream=stream) for a in (grad2, x2, idx2)]
    with pyaclnn.max_pool3d_with_argmax_backward(*arrays, 2, backend=backend, stream=stream) as got:
        np.testing.assert_array_equal(got.numpy(), _pool_backward_oracle(torch, grad2, x2, idx2))


def test_a_failed_launch_on_a_cached_plan_leaves_no_plan(backend, stream, torch):
    base = _live_executors(backend)  # what earlier tests left on other streams
    rng = np.random.default_rng(4)
    x, idx = _pool_inputs(torch, rng)
    grad = rng.standard_normal(GRAD_SHAPE, dtype=np.float32)
    dg, dx = (
        pyaclnn.to_device(grad, backend=backend, stream=stream),
        pyaclnn.to_device(x, backend=backend, stream=stream),
    )
    di = pyaclnn.to_device(idx, backend=backend, stream=stream)
    pyaclnn.max_pool3d_with_argmax_backward(dg, dx, di, 2, backend=backend, stream=stream).close()
    assert len(stream._state.executors) == 1
    bad = idx.copy()
    bad[0, 0, 0, 0, 0] = 64  # one past the 4x4x4 plane: found by the kernel, which the hit runs
    di.close()
    di = pyaclnn.to_device(bad, backend=backend, stream=stream)  # same block, same descriptor: a cache hit
    pyaclnn.max_pool3d_with_argmax_backward(dg, dx, di, 2, backend=backend, stream=stream).close()
    with pytest.raises(pyaclnn.AclError, match="outside its") as info:
        stream.synchronize()  # the device error surfaces at the next wait
    assert info.value.status == _decl.constant("ACL_ERROR_RT_VECTOR_CORE_EXCEPTION")
    assert len(stream._state.executors) == 0  # the failed plan is no longer used
    # A wait that raised changed no bookkeeping: the next one (the error was reported
    # once) counts the launches done, and so destroys the dropped executor.
    stream.synchronize()
    assert _live_executors(backend) == base
    di.close()
    di = pyaclnn.to_device(idx, backend=backend, stream=stream)
    with pyaclnn.max_pool3d_with_argmax_backward(dg, dx, di, 2, backend=backend, stream=stream) as got:
        np.testing.assert_array_equal(got.numpy(), _pool_backward_oracle(torch, grad, x, idx))


def test_a_launch_refused_on_a_cached_plan_raises_counts_nothing_and_leaves_no_plan(
    backend, stream, torch, monkeypatch
):
    """A hit launches phase 2 bound once to the plan (``Backend.phase2_call``): a failing status
    of that launch raises AclnnError naming phase 2, like any launch; the stream's count of work
    is unchanged (nothing was queued) and the plan is dropped, its executor destroyed."""
    base = _live_executors(backend)  # what earlier tests left on other streams
    (grad, x, idx), arrays = _pool_backward_case(backend, stream, torch, 10)
    pyaclnn.max_pool3d_with_argmax_backward(*arrays, 2, backend=backend, stream=stream).close()
    assert len(stream._state.executors) == 1
    b = backends.get(backend)
    api = "aclnnMaxPool3dWithArgmaxBackward"
    launched = []

    def refusing(*args):
        launched.append(args)
        return errors.ACLNN_ERR_PARAM_INVALID

    monkeypatch.setattr(b, "phase2_call", lambda *args: (refusing, args[1:]))
    state = stream._state
    queued = state.queued
    with pytest.raises(errors.AclnnError, match=api) as info:
        pyaclnn.max_pool3d_with_argmax_backward(*arrays, 2, backend=backend, stream=stream)
    assert info.value.status == errors.ACLNN_ERR_PARAM_INVALID and info.value.api == api
    assert len(launched) == 1 and launched[0][3] is state.handle
    assert state.queued == queued and len(state.executors) == 0
    stream.synchronize()
    assert _live_executors(backend) == base
    monkeypatch.undo()
    with pyaclnn.max_pool3d_with_argmax_backward(*arrays, 2, backend=backend, stream=stream) as got:
        np.testing.assert_array_equal(got.numpy(), _pool_backward_oracle(torch, grad, x, idx))
    assert state.queued == queued + 1


def test_a_cached_plan_launches_with_the_stream_s_current_workspace_buffer(backend, stream, torch):
    """A hit reuses the workspace pointer its launch was bound with only while the stream keeps
    that buffer: once a larger one replaced it (and the old one was freed), the next hit runs on
    the new one (a launch on the freed buffer would be refused)."""
    (grad, x, idx), arrays = _pool_backward_case(backend, stream, torch, 11)
    want = _pool_backward_oracle(torch, grad, x, idx)
    out = pyaclnn.empty(X_SHAPE, np.float32, backend=backend)  # kept: the plan's key holds it
    for _ in range(2):  # planned, then a hit
        pyaclnn.max_pool3d_with_argmax_backward(*arrays, 2, backend=backend, stream=stream, out=out)
    state = stream._state
    old = state._workspace
    assert old is not None and len(state.executors) == 1
    state.workspace(old.nbytes + 1)  # a larger buffer: the old one goes back to the pool
    assert state._workspace is not old
    stream.synchronize()
    pyaclnn.memory_pool(backend=backend).free_all_blocks()  # ... and is freed
    assert old.ptr == 0 and len(state.executors) == 1
    pyaclnn.max_pool3d_with_argmax_backward(*arrays, 2, backend=backend, stream=stream, out=out)
    np.testing.assert_array_equal(out.numpy(), want)
    assert len(state.executors) == 1  # still the same plan


def test_set_deterministic_and_closing_the_stream_destroy_the_plans(backend, monkeypatch, torch):
    base = _live_executors(backend)  # what earlier tests left on other streams
    calls = _count_phase1(monkeypatch, backend, "aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize")
    rng = np.random.default_rng(5)
    x, idx = _pool_inputs(torch, rng)
    arrays = [pyaclnn.to_device(a, backend=backend) for a in (np.ones(GRAD_SHAPE, np.float32), x, idx)]
    stream = pyaclnn.Stream(backend=backend)
    pyaclnn.max_pool3d_with_argmax_backward(*arrays, 2, backend=backend, stream=stream).close()
    assert len(stream._state.executors) == 1
    pyaclnn.set_deterministic(True, backend=backend)
    assert len(stream._state.executors) == 0
    stream.synchronize()  # a dropped plan's executor is destroyed once its launches have run
    assert _live_executors(backend) == base
    for _ in range(2):
        pyaclnn.max_pool3d_with_argmax_backward(*arrays, 2, backend=backend, stream=stream).close()
    assert len(calls) == 2, "the first call after the switch plans again, the next reuses it"
    assert _live_executors(backend) == base + 1
    stream.close()
    assert _live_executors(backend) == base


def test_the_environment_can_turn_the_cache_off(backend, monkeypatch, torch):
    base = _live_executors(backend)  # what earlier tests left on other streams
    monkeypatch.setenv("PYACLNN_EXECUTOR_CACHE", "0")
    calls = _count_phase1(monkeypatch, backend, "aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize")
    rng = np.random.default_rng(6)
    x, idx = _pool_inputs(torch, rng)
    arrays = [pyaclnn.to_device(a, backend=backend) for a in (np.ones(GRAD_SHAPE, np.float32), x, idx)]
    with pyaclnn.Stream(backend=backend) as stream:
        for _ in range(3):
            pyaclnn.max_pool3d_with_argmax_backward(*arrays, 2, backend=backend, stream=stream).close()
        assert not stream._state.executors.enabled and len(stream._state.executors) == 0
    assert len(calls) == 3 and _live_executors(backend) == base


def test_a_call_with_its_own_parameter_arrays_is_not_cached(backend, stream, monkeypatch, torch):
    """Parameter arrays made for one call are destroyed with it; a plan holding them could
    match a later array at the same address."""
    base = _live_executors(backend)  # what earlier tests left on other streams
    monkeypatch.setattr(_context, "_ARRAY_CACHE_LIMIT", 0)  # the context's array cache takes nothing
    _repeat_pool_backward(backend, stream, torch, seed=7, times=2)
    assert len(stream._state.executors) == 0 and _live_executors(backend) == base


def test_dropping_plans_never_waits_for_a_launch(backend, stream, torch):
    """The pool drops plans without the stream's lock, which a launch in another thread may
    hold; waiting for it could deadlock with a collection freeing blocks inside that launch."""
    rng = np.random.default_rng(8)
    x, idx = _pool_inputs(torch, rng)
    arrays = [
        pyaclnn.to_device(a, backend=backend, stream=stream)
        for a in (np.ones(GRAD_SHAPE, np.float32), x, idx)
    ]
    pyaclnn.max_pool3d_with_argmax_backward(*arrays, 2, backend=backend, stream=stream).close()
    for array in arrays:
        array.close()
    holding, done_holding = threading.Event(), threading.Event()

    def launch_in_progress():
        with stream._state.lock:
            holding.set()
            done_holding.wait(30)

    holder = threading.Thread(target=launch_in_progress, daemon=True)
    holder.start()
    holding.wait(10)
    try:
        freeing = threading.Thread(target=pyaclnn.memory_pool(backend=backend).free_all_blocks, daemon=True)
        freeing.start()
        freeing.join(10)
        assert not freeing.is_alive(), "free_all_blocks waited for the stream's lock"
        assert len(stream._state.executors) == 0
    finally:
        done_holding.set()
        holder.join()


def test_without_repeatable_executors_every_call_plans_and_nothing_leaks(backend, stream, monkeypatch, torch):
    """A CANN without aclSetAclOpExecutorRepeatable (the npu backend's stub for a missing
    symbol raises ACL_ERROR_API_NOT_SUPPORT): after one refusal the op is not tried again, and
    each executor is consumed by its launch as usual."""
    refusals = []

    def unsupported(executor, *, backend=None):
        refusals.append(1)
        api = "aclSetAclOpExecutorRepeatable"
        raise errors.make_error(errors.ACL_ERROR_API_NOT_SUPPORT, f"{api} is not exported", api)

    monkeypatch.setattr(acl, "set_acl_op_executor_repeatable", unsupported)
    calls = _count_phase1(monkeypatch, backend, "aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize")
    base = _live_executors(backend)
    _repeat_pool_backward(backend, stream, torch, seed=9, times=3)
    assert len(calls) == 3 and len(refusals) == 1 and len(stream._state.executors) == 0
    assert _live_executors(backend) == base
