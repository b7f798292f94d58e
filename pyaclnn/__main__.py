"""Command line: ``python -m pyaclnn [--version] info | ops | selftest | bench`` (or ``pyaclnn``).

info      what pyaclnn runs on: version, active backend and why, the CANN
          libraries found (or why the npu backend is unusable and where it
          looked), SoC, devices, memory; ``--json`` for a machine-readable report.
          Exits 1 when the requested backend (PYACLNN_BACKEND) cannot be used.
ops       the aclnn operators ``pyaclnn.ops`` can call, with their Python signatures, and
          the refused ones with the reason; ``PATTERN`` keeps the names that
          contain it (or match it, with ``*``); ``--headers DIR`` reads a folder of
          operator headers or a CANN home instead of the active backend's (the npu
          backend's CANN home, or the numpy backend's NumPy references);
          ``--json`` for a machine-readable catalogue
selftest  the four operators on a backend against the NumPy reference kernels
          (and, on numpy, against golden PyTorch outputs); ``--json`` gives every
          case with its error and tolerance; exits 1 when a case fails
          (see pyaclnn.selftest for cases and tolerances)
bench     runs benchmarks/bench_kernels.py, bench_overhead.py and bench_pipeline.py of a
          source checkout (they need PyTorch); ``--json DIR`` writes
          DIR/<benchmark>.json, ``--strict`` exits 1 when a target is missed;
          other options go to the scripts
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from . import __version__, _env, _repeat
from . import backends as _backends

_GIB = 1 << 30
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _print_json(payload: dict[str, Any], out: TextIO) -> None:
    # allow_nan=False: a non-finite number must have been mapped to null already (strict JSON for CI tools).
    json.dump(payload, out, indent=2, allow_nan=False)
    out.write("\n")


# -- info -------------------------------------------------------------------------


def _cann_version(home: Path) -> str | None:
    """CANN's version from the version files of an install, else from the resolved directory name."""
    for name in (
        "version.cfg",
        "version.info",
        "runtime/version.info",
        "compiler/version.info",
        "share/info/runtime/version.info",
    ):
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


def _memory(name: str, device: int = 0) -> dict[str, Any]:
    """``{"free_bytes", "total_bytes"}`` of ``device`` on backend ``name``, or ``{"error": ...}``."""
    from . import acl, runtime

    try:
        with runtime.Device(device, backend=name):  # aclInit + aclrtSetDevice, freed at exit
            free, total = acl.rt.get_mem_info(backend=name)
    except Exception as exc:  # info reports, it does not fail
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"free_bytes": int(free), "total_bytes": int(total)}


def _devices(name: str, count: int | None) -> list[dict[str, Any]]:
    """Every device of backend ``name``: its id and memory."""
    return [{"device": d, "memory": _memory(name, d)} for d in range(count or 0)]


def _format_memory(memory: dict[str, Any]) -> str:
    if "error" in memory:
        return f"unavailable ({memory['error']})"
    return f"{memory['free_bytes'] / _GIB:.1f} GiB free of {memory['total_bytes'] / _GIB:.1f} GiB"


def _npu_info() -> dict[str, Any]:
    """The npu backend as :func:`pyaclnn.backends.npu.probe` sees it, with the library search."""
    from .backends.npu import discover, probe

    result = probe()
    home = Path(result.home) if result.home else None
    return {
        "usable": result.ok,
        "reason": result.reason,
        "home": str(home) if home else None,
        "cann_version": _cann_version(home) if home else None,
        "libraries": list(result.libraries),
        "missing_functions": list(result.missing_functions),
        "search": discover().report(),
        "device_count": result.device_count,
        "soc": result.soc_name,
        "memory": _memory("npu") if result.ok else None,
        "devices": _devices("npu", result.device_count) if result.ok else [],
    }


def _numpy_info() -> dict[str, Any]:
    from . import acl, runtime
    from .kernels import _accel

    count = runtime.device_count("numpy")
    return {
        "soc": acl.rt.get_soc_name(backend="numpy"),
        "memory": _memory("numpy"),
        "memory_from_environment": bool(_env.integer("PYACLNN_NUMPY_DEVICE_MEMORY", 0, minimum=1)),
        "device_count": count,
        "devices": _devices("numpy", count),
        "compiled_kernels": _accel.accel_status(),
    }


def collect_info() -> dict[str, Any]:
    """What ``info`` reports, as JSON-ready data.

    ``usable`` is False, with ``problem`` saying why, when the backend asked
    for by PYACLNN_BACKEND cannot be used: an unknown name, or npu without a
    loadable CANN and a device.
    """
    report: dict[str, Any] = {
        "pyaclnn": __version__,
        "path": str(Path(__file__).resolve().parent),
        "python": platform.python_version(),
        "numpy_version": _numpy_version(),
        "machine": platform.machine(),
        "system": platform.system(),
        "requested_backend": _env.text("PYACLNN_BACKEND").lower() or "auto",
        "active_backend": None,
        "selection_reason": None,
    }
    npu = _npu_info()
    problem = None
    try:
        report["active_backend"] = _backends.active_name()
        report["selection_reason"] = _backends.selection_reason()
    except Exception as exc:  # e.g. PYACLNN_BACKEND=bogus
        problem = f"the backend cannot be selected: {type(exc).__name__}: {exc}"
    else:
        if report["active_backend"] == "npu" and not npu["usable"]:
            problem = "npu was requested but is not usable: every operator call will raise"
    report.update(usable=problem is None, problem=problem, backends={"npu": npu, "numpy": _numpy_info()})
    report["compiled_calls"] = _repeat.status(load=True)
    return report


def _numpy_version() -> str:
    import numpy as np

    return str(np.__version__)


def _short(text: str) -> str:
    """First line of a multi-line reason, with a pointer to the rest."""
    lines = text.splitlines() or [""]
    return lines[0] + (" (more below)" if len(lines) > 1 else "")


def format_info(report: dict[str, Any]) -> str:
    """The human-readable form of :func:`collect_info`'s report."""
    lines = [
        f"pyaclnn {report['pyaclnn']} ({report['path']})",
        f"python {report['python']}, numpy {report['numpy_version']}, {report['machine']} {report['system']}",
    ]
    active = report["active_backend"]
    if active is None:
        lines.append(f"active backend: none: {report['problem']}")
    elif not report["usable"]:
        lines.append(
            f"active backend: {active} ({report['selection_reason']}) is NOT usable: "
            "every operator call will raise (see below)"
        )
    else:
        lines.append(f"active backend: {active} ({_short(report['selection_reason'])})")
    lines += [
        "",
        "npu backend (CANN through cffi):",
        *_format_npu(report["backends"]["npu"]),
        "",
        "numpy backend (host emulation of the same C API, Atlas A2/A3 rules):",
    ]
    numpy = report["backends"]["numpy"]
    lines.append(f"  SoC: {numpy['soc']}")
    source = " (PYACLNN_NUMPY_DEVICE_MEMORY)" if numpy["memory_from_environment"] else ""
    lines += [
        f"  device {d['device']} emulated device memory: {_format_memory(d['memory'])}{source}"
        for d in numpy["devices"]
    ]
    lines.append("  compiled kernels: " + _format_accel(numpy["compiled_kernels"]))
    calls = report["compiled_calls"]
    how = "compiled" if calls["active"] else f"Python path ({calls['reason']})"
    lines += ["", f"repeated calls of pyaclnn.ops: {how}"]
    return "\n".join(lines)


def _format_accel(status: dict[str, Any]) -> str:
    kernels = ", ".join(f"{op} {how}" for op, how in status.get("kernels", {}).items())
    if status.get("active"):
        return f"active ({kernels})"
    return f"off: {status.get('reason', 'unknown')} ({kernels or 'NumPy kernels'})"


def _format_npu(npu: dict[str, Any]) -> list[str]:
    lines = ["  usable" if npu["usable"] else "  NOT usable: " + npu["reason"].replace("\n", "\n    ")]
    if npu["home"]:
        lines.append(f"  CANN home: {npu['home']}")
        lines.append(f"  CANN version: {npu['cann_version'] or 'unknown (no version file found)'}")
        lines += [f"  library: {lib}" for lib in npu["libraries"]]
        if npu["missing_functions"]:
            lines.append(f"  functions not exported by any library: {', '.join(npu['missing_functions'])}")
    elif "were not found" not in npu["reason"]:  # that reason already lists the search
        lines.append("  search:\n" + npu["search"])
    if npu["device_count"] is not None:
        lines.append(f"  devices: {npu['device_count']}")
    if npu["soc"]:
        lines.append(f"  SoC: {npu['soc']}")
    lines += [f"  device {d['device']} memory: {_format_memory(d['memory'])}" for d in npu["devices"]]
    return lines


