"""Streams and events as CuPy and torch users expect them: ``with stream:`` makes it current,
``current_stream()``, ``wait_stream``, ``query``, timing as an event option, ``Event.wait``.

Ordering is observed with a slow simulated kernel (``PYACLNN_EMU_KERNEL_US``, read at
each launch by both emulations): work queued behind it is still pending when the host
asks, so a wait that was not queued shows.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from running import on_two_devices

import pyaclnn

X = np.arange(64, dtype=np.float32).reshape(1, 1, 4, 4, 4)
SLOW_US = "300000"  # 0.3 s: far longer than the host needs to ask


def _eventually(predicate, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def _call(backend: str, **kwargs):
    x = pyaclnn.to_device(X, backend=backend, **kwargs)
    out, indices = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend, **kwargs)
    return x, out, indices


def test_a_with_block_makes_the_stream_current_and_leaves_it_open(backend):
    default = pyaclnn.current_stream(backend=backend)
    assert default is pyaclnn.default_stream(backend=backend)
    s = pyaclnn.Stream(backend=backend)
    with s as entered:
        assert entered is s and pyaclnn.current_stream(backend=backend) is s
        upload = pyaclnn.to_device(X, backend=backend)
        zeros = pyaclnn.zeros((2,), backend=backend)
        assert upload.stream is s and zeros.stream is s  # neither named a stream
        upload.close()
        zeros.close()
        x, out, indices = _call(backend)
        assert out.stream is s and x.stream is s
    assert pyaclnn.current_stream(backend=backend) is default
    assert not s.closed  # CuPy and torch keep the stream usable after the block
    np.testing.assert_array_equal(out.numpy().reshape(-1), [21, 23, 29, 31, 53, 55, 61, 63])
    for a in (x, out, indices):
        a.close()
    s.close()


def test_blocks_nest_and_each_gives_back_what_it_replaced(backend):
    a, b = pyaclnn.Stream(backend=backend), pyaclnn.Stream(backend=backend)
    with a:
        with b:
            assert pyaclnn.current_stream(backend=backend) is b
            with a:
                assert pyaclnn.current_stream(backend=backend) is a
            assert pyaclnn.current_stream(backend=backend) is b
        assert pyaclnn.current_stream(backend=backend) is a
    assert pyaclnn.current_stream(backend=backend) is pyaclnn.default_stream(backend=backend)
    a.close()
    b.close()


def test_the_current_stream_is_per_thread(backend):
    s = pyaclnn.Stream(backend=backend)
    seen = {}

    def other_thread():
        seen["stream"] = pyaclnn.current_stream(backend=backend)
        seen["default"] = pyaclnn.default_stream(backend=backend)

    with s:
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        assert pyaclnn.current_stream(backend=backend) is s
    assert seen["stream"] is seen["default"] and seen["stream"] is not s
    seen.clear()  # the other thread's default stream closes with the objects that hold it
    s.close()


def test_a_current_stream_closed_inside_its_block_is_refused_not_replaced(backend):
    s = pyaclnn.Stream(backend=backend)
    with s:
        s.close()
        with pytest.raises(ValueError, match=r"current stream is closed"):
            pyaclnn.max_pool3d_with_argmax(X, 2, backend=backend)
        with pytest.raises(ValueError, match=r"stream is closed"):
            pyaclnn.Event(backend=backend).record()
    assert pyaclnn.current_stream(backend=backend) is pyaclnn.default_stream(backend=backend)
    out, _ = pyaclnn.max_pool3d_with_argmax(X, 2, backend=backend)  # the default again
    assert out.shape == (1, 1, 2, 2, 2)


def test_query_and_wait_stream_follow_the_queued_work(backend, monkeypatch):
    a, b = pyaclnn.Stream(backend=backend), pyaclnn.Stream(backend=backend)
    x = pyaclnn.to_device(X, backend=backend, stream=a)
    a.synchronize()
    assert a.query() and b.query()
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", SLOW_US)
    out, indices = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend, stream=a)
    monkeypatch.delenv("PYACLNN_EMU_KERNEL_US")
    assert not a.query()  # the slow kernel is still running
    b.wait_stream(a)
    assert not b.query()  # b's wait for a is queued: b is not done either
    b.synchronize()  # returns only once a's kernel finished
    assert b.query()  # a wait saw all of b's work
    assert _eventually(a.query)  # a's kernel is done: the record of the event b waited for ends a's work
    for arr in (x, out, indices):
        arr.close()
    a.close()
    b.close()


def test_wait_stream_refuses_what_is_not_an_open_stream(backend):
    s = pyaclnn.Stream(backend=backend)
    with pytest.raises(ValueError, match=r"other must be a pyaclnn.Stream"):
        s.wait_stream(pyaclnn.Event(backend=backend))
    closed = pyaclnn.Stream(backend=backend)
    closed.close()
    with pytest.raises(ValueError, match=r"stream is closed"):
        s.wait_stream(closed)
    s.close()


def test_event_wait_makes_the_current_stream_wait(backend, monkeypatch):
    a, b = pyaclnn.Stream(backend=backend), pyaclnn.Stream(backend=backend)
    x = pyaclnn.to_device(X, backend=backend, stream=a)
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", SLOW_US)
    out, indices = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend, stream=a)
    monkeypatch.delenv("PYACLNN_EMU_KERNEL_US")
    done = a.record_event()
    with b:
        done.wait()  # the current stream: b
    assert not b.query()
    b.synchronize()
    assert done.query()
    for obj in (x, out, indices, done, a, b):
        obj.close()


def test_timing_is_an_option_of_the_event(backend):
    s = pyaclnn.Stream(backend=backend)
    start, end = pyaclnn.Event(backend=backend), pyaclnn.Event(backend=backend)  # timing by default
    plain = pyaclnn.Event(enable_timing=False, blocking=True, backend=backend)
    start.record(s)
    _, out, indices = _call(backend, stream=s)
    end.record(s)
    plain.record(s)
    plain.synchronize()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0
    with pytest.raises(pyaclnn.AclError, match=r"ACL_EVENT_TIME_LINE"):
        start.elapsed_time(plain)
    assert plain.query() and plain.blocking
    for obj in (out, indices, start, end, plain):
        obj.close()
    s.close()


_TWO_DEVICES = """
import pyaclnn
backend = {backend!r}
s = pyaclnn.Stream(backend=backend, device=1)
assert pyaclnn.get_device() == 0
with s:
    assert pyaclnn.get_device() == 1  # the block also makes the stream's device current
    assert pyaclnn.current_stream(backend=backend) is s
    on_0 = pyaclnn.current_stream(backend=backend, device=0)
    assert on_0 is not s and on_0.device == 0  # device 0's current stream: its default
    out, _ = pyaclnn.max_pool3d_with_argmax(pyaclnn.zeros((1, 1, 2, 2, 2), backend=backend), 2)
    assert out.device == 1 and out.stream is s
    out.close()
assert pyaclnn.get_device() == 0
assert pyaclnn.current_stream(backend=backend) is pyaclnn.default_stream(backend=backend)
s.close()
print("ok")
"""


@pytest.mark.parametrize("name", ["numpy", "npu"])
def test_a_block_on_another_device_makes_that_device_current(name, emulator_home):
    # A child: the emulations read PYACLNN_EMU_DEVICES once per process.
    proc = on_two_devices(_TWO_DEVICES.format(backend=name), name, emulator_home)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr
