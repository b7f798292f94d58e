"""Threads: concurrent calls give the serial results, and errors stay in their thread.

Eight threads run the four ops a few rounds at once, each on its own
``pyaclnn.Stream`` (and again on each thread's default stream), with NumPy and
with DeviceArray inputs (all of a round's calls queued before any result is
read, under a slow simulated kernel), on both backends; every result must
equal, bit for bit, the result of the same call made serially. The recent error message
(``aclGetRecentErrMsg``) is per thread: an error raised in one thread never
carries another thread's message.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pytest

import pyaclnn
from pyaclnn import AclnnError, acl, backends, runtime

THREADS = 8
ROUNDS = 3
RNG = np.random.default_rng(8)


def _cases(seed: int) -> list[tuple[str, Callable]]:
    """The four ops on inputs of their own, one list per thread (``seed`` varies the data)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 9, 8, 7)).astype(np.float32)
    big = rng.standard_normal((2, 8, 24, 24, 24)).astype(
        np.float32
    )  # big enough for the kernels' worker threads
    out, idx = pyaclnn.max_pool3d_with_argmax(x, 3, 2, 1, backend="numpy")
    g = rng.standard_normal(out.shape).astype(np.float32)
    inp = rng.standard_normal((2, 3, 5, 6, 7)).astype(np.float32)
    grid = rng.uniform(-1.2, 1.2, (2, 4, 5, 6, 3)).astype(np.float32)
    gout = rng.standard_normal((2, 3, 4, 5, 6)).astype(np.float32)
    return [
        (
            "max_pool3d_with_argmax",
            lambda b, s, dev: pyaclnn.max_pool3d_with_argmax(
                dev(x), 3, 2, 1, ceil_mode=True, backend=b, stream=s
            ),
        ),
        (
            "max_pool3d_with_argmax big",
            lambda b, s, dev: pyaclnn.max_pool3d_with_argmax(dev(big), 2, backend=b, stream=s),
        ),
        (
            "max_pool3d_with_argmax_backward",
            lambda b, s, dev: pyaclnn.max_pool3d_with_argmax_backward(
                dev(g), dev(x), dev(idx), 3, 2, 1, backend=b, stream=s
            ),
        ),
        (
            "grid_sampler3d",
            lambda b, s, dev: pyaclnn.grid_sampler3d(
                dev(inp), dev(grid), "bilinear", "reflection", backend=b, stream=s
            ),
        ),
        (
            "grid_sampler3d_backward",
            lambda b, s, dev: pyaclnn.grid_sampler3d_backward(
                dev(gout), dev(inp), dev(grid), "bilinear", "border", True, backend=b, stream=s
            ),
        ),
    ]


def _host(result) -> tuple[np.ndarray, ...]:
    items = result if isinstance(result, tuple) else (result,)
    arrays = []
    for a in items:
        if isinstance(a, pyaclnn.DeviceArray):
            arrays.append(a.numpy())
            a.close()
        else:
            arrays.append(a)
    return tuple(arrays)


def _run_threads(target: Callable[[int], None], count: int = THREADS) -> None:
    errors: list[BaseException] = []

    def wrapped(i: int) -> None:
        try:
            target(i)
        except BaseException as exc:  # noqa: BLE001 -- reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
        assert not t.is_alive(), "a thread hung"
    if errors:
        raise errors[0]


@pytest.mark.parametrize("streams", ["own", "default"])
def test_concurrent_calls_equal_serial_calls(backend, streams, monkeypatch):
    cases = [_cases(seed) for seed in range(THREADS)]
    serial = [[_host(call(backend, None, lambda a: a)) for _, call in thread_cases] for thread_cases in cases]
    barrier = threading.Barrier(THREADS)
    results: dict[int, list] = {}
    # Each kernel takes 2 ms of simulated device time: the DeviceArray rounds queue all their
    # calls before reading any result back, so every thread has work of its stream in flight.
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "2000")

    def work(i: int) -> None:
        stream = pyaclnn.Stream(backend=backend) if streams == "own" else None
        mine = []
        barrier.wait()
        for r in range(ROUNDS):
            # odd rounds pass DeviceArrays (copied to the device inside this thread)
            arrays: list[pyaclnn.DeviceArray] = []

            def dev(a, _arrays=arrays, _r=r):
                if _r % 2 == 0:
                    return a
                d = pyaclnn.to_device(a, backend=backend)
                _arrays.append(d)
                return d

            queued = [call(backend, stream, dev) for _, call in cases[i]]
            mine.append([_host(result) for result in queued])
            for d in arrays:
                d.close()
        if stream is not None:
            stream.close()
        results[i] = mine

    _run_threads(work)
    for i in range(THREADS):
        for r in range(ROUNDS):
            for (name, _), want, got in zip(cases[i], serial[i], results[i][r]):
                for w, g in zip(want, got):
                    np.testing.assert_array_equal(g, w, err_msg=f"thread {i} round {r} {name}")


def test_errors_carry_their_own_threads_message(backend):
    """Every thread fails with its own bad padding while the others fail or succeed at the same time."""
    x = RNG.standard_normal((1, 1, 4, 4, 4)).astype(np.float32)
    want_out, _ = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend)
    barrier = threading.Barrier(THREADS)
    rounds = 30

    def work(i: int) -> None:
        stream = pyaclnn.Stream(backend=backend)
        bad = -(1000 + i)
        for r in range(rounds):
            barrier.wait()
            if (i + r) % 2:
                out, _ = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend, stream=stream)
                np.testing.assert_array_equal(out, want_out)
                continue
            with pytest.raises(AclnnError) as info:
                pyaclnn.max_pool3d_with_argmax(x, 2, (), bad, backend=backend, stream=stream)
            text = str(info.value)
            assert str(bad) in text, f"thread {i}: {text}"
            others = [str(-(1000 + j)) for j in range(THREADS) if j != i]
            assert not any(o in text for o in others), f"thread {i} got another thread's message: {text}"
        stream.close()

    _run_threads(work)


def test_recent_error_message_is_per_thread(backend):
    """A message left unread in one thread is invisible to another, and still there for its own."""
    runtime.context(backend)
    raw = backends.get(backend)
    left = threading.Event()
    read = threading.Event()
    seen: dict[str, str] = {}

    def failing() -> None:
        status, _ = raw.aclrtMalloc(0, 0)  # fails and leaves its message unread
        assert status != 0
        left.set()
        read.wait(30)
        seen["own"] = acl.get_recent_err_msg(backend=backend)

    def other() -> None:
        left.wait(30)
        seen["other"] = acl.get_recent_err_msg(backend=backend)
        read.set()

    threads = [threading.Thread(target=failing), threading.Thread(target=other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert seen["other"] == ""
    assert "size" in seen["own"]
    assert acl.get_recent_err_msg(backend=backend) == ""  # nor did it reach the main thread
