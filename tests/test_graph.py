"""pyaclnn.Graph and pyaclnn.graph: the runtime API of stream capture, on both emulations.

A block of calls on DeviceArrays is captured once; each replay runs it again on the data copied into
the captured inputs, and must give what an eager call on that data gives, bit for bit. The graph's
memory is its own until close(); what a capture cannot record is refused naming the call, and the
capture is abandoned with nothing left behind (the backend fixture checks live objects and hazards
after every test).
"""

from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest

import pyaclnn
from pyaclnn import backends

RNG = np.random.default_rng(2222)
POOL_SHAPE = (1, 2, 4, 8, 8)
POOLED = (1, 2, 2, 4, 4)
VOLUME = (1, 2, 4, 5, 6)
GRID = (1, 3, 4, 5, 3)


def _pool_inputs() -> list[np.ndarray]:
    return [RNG.standard_normal(POOL_SHAPE, dtype=np.float32)]


def _pool_backward_inputs() -> list[np.ndarray]:
    x = RNG.standard_normal(POOL_SHAPE, dtype=np.float32)
    _, indices = pyaclnn.max_pool3d_with_argmax(x, 2, backend="numpy")
    return [RNG.standard_normal(POOLED, dtype=np.float32), x, np.asarray(indices)]


def _sampler_inputs() -> list[np.ndarray]:
    grid = RNG.uniform(-1.1, 1.1, GRID).astype(np.float32)
    return [RNG.standard_normal(VOLUME, dtype=np.float32), grid]


def _sampler_backward_inputs() -> list[np.ndarray]:
    volume, grid = _sampler_inputs()
    return [RNG.standard_normal((1, 2, *GRID[1:4]), dtype=np.float32), volume, grid]


# name -> (inputs, the call on them); every call returns a tuple of outputs
OPS = {
    "max_pool3d_with_argmax": (_pool_inputs, lambda b, x: pyaclnn.max_pool3d_with_argmax(x, 2, backend=b)),
    "max_pool3d_with_argmax_backward": (
        _pool_backward_inputs,
        lambda b, g, x, i: (pyaclnn.max_pool3d_with_argmax_backward(g, x, i, 2, backend=b),),
    ),
    "grid_sampler3d": (_sampler_inputs, lambda b, x, grid: (pyaclnn.grid_sampler3d(x, grid, backend=b),)),
    "grid_sampler3d_backward": (
        _sampler_backward_inputs,
        lambda b, g, x, grid: pyaclnn.grid_sampler3d_backward(g, x, grid, backend=b),
    ),
}


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.view(np.uint32) if a.dtype == np.float32 else a


def _device_allocs(b: str) -> int:
    return backends.get(b).live_counts()["device_allocs"]


@pytest.mark.parametrize("op", list(OPS))
def test_replays_give_the_eager_results_on_the_new_inputs_bit_for_bit(backend, op):
    b = backend
    make, call = OPS[op]
    inputs = [pyaclnn.to_device(a, backend=b) for a in make()]
    with pyaclnn.Graph(backend=b) as g:
        with pyaclnn.graph(g):
            outputs = call(b, *inputs)
        assert g.captured and all(isinstance(o, pyaclnn.DeviceArray) for o in outputs)
        for _ in range(2):  # each replay on new data, against an eager call (on NumPy) on that data
            data = make()
            for array, new in zip(inputs, data):
                array.copy_(new)
            g.replay()
            wanted = call(b, *data)
            for got, want in zip(outputs, wanted):
                np.testing.assert_array_equal(_bits(got.numpy()), _bits(want))
    for array in (*inputs, *outputs):
        array.close()


def test_the_captured_calls_run_only_at_a_replay(backend):
    b = backend
    x = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    out = pyaclnn.zeros(POOLED, backend=b)
    idx = pyaclnn.zeros(POOLED, np.int32, backend=b)
    with pyaclnn.Graph(backend=b) as g:
        with pyaclnn.graph(g):
            pyaclnn.max_pool3d_with_argmax(x, 2, out=(out, idx), backend=b)
        assert not out.numpy().any()  # recorded, not run
        g.replay()
        np.testing.assert_array_equal(out.numpy(), pyaclnn.max_pool3d_with_argmax(x.numpy(), 2, backend=b)[0])
    for a in (x, out, idx):
        a.close()


def test_graph_memory_is_its_own_while_it_lives_and_freed_by_close(backend):
    b = backend
    x = pyaclnn.to_device(RNG.standard_normal(VOLUME, dtype=np.float32), backend=b)
    grid = pyaclnn.to_device(RNG.uniform(-1, 1, GRID).astype(np.float32), backend=b)
    before = _device_allocs(b)
    g = pyaclnn.Graph(backend=b)
    with pyaclnn.graph(g):
        out = pyaclnn.grid_sampler3d(x, grid, backend=b)
    captured = _device_allocs(b)
    assert captured > before  # the output came from the graph's own memory
    ptr = out.ptr
    g.replay()
    want = out.numpy()
    out.close()  # the graph keeps the memory: its replays write it
    assert _device_allocs(b) == captured
    # an eager call of the same shape never gets the graph's block, even though its array is closed
    eager = [pyaclnn.grid_sampler3d(x, grid, backend=b) for _ in range(3)]
    assert ptr not in [e.ptr for e in eager]
    for e in eager:
        np.testing.assert_array_equal(_bits(e.numpy()), _bits(want))
        e.close()
    pyaclnn.memory_pool(backend=b).free_all_blocks()
    assert _device_allocs(b) == captured
    g.close()
    assert _device_allocs(b) == before  # no array held the graph's memory: freed
    assert backends.get(b).live_counts()["graphs"] == 0
    x.close()
    grid.close()


def test_an_output_still_open_at_close_stays_readable_and_goes_to_the_pool(backend):
    b = backend
    x = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    g = pyaclnn.Graph(backend=b)
    with pyaclnn.graph(g):
        out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=b)
    g.replay()
    g.close()
    want = pyaclnn.max_pool3d_with_argmax(x.numpy(), 2, backend=b)
    np.testing.assert_array_equal(_bits(out.numpy()), _bits(want[0]))
    np.testing.assert_array_equal(idx.numpy(), want[1])
    pyaclnn.memory_pool(backend=b).free_all_blocks()  # what the eager call cached
    before = _device_allocs(b)
    out.close()
    idx.close()
    pyaclnn.memory_pool(backend=b).free_all_blocks()  # the shared pool now owns them: cached, then freed
    assert _device_allocs(b) == before - 2
    x.close()


def test_a_replay_on_a_slow_device_is_ordered_before_reads_on_another_stream(backend, monkeypatch):
    b = backend
    first, second = (RNG.standard_normal(POOL_SHAPE, dtype=np.float32) for _ in range(2))
    x = pyaclnn.to_device(first, backend=b)
    replaying, reading = pyaclnn.Stream(backend=b), pyaclnn.Stream(backend=b)
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "2000")  # read at each launch: at the capture
    g = pyaclnn.Graph(backend=b)
    with pyaclnn.graph(g):
        out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=b)
        for _ in range(4):  # 8 ms of kernels per replay
            pyaclnn.max_pool3d_with_argmax(x, 2, out=(out, idx), backend=b)
    g.replay(replaying)
    replaying.synchronize()
    x.copy_(second, stream=replaying)
    g.replay(replaying)
    # read on another stream, at once: the copy must wait for the replay still running
    copy = pyaclnn.empty_like(out, stream=reading).copy_(out, stream=reading)
    np.testing.assert_array_equal(
        _bits(copy.numpy()), _bits(pyaclnn.max_pool3d_with_argmax(second, 2, backend=b)[0])
    )
    g.close()
    for a in (x, out, idx, copy):
        a.close()
    replaying.close()
    reading.close()


