"""The eager path of pyaclnn.ops: a repeated call on DeviceArrays skips the general Launch, with the
checks of its other arguments cached per operator. The cache must never let through what the
checks refuse (a value equal to a recorded one but of another type, a float zero of the other
sign), and the tensors are checked at every call (closed, elsewhere, ordered after other streams)."""

from __future__ import annotations

import decimal

import numpy as np
import pytest
from running import in_threads, on_two_devices

import pyaclnn
from pyaclnn import ops


def _arrays(*values):
    return [pyaclnn.to_device(np.asarray(v, np.float32)) for v in values]


def test_a_repeated_call_on_device_arrays_skips_the_general_path_and_computes_the_same(active, ops_general):
    x, y, out = _arrays([1, 2], [10, 20], [0, 0])
    for alpha in (7, 7, 8, 7):
        assert ops.add(x, y, alpha, out) is out
        np.testing.assert_array_equal(out.numpy(), [1 + alpha * 10, 2 + alpha * 20])
    assert len(ops_general) == 2  # the first call with 7 and the first with 8; the repeats were eager
    for a in (x, y, out):
        a.close()


def test_a_value_equal_to_a_recorded_one_but_of_a_refused_type_is_still_refused(active, ops_general):
    x, y, out = _arrays([1, 2], [10, 20], [0, 0])
    ops.add(x, y, 1, out)
    with pytest.raises(TypeError, match="alpha must be a bool, int, float or NumPy scalar"):
        ops.add(x, y, decimal.Decimal(1), out)  # == 1, and hashes as 1
    grid_in = pyaclnn.to_device(np.ones((1, 1, 2, 2, 2), np.float32))
    grid = pyaclnn.to_device(np.zeros((1, 1, 1, 1, 3), np.float32))
    sampled = pyaclnn.empty((1, 1, 1, 1, 1), np.float32)
    ops.grid_sampler3d(grid_in, grid, 0, 0, False, sampled)
    with pytest.raises(TypeError, match="interpolation_mode must be an int"):
        ops.grid_sampler3d(grid_in, grid, False, 0, False, sampled)  # False == 0
    with pytest.raises(TypeError, match="align_corners must be a bool"):
        ops.grid_sampler3d(grid_in, grid, 0, 0, 0, sampled)  # 0 == False
    for a in (x, y, out, grid_in, grid, sampled):
        a.close()


def test_a_float_zero_is_not_taken_for_the_other_zero(active):
    x, y, out = _arrays([-0.0], [0.0], [1.0])
    ops.add(x, y, 0.0, out)
    assert not np.signbit(out.numpy()[0])  # -0 + 0 * 0 = +0
    ops.add(x, y, -0.0, out)
    assert np.signbit(out.numpy()[0])  # -0 + -0 * 0 = -0: 0.0's C value would give +0
    for a in (x, y, out):
        a.close()


def test_a_closed_array_or_stream_after_a_recorded_call_is_refused_by_name(active):
    x, y, out = _arrays([1, 2], [10, 20], [0, 0])
    stream = pyaclnn.Stream()
    ops.add(x, y, 1, out, stream=stream)
    ops.add(x, y, 1, out, stream=stream)
    y.close()
    with pytest.raises(ValueError, match="other is a closed DeviceArray"):
        ops.add(x, y, 1, out, stream=stream)
    y = _arrays([10, 20])[0]
    ops.add(x, y, 1, out, stream=stream)
    stream.close()
    with pytest.raises(ValueError, match="stream is closed"):
        ops.add(x, y, 1, out, stream=stream)
    for a in (x, y, out):
        a.close()


def test_a_numpy_array_after_a_recorded_call_takes_the_general_path(active, ops_general):
    x, y, out = _arrays([1, 2], [10, 20], [0, 0])
    ops.add(x, y, 1, out)
    out.numpy()  # its work done: on the numpy backend the stream is then idle
    before = len(ops_general)
    result = ops.add(np.array([1, 2], np.float32), np.array([3, 4], np.float32), 1, np.zeros(2, np.float32))
    np.testing.assert_array_equal(result, [4, 6])
    with pytest.raises(TypeError, match="out is a NumPy array the operator writes"):
        ops.add(x, y, 1, np.zeros(2, np.float32))
    # (on the numpy backend the call on NumPy arrays ran at once: tests/test_ops_at_once.py)
    assert len(ops_general) == before + (1 if active == "numpy" else 2)
    for a in (x, y, out):
        a.close()


