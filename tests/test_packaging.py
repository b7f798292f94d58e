"""What pip and PyPI get: the sdist is a complete tree whose own tests run, the wheel holds the package only.

The sdist is built from this checkout; the wheel from the unpacked sdist, as
pip builds it, with a stale file planted in its ``build/lib`` first (setup.py
must not let it into the wheel). Built with setuptools' PEP 517 backend in a
subprocess, without isolation or network.
"""

from __future__ import annotations

import email.parser
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import pyaclnn

ROOT = Path(__file__).resolve().parent.parent
NAME = f"pyaclnn-{pyaclnn.__version__}"

#: Files the sdist's test suite needs besides the package (tests/emulator_build.py builds the emulator).
SDIST_MUST_HOLD = (
    "LICENSE",
    "README.md",
    "pyproject.toml",
    "setup.py",
    "CMakeLists.txt",
    "MANIFEST.in",
    "tests/conftest.py",
    "tests/emulator_build.py",
    "tests/lowlevel.py",
    "tests/emulator/CMakeLists.txt",
    "tests/emulator/runtime.c",
    "tests/test_cli.py",
    "samples/max_pool3d_forward_backward.py",
    "samples/cpp/CMakeLists.txt",
    "include/decl",
    "benchmarks/bench_kernels.py",
    "benchmarks/_common.py",
    "scripts/make_selftest_golden.py",
    "pyaclnn/selftest_golden.npz",
    "pyaclnn/include/decl",
)


def _build(hook: str, source: Path, out_dir: Path) -> Path:
    """Run ``setuptools.build_meta.<hook>`` in ``source``; the file it made. Fails on a setuptools warning."""
    code = f"from setuptools import build_meta; print(build_meta.{hook}({str(out_dir)!r}))"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=source, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # e.g. "SetuptoolsDeprecationWarning: `project.license` as a TOML table is deprecated"
    assert "Warning" not in proc.stderr, proc.stderr[-3000:]
    return out_dir / proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def unpacked_sdist(tmp_path_factory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    sdist = _build("build_sdist", ROOT, dist)
    assert sdist.name == f"{NAME}.tar.gz"
    where = tmp_path_factory.mktemp("unpacked")
    with tarfile.open(sdist) as tar:
        # The "data" filter (no links out, no devices) exists from 3.10.12/3.11.4 on.
        tar.extractall(where, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    return where / NAME


@pytest.fixture(scope="module")
def wheel(unpacked_sdist, tmp_path_factory) -> zipfile.ZipFile:
    stale = unpacked_sdist / "build" / "lib" / "pyaclnn"
    stale.mkdir(parents=True)
    (stale / "stale_leftover.py").write_text("planted = True\n")
    (stale.parent / "planted.txt").write_text("not ours\n")
    path = _build("build_wheel", unpacked_sdist, tmp_path_factory.mktemp("wheel"))
    assert path.name == f"{NAME}-py3-none-any.whl"
    with zipfile.ZipFile(path) as whl:
        yield whl


def test_the_sdist_holds_what_its_tests_need_and_no_build_products(unpacked_sdist):
    for name in SDIST_MUST_HOLD:
        assert (unpacked_sdist / name).exists(), name
    files = [p.relative_to(unpacked_sdist).as_posix() for p in unpacked_sdist.rglob("*") if p.is_file()]
    assert not [
        f
        for f in files
        if f.startswith(("build/", ".emulator-build/")) or "__pycache__" in f or f.endswith((".so", ".pyc"))
    ]


def _run_in(tree: Path, *args: str) -> subprocess.CompletedProcess:
    """``python *args`` in ``tree``, PYACLNN_* unset; ``-c``/``-m`` put ``tree`` first on sys.path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYACLNN_")}
    return subprocess.run(
        [sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_unpacked_sdist_runs_its_own_tests(unpacked_sdist):
    where = _run_in(unpacked_sdist, "-c", "import pyaclnn; print(pyaclnn.__file__)")
    # The unpacked tree's pyaclnn is the one tested, not the installed one.
    assert Path(where.stdout.strip()).is_relative_to(unpacked_sdist), where.stdout + where.stderr
    pytest_args = ("-m", "pytest", "-q", "-p", "no:cacheprovider")
    collect = _run_in(unpacked_sdist, *pytest_args, "--collect-only", "tests")
    assert collect.returncode == 0, collect.stdout[-3000:] + collect.stderr[-3000:]  # conftest, helpers
    run = _run_in(
        unpacked_sdist, *pytest_args, "tests/test_cli.py", "-k", "version or quick or golden_outputs"
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert " passed" in run.stdout and "failed" not in run.stdout


def test_the_wheel_holds_the_package_its_data_and_the_licence_only(wheel):
    names = wheel.namelist()
    info = f"{NAME}.dist-info/"
    assert all(n.startswith(("pyaclnn/", info)) for n in names), [n for n in names if "pyaclnn/" not in n]
    assert not [n for n in names if "stale_leftover" in n or "planted" in n or "__pycache__" in n]
    for name in (
        "pyaclnn/__init__.py",
        "pyaclnn/py.typed",
        "pyaclnn/functional.pyi",  # the typed interface of the calls (generated)
        "pyaclnn/aclnn.pyi",  # and of the low-level wrappers (generated)
        "pyaclnn/selftest_golden.npz",
        "pyaclnn/include/decl/acl_types.h",
        "pyaclnn/backends/npu/_ffi.py",
        f"{info}licenses/LICENSE",
    ):
        assert name in names, name
    assert "Apache License" in wheel.read(f"{info}licenses/LICENSE").decode()
    # the golden outputs are small package data
    assert wheel.getinfo("pyaclnn/selftest_golden.npz").file_size < 400_000


def test_the_wheel_metadata_is_spdx_licensed_classified_and_versioned(wheel):
    meta = email.parser.Parser().parsestr(wheel.read(f"{NAME}.dist-info/METADATA").decode())
    assert meta["Version"] == pyaclnn.__version__
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert meta["License"] is None  # the deprecated free-text field is gone
    classifiers = meta.get_all("Classifier")
    for expected in (
        "Operating System :: POSIX :: Linux",
        "Topic :: Scientific/Engineering",
        *(f"Programming Language :: Python :: 3.{minor}" for minor in range(10, 14)),
    ):
        assert expected in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # PEP 639: the expression only
    assert meta["Requires-Python"] == ">=3.10"
