"""Running the selftest: one case (:func:`run_case`), the matrix (:func:`run`), and the
command line of ``python -m pyaclnn selftest`` (:func:`add_arguments`, :func:`main`)."""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any, TextIO

from .. import backends as _backends
from .compare import compare
from .goldens import compare_golden
from .matrix import cases
from .operators import Case
from .report import CaseResult, finish

__all__ = ["run_case", "run", "main", "add_arguments"]

_DESCRIPTION = "python -m pyaclnn selftest: the operators on a backend against the NumPy reference"


def run_case(case: Case, backend: str) -> CaseResult:
    """Run one case; an exception is a failure with its text."""
    start = time.perf_counter()
    try:
        inputs = case.inputs()
        outputs = case.call(backend, inputs)
        cmp = compare(outputs, case.reference(inputs), exact=case.exact)
        golden_cmp = compare_golden(case, inputs, outputs)
    except Exception as exc:  # report and go on with the other cases
        detail = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return CaseResult(case, False, None, detail, time.perf_counter() - start)
    passed = cmp.within(case.tolerance) and golden_cmp.within(case.tolerance)
    return CaseResult(case, passed, cmp, seconds=time.perf_counter() - start, golden=golden_cmp)


def _short_reason(reason: str) -> str:
    """The selection reason in one short line; ``info`` gives the whole library search."""
    lines = reason.splitlines()
    if len(lines) <= 1:
        return reason
    return lines[0].split(". ")[0].rstrip(".:") + "; `python -m pyaclnn info` shows where it looked"


def _select(quick: bool, pattern: str | None) -> list[Case]:
    return [c for c in cases() if (c.quick or not quick) and (pattern is None or pattern in c.name)]


def run(
    backend: str | None = None,
    quick: bool = False,
    pattern: str | None = None,
    out: TextIO | None = None,
    as_json: bool = False,
) -> int:
    """Run the matrix on ``backend`` (None: the active one) and report; 0 if every case passes.

    Parameters
    ----------
    backend : {"numpy", "npu"}, optional
        The backend under test.
    quick : bool
        Only the cases marked quick (one or two per operator).
    pattern : str, optional
        Only the cases whose name contains it.
    out : file, optional
        Where to print (sys.stdout by default).
    as_json : bool
        Print one JSON object (backend, counts, every case with its errors and
        tolerance) instead of the table.

    Returns
    -------
    int
        0 when all selected cases pass, 1 otherwise (also when none is
        selected, or the backend cannot be used).
    """
    out = out or sys.stdout
    report: dict[str, Any] = {
        "backend": backend,
        "reason": f"--backend {backend}" if backend else None,
        "usable": True,
        "problem": None,
    }
    try:
        name = backend or _backends.active_name()
    except Exception as exc:  # PYACLNN_BACKEND=bogus
        report.update(usable=False, problem=f"no backend can be selected: {exc}")
        return finish(report, [], out, as_json)
    report.update(backend=name, reason=report["reason"] or _backends.selection_reason())
    try:
        _backends.get(name)
    except Exception as exc:  # e.g. npu asked for where CANN cannot load
        report.update(usable=False, problem=f"backend {name!r} is not usable: {exc}")
        return finish(report, [], out, as_json)
    selected = _select(quick, pattern)
    if not as_json:
        print(
            f"pyaclnn selftest on backend {name!r} ({_short_reason(report['reason'])}): "
            f"{len(selected)} case(s)",
            file=out,
        )
    if not selected:
        report["problem"] = "no case matches"
    return finish(report, [run_case(c, name) for c in selected], out, as_json)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line of ``python -m pyaclnn selftest``."""
    parser = argparse.ArgumentParser(prog="python -m pyaclnn selftest", description=_DESCRIPTION)
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run(args.backend, args.quick, args.k, as_json=args.json)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=_backends.BACKEND_NAMES, help="default: the active backend")
    parser.add_argument("--quick", action="store_true", help="one or two cases per operator")
    parser.add_argument("-k", metavar="TEXT", help="only the cases whose name contains TEXT")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print JSON: every case with its errors and tolerance, and the counts",
    )
