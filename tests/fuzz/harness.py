"""How the fuzz runs: each property category by category under Hypothesis, in a
child process with a memory limit, with coverage accounting of the outcomes.

Examples per property: ``PYACLNN_FUZZ_EXAMPLES`` (default 300), split evenly
over its categories. ``PYACLNN_FUZZ_REPORT=<file>`` appends each property's
per-category counts to that file as one JSON line.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .properties import CATEGORIES, PROPERTIES, release

DEFAULT_EXAMPLES = 300
EXAMPLES = int(os.environ.get("PYACLNN_FUZZ_EXAMPLES", str(DEFAULT_EXAMPLES)))
#: tests/, which the child puts on sys.path to import this package
TESTS = Path(__file__).resolve().parent.parent

SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


# Hypothesis derandomizes from the source of ``prop`` below: keep it as written, or every
# property draws other examples than before.
def _category_property(name: str, backend: str, category: str, counts, examples: int):
    @settings(SETTINGS, max_examples=examples)
    @given(st.data())
    def prop(data):
        PROPERTIES[name](backend, category, data, counts)

    return prop


def run_property(name: str, backend: str) -> dict[str, int]:
    """Run one property on one backend, category by category; per-category counts of outcomes.

    Each category gets an equal share of ``EXAMPLES`` (at least 10), so the counts are even.
    """
    counts: collections.Counter = collections.Counter()
    per_category = max(10, -(-EXAMPLES // len(CATEGORIES[name])))
    try:
        for category in CATEGORIES[name]:
            _category_property(name, backend, category, counts, per_category)()
    finally:
        release()
    return {f"{cat}|{outcome}": n for (cat, outcome), n in sorted(counts.items())}


def _report(name: str, backend: str, counts: dict[str, int]) -> None:
    path = os.environ.get("PYACLNN_FUZZ_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(
                json.dumps({"property": name, "backend": backend, "examples": EXAMPLES, "counts": counts})
                + "\n"
            )


def _assert_coverage(name: str, counts: dict[str, int]) -> None:
    seen = {key.split("|")[0] for key in counts}
    missing = [c for c in CATEGORIES[name] if c not in seen]
    assert not missing, f"{name}: categories never generated: {missing}"
    # Hypothesis stops early only in small, exhausted spaces: at the default budget most categories
    # reach their share. A larger budget asks some categories for more examples than their space
    # holds, so it must still give at least what the default gives.
    assert sum(counts.values()) >= min(EXAMPLES, DEFAULT_EXAMPLES) // 2, counts


CHILD = textwrap.dedent(
    """
    import json, resource, sys
    # a bug that allocates without bound must fail with MemoryError here, not exhaust the machine
    resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
    sys.path.insert(0, {tests!r})
    import pyaclnn
    from fuzz import harness
    from pyaclnn import backends
    counts = harness.run_property({name!r}, {backend!r})
    for b in ("numpy", "npu"):
        pyaclnn.finalize(b)
        left = backends.get(b).live_counts()
        assert not any(left.values()), f"live objects left on {{b}}: {{left}}"
    print("COUNTS " + json.dumps(counts))
    """
)
CHILD_MEMORY = 6 << 30


def run_in_child(name: str, backend: str, emulator_home: Path) -> dict[str, int]:
    """One property on one backend in a child process; its counts, checked and reported.

    npu runs C code (a crash must not take pytest down); both children get a
    memory limit. The numpy child also holds npu DeviceArrays and handles (the
    other backend), and vice versa.
    """
    env = dict(
        os.environ,
        PYACLNN_ASCEND_HOME=str(emulator_home),
        PYACLNN_BACKEND="numpy",
        PYACLNN_NUMPY_DEVICE_MEMORY=str(1 << 30),
    )
    script = CHILD.format(tests=str(TESTS), name=name, backend=backend, limit=CHILD_MEMORY)
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False, timeout=900
    )
    assert proc.returncode == 0, (
        f"child exited with {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}"
    )
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("COUNTS ")][-1]
    counts = json.loads(line[len("COUNTS ") :])
    _assert_coverage(name, counts)
    _report(name, backend, counts)
    return counts


def in_child(script: str, emulator_home: Path, backend: str) -> subprocess.CompletedProcess:
    """Run a (dedented) Python ``script`` in a child with ``backend`` active over the emulator."""
    env = dict(os.environ, PYACLNN_ASCEND_HOME=str(emulator_home), PYACLNN_BACKEND=backend)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
