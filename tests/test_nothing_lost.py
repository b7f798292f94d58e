"""Nothing is lost under threads, Ctrl-C, races, exit and fork; out= never aliases an input.

Each test here reproduces one way queued kernels could overwrite memory handed
to other work, or an object could be leaked or destroyed under queued work,
and checks that it no longer happens. Kernels get simulated device time
(``PYACLNN_EMU_KERNEL_US``), so queued work is still pending while the host
goes on. The backend fixture then checks that nothing is left live and that no
hazard was seen.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import pyaclnn
from pyaclnn import acl

ROOT = Path(__file__).resolve().parents[1]
SLOW_US = 100_000


@pytest.fixture
def slow_kernels(monkeypatch):
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", str(SLOW_US))


def _increasing(shape: tuple[int, ...] = (1, 2, 4, 4, 4), start: float = 0.0) -> np.ndarray:
    return (np.arange(int(np.prod(shape)), dtype=np.float32) + start).reshape(shape)


def _pooled(x: np.ndarray) -> np.ndarray:
    """The 2x2x2 max pool of an increasing input: the last element of each window."""
    return x[..., 1::2, 1::2, 1::2]


def _in_fresh_thread(fn):
    """Run ``fn`` in a thread that never called pyaclnn; return its result or raise its error."""
    box: dict[str, object] = {}

    def body():
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            box["error"] = exc

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the thread hung"
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("result")


# -- 1. a thread that never called pyaclnn ------------------------------------------


def test_a_fresh_thread_reads_synchronizes_and_queries(backend, slow_kernels):
    x = _increasing()
    with pyaclnn.Stream(backend=backend) as stream:
        dx = pyaclnn.to_device(x, backend=backend, stream=stream)
        out, indices = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=stream)
        done = stream.record_event()
        # A consumer thread reads the result of work another thread queued.
        np.testing.assert_array_equal(_in_fresh_thread(out.numpy), _pooled(x))
        assert _in_fresh_thread(done.query) is True
        _in_fresh_thread(done.synchronize)
        again = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=stream)
        _in_fresh_thread(stream.synchronize)
        late = stream.record_event()
        _in_fresh_thread(late.synchronize)
        assert late.query()
        np.testing.assert_array_equal(again[0].numpy(), _pooled(x))
        for array in (dx, out, indices, *again):
            _in_fresh_thread(array.close)  # close paths bind the device too
        done.close()


def test_blocks_released_to_a_stream_a_fresh_thread_waits_for_stay_its_own(backend, slow_kernels):
    """The issue's case: the fresh thread's synchronize used to fail and still hand the stream's
    blocks to other streams, whose arrays its kernels then overwrote."""
    x = _increasing()
    with pyaclnn.Stream(backend=backend) as first, pyaclnn.Stream(backend=backend) as second:
        dx = pyaclnn.to_device(x, backend=backend, stream=first)
        for _ in range(4):  # queued kernels write into blocks released to `first` at once
            for array in pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=first):
                array.close()
        _in_fresh_thread(first.synchronize)
        marks = [_increasing(_pooled(x).shape, 1000.0 * k) for k in range(4)]
        others = [pyaclnn.to_device(m, backend=backend, stream=second) for m in marks]
        first.synchronize()
        for mark, other in zip(marks, others):
            np.testing.assert_array_equal(other.numpy(), mark)
            other.close()
        dx.close()


# -- 2. Ctrl-C during a synchronize -------------------------------------------------


def test_ctrl_c_during_synchronize_hands_nothing_over(backend, slow_kernels):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are delivered to the main thread only")
    x = _increasing()
    with pyaclnn.Stream(backend=backend) as first, pyaclnn.Stream(backend=backend) as second:
        dx = pyaclnn.to_device(x, backend=backend, stream=first)
        results = []
        for _ in range(6):
            out, indices = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=first)
            results.append(out)
            indices.close()  # released to `first` while its kernel is queued
        timer = threading.Timer(0.15, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                first.synchronize()
                time.sleep(5)  # the numpy backend's caller runs the kernels: the signal lands in one
        finally:
            timer.cancel()
        # Arrays of the released blocks' size made on another stream now: the interrupted
        # stream's kernels must not write into them.
        marks = [np.full(_pooled(x).shape, -7 - k, np.int32) for k in range(4)]
        others = [pyaclnn.to_device(m, backend=backend, stream=second) for m in marks]
        for out in results:
            np.testing.assert_array_equal(out.numpy(), _pooled(x))  # an interrupted kernel still ran whole
        for mark, other in zip(marks, others):
            np.testing.assert_array_equal(other.numpy(), mark)
        for array in (*results, *others, dx):
            array.close()


def _interrupt_synchronize(monkeypatch):
    """Make ``aclrtSynchronizeStream`` raise KeyboardInterrupt, as a Ctrl-C in it would; returns
    the function that puts the real one back."""
    real = acl.rt.synchronize_stream

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(acl.rt, "synchronize_stream", interrupted)
    return lambda: monkeypatch.setattr(acl.rt, "synchronize_stream", real)


def test_a_failed_wait_changes_no_bookkeeping(backend, monkeypatch, slow_kernels):
    with pyaclnn.Stream(backend=backend) as stream:
        dx = pyaclnn.to_device(_increasing(), backend=backend, stream=stream)
        out, indices = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=stream)
        indices.close()
        pool = pyaclnn.memory_pool(backend=backend)
        undo = _interrupt_synchronize(monkeypatch)
        with pytest.raises(KeyboardInterrupt):
            stream.synchronize()
        state = stream._state
        assert state.done < state.queued  # not counted as done
        assert pool._released.get(state), "the released block left its stream"
        undo()
        stream.synchronize()  # the next wait finishes the job
        assert state.done == state.queued and not pool._released.get(state)
        for array in (dx, out):
            array.close()


def test_an_interrupted_close_can_be_finished(backend, monkeypatch, slow_kernels):
    stream = pyaclnn.Stream(backend=backend)
    dx = pyaclnn.to_device(_increasing(), backend=backend, stream=stream)
    out, indices = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=stream)
    undo = _interrupt_synchronize(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        stream.close()
    assert not stream.closed  # nothing was given back or destroyed
    undo()
    np.testing.assert_array_equal(out.numpy(), _pooled(_increasing()))
    stream.close()
    assert stream.closed
    for array in (dx, out, indices):
        array.close()


# -- 3, 4. the pool's fences, free_all_blocks and close ------------------------------


def test_free_all_blocks_waits_on_fences_no_other_thread_retires(backend, monkeypatch):
    """An allocation in another thread used to retire (and destroy the event of) a fence that
    free_all_blocks was waiting on: 'not a live event'."""
    pool = pyaclnn.memory_pool(backend=backend)
    with pyaclnn.Stream(backend=backend) as first, pyaclnn.Stream(backend=backend) as second:
        x = _increasing()
        pyaclnn.to_device(x, backend=backend, stream=first).close()  # released to `first`
        real = acl.rt.synchronize_event
        calls = []

        def meanwhile(event, **kwargs):
            if not calls:
                calls.append(event)
                time.sleep(0.05)  # the fence's event completes
                # Another thread's allocation of that size polls the fences.
                _in_fresh_thread(lambda: pyaclnn.to_device(x, backend=backend, stream=second).close())
            return real(event, **kwargs)

        monkeypatch.setattr(acl.rt, "synchronize_event", meanwhile)
        pool.free_all_blocks()
        assert calls, "free_all_blocks waited on no fence"
        assert not pool._fences  # each fence retired once, its event destroyed once


def test_free_all_blocks_records_no_fence_on_a_stream_being_closed(backend, monkeypatch):
    """A fence recorded between a close's synchronize and its destroy left a task pending on a
    destroyed stream."""
    pool = pyaclnn.memory_pool(backend=backend)
    stream = pyaclnn.Stream(backend=backend)
    pyaclnn.to_device(_increasing(), backend=backend, stream=stream).close()
    real_sync, real_record = acl.rt.synchronize_stream, acl.rt.record_event
    recorded_on = []

    def record(event, handle, **kwargs):
        recorded_on.append(handle)
        return real_record(event, handle, **kwargs)

    def synchronize_then_free(handle, **kwargs):
        real_sync(handle, **kwargs)
        _in_fresh_thread(pool.free_all_blocks)  # another thread, between the wait and the destroy

    monkeypatch.setattr(acl.rt, "record_event", record)
    monkeypatch.setattr(acl.rt, "synchronize_stream", synchronize_then_free)
    handle = stream.handle
    stream.close()
    assert all(h is not handle for h in recorded_on), "a fence was recorded on the closing stream"
    assert stream.closed


def test_free_all_blocks_and_closes_race_freely(backend, monkeypatch):
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "200")
    pool = pyaclnn.memory_pool(backend=backend)
    errors: list[BaseException] = []
    stop = threading.Event()
    x = _increasing()

    def worker(seed: int) -> None:
        try:
            for k in range(40):
                with pyaclnn.Stream(backend=backend) as stream:
                    dx = pyaclnn.to_device(x + seed + k, backend=backend, stream=stream)
                    out, indices = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=stream)
                    indices.close()
                    dx.close()
                    np.testing.assert_array_equal(out.numpy(), _pooled(x + seed + k))
                    out.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    def freer() -> None:
        try:
            while not stop.is_set():
                pool.free_all_blocks()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(3)]
    threads.append(threading.Thread(target=freer))
    for thread in threads:
        thread.start()
    for thread in threads[:-1]:
        thread.join(120)
    stop.set()
    threads[-1].join(60)
    assert not errors, errors[:3]


# -- 5. exit with several devices ---------------------------------------------------

EXIT_SCRIPT = """
import atexit, sys
from pyaclnn import backends