def test_close_waits_for_a_queued_replay(backend, monkeypatch):
    b = backend
    x = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    stream = pyaclnn.Stream(backend=b)
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "20000")
    g = pyaclnn.Graph(backend=b)
    with pyaclnn.graph(g):
        out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=b)
    out.close()
    idx.close()  # only the graph holds their memory now: close frees it, after the replay
    start = time.perf_counter()
    g.replay(stream)
    assert not stream.query()  # queued, still running
    g.close()
    assert time.perf_counter() - start >= 0.015  # close waited for the replay's 20 ms kernel
    assert backends.get(b).live_counts()["graphs"] == 0
    # the fixture checks that nothing was freed under the replay (0 hazards) and nothing is left
    stream.close()
    x.close()


def test_finalize_releases_a_live_graph(backend):
    b = backend
    x = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    g = pyaclnn.Graph(backend=b)
    with pyaclnn.graph(g):
        pyaclnn.max_pool3d_with_argmax(x, 2, backend=b)
    g.replay()
    pyaclnn.finalize(b)  # the fixture then finds no live object: graph, executors, memory gone
    assert g.closed
    assert not any(backends.get(b).live_counts().values())


def _warm(b: str, x: pyaclnn.DeviceArray) -> None:
    """An eager call first: x's descriptor and the parameter arrays are then cached for good, so
    the live counts after an abandoned capture compare with those before it."""
    for a in pyaclnn.max_pool3d_with_argmax(x, 2, backend=b):
        a.close()


# -- refusals ---------------------------------------------------------------------------------------


def _refusals(b: str, x: pyaclnn.DeviceArray, out: pyaclnn.DeviceArray, what: str) -> None:
    """Make, inside a capture, the call ``what`` names."""
    if what == "a NumPy input":
        pyaclnn.max_pool3d_with_argmax(np.zeros(POOL_SHAPE, np.float32), 2, backend=b)
    elif what == "a NumPy out":
        pyaclnn.max_pool3d_with_argmax(x, 2, out=(np.empty(POOLED, np.float32), None), backend=b)
    elif what == "to_device":
        pyaclnn.to_device(np.zeros(4, np.float32), backend=b)
    elif what == "copy_ from NumPy":
        x.copy_(np.zeros(POOL_SHAPE, np.float32))
    elif what == "synchronize":
        pyaclnn.current_stream(backend=b).synchronize()
    elif what == "pyaclnn.synchronize":
        pyaclnn.synchronize(backend=b)
    elif what == "numpy":
        out.numpy()
    elif what == "Event.synchronize":
        pyaclnn.current_stream(backend=b).record_event().synchronize()
    else:
        raise AssertionError(what)


REFUSED = {
    "a NumPy input": "max_pool3d_with_argmax(input=NumPy array) cannot be captured",
    "a NumPy out": "max_pool3d_with_argmax(out[0]=NumPy array) cannot be captured",
    "to_device": "to_device(x=NumPy array) cannot be captured",
    "copy_ from NumPy": "DeviceArray.copy_(src=NumPy array) cannot be captured",
    "synchronize": "synchronize() of pyaclnn stream #",
    "pyaclnn.synchronize": "synchronize() of pyaclnn stream #",
    "numpy": "DeviceArray.numpy() cannot be captured",
    "Event.synchronize": "Event.synchronize() cannot be captured",
}


@pytest.mark.parametrize("what", list(REFUSED))
def test_what_a_capture_cannot_record_is_refused_naming_the_call_and_the_capture_abandoned(backend, what):
    b = backend
    x = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    _warm(b, x)
    before = backends.get(b).live_counts()
    g = pyaclnn.Graph(backend=b)
    with pytest.raises(pyaclnn.GraphCaptureError) as info:  # noqa: PT012 - the capture is the block
        with pyaclnn.graph(g):
            out, _ = pyaclnn.max_pool3d_with_argmax(
                x, 2, backend=b
            )  # captured: its memory and executor are the graph's
            _refusals(b, x, out, what)
    message = str(info.value)
    assert REFUSED[what] in message and "was abandoned" in message, message
    assert not g.captured and not g.closed
    assert backends.get(b).live_counts() == before  # graph, executor, memory, stream: all given back
    assert out.closed  # its memory was the abandoned graph's
    # the graph can capture again, and what it captures replays
    with pyaclnn.graph(g):
        out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=b)
    g.replay()
    np.testing.assert_array_equal(out.numpy(), pyaclnn.max_pool3d_with_argmax(x.numpy(), 2, backend=b)[0])
    g.close()
    for a in (x, out, idx):
        a.close()


