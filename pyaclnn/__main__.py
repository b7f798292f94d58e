"""Command line: ``python -m pyaclnn info | selftest | bench`` (also installed as ``pyaclnn``).

info      what pyaclnn runs on: version, active backend and why, the CANN
          libraries found (or why the npu backend is unusable), SoC, devices, memory
selftest  the four operators on a backend against the NumPy reference kernels;
          exits 1 when a case fails (see pyaclnn.selftest for cases and tolerances)
bench     runs benchmarks/bench_kernels.py and benchmarks/bench_overhead.py of a
          source checkout (they need PyTorch)
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from . import __version__, acl, runtime, selftest
from . import backends as _backends

_GIB = 1 << 30


# -- info -------------------------------------------------------------------------


def _cann_version(home: Path) -> str | None:
    """CANN's version from the version files of an install, else from the resolved directory name."""
    for name in ("version.cfg", "version.info", "runtime/version.info", "compiler/version.info",
                 "share/info/runtime/version.info"):
        path = home / name
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        match = re.search(r"^\s*(?:version|Version)\s*=\s*(\S+)", text, re.MULTILINE)
        if match:
            return f"{match.group(1)} (from {path})"
    resolved = home.resolve()
    if resolved.name != home.name or re.search(r"\d", resolved.name):
        return f"{resolved.name} (from the install directory name {resolved})"
    return None


def _memory(name: str) -> str:
    """Free and total memory of device 0 on backend ``name`` (``aclrtGetMemInfo``)."""
    try:
        runtime.context(name)  # aclInit + aclrtSetDevice(0), freed at exit
        free, total = acl.rt.get_mem_info(backend=name)
    except Exception as exc:  # info reports, it does not fail
        return f"unavailable ({type(exc).__name__}: {exc})"
    return f"{free / _GIB:.1f} GiB free of {total / _GIB:.1f} GiB"


def info(out=None) -> int:
    """Print what pyaclnn runs on; never raises for a missing or broken CANN. Returns 0."""
    out = out or sys.stdout

    def say(text: str = "") -> None:
        print(text, file=out)

    say(f"pyaclnn {__version__} ({Path(__file__).resolve().parent})")
    say(f"python {platform.python_version()}, numpy {np.__version__}, "
        f"{platform.machine()} {platform.system()}")
    try:
        active = _backends.active_name()
        reason = _backends.selection_reason().splitlines()
        say(f"active backend: {active} ({reason[0]}{' ...' if len(reason) > 1 else ''})")
    except Exception as exc:
        active = None
        say(f"active backend: cannot be selected: {exc}")

    say()
    say("npu backend (CANN through cffi):")
    from .backends.npu import discover, probe

    result = probe()
    if result.ok:
        say("  usable")
    else:
        say("  NOT usable: " + result.reason.replace("\n", "\n    "))
    if result.home:
        home = Path(result.home)
        say(f"  CANN home: {home}")
        say(f"  CANN version: {_cann_version(home) or 'unknown (no version file found)'}")
        for lib in result.libraries:
            say(f"  library: {lib}")
        if result.missing_functions:
            say(f"  functions not exported by any library: {', '.join(result.missing_functions)}")
    elif "were not found" not in result.reason:
        say("  search:\n" + discover().report())
    if result.device_count is not None:
        say(f"  devices: {result.device_count}")
    if result.soc_name:
        say(f"  SoC: {result.soc_name}")
    if result.ok:
        say(f"  device 0 memory: {_memory('npu')}")
    elif active == "npu":
        say("  WARNING: npu is the active backend but unusable: every operator call will raise")

    say()
    say("numpy backend (host emulation of the same C API, Atlas A2/A3 rules):")
    say(f"  SoC: {acl.rt.get_soc_name(backend='numpy')}")
    say(f"  emulated device memory: {_memory('numpy')}"
        + (" (PYACLNN_NUMPY_DEVICE_MEMORY)" if os.environ.get("PYACLNN_NUMPY_DEVICE_MEMORY") else ""))
    return 0


# -- bench ------------------------------------------------------------------------

BENCHMARKS = ("bench_kernels.py", "bench_overhead.py")


def _benchmarks_dir() -> Path | None:
    for candidate in (Path(__file__).resolve().parent.parent / "benchmarks", Path.cwd() / "benchmarks"):
        if candidate.is_dir():
            return candidate
    return None


def _have_torch() -> bool:
    return importlib.util.find_spec("torch") is not None


def bench(extra: Sequence[str] = (), directory: Path | None = None) -> int:
    """Run the benchmark scripts, one subprocess each, in ``directory`` (default: the checkout's benchmarks/).

    Returns 0 when all ran and succeeded, 2 when torch or a script is missing,
    else the first failing script's exit status.
    """
    if not _have_torch():
        print("bench: the benchmarks compare against PyTorch CPU, which is not installed "
              "(pip install torch)", file=sys.stderr)
        return 2
    directory = directory or _benchmarks_dir()
    if directory is None:
        print("bench: no benchmarks/ directory: the benchmarks ship with the source tree, not the wheel; "
              "run this from a checkout of pyaclnn", file=sys.stderr)
        return 2
    status = 0
    for script in BENCHMARKS:
        path = directory / script
        if not path.is_file():
            print(f"bench: {path} is missing, skipped", file=sys.stderr)
            status = status or 2
            continue
        print(f"== {path}", flush=True)
        code = subprocess.call([sys.executable, str(path), *extra])
        if code:
            print(f"bench: {script} exited with {code}", file=sys.stderr)
            status = status or code
    return status


# -- entry point ---------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pyaclnn``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m pyaclnn", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="{info,selftest,bench}")
    sub.add_parser("info", help="version, backend, CANN libraries, devices")
    st = sub.add_parser("selftest", help="check the operators on a backend against the reference kernels")
    selftest.add_arguments(st)
    # Listed for --help only: main() hands "bench ..." to bench() before parsing.
    sub.add_parser("bench", help="run benchmarks/ (needs PyTorch and a checkout); options go to the scripts")
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:
        # Everything after "bench" (e.g. --quick) belongs to the scripts; argparse would take it as its own.
        rest = argv[1:]
        return bench(rest[1:] if rest[:1] == ["--"] else rest)
    args = parser.parse_args(argv)
    try:
        if args.command == "info":
            return info()
        if args.command == "selftest":
            return selftest.run(args.backend, args.quick, args.k)
    except BrokenPipeError:  # output piped into e.g. `head`: stop quietly
        sys.stdout = open(os.devnull, "w")
        return 141
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