def check():  # registered first, so it runs after pyaclnn's own exit hook
    b = backends.get(sys.argv[1])
    print("LIVE", b.live_counts(), "HAZARDS", b.hazard_count())

atexit.register(check)
import numpy as np
import pyaclnn
name = sys.argv[1]
x = np.arange(128, dtype=np.float32).reshape(1, 2, 4, 4, 4)
with pyaclnn.Device(1, backend=name):
    xd = pyaclnn.to_device(x, backend=name)
    out, idx = pyaclnn.max_pool3d_with_argmax(xd, 2, backend=name)
s = pyaclnn.Stream(device=1, backend=name)
e = s.record_event()
y, _ = pyaclnn.max_pool3d_with_argmax(xd, 2, backend=name, stream=s)
z, _ = pyaclnn.max_pool3d_with_argmax(x, 2, backend=name)   # device 0 too
xd.close()   # released to device 1's default stream of this thread
if sys.argv[2] == "finalize":
    pyaclnn.finalize()
"""


@pytest.mark.parametrize("ending", ["exit", "finalize"])
def test_exit_with_two_devices_leaves_nothing(backend, ending, emulator_home, tmp_path):
    env = dict(os.environ, PYACLNN_EMU_DEVICES="2", PYACLNN_EMU_KERNEL_US="20000", PYTHONPATH=str(ROOT))
    env["PYACLNN_ASCEND_HOME"] = str(emulator_home)
    script = tmp_path / "exit_check.py"
    script.write_text(EXIT_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), backend, ending], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "HAZARD" not in proc.stderr, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith("LIVE"))
    counts = eval(line.split("LIVE", 1)[1].split("HAZARDS")[0])  # noqa: S307 - our own dict repr
    assert counts is None or not any(counts.values()), line
    assert line.rstrip().endswith("HAZARDS 0"), line


# -- 6. fork ---------------------------------------------------------------------------


def _child_exit_code(child) -> int:
    """The exit code of a forked child, killing it if it hangs."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    raise AssertionError("the forked child hung")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_child_forked_after_start_refuses_at_once(backend, slow_kernels):
    x = _increasing()
    with pyaclnn.Stream(backend=backend) as stream:
        dx = pyaclnn.to_device(x, backend=backend, stream=stream)
        out, indices = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=stream)  # pending
        child = os.fork()
        if child == 0:  # pragma: no cover - the child reports through its exit code
            code = 0
            for attempt in (
                lambda: pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend),
                out.numpy,
                stream.synchronize,
                lambda: acl.rt.malloc(64, backend=backend),
            ):
                try:
                    attempt()
                    code = 3  # it ran: the parent's memory or streams were used
                except RuntimeError as exc:
                    if "spawn" not in str(exc) or "forked" not in str(exc):
                        code = 4
                except BaseException:  # noqa: BLE001
                    code = 5
            os._exit(code)
        assert _child_exit_code(child) == 0
        np.testing.assert_array_equal(out.numpy(), _pooled(x))  # the parent goes on
        for array in (dx, out, indices):
            array.close()