def test_an_eager_call_waits_for_the_write_of_another_stream(active):
    first, second = pyaclnn.Stream(), pyaclnn.Stream()
    x, y, out = _arrays(np.zeros(1000), np.ones(1000), np.zeros(1000))
    ops.add(x, y, 1, x, stream=first)  # recorded
    for _ in range(20):
        ops.add(x, y, 1, x, stream=first)  # x += 1, eager, on the first stream
    ops.add(x, y, 1, out, stream=second)  # reads x on the second: after the first's writes
    np.testing.assert_array_equal(out.numpy(), np.full(1000, 22, np.float32))
    for a in (x, y, out, first, second):
        a.close()


def _grid_backward_launch():
    """A new stream (no workspace yet), grid_sampler3d_backward's phase-1 C arguments on device
    arrays of it (the operator asks for a 32-byte workspace), its outputs, and the results
    the functional API gives: (stream, op, args, outputs, expected, arrays to close)."""
    from pyaclnn import _context, _generic

    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 4, 4, 4)).astype(np.float32)
    grid = rng.uniform(-1, 1, (1, 2, 2, 2, 3)).astype(np.float32)
    g = rng.standard_normal((1, 2, 2, 2, 2)).astype(np.float32)
    expected = pyaclnn.grid_sampler3d_backward(g, x, grid)
    stream = pyaclnn.Stream()
    op = _generic.operator(ops.grid_sampler3d_backward.declaration)
    arrays = [pyaclnn.to_device(a, stream=stream) for a in (g, x, grid)]
    outputs = [
        pyaclnn.empty(x.shape, np.float32, stream=stream),
        pyaclnn.empty(grid.shape, np.float32, stream=stream),
    ]
    mask = _context.context().cached_bool_array((True, True))
    args = (*(a.descriptor(2) for a in arrays), 0, 0, False, mask, *(o.descriptor(2) for o in outputs))
    return stream, op, args, outputs, expected, [*arrays, *outputs, stream]


def test_once_takes_a_larger_workspace_when_the_streams_one_is_too_small(active):
    """launch_once on a new stream (no workspace yet) with an operator that needs one: phase 2
    runs after the stream's buffer was grown, and the next call runs both phases in one."""
    stream, op, args, outputs, expected, owned = _grid_backward_launch()
    state = stream._state
    assert state._workspace is None
    for call in range(2):
        before = state.queued
        assert state.executors.launch_once(op, args, outputs) is True
        assert state._workspace is not None and state.queued == before + 1  # counted once
        np.testing.assert_array_equal(outputs[0].numpy(), expected[0], err_msg=f"call {call}")
        np.testing.assert_array_equal(outputs[1].numpy(), expected[1], err_msg=f"call {call}")
        for output in outputs:
            output.fill_zero(stream)
    for a in owned:
        a.close()


@pytest.mark.parametrize("backend", ["npu"], indirect=True)  # (the words and their executor: npu's)
def test_the_compiled_call_hands_a_larger_workspace_to_python_which_takes_it(active):
    """What the compiled call (pyaclnn._repeat) hands to Python when phase 1 asks for more
    workspace than the stream's buffer holds: no eager operator of the emulator asks for any,
    so the hand-over (_launch._rest) is called here as the C code calls it, under the lock,
    with the address of an executor of grid_sampler3d_backward's phase 1."""
    from pyaclnn import _launch
    from pyaclnn.backends.npu._ffi import ffi

    stream, op, args, outputs, expected, owned = _grid_backward_launch()
    state = stream._state
    assert op.c_form is not None  # (int64_t and bool parameters: words)
    size, executor = op.phase1(*args)
    assert size == 32 and state._workspace is None
    before = state.queued
    address = int(ffi.cast("uintptr_t", executor))
    with state.lock:
        _launch._rest(state, _launch.Repeated(op, args, ()), (), (), 0, 0, size, address)
    assert state.queued == before + 1 and state._workspace.nbytes >= 32
    np.testing.assert_array_equal(outputs[0].numpy(), expected[0])
    np.testing.assert_array_equal(outputs[1].numpy(), expected[1])
    for a in owned:
        a.close()