def test_an_error_in_the_block_abandons_the_capture(backend):
    b = backend
    x = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    _warm(b, x)
    before = backends.get(b).live_counts()
    g = pyaclnn.Graph(backend=b)
    with pytest.raises(KeyError), pyaclnn.graph(g):
        pyaclnn.max_pool3d_with_argmax(x, 2, backend=b)
        raise KeyError("the user's")
    assert not g.captured and backends.get(b).live_counts() == before
    g.close()
    x.close()


def test_the_default_stream_cannot_be_captured(backend):
    b = backend
    g = pyaclnn.Graph(backend=b)
    with pytest.raises(pyaclnn.GraphCaptureError, match=r"capture_begin\(\): .* default stream"):
        with pyaclnn.graph(g, stream=pyaclnn.default_stream(backend=b)):
            pass
    assert backends.get(b).live_counts()["graphs"] == 0
    assert not g.captured
    g.close()


def test_a_closed_graph_refuses_replay_naming_it(backend):
    b = backend
    x = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    g = pyaclnn.Graph(backend=b)
    with pyaclnn.graph(g):
        out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=b)
    g.close()
    g.close()  # a second close does nothing
    with pytest.raises(ValueError, match=r"replay\(\): the graph is closed"):
        g.replay()
    with pytest.raises(ValueError, match=r"replay\(\): the graph has captured nothing"):
        pyaclnn.Graph(backend=b).replay()
    for a in (x, out, idx):
        a.close()


def test_an_event_recorded_before_the_capture_can_be_waited_for_during_it(backend):
    b = backend
    x = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    with pyaclnn.Stream(backend=b) as other:
        event = other.record_event()
        with pyaclnn.Graph(backend=b) as g:
            with pyaclnn.graph(g):
                out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=b)
                event.synchronize()  # not part of the capture: allowed, and the capture goes on
                assert event.query()
            assert g.captured
        event.close()
    for a in (x, out, idx):
        a.close()


def test_a_replay_refuses_an_input_closed_since_the_capture(backend):
    b = backend
    x = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    with pyaclnn.Graph(backend=b) as g:
        with pyaclnn.graph(g):
            out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=b)
        out.close()  # the graph's own memory: replays go on writing it
        g.replay()
        x.close()  # the shared pool's: another array may get it now
        with pytest.raises(ValueError, match=r"replay\(\): .* was closed"):
            g.replay()
    idx.close()


def test_the_capture_mode_decides_which_threads_may_read_meanwhile(backend):
    b = backend
    x = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    y = pyaclnn.to_device(np.arange(4, dtype=np.float32), backend=b)  # idle, on no capturing stream
    errors: list[BaseException] = []

    def read() -> None:
        for call in (y.numpy, lambda: pyaclnn.synchronize(backend=b)):  # a read; a wait for every stream
            try:
                call()
            except BaseException as exc:  # noqa: BLE001 - reported to the test's thread
                errors.append(exc)

    g = pyaclnn.Graph(backend=b)
    with pyaclnn.graph(g):  # GLOBAL: no thread may read
        pyaclnn.max_pool3d_with_argmax(x, 2, backend=b)
        reader = threading.Thread(target=read)
        reader.start()
        reader.join()
    assert len(errors) == 2 and all(isinstance(e, pyaclnn.GraphCaptureError) for e in errors)
    assert "captures in another thread; that capture goes on" in str(errors[1])
    assert "DeviceArray.numpy() cannot run while" in str(errors[0])
    assert "captures a graph in another thread in GLOBAL mode" in str(errors[0])
    assert g.captured  # the other thread's refusal left this capture alone
    g.close()
    g = pyaclnn.Graph(backend=b)
    with pyaclnn.graph(g, capture_error_mode="relaxed"):  # RELAXED: every thread may read
        out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=b)
        np.testing.assert_array_equal(y.numpy(), np.arange(4, dtype=np.float32))
    g.replay()
    np.testing.assert_array_equal(out.numpy(), pyaclnn.max_pool3d_with_argmax(x.numpy(), 2, backend=b)[0])
    g.close()
    with pytest.raises(ValueError, match="capture_error_mode must be one of"):
        pyaclnn.Graph(backend=b).capture_begin(pyaclnn.Stream(backend=b), "strict")
    for a in (x, y, out, idx):
        a.close()


def test_capture_begin_and_end_on_a_stream_of_ones_own_and_a_collected_graph(backend):
    b = backend
    x = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    y = pyaclnn.empty(POOL_SHAPE, backend=b)
    stream = pyaclnn.Stream(backend=b)
    g = pyaclnn.Graph(backend=b)
    g.capture_begin(stream)
    y.copy_(x, stream=stream)  # a device-to-device copy is captured too
    out, idx = pyaclnn.max_pool3d_with_argmax(y, 2, stream=stream, backend=b)
    g.capture_end()
    x.copy_(np.ones(POOL_SHAPE, np.float32))
    g.replay(stream)
    np.testing.assert_array_equal(y.numpy(), np.ones(POOL_SHAPE, np.float32))
    want = pyaclnn.max_pool3d_with_argmax(np.ones(POOL_SHAPE, np.float32), 2, backend=b)
    np.testing.assert_array_equal(out.numpy(), want[0])
    np.testing.assert_array_equal(idx.numpy(), want[1])
    del g
    gc.collect()  # the finalizer closes the graph
    assert backends.get(b).live_counts()["graphs"] == 0
    for a in (x, y, out, idx):
        a.close()
    stream.close()


def test_two_graphs_capture_at_once_on_two_streams(backend):
    b = backend
    x = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    volume = pyaclnn.to_device(RNG.standard_normal(VOLUME, dtype=np.float32), backend=b)
    grid = pyaclnn.to_device(RNG.uniform(-1, 1, GRID).astype(np.float32), backend=b)
    with pyaclnn.Graph(backend=b) as pooling, pyaclnn.Graph(backend=b) as sampling:
        with pyaclnn.graph(pooling):
            out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=b)
            # the second capture's start waits for the device's streams, but not the capturing one
            with pyaclnn.graph(sampling):
                sampled = pyaclnn.grid_sampler3d(volume, grid, backend=b)
        assert pooling.captured and sampling.captured
        pooling.replay()
        sampling.replay()
        np.testing.assert_array_equal(
            _bits(out.numpy()), _bits(pyaclnn.max_pool3d_with_argmax(x.numpy(), 2, backend=b)[0])
        )
        np.testing.assert_array_equal(
            _bits(sampled.numpy()), _bits(pyaclnn.grid_sampler3d(volume.numpy(), grid.numpy(), backend=b))
        )
    for a in (x, volume, grid, out, idx, sampled):
        a.close()


def test_work_in_and_out_of_a_capture_cannot_wait_for_each_other(backend, monkeypatch):
    b = backend
    x = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    _warm(b, x)
    pyaclnn.memory_pool(backend=b).free_all_blocks()  # the eager calls below cache theirs: freed at the end
    pyaclnn.synchronize(backend=b)  # executors dropped with those blocks go once their stream is idle
    before = backends.get(b).live_counts()
    other = pyaclnn.Stream(backend=b)
    g = pyaclnn.Graph(backend=b)
    # an eager call on another stream reading a captured output would wait for work that never runs
    with pytest.raises(pyaclnn.GraphCaptureError, match="using an array of the capture on") as info:  # noqa: PT012
        with pyaclnn.graph(g):
            out, _ = pyaclnn.max_pool3d_with_argmax(x, 2, backend=b)
            pyaclnn.max_pool3d_with_argmax(out, 1, stream=other, backend=b)
    assert f"a call on pyaclnn stream #{other.number}" in str(info.value)
    # a captured call reading what another stream is still computing would wait outside the graph
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "20000")
    with pytest.raises(pyaclnn.GraphCaptureError, match="a captured call using an array last used on"):  # noqa: PT012
        with pyaclnn.graph(g):
            late, late_idx = pyaclnn.max_pool3d_with_argmax(x, 1, stream=other, backend=b)
            pyaclnn.max_pool3d_with_argmax(late, 2, backend=b)
    other.synchronize()
    late.close()
    late_idx.close()
    other.close()
    pyaclnn.memory_pool(backend=b).free_all_blocks()
    pyaclnn.synchronize(backend=b)
    assert backends.get(b).live_counts() == before and not g.captured
    g.close()
    x.close()


