"""Shared fixtures: the PyTorch oracle and the backends under test."""

from __future__ import annotations

import os

import pytest

# A hazard (memory freed under queued work, a stream destroyed with work pending, ...) aborts
# the process that sees it, child processes included (they inherit the variable): the suite
# cannot pass while printing hazards nobody reads. Tests that provoke one on purpose use
# the ``hazards_expected`` fixture.
os.environ.setdefault("PYACLNN_EMU_HAZARD_FATAL", "1")
# The numpy backend maps every NumPy array of a call (not only calls of 1 MiB and more), so that
# every test on NumPy arrays runs the mapped path; tests of the copies set PYACLNN_MAP_HOST=0.
os.environ.setdefault("PYACLNN_MAP_HOST", "always")


# Under PYACLNN_EMU_SANITIZE with ASan (tests/emulator_build.py, docs/reliability.md section 5), tests
# that cannot hold for an ASan process, by a reason that is ASan's and not the emulator's; any other
# failure there is a finding. {test function: why}
_NOT_UNDER_ASAN = {
    "test_a_huge_valid_kernel_neither_exhausts_memory_nor_time": "its child sets RLIMIT_AS (3 GiB), and "
    "ASan's shadow memory needs terabytes of address space",
    "test_grid_sampler_on_a_huge_broadcast_input_never_crashes": "its child sets RLIMIT_AS (4 GiB), and "
    "ASan's shadow memory needs terabytes of address space",
    "test_soak_memory_and_live_objects_stay_bounded": "ASan keeps freed memory in quarantine: RSS grows by "
    "design beyond the 8 MiB bound",
    "test_instruction_counter_reports_a_plausible_count_per_call": "valgrind cannot run a process with "
    "ASan's runtime",
}


def _asan() -> bool:
    from emulator_build import sanitizers

    return "address" in sanitizers()


if _asan():
    import resource

    from fuzz import harness

    # The fuzz children's 6 GiB RLIMIT_AS leaves ASan no room for its shadow memory; the recipe's
    # ASAN_OPTIONS max_allocation_size_mb=6144 bounds each allocation in its place.
    harness.CHILD_MEMORY = resource.RLIM_INFINITY


def pytest_collection_modifyitems(config, items):
    if not _asan():
        return
    for item in items:
        reason = _NOT_UNDER_ASAN.get(getattr(item, "originalname", item.name))
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"not under ASan: {reason}"))


def pytest_report_header(config):
    """Which emulator the npu tests load: under PYACLNN_EMU_SANITIZE a sanitized one (say so, and where)."""
    from emulator_build import SANITIZE_VAR, build_dir, sanitizers

    chosen = sanitizers()
    if chosen:
        return f"CANN emulator: sanitized ({SANITIZE_VAR}={','.join(chosen)}) in {build_dir()}"
    return f"CANN emulator: plain build in {build_dir()}"


@pytest.fixture
def hazards_expected(monkeypatch):
    """For a test that provokes hazards on purpose: they are counted and printed, not fatal."""
    monkeypatch.setenv("PYACLNN_EMU_HAZARD_FATAL", "0")


def _torch_required() -> bool:
    # CI sets this so that a missing torch fails the oracle tests instead of skipping them.
    return os.environ.get("PYACLNN_REQUIRE_TORCH", "") not in ("", "0")


@pytest.fixture(scope="session")
def torch():
    """PyTorch CPU, the oracle for the math; skipped with a reason when absent
    unless PYACLNN_REQUIRE_TORCH=1, where its absence is an error."""
    try:
        import torch as _torch
    except ImportError as exc:
        if _torch_required():
            raise RuntimeError("PYACLNN_REQUIRE_TORCH=1 but torch cannot be imported") from exc
        pytest.skip(
            "PyTorch is not installed: the oracle comparisons need its CPU build "
            '(pip install ".[test,oracle]" in a checkout, not a plain pip install torch)'
        )
    _torch.set_num_threads(1)
    return _torch


@pytest.fixture(scope="session")
def emulator_home():
    """The classic-layout emulator home, built on first use (never skipped: CI must build it)."""
    from emulator_build import emulator_home as build

    return build("classic")


@pytest.fixture(params=["numpy", "npu"])
def backend(request):
    """Name of the backend under test: numpy, or npu over the host emulator of CANN.

    After the test everything pyaclnn holds is freed and the backend must report
    no live object (no leak, no double free) and no new hazard (memory freed under
    queued work, a stream destroyed with work pending, ...: printed on stderr).
    """
    import pyaclnn
    from pyaclnn import backends

    name = request.param
    if name == "npu":
        home = request.getfixturevalue("emulator_home")
        # One CANN per process: the first npu use loads this home for the whole session.
        os.environ["PYACLNN_ASCEND_HOME"] = str(home)
    hazards = backends.get(name).hazard_count()
    yield name
    pyaclnn.finalize(name)
    emulation = backends.get(name)
    counts = emulation.live_counts()
    assert counts is None or not any(counts.values()), f"live objects left on {name}: {counts}"
    new_hazards = (emulation.hazard_count() or 0) - (hazards or 0)
    assert new_hazards == 0, f"{new_hazards} hazard(s) on {name}: see the HAZARD lines on stderr"


@pytest.fixture
def active(backend):
    """The backend under test made the active one (pyaclnn.ops follows the active backend)."""
    import pyaclnn

    previous = pyaclnn.get_backend()
    pyaclnn.set_backend(backend)
    yield backend
    pyaclnn.set_backend(previous)


@pytest.fixture
def ops_general(monkeypatch):
    """The calls of ``pyaclnn.ops`` that took the general path (``ops._call.launch``), each as the
    last argument it was given: the tests of the shortcuts count them."""
    from pyaclnn.ops import _call

    calls = []
    launch = _call.launch

    def counted(*args, **kwargs):
        calls.append(args[-1])
        return launch(*args, **kwargs)

    monkeypatch.setattr(_call, "launch", counted)
    return calls