def info(as_json: bool = False, out: TextIO | None = None) -> int:
    """Print what pyaclnn runs on; never raises for a missing or broken CANN.

    Returns
    -------
    int
        0, or 1 when the requested backend cannot be used (see :func:`collect_info`).
    """
    out = out or sys.stdout
    report = collect_info()
    if as_json:
        _print_json(report, out)
    else:
        print(format_info(report), file=out)
    return EXIT_OK if report["usable"] else EXIT_FAILED


# -- bench ------------------------------------------------------------------------

BENCHMARKS = ("bench_kernels.py", "bench_overhead.py", "bench_pipeline.py")


def _benchmark_places() -> list[Path]:
    """Where the benchmark scripts may be: next to the package (a checkout), then the working directory."""
    places = [Path(__file__).resolve().parent.parent / "benchmarks"]
    try:
        places.append(Path.cwd() / "benchmarks")
    except OSError:  # the working directory was removed: only the checkout's place is left
        pass
    return places


def _benchmarks_dir() -> Path | None:
    return next((place for place in _benchmark_places() if place.is_dir()), None)


def _scripts_elsewhere() -> str:
    """Where the benchmark scripts are when they are not here, naming the places tried."""
    places = [str(p) for p in _benchmark_places()]
    tried = (
        f"neither {places[0]} nor {places[1]} exists" if len(places) == 2 else f"{places[0]} does not exist"
    )
    return (
        "the benchmark scripts are in benchmarks/ of the pyaclnn source tree, "
        f"not in the installed package ({tried})"
    )


def _have_torch() -> bool:
    return importlib.util.find_spec("torch") is not None


def _bench_parser() -> argparse.ArgumentParser:
    # allow_abbrev=False: an abbreviated script option (e.g. --js) must reach the scripts untouched.
    # add_help=False: -h/--help is handled by main() (bench_help), since a script option may follow "--".
    parser = argparse.ArgumentParser(
        prog="python -m pyaclnn bench",
        usage="%(prog)s [-h] [--json DIR] [--strict] [--] [OPTIONS OF THE SCRIPTS]",
        description=f"Run {', '.join(BENCHMARKS[:-1])} and {BENCHMARKS[-1]} of a source checkout, "
        "one process each; they compare against PyTorch CPU, which they need.",
        add_help=False,
        allow_abbrev=False,
    )
    parser.add_argument("-h", "--help", action="store_true", help="show this help message and exit")
    parser.add_argument("--json", metavar="DIR", type=Path, help="write DIR/<benchmark>.json, one per script")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a benchmark misses its target")
    return parser


def bench_help(out: TextIO | None = None) -> int:
    """Print the help of ``python -m pyaclnn bench``; needs neither PyTorch nor the scripts.

    Returns
    -------
    int
        0.
    """
    parser = _bench_parser()
    directory = _benchmarks_dir()
    where = f"The scripts: {directory}." if directory else f"Needs a source checkout: {_scripts_elsewhere()}."
    parser.epilog = (
        "Other options (e.g. --quick) go to every script, and so does --help after -- "
        f"(python -m pyaclnn bench -- --help shows the scripts' options). {where}"
    )
    parser.print_help(out or sys.stdout)
    return EXIT_OK


def _script_args(script: str, rest: Sequence[str], json_dir: Path | None, strict: bool) -> list[str]:
    """Options for one script: ours translated (one JSON file per script), the others as given."""
    args = list(rest)
    if strict:
        args.append("--strict")
    if json_dir is not None:
        args += ["--json", str(json_dir / f"{Path(script).stem}.json")]
    return args


def bench(extra: Sequence[str] = (), directory: Path | None = None) -> int:
    """Run the benchmark scripts, one subprocess each, in ``directory`` (default: the checkout's benchmarks/).

    Parameters
    ----------
    extra : sequence of str
        ``--json DIR`` (one ``DIR/<script>.json`` per script), ``--strict``
        (a missed target is a failure), and options for the scripts,
        ``-h``/``--help`` included (the command line's own help is
        :func:`bench_help`).
    directory : Path, optional
        Where the scripts are.

    Returns
    -------
    int
        0 when all ran and succeeded; 2 when torch, the scripts' directory
        (outside a source checkout) or a script is missing;
        else the first failing script's exit status (1 for a missed target
        with ``--strict``, or for a JSON file a script did not write).
    """
    options, rest = _bench_parser().parse_known_args(list(extra))
    if options.help:  # only here when given after "--": the scripts' help
        rest.append("--help")
    # The scripts first: without a checkout, installing torch would not help.
    directory = directory or _benchmarks_dir()
    if directory is None:
        print(
            f"bench: needs a source checkout: {_scripts_elsewhere()}; run it from a checkout", file=sys.stderr
        )
        return EXIT_USAGE
    if not _have_torch():
        print(
            "bench: the benchmarks compare against PyTorch CPU, which is not installed "
            '(pip install ".[test,oracle]" in a checkout, not a plain pip install torch)',
            file=sys.stderr,
        )
        return EXIT_USAGE
    if options.json is not None:
        options.json.mkdir(parents=True, exist_ok=True)
    status = EXIT_OK
    for script in BENCHMARKS:
        status = status or _run_benchmark(directory / script, rest, options.json, options.strict)
    return status


