"""The kernels' one worker-pool policy and pool (pyaclnn.kernels._workers): thread count, shares, fork."""

from __future__ import annotations

import os
import threading

import pytest

from pyaclnn import _env as _env_reader
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
    want = max(1, min(len(os.sched_getaffinity(0)), 8))
    if env == "many":  # malformed: said (once per value), then the default
        monkeypatch.setattr(_env_reader, "_warned", set())
        with pytest.warns(_env_reader.EnvironmentWarning, match="PYACLNN_NUM_THREADS='many' is ignored"):
            assert _workers.thread_count() == want
    else:
        assert _workers.thread_count() == want


def test_threads_for_gives_one_thread_below_the_work_that_pays_and_the_count_from_it(monkeypatch):
    monkeypatch.setenv("PYACLNN_NUM_THREADS", "3")
    assert _workers.threads_for(99, 100) == 1
    assert _workers.threads_for(100, 100) == 3
    monkeypatch.setenv("PYACLNN_NUM_THREADS", "many")  # not even read below the threshold
    assert _workers.threads_for(0, 1) == 1


def test_the_kernels_take_their_thread_counts_from_threads_for():
    """One policy: the tuned NumPy paths and the compiled kernels' Python entries ask
    threads_for, and nothing else in the kernels reads the thread count."""
    import inspect

    from pyaclnn.kernels import _accel
    from pyaclnn.kernels._tuned import grid_sampler3d, max_pool3d

    for module in (_accel, grid_sampler3d, max_pool3d):
        source = inspect.getsource(module)
        assert "threads_for(" in source, module.__name__
        assert "thread_count(" not in source and "PYACLNN_NUM_THREADS" not in source, module.__name__


def test_environment_values_are_read_at_every_call(monkeypatch):
    """The reader sees every change made through os.environ, stripped; "" when unset."""
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


@pytest.mark.parametrize("threads", [1, 3])
def test_run_shared_gives_every_block_to_exactly_one_share(threads):
    seen: list[int] = []
    lock = threading.Lock()

    def work(share: list[int]) -> None:
        with lock:
            seen.extend(share)

    _workers.run_shared(work, list(range(10)), threads)
    assert sorted(seen) == list(range(10))


def test_a_failing_share_is_raised_after_all_shares_stopped():
    done: list[int] = []

    def work(share: list[int]) -> None:
        if 1 in share:
            raise RuntimeError("share with block 1")
        done.extend(share)

    with pytest.raises(RuntimeError, match="block 1"):
        _workers.run_shared(work, [0, 1], 2)
    assert done == [0]


def test_the_pipeline_runs_every_chunk_and_re_raises_the_first_failure():
    results = [0] * 6
    pipe = _workers.Pipeline(2, 1)

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
            _workers.run_shared(seen.extend, [1, 2, 3, 4], 2)
            code = 0 if sorted(seen) == [1, 2, 3, 4] else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
