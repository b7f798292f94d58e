"""The compiled repeated call of pyaclnn.ops (pyaclnn._repeat): a call like an earlier eager one on
the same stream runs from C, with the Python path's results, counts, marks and errors, and hands
every other outcome back to Python as the Python path meets it.

CI runs this file (and test_ops_eager.py) once more with ``PYACLNN_COMPILED_CALLS=0``: the tests
that need the compiled module then check that the Python path took the calls instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import tracemalloc

import numpy as np
import pytest

import pyaclnn
from pyaclnn import _launch, _repeat, ops
from pyaclnn.errors import AclnnError

COMPILED_OFF = _repeat._disabled()  # PYACLNN_COMPILED_CALLS=0 (read as pyaclnn reads it)


def _f32(*values):
    return [np.asarray(v, np.float32) for v in values]


# The compiled call launches the npu backend's C phases (on the emulator here).
on_npu = pytest.mark.parametrize("backend", ["npu"], indirect=True)


@pytest.fixture
def compiled(active):
    """The compiled call, once a first record made it (skipped only where no compiler can build
    it and CI does not require one)."""
    x, y, out = (pyaclnn.to_device(a) for a in _f32([1], [2], [0]))
    stream = pyaclnn.Stream()
    for _ in range(2):
        ops.add(x, y, 1, out, stream=stream)
    for a in (x, y, out, stream):
        a.close()
    status = _repeat.status()
    if COMPILED_OFF:
        assert status == {"active": False, "reason": "PYACLNN_COMPILED_CALLS=0"}
        assert _launch.compiled_call is None
        pytest.skip("PYACLNN_COMPILED_CALLS=0: the Python path runs (checked above)")
    if not status["active"] and os.environ.get("PYACLNN_REQUIRE_ACCEL") != "1":
        pytest.skip(f"no compiled call here: {status['reason']}")
    assert status == {"active": True, "reason": ""}
    assert _launch.compiled_call is not None
    return _launch.compiled_call


@pytest.fixture
def python_steps(monkeypatch):
    """The Python steps a call took: ``find`` (the Python look-up of a record) and ``rest`` (the
    rest of the Python path, with what was found)."""
    steps = {"find": 0, "rest": []}
    find, rest = _launch._find, _launch.eager_rest

    def counted_find(*args, **kwargs):
        steps["find"] += 1
        return find(*args, **kwargs)

    def counted_rest(*args, **kwargs):
        steps["rest"].append(args[-1])  # found: None (the general way) or a record
        return rest(*args, **kwargs)

    monkeypatch.setattr(_launch, "_find", counted_find)
    monkeypatch.setattr(_launch, "eager_rest", counted_rest)
    return steps


def _add_setup():
    stream = pyaclnn.Stream()
    x, y = (pyaclnn.to_device(a, stream=stream) for a in _f32([1, 2, 3], [10, 20, 30]))
    out = pyaclnn.empty((3,), np.float32, stream=stream)
    return stream, x, y, out


@on_npu
def test_a_repeated_call_runs_from_c_with_the_counts_and_marks_of_the_python_path(compiled, python_steps):
    stream, x, y, out = _add_setup()
    state = stream._state
    ops.add(x, y, 2, out, stream=stream)  # the general path: descriptors made
    ops.add(x, y, 2, out, stream=stream)  # the eager one: leaves the record
    python_steps["rest"].clear()
    for alpha in (2, 2, 2):
        before = state.queued
        assert ops.add(x, y, alpha, out, stream=stream) is out
        assert state.queued == before + 1  # one launch counted
        # marked as written by it: each tensor (Add's roles are not known: all count as written)
        assert out._written_at == x._written_at == y._written_at == state.queued
    assert python_steps == {"find": 0, "rest": []}  # nothing went through Python
    np.testing.assert_array_equal(out.numpy(), [21, 42, 63])
    for a in (x, y, out, stream):
        a.close()


@on_npu
def test_the_current_stream_is_found_by_the_python_rule_and_the_call_still_runs_from_c(
    compiled, python_steps
):
    x, y = (pyaclnn.to_device(a) for a in _f32([1, 2], [3, 4]))
    out = pyaclnn.empty((2,), np.float32)
    for _ in range(3):
        ops.add(x, y, 1, out)
    python_steps["rest"].clear()
    ops.add(x, y, 1, out)
    assert python_steps == {"find": 0, "rest": []}
    np.testing.assert_array_equal(out.numpy(), [4, 6])
    for a in (x, y, out):
        a.close()


@on_npu
def test_repeated_calls_leak_no_python_object(compiled):
    stream, x, y, out = _add_setup()
    state = stream._state
    for _ in range(1000):  # (the count of queued work passes the small ints cached by Python)
        ops.add(x, y, 1, out, stream=stream)
    references = [sys.getrefcount(o) for o in (x, y, out, stream, state)]
    tracemalloc.start()
    try:
        first = tracemalloc.get_traced_memory()[0]
        for _ in range(5000):
            ops.add(x, y, 1, out, stream=stream)
        grown = tracemalloc.get_traced_memory()[0] - first
    finally:
        tracemalloc.stop()
    assert [sys.getrefcount(o) for o in (x, y, out, stream, state)] == references
    assert grown < 20_000, f"{grown} bytes more after 5000 calls"  # one int a call would be 140 kB
    stream.synchronize()
    np.testing.assert_array_equal(out.numpy(), [11, 22, 33])
    for a in (x, y, out, stream):
        a.close()


@on_npu
def test_the_write_marks_wait_for_the_order_lock_another_thread_holds(compiled):
    """The compiled call marks the written arrays without taking the lock of those marks when no
    thread holds it (it keeps the GIL throughout); when one does, it waits for it."""
    from pyaclnn import _array

    stream, x, y, out = _add_setup()
    for _ in range(2):
        ops.add(x, y, 1, out, stream=stream)
    taken, events = threading.Event(), []

    def hold():
        with _array._ORDER_LOCK:
            taken.set()
            time.sleep(0.05)
            events.append("released")

    holder = threading.Thread(target=hold)
    holder.start()
    taken.wait()
    ops.add(x, y, 1, out, stream=stream)
    events.append("marked")
    holder.join()
    assert events == ["released", "marked"]
    assert out._written_at == stream._state.queued
    for a in (x, y, out, stream):
        a.close()


@on_npu
def test_a_failing_phase_1_raises_as_the_python_path_does_and_gives_the_lock_back(compiled):
    stream, x, y, out = _add_setup()
    state = stream._state
    for _ in range(2):
        ops.add(x, y, 1, out, stream=stream)
    (key, record), *others = state.executors.checked.items()
    assert not others and record.c_form is not None
    # The same record with NULL for self: phase 1 refuses it, as it would a bad argument.
    args = (None, *record.args[1:])
    record.c_form = record.op.c_form.pack(args, state.handle)
    before = state.queued
    with pytest.raises(AclnnError) as raised:
        ops.add(x, y, 1, out, stream=stream)
    assert raised.value.api == "aclnnAddGetWorkspaceSize"
    assert "self" in str(raised.value)
    assert state.queued == before  # nothing counted
    free = []
    other = threading.Thread(
        target=lambda: free.append(state.lock.acquire(timeout=5) and state.lock.release())
    )
    other.start()
    other.join()
    assert free == [None]  # another thread takes the stream's lock at once
    del state.executors.checked[key]  # the next call makes its record again
    for _ in range(2):
        ops.add(x, y, 1, out, stream=stream)
    np.testing.assert_array_equal(out.numpy(), [11, 22, 33])
    for a in (x, y, out, stream):
        a.close()


def test_a_failing_phase_2_is_raised_naming_the_launch(active):
    """What the compiled call hands to Python when phase 2 failed (the emulator's phase 2 refuses
    nothing a phase 1 accepted, so the hand-over is called here as the C code calls it)."""
    from pyaclnn import _generic
    from pyaclnn._launch import Repeated, _rest

    op = _generic.operator(ops.add.declaration, active)
    stream = pyaclnn.Stream()
    with pytest.raises(AclnnError) as raised:
        _rest(stream._state, Repeated(op, (), ()), (), (), 0, 561000, 0, 0)
    assert raised.value.api == "aclnnAdd" and raised.value.status == 561000
    stream.close()


@on_npu
def test_nothing_to_compute_is_handed_back_and_counts_no_launch(compiled, python_steps):
    stream = pyaclnn.Stream()
    state = stream._state
    x, y, out = (pyaclnn.empty((0, 3), np.float32, stream=stream) for _ in range(3))
    for _ in range(2):
        ops.add(x, y, 1, out, stream=stream)
    assert len(state.executors.checked) == 1
    python_steps["rest"].clear()
    before = state.queued
    assert ops.add(x, y, 1, out, stream=stream) is out
    assert python_steps == {"find": 0, "rest": []} and state.queued == before  # (zero bytes: no fill)
    for a in (x, y, out, stream):
        a.close()


@on_npu
def test_launch_blocking_waits_after_a_compiled_call(compiled, monkeypatch):
    stream, x, y, out = _add_setup()
    for _ in range(2):
        ops.add(x, y, 1, out, stream=stream)
    waits = []
    synchronize = pyaclnn.Stream.synchronize

    def counted(self):
        waits.append(self)
        return synchronize(self)

    monkeypatch.setattr(pyaclnn.Stream, "synchronize", counted)
    ctx = stream._state._ctx
    monkeypatch.setattr(ctx, "launch_blocking", True)
    ops.add(x, y, 1, out, stream=stream)
    assert waits == [stream]
    monkeypatch.setattr(ctx, "launch_blocking", False)
    ops.add(x, y, 1, out, stream=stream)
    assert waits == [stream]
    for a in (x, y, out, stream):
        a.close()


def test_a_record_with_no_c_form_is_launched_by_python(active, python_steps):
    """A record with no C form (npu: nan_to_num, whose float parameters go in other registers
    than the words; numpy: every record, its backend has no C phases) is found (by the compiled
    call or the Python look-up) and launched by Python."""
    stream = pyaclnn.Stream()
    x = pyaclnn.to_device(np.asarray([np.nan, np.inf, -np.inf, 1], np.float32), stream=stream)
    out = pyaclnn.empty((4,), np.float32, stream=stream)
    if active == "npu":
        args, expected = (x, 0.5, 9.0, -9.0, out), [0.5, 9.0, -9.0, 1]
        call = ops.nan_to_num
    else:
        args, expected = (x, x, 1, out), [np.nan, np.inf, -np.inf, 2]
        call = ops.add
    for _ in range(2):
        call(*args, stream=stream)
    (record,) = stream._state.executors.checked.values()
    assert record.c_form is None
    python_steps["rest"].clear()
    call(*args, stream=stream)
    written = [out, x] if active == "npu" else [out, x, x]  # (roles not known: x counts as written)
    assert python_steps["rest"] == [(record, written)]
    np.testing.assert_array_equal(out.numpy(), expected)
    for a in (x, out, stream):
        a.close()


def test_words_carry_pointers_integers_and_bools_and_nothing_else():
    from pyaclnn.backends.npu._c_form import c_form
    from pyaclnn.backends.npu._ffi import ffi

    def function(prototype):
        return ffi.cast(prototype, 0x1000)

    phase2 = function("int32_t(*)(void *, uint64_t, aclOpExecutor *, aclrtStream)")
    words = c_form(
        function("int32_t(*)(aclTensor *, int64_t, _Bool, int8_t, uint64_t *, aclOpExecutor **)"), phase2
    )
    assert words is not None
    tensor = ffi.cast("aclTensor *", 0x2000)
    stream = ffi.cast("aclrtStream", 0x3000)
    packed = np.frombuffer(words.pack((tensor, -2, True, -1), stream), np.uint64)
    assert packed.tolist() == [0x1000, 0x1000, 0x3000, 4, 0x2000, 2**64 - 2, 1, 2**64 - 1]
    assert np.frombuffer(words.pack((None, 0, False, 0), stream), np.uint64)[4] == 0  # NULL
    assert words.pack((b"text", 0, False, 0), stream) is None  # cffi would convert it per call
    assert words.pack((tensor, 1.5, False, 0), stream) is None
    assert words.pack((tensor, 0, False), stream) is None  # not the declared count
    for other in ("double", "float"):
        assert (
            c_form(function(f"int32_t(*)(aclTensor *, {other}, uint64_t *, aclOpExecutor **)"), phase2)
            is None
        )
    bad_launch = function("int32_t(*)(void *, double, aclOpExecutor *, aclrtStream)")
    assert c_form(function("int32_t(*)(aclTensor *, uint64_t *, aclOpExecutor **)"), bad_launch) is None


def test_without_the_compiled_call_the_python_path_gives_the_same(emulator_home, tmp_path):
    """A process with PYACLNN_COMPILED_CALLS=0, and one where no compiler can build it (CC names
    none): both run the Python path, say why, and compute the same."""
    script = (
        "import numpy as np, pyaclnn\n"
        "from pyaclnn import _launch, _repeat, ops\n"
        "pyaclnn.set_backend('npu')\n"
        "s = pyaclnn.Stream()\n"
        "x, y = (pyaclnn.to_device(np.asarray(v, np.float32), stream=s) for v in ([1, 2], [3, 4]))\n"
        "out = pyaclnn.empty((2,), np.float32, stream=s)\n"
        "for _ in range(3):\n"
        "    ops.add(x, y, 2, out, stream=s)\n"
        "print(out.numpy().tolist(), _launch.compiled_call is None, _repeat.status()['reason'])\n"
    )
    for env, reason in (
        ({"PYACLNN_COMPILED_CALLS": "0"}, "PYACLNN_COMPILED_CALLS=0"),
        (
            {"CC": "nosuchcc", "PYACLNN_CACHE_DIR": str(tmp_path)},
            "NoCompiler: CC=nosuchcc: nosuchcc is not on PATH",
        ),
    ):
        environ = {k: v for k, v in os.environ.items() if k not in ("PYACLNN_COMPILED_CALLS", "CC")}
        environ.update(PYACLNN_ASCEND_HOME=str(emulator_home), **env)
        proc = subprocess.run(
            [sys.executable, "-c", script], env=environ, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == f"[7.0, 10.0] True {reason}"


def test_build_needs_the_python_headers(monkeypatch, tmp_path):
    import sysconfig

    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"include": str(tmp_path)})
    with pytest.raises(_repeat._compile.NoCompiler, match="no Python headers"):
        _repeat.build(tmp_path)


def test_info_says_which_path_repeated_calls_take():
    environ = {k: v for k, v in os.environ.items() if k != "PYACLNN_COMPILED_CALLS"}
    lines = {}
    for value in ("0", "1"):
        proc = subprocess.run(
            [sys.executable, "-m", "pyaclnn", "info"],
            env={**environ, "PYACLNN_BACKEND": "numpy", "PYACLNN_COMPILED_CALLS": value},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        lines[value] = [line for line in proc.stdout.splitlines() if line.startswith("repeated calls")]
    assert lines["0"] == ["repeated calls of pyaclnn.ops: Python path (PYACLNN_COMPILED_CALLS=0)"]
    if _repeat._compile.compiler() is not None or os.environ.get("PYACLNN_REQUIRE_ACCEL") == "1":
        assert lines["1"] == ["repeated calls of pyaclnn.ops: compiled"]
    else:
        assert lines["1"][0].startswith("repeated calls of pyaclnn.ops: Python path (NoCompiler")


def test_a_repeated_call_after_a_write_on_another_stream_takes_the_general_path(
    active, python_steps, monkeypatch
):
    """x written on a second stream that is 10 ms behind (1 ms kernels): the call recorded on
    the first stream reads it only through the general path, which orders it after those."""
    first, second = pyaclnn.Stream(), pyaclnn.Stream()
    x, y = (pyaclnn.to_device(a, stream=first) for a in _f32([1, 2], [1, 1]))
    out = pyaclnn.empty((2,), np.float32, stream=first)
    for _ in range(3):
        ops.add(x, y, 1, out, stream=first)  # recorded
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "1000")
    for _ in range(10):
        ops.add(x, y, 1, x, stream=second)  # x += 1, ten times
    python_steps["rest"].clear()
    ops.add(x, y, 1, out, stream=first)
    assert python_steps["rest"] == [None]  # the general path
    np.testing.assert_array_equal(out.numpy(), [12, 13])
    for a in (x, y, out, first, second):
        a.close()


def test_a_repeated_call_on_an_array_a_graph_holds_takes_the_general_path(active, python_steps):
    """grid_sampler3d's roles are known: a graph that samples ``a`` only reads it, so ``a`` keeps
    its stream and the recorded call (which reads it too) is told apart by the graph alone."""
    a = pyaclnn.to_device(np.arange(8, dtype=np.float32).reshape(1, 1, 2, 2, 2))
    grid = pyaclnn.to_device(np.zeros((1, 1, 1, 1, 3), np.float32))
    sampled, again = (pyaclnn.empty((1, 1, 1, 1, 1), np.float32) for _ in range(2))
    for _ in range(3):
        ops.grid_sampler3d(a, grid, 0, 0, False, sampled)  # recorded
    with pyaclnn.Graph() as g:
        with pyaclnn.graph(g):
            ops.grid_sampler3d(a, grid, 0, 0, False, again)
        g.replay()
        assert a._graphs is not None and a._stream is pyaclnn.current_stream()
        python_steps["rest"].clear()
        ops.grid_sampler3d(a, grid, 0, 0, False, sampled)
        assert python_steps["rest"] == [None]  # the general path
        np.testing.assert_array_equal(sampled.numpy(), again.numpy())
        np.testing.assert_array_equal(sampled.numpy(), [[[[[3.5]]]]])  # the centre: the mean
    for x in (a, grid, sampled, again):
        x.close()