@pytest.fixture
def general_eager(monkeypatch):
    """The eager calls that made their C arguments (``_launch.eager_rest`` asked for the operator,
    by the Python path or the compiled one), each as its values: a call like an earlier eager
    one on the same stream and arrays reuses that one's instead."""
    from pyaclnn import _launch

    calls = []
    rest = _launch.eager_rest

    def counted(operator, stream, state, ctx, values, *args, **kwargs):
        def counting():
            calls.append(values)
            return operator()

        return rest(counting, stream, state, ctx, values, *args, **kwargs)

    monkeypatch.setattr(_launch, "eager_rest", counted)
    return calls


def test_a_call_like_an_earlier_eager_one_reuses_its_c_arguments(active, general_eager):
    x, y, out = _arrays([1, 2], [10, 20], [0, 0])
    stream = pyaclnn.Stream()
    for alpha in (3, 3, 3, 3, 4, 4, 3):
        assert ops.add(x, y, alpha, out, stream=stream) is out
        np.testing.assert_array_equal(out.numpy(), [1 + alpha * 10, 2 + alpha * 20])
    # the second call with 3 made them (the first was the general one), the second with 4 too
    assert len(general_eager) == 2
    for a in (x, y, out, stream):
        a.close()


def test_a_new_array_on_the_block_of_an_earlier_call_gets_its_own_descriptor(active, general_eager):
    stream = pyaclnn.Stream()
    x, y = (pyaclnn.to_device(np.asarray(v, np.float32), stream=stream) for v in ([1, 2], [10, 20]))
    out = pyaclnn.empty((2,), np.float32, stream=stream)
    for _ in range(3):
        ops.add(x, y, 1, out, stream=stream)
    block, ptr = out._block, out.ptr
    out.close()
    half = pyaclnn.empty((2,), np.float16, stream=stream)  # the pool gives the same block again
    assert half._block is block and half.ptr == ptr
    before = len(general_eager)
    for _ in range(3):
        assert ops.add(x, y, 1, half, stream=stream) is half
        np.testing.assert_array_equal(half.numpy(), np.array([11, 22], np.float16))
    # half's first two calls (a new array leaves nothing the first time); the third reused
    assert len(general_eager) == before + 2
    for a in (x, y, half, stream):
        a.close()


def test_a_reference_registered_later_is_what_a_repeated_call_runs(monkeypatch):
    """A function of pyaclnn.ops kept across a register_reference (numpy backend) runs the new
    reference: what its eager calls left holds the operator, and goes with it."""
    from pyaclnn import _generic
    from pyaclnn.kernels.references import _registry as references

    previous = pyaclnn.get_backend()
    pyaclnn.set_backend("numpy")
    monkeypatch.setattr(references, "_REFERENCES", dict(references._REFERENCES))
    try:
        add = ops.add
        x, y, out = _arrays([1, 2], [10, 20], [0, 0])
        for _ in range(3):
            add(x, y, 1, out)
        np.testing.assert_array_equal(out.numpy(), [11, 22])

        def subtract(self, other, alpha, result):
            np.subtract(self, alpha * other, out=result)

        ops.register_reference("Add", subtract)
        add(x, y, 1, out)
        np.testing.assert_array_equal(out.numpy(), [-9, -18])
        for a in (x, y, out):
            a.close()
    finally:
        monkeypatch.undo()
        _generic.forget("numpy")
        ops._functions.clear()
        pyaclnn.set_backend(previous)


def test_a_repeated_write_waits_for_a_read_on_another_stream(active, general_eager, monkeypatch):
    """x written again and again on one stream (the call repeated), read on another that is
    behind with slow kernels, then written once more: that write waits for the read."""
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "1000")  # queued work lags: a missing wait shows
    writer, reader = pyaclnn.Stream(), pyaclnn.Stream()
    x, one = (pyaclnn.to_device(np.ones((1, 1, 2, 2, 2), np.float32), stream=writer) for _ in range(2))
    for _ in range(3):
        ops.add(x, one, 1, x, stream=writer)  # x = 4 everywhere
    assert len(general_eager) == 1  # the third call reused the second's
    z, w = _arrays(np.zeros(100), np.ones(100))
    grid = pyaclnn.to_device(np.zeros((1, 1, 1, 1, 3), np.float32), stream=reader)
    pyaclnn.grid_sampler3d(w.reshape(1, 1, 4, 5, 5), grid, stream=reader).close()  # made once, ahead
    for _ in range(12):  # the reader is 12 ms behind
        ops.add(z, w, 1, z, stream=reader)
    assert not reader.query()
    sampled = pyaclnn.grid_sampler3d(x, grid, stream=reader)  # the centre: the mean of x, 4
    ops.add(x, one, 1, x, stream=writer)  # x = 5, once the reader has read it
    np.testing.assert_array_equal(sampled.numpy(), np.full((1, 1, 1, 1, 1), 4, np.float32))
    np.testing.assert_array_equal(x.numpy(), np.full(x.shape, 5, np.float32))
    for a in (x, one, z, w, grid, sampled, writer, reader):
        a.close()


def test_threads_repeating_calls_each_get_their_own_sums(active):
    """Four threads, each adding into its own array 30 times: two on a stream of their own, two
    sharing one (the calls reuse what the stream's earlier calls left, whichever thread made it)."""
    shared = pyaclnn.Stream()
    streams = [pyaclnn.Stream(), pyaclnn.Stream(), shared, shared]
    results: dict[int, np.ndarray] = {}

    def run(i: int) -> None:
        stream = streams[i]
        total = pyaclnn.to_device(np.zeros(8, np.float32), stream=stream)
        step = pyaclnn.to_device(np.full(8, i + 1, np.float32), stream=stream)
        for _ in range(30):
            ops.add(total, step, 1, total, stream=stream)
        results[i] = total.numpy()
        total.close()
        step.close()

    errors = in_threads(run, 4)
    assert not errors, errors
    for i in range(4):
        np.testing.assert_array_equal(results[i], np.full(8, 30 * (i + 1), np.float32))
    for s in streams[:3]:
        s.close()


def test_a_new_output_each_call_leaves_nothing_behind(active):
    """Calls that each write a new array (never described before) leave no record: they would
    only push out what other calls on the stream left (their arrays repeat)."""
    stream = pyaclnn.Stream()
    x, y = (pyaclnn.to_device(np.asarray(v, np.float32), stream=stream) for v in ([1, 2], [10, 20]))
    before = len(stream._state.executors.checked)
    for _ in range(3):
        out = pyaclnn.empty((2,), np.float32, stream=stream)
        ops.add(x, y, 1, out, stream=stream)
        np.testing.assert_array_equal(out.numpy(), [11, 22])
        out.close()
    assert len(stream._state.executors.checked) == before
    out = pyaclnn.empty((2,), np.float32, stream=stream)
    for _ in range(3):  # the same arrays again: the second call leaves one, the third takes it
        ops.add(x, y, 1, out, stream=stream)
    assert len(stream._state.executors.checked) == before + 1
    for a in (x, y, out, stream):
        a.close()


_OTHER_DEVICE = """
import threading
import numpy as np
import pyaclnn
from pyaclnn import ops

s = pyaclnn.Stream(device=1)
x, y, out = (pyaclnn.to_device(np.full(4, v, np.float32), stream=s) for v in (1, 2, 0))
seen = []

def run():  # a thread that never called before: its current device is 0
    for alpha in (1, 1, 1, 2):
        ops.add(x, y, alpha, out, stream=s)
        seen.append(out.numpy()[0])
    seen.append(pyaclnn.get_device())

t = threading.Thread(target=run)
t.start()
t.join()
assert seen == [3, 3, 3, 5, 0], seen
assert out.device == 1
print("ok")
"""


@pytest.mark.parametrize("name", ["numpy", "npu"])
def test_calls_on_another_devices_stream_from_a_new_thread(name, emulator_home):
    """A new thread's repeated calls on a stream of device 1 run there and leave the thread's
    current device 0 (a child: the emulations read PYACLNN_EMU_DEVICES once per process)."""
    proc = on_two_devices(_OTHER_DEVICE, name, emulator_home)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr
