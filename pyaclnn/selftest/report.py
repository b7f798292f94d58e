"""What the selftest prints: each case's result, the pass/fail table, and the JSON report."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from .compare import Comparison
from .goldens import GOLDEN_FILE
from .operators import Case

__all__ = ["CaseResult", "format_table", "finish"]


@dataclass
class CaseResult:
    """The outcome of one case: against the reference kernels and against the golden outputs."""

    case: Case
    passed: bool
    comparison: Comparison | None  # against the reference kernels
    error: str = ""  # the exception, when the case raised
    seconds: float = 0.0
    golden: Comparison | None = None  # against PyTorch's golden outputs

    def to_json(self) -> dict[str, Any]:
        """JSON-ready: every number finite or null."""
        c = self.case
        return {
            "name": c.name,
            "operator": c.kind,
            "dtype": c.dtype.name,
            "exact": c.exact,
            "tolerance": c.tolerance,
            "passed": self.passed,
            "result": _verdict(self),
            "exception": self.error or None,
            "seconds": round(self.seconds, 6),
            "reference": _comparison_json(self.comparison),
            "golden": _comparison_json(self.golden),
        }


def _comparison_json(cmp: Comparison | None) -> dict[str, Any] | None:
    if cmp is None:
        return None
    return {
        "error": cmp.error if math.isfinite(cmp.error) else None,
        "index_mismatches": cmp.index_mismatches,
        "exact_mismatches": cmp.exact_mismatches,
        "notes": list(cmp.notes),
    }


def _format_error(value: float) -> str:
    return "0" if value == 0 else f"{value:.2e}"


def _verdict(r: CaseResult) -> str:
    return "ERROR" if r.comparison is None else "PASS" if r.passed else "FAIL"


def _details(r: CaseResult) -> list[str]:
    """Lines explaining a failure: the exception, or what differed from which expected values."""
    if r.comparison is None:
        return [f"  {r.case.name}: {r.error}"]
    lines = []
    for label, cmp in (("reference", r.comparison), ("torch golden", r.golden)):
        if cmp is None:
            continue
        if cmp.exact_mismatches:
            lines.append(f"  {r.case.name}: vs {label}: {cmp.exact_mismatches} value(s) differ")
        if cmp.index_mismatches:
            lines.append(f"  {r.case.name}: vs {label}: {cmp.index_mismatches} index mismatch(es)")
        lines.extend(f"  {r.case.name}: vs {label}: {note}" for note in cmp.notes)
    return lines


def format_table(results: Sequence[CaseResult]) -> str:
    """The pass/fail table, one row per case, then what went wrong."""
    rows = [("case", "dtype", "err vs ref", "err vs torch", "tolerance", "index mism.", "result")]
    for r in results:
        c, cmp, gold = r.case, r.comparison, r.golden
        tol = "exact" if c.exact else f"{c.tolerance:g}"
        if cmp is None:
            rows.append((c.name, str(c.dtype), "-", "-", tol, "-", "ERROR"))
            continue
        mism = "-" if cmp.index_mismatches is None else str(cmp.index_mismatches)
        gold_error = "-" if gold is None else _format_error(gold.error)
        rows.append((c.name, str(c.dtype), _format_error(cmp.error), gold_error, tol, mism, _verdict(r)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines + [line for r in results for line in _details(r)])


def finish(report: dict[str, Any], results: list[CaseResult], out: TextIO, as_json: bool) -> int:
    """Print the results (JSON, or the table and summary); the exit status."""
    failed = sum(not r.passed for r in results)
    seconds = sum(r.seconds for r in results)
    report.update(
        passed=len(results) - failed,
        failed=failed,
        seconds=round(seconds, 6),
        golden_file=GOLDEN_FILE,
        cases=[r.to_json() for r in results],
    )
    if as_json:
        json.dump(report, out, indent=2, allow_nan=False)
        out.write("\n")
    elif report["problem"] is not None:
        print(f"pyaclnn selftest: {report['problem']}", file=out)
    else:
        print(format_table(results), file=out)
        print(f"{report['passed']} passed, {failed} failed in {seconds:.2f} s", file=out)
    return 1 if failed or report["problem"] is not None else 0
