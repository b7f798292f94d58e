"""The kernels' one worker pool (pyaclnn.kernels._workers): thread count, shares, fork."""

from __future__ import annotations

import os
import threading

import pytest

from pyaclnn.kernels import _env, _workers


@pytest.mark.parametrize("env, want", [("3", 3), ("0", 1), ("-2", 1), (" 12 ", 12)])
def test_the_thread_count_comes_from_pyaclnn_num_threads(monkeypatch, env, want):
    monkeypatch.setenv("PYACLNN_NUM_THREADS", env)
    assert _workers.thread_count() == want


@pytest.mark.parametrize("env", [None, "", "many"])
def test_the_default_thread_count_is_the_usable_cores_at_most_8(monkeypatch, env):
    if env is None:
        monkeypatch.delenv("PYACLNN_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("PYACLNN_NUM_THREADS", env)
    assert _workers.thread_count() == max(1, min(len(os.sched_getaffinity(0)), 8))


@pytest.mark.parametrize("fast", [True, False], ids=["bytes-mapping", "os.environ"])
def test_environment_values_are_read_at_every_call(monkeypatch, fast):
    """The fast reader sees every change made through os.environ, stripped; "" when unset."""
    if not fast:
        monkeypatch.setattr(_env, "_DATA", None)
    name = "PYACLNN_TEST_ENV_VALUE"
    monkeypatch.delenv(name, raising=False)
    assert _env.value(name) == ""
    monkeypatch.setenv(name, " 7 ")
    assert _env.value(name) == "7"
    os.environ[name] = "caf\u00e9"
    assert _env.value(name) == "caf\u00e9"
    monkeypatch.setenv(name, "")
    assert _env.value(name) == ""
    monkeypatch.delenv(name)
    assert _env.value(name) == ""


@pytest.mark.parametrize("parallel", [False, True])
def test_run_shared_gives_every_block_to_exactly_one_share(monkeypatch, parallel):
    monkeypatch.setenv("PYACLNN_NUM_THREADS", "3")
    seen: list[int] = []
    lock = threading.Lock()

    def work(share: list[int]) -> None:
        with lock:
            seen.extend(share)

    _workers.run_shared(work, list(range(10)), parallel)
    assert sorted(seen) == list(range(10))


def test_a_failing_share_is_raised_after_all_shares_stopped(monkeypatch):
    monkeypatch.setenv("PYACLNN_NUM_THREADS", "2")
    done: list[int] = []

    def work(share: list[int]) -> None:
        if 1 in share:
            raise RuntimeError("share with block 1")
        done.extend(share)

    with pytest.raises(RuntimeError, match="block 1"):
        _workers.run_shared(work, [0, 1], True)
    assert done == [0]


def test_the_pipeline_runs_every_chunk_and_re_raises_the_first_failure(monkeypatch):
    monkeypatch.setenv("PYACLNN_NUM_THREADS", "2")
    results = [0] * 6
    pipe = _workers.Pipeline(True, 1)

    def fill(i: int) -> None:
        results[i] = i + 1

    for i in range(6):
        pipe.run(fill, i)
    pipe.wait()
    assert results == [1, 2, 3, 4, 5, 6]

    def fail() -> None:
        raise ValueError("chunk failed")

    pipe.run(fail)
    with pytest.raises(ValueError, match="chunk failed"):
        pipe.wait()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_a_fresh_pool(monkeypatch):
    monkeypatch.setenv("PYACLNN_NUM_THREADS", "2")
    _workers.submit(1, int).result()  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # the child: the inherited pool has no threads; a new one must run the work
        code = 1
        try:
            seen: list[int] = []
            _workers.run_shared(seen.extend, [1, 2, 3, 4], True)
            code = 0 if sorted(seen) == [1, 2, 3, 4] else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