def test_launch_blocking_does_not_wait_for_captured_calls(backend, monkeypatch):
    b = backend
    x = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    monkeypatch.setattr(pyaclnn.runtime.context(b), "launch_blocking", True)  # ASCEND_LAUNCH_BLOCKING=1
    with pyaclnn.Graph(backend=b) as g:
        with pyaclnn.graph(g):  # each call would wait for its stream: a capturing one cannot
            out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=b)
        g.replay()
        np.testing.assert_array_equal(out.numpy(), pyaclnn.max_pool3d_with_argmax(x.numpy(), 2, backend=b)[0])
    for a in (x, out, idx):
        a.close()


def test_closing_the_capturing_stream_or_finalize_abandons_the_capture(backend):
    b = backend
    x = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    stream = pyaclnn.Stream(backend=b)
    g = pyaclnn.Graph(backend=b)
    g.capture_begin(stream)
    out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, stream=stream, backend=b)
    stream.close()  # CANN cannot destroy a capturing stream: the capture is abandoned first
    assert out.closed and not g.captured and backends.get(b).live_counts()["graphs"] == 0
    with pytest.raises(ValueError, match=r"capture_end\(\): the graph is not capturing"):
        g.capture_end()
    g.capture_begin(pyaclnn.Stream(backend=b))
    pyaclnn.max_pool3d_with_argmax(x, 2, stream=pyaclnn.current_stream(backend=b), backend=b)  # not captured
    pyaclnn.finalize(b)  # closes the capturing stream among the others: no error, nothing left
    assert not g.captured  # abandoned: an empty graph, holding nothing
    assert not any(backends.get(b).live_counts().values())


def test_reset_gives_everything_back_and_lets_the_graph_capture_again(backend):
    b = backend
    x = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    before = _device_allocs(b)
    with pyaclnn.Graph(backend=b) as g:
        with pyaclnn.graph(g):
            out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=b)
        with pytest.raises(ValueError, match=r"capture_begin\(\): the graph has captured already"):
            g.capture_begin(pyaclnn.Stream(backend=b))
        out.close()
        idx.close()
        g.replay()
        g.reset()
        assert not g.captured and not g.closed and _device_allocs(b) == before
        assert backends.get(b).live_counts()["graphs"] == 0
        with pyaclnn.graph(g):
            grad = pyaclnn.max_pool3d_with_argmax_backward(
                out2 := pyaclnn.zeros(POOLED, backend=b),
                x,
                idx2 := pyaclnn.zeros(POOLED, np.int32, backend=b),
                2,
                backend=b,
            )
        g.replay()
        want = pyaclnn.max_pool3d_with_argmax_backward(out2.numpy(), x.numpy(), idx2.numpy(), 2, backend=b)
        np.testing.assert_array_equal(_bits(grad.numpy()), _bits(want))
    with pytest.raises(ValueError, match=r"reset\(\): the graph is closed"):
        g.reset()
    for a in (x, grad, out2, idx2):
        a.close()


def test_arrays_made_in_the_block_are_graph_memory(backend):
    b = backend
    x = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    _warm(b, x)
    pyaclnn.memory_pool(backend=b).free_all_blocks()
    before = _device_allocs(b)
    with pyaclnn.Graph(backend=b) as g:
        with pyaclnn.graph(g):  # made for no stream, in the block: for the capturing stream
            out, idx = pyaclnn.empty(POOLED, backend=b), pyaclnn.zeros(POOLED, np.int32, backend=b)
            pyaclnn.max_pool3d_with_argmax(x, 2, out=(out, idx), backend=b)
        out.close()
        idx.close()
        assert _device_allocs(b) == before + 2  # kept for the graph, not cached for others
    assert _device_allocs(b) == before  # freed by close
    x.close()


def test_an_executor_dropped_during_a_capture_records_nothing_into_the_graph(backend):
    # A call cached on a user's stream before its capture; during the capture the caches are
    # emptied (set_deterministic), which drops the cached executor of the set-aside cache. The
    # stream has counted the captured launch by then, so the executor looks as if queued work may
    # still use it: its destruction must wait without recording an event on the capturing stream
    # (the event would land in the graph, and each replay would record an event the cache destroys).
    b = backend
    stream = pyaclnn.Stream(backend=b)
    old = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    old_out, old_idx = pyaclnn.max_pool3d_with_argmax(old, 2, stream=stream, backend=b)
    stream.synchronize()
    x = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    with pyaclnn.Graph(backend=b) as g:
        with pyaclnn.graph(g, stream=stream):
            out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, stream=stream, backend=b)
            pyaclnn.set_deterministic(False, backend=b)
        status, graph = pyaclnn.acl.mdl.capture_get_info(stream.handle, backend=b)
        assert status == 0 and graph is None  # the capture ended
        stream.synchronize()  # buries what the cache dropped
        for _ in range(2):
            g.replay(stream)
        want = pyaclnn.max_pool3d_with_argmax(x.numpy(), 2, backend=b)
        np.testing.assert_array_equal(_bits(out.numpy()), _bits(want[0]))
        np.testing.assert_array_equal(idx.numpy(), want[1])
    # (the backend fixture fails the test on a hazard: a replay recording a destroyed event)
    for a in (old, old_out, old_idx, x, out, idx):
        a.close()
    stream.close()


def test_memory_released_during_a_capture_on_its_stream_records_nothing_into_the_graph(backend, monkeypatch):
    # An array last used on a stream, closed while that stream captures: its block waits for the
    # stream in the shared pool. A fence event recorded on the capturing stream would become a step
    # of the graph (recorded at every replay, after the pool destroyed it), so the block waits for
    # the stream's next synchronize instead, whether the pool keeps it (cache) or frees it (over
    # the cache's limit), or another stream's allocation looks for blocks to fence.
    b = backend
    monkeypatch.setattr("pyaclnn._pool._CACHE_LIMIT", 0)  # every release goes back behind a fence
    stream, elsewhere = pyaclnn.Stream(backend=b), pyaclnn.Stream(backend=b)
    x = pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b)
    olds = [pyaclnn.to_device(RNG.standard_normal(POOL_SHAPE, dtype=np.float32), backend=b) for _ in range(2)]
    for old in olds:
        pyaclnn.max_pool3d_with_argmax(old, 2, stream=stream, backend=b)[0].close()
    stream.synchronize()
    with pyaclnn.Graph(backend=b) as g:
        with pyaclnn.graph(g, stream=stream):
            out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, stream=stream, backend=b)
            olds[0].close()
            monkeypatch.setattr("pyaclnn._pool._CACHE_LIMIT", 1 << 30)
            olds[1].close()  # kept for reuse on the stream
            # another stream's allocation of that size finds the block and would fence it
            other = pyaclnn.empty(POOL_SHAPE, backend=b, stream=elsewhere)
            pyaclnn.memory_pool(backend=b).free_all_blocks()  # and so would this
        stream.synchronize()
        for _ in range(2):
            g.replay(stream)
        want = pyaclnn.max_pool3d_with_argmax(x.numpy(), 2, backend=b)
        np.testing.assert_array_equal(_bits(out.numpy()), _bits(want[0]))
    # (the backend fixture fails the test on a hazard: a replay recording a destroyed event)
    for a in (x, out, idx, other):
        a.close()
    stream.close()
    elsewhere.close()