def _run_benchmark(path: Path, rest: Sequence[str], json_dir: Path | None, strict: bool) -> int:
    """Exit status of one benchmark script (2 when it is missing)."""
    if not path.is_file():
        print(f"bench: {path} is missing, skipped", file=sys.stderr)
        return EXIT_USAGE
    print(f"== {path}", flush=True)
    code = subprocess.call([sys.executable, str(path), *_script_args(path.name, rest, json_dir, strict)])
    if code:
        print(f"bench: {path.name} exited with {code}", file=sys.stderr)
        return code
    if json_dir is not None and not (json_dir / f"{path.stem}.json").is_file():
        print(f"bench: {path.name} wrote no {json_dir / (path.stem + '.json')}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


# -- entry point ---------------------------------------------------------------------


def _plain(text: str) -> str:
    """``text`` without reStructuredText's inline-literal backticks: --help is read as plain text."""
    return text.replace("``", "")


def _command_description(command: str) -> str:
    """The module docstring's paragraph on ``command`` (its line and the indented ones after it),
    in plain text, for the command's --help."""
    text: list[str] = []
    for line in __doc__.splitlines():
        if text and not line.startswith(" "):
            break
        if text or line.startswith(f"{command} "):
            text.append(line.removeprefix(command))
    paragraph = _plain(" ".join(" ".join(text).split()))
    return paragraph[:1].upper() + paragraph[1:]


def _parser() -> argparse.ArgumentParser:
    from . import selftest

    parser = argparse.ArgumentParser(prog="python -m pyaclnn", description=_plain(__doc__.splitlines()[0]))
    parser.add_argument("--version", action="version", version=f"pyaclnn {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{info,ops,selftest,bench}")
    info_parser = sub.add_parser(
        "info", help="version, backend, CANN libraries, devices", description=_command_description("info")
    )
    info_parser.add_argument("--json", action="store_true", help="print the report as JSON")
    ops_parser = sub.add_parser(
        "ops", help="the aclnn operators pyaclnn.ops can call", description=_command_description("ops")
    )
    ops_parser.add_argument("pattern", nargs="?", default=None, help="keep operators whose name holds it")
    ops_parser.add_argument("--headers", metavar="DIR", help="a folder of operator headers, or a CANN home")
    ops_parser.add_argument("--json", action="store_true", help="print the catalogue as JSON")
    st = sub.add_parser(
        "selftest",
        help="check the operators on a backend against the reference kernels",
        description=_command_description("selftest"),
    )
    selftest.add_arguments(st)
    # Listed for --help only: main() hands "bench ..." to bench() before parsing.
    sub.add_parser(
        "bench",
        help="run benchmarks/ (needs PyTorch and a checkout): [--json DIR] [--strict], "
        "other options go to the scripts",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pyaclnn``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:
        # Everything after "bench" (e.g. --quick) belongs to the scripts; argparse would take it as its own.
        rest = argv[1:]
        if rest[:1] == ["--"]:
            return bench(rest[1:])
        if "-h" in rest or "--help" in rest:  # the help of bench itself, even without a checkout or torch
            return bench_help()
        return bench(rest)
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "info":
            return info(as_json=args.json)
        if args.command == "ops":
            from .ops import _listing

            return _listing.run(args.pattern, args.headers, args.json, sys.stdout)
        if args.command == "selftest":
            from . import selftest

            return selftest.run(args.backend, args.quick, args.k, as_json=args.json)
    except BrokenPipeError:  # output piped into e.g. `head`: stop quietly
        sys.stdout = open(os.devnull, "w")
        return 141
    parser.print_help()
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