FORK_BEFORE_START = """
import os, sys
import numpy as np
import pyaclnn
from pyaclnn import backends
name = sys.argv[1]
backends.get(name)  # loaded, not started
child = os.fork()
x = np.arange(128, dtype=np.float32).reshape(1, 2, 4, 4, 4)
out, _ = pyaclnn.max_pool3d_with_argmax(x, 2, backend=name)
ok = np.array_equal(out, x[..., 1::2, 1::2, 1::2])
if child == 0:
    pyaclnn.finalize()
    os._exit(0 if ok else 1)
_, status = os.waitpid(child, 0)
print("CHILD", os.waitstatus_to_exitcode(status), "PARENT", int(ok))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_child_forked_before_start_works(backend, emulator_home, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYACLNN_ASCEND_HOME=str(emulator_home))
    script = tmp_path / "fork_before.py"
    script.write_text(FORK_BEFORE_START)
    proc = subprocess.run(
        [sys.executable, str(script), backend], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "CHILD 0 PARENT 1" in proc.stdout, proc.stdout + proc.stderr
    assert "HAZARD" not in proc.stderr


# -- 7. out= overlapping an input or another output -------------------------------------


def test_out_overlapping_an_input_is_refused(backend):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 4, 4, 4), dtype=np.float32)
    grid = rng.uniform(-1, 1, (1, 4, 4, 4, 3)).astype(np.float32)
    with (
        pyaclnn.to_device(x, backend=backend) as xd,
        pyaclnn.to_device(grid, backend=backend) as gd,
    ):
        with pytest.raises(ValueError, match=r"^out shares memory with input"):
            pyaclnn.grid_sampler3d(xd, gd, out=xd, backend=backend)
        with pytest.raises(ValueError, match=r"^out\[0\] shares memory with input"):
            pyaclnn.max_pool3d_with_argmax(xd, 3, 1, 1, out=(xd, None), backend=backend)
        # A view into the middle of the input's block, through from_ptr, overlaps too.
        view = pyaclnn.DeviceArray.from_ptr(xd.ptr, (1, 2, 2, 2, 2), np.int32, offset=8, backend=backend)
        with pytest.raises(ValueError, match=r"^out\[1\] shares memory with input"):
            pyaclnn.max_pool3d_with_argmax(xd, 2, out=(None, view), backend=backend)
        grad = pyaclnn.to_device(np.ones((1, 2, 4, 4, 4), np.float32), backend=backend)
        with pytest.raises(ValueError, match=r"^out\[1\] shares memory with grid"):
            pyaclnn.grid_sampler3d_backward(grad, xd, gd, out=(None, gd), backend=backend)
        np.testing.assert_array_equal(xd.numpy(), x)  # nothing was launched
        np.testing.assert_array_equal(gd.numpy(), grid)
        view.close()
        grad.close()


def test_out_overlapping_another_output_is_refused_and_disjoint_views_are_not(backend):
    x = _increasing()
    with (
        pyaclnn.to_device(x, backend=backend) as xd,
        pyaclnn.empty((2, 1, 2, 2, 2), np.float32, backend=backend) as both,
    ):
        halves = [
            pyaclnn.DeviceArray.from_ptr(both.ptr, (1, 2, 2, 2, 2), dt, offset=k * 16, backend=backend)
            for k, dt in ((0, np.float32), (1, np.int32))
        ]
        overlapping = pyaclnn.DeviceArray.from_ptr(
            both.ptr, (1, 2, 2, 2, 2), np.int32, offset=8, backend=backend
        )
        with pytest.raises(ValueError, match=r"^out\[1\] shares memory with out\[0\]"):
            pyaclnn.max_pool3d_with_argmax(xd, 2, out=(halves[0], overlapping), backend=backend)
        values, indices = pyaclnn.max_pool3d_with_argmax(xd, 2, out=tuple(halves), backend=backend)
        np.testing.assert_array_equal(values.numpy(), _pooled(x))
        for array in (*halves, overlapping):
            array.close()


def test_a_task_interrupted_in_the_waiting_caller_runs_again_whole(monkeypatch):
    """The numpy backend's waiting caller runs queued tasks itself: a Ctrl-C landing in one must
    not count it as finished (its outputs half written, or not at all)."""
    from pyaclnn.backends.numpy import _streams

    monkeypatch.setattr(_streams.Worker, "_loop", lambda self: None)  # no worker thread: the caller runs
    runs = []

    def task() -> None:
        runs.append(len(runs))
        if len(runs) == 1:
            raise KeyboardInterrupt  # as the signal would, inside the task

    worker = _streams.Worker("test", 0)
    seq = worker.submit(_streams.Task(task, what="test"))
    with pytest.raises(KeyboardInterrupt):
        worker.wait(seq)
    assert not worker.finished(seq) and worker.busy()
    worker.wait(seq)  # the next wait runs it again, from the start
    assert runs == [0, 1] and worker.finished(seq)


def test_synchronize_while_other_threads_make_and_close_streams(backend):
    """pyaclnn.synchronize() copied the open streams while another thread added one ("Set changed
    size during iteration"), and waited on streams another thread had closed meanwhile."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def churn() -> None:
        try:
            while not stop.is_set():
                streams = [pyaclnn.Stream(backend=backend) for _ in range(5)]
                for stream in streams:
                    stream.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            pyaclnn.synchronize(backend=backend)
    finally:
        stop.set()
        thread.join(30)
    assert not errors, errors[:3]
