"""Write the table of what the CPU fallback runs into docs/ops.md, from the references' registry.

The section between ``<!-- GENERATED: cpu fallback table -->`` and ``<!-- END GENERATED: cpu
fallback table -->`` lists every operator pyaclnn has a NumPy reference for: its C name, its family
(the module of ``pyaclnn/kernels/references/``) and the dtypes its tensors take. Nothing else of
docs/ops.md is touched. tests/test_generated.py fails while the section is stale.

Usage::

    python scripts/generate_fallback_table.py           # rewrite the section
    python scripts/generate_fallback_table.py --check   # exit 1 if it is not current
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "ops.md"
BEGIN = "<!-- GENERATED: cpu fallback table -->"
END = "<!-- END GENERATED: cpu fallback table -->"
# The checkout's pyaclnn, not an installed copy: the table describes this tree.
sys.path.insert(0, str(ROOT))

from pyaclnn.kernels import references  # noqa: E402

#: The families in the order the table shows them.
FAMILIES = ("elementwise", "unary", "comparison", "linalg", "reductions", "normalization", "movement")
#: dtypes in the order the table lists them.
DTYPE_ORDER = (
    "float32",
    "float16",
    "bfloat16",
    "float64",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
)


def table() -> str:
    """The Markdown table: one row per registered reference of pyaclnn's, by family."""
    rows = []
    for name in references.names():
        reference = references.get(name)
        if reference is None or not reference.declaration:
            continue  # a user's reference
        family = reference.module
        order = FAMILIES.index(family) if family in FAMILIES else len(FAMILIES)
        dtypes = ", ".join(d for d in DTYPE_ORDER if d in reference.dtypes)
        rows.append((order, family, name, dtypes))
    rows.sort(key=lambda row: (row[0], row[1]))  # stable: each family in registration order
    lines = [
        f"{len(rows)} operators. Generated from the registry by `python scripts/generate_fallback_table.py`.",
        "",
        "| operator | family | dtypes |",
        "|---|---|---|",
        *(f"| `aclnn{name}` | {family} | {dtypes} |" for _, family, name, dtypes in rows),
    ]
    return "\n".join(lines) + "\n"


def render(current: str) -> str:
    """``current`` (docs/ops.md's text) with the marked section replaced by :func:`table`."""
    start, end = current.find(BEGIN), current.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{OUTPUT} has no section marked {BEGIN} ... {END}")
    return current[: start + len(BEGIN)] + "\n" + table() + current[end:]


def main(argv: list[str] | None = None) -> int:
    """Rewrite the section, or with ``--check`` compare it; the exit status."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the section is not current")
    args = parser.parse_args(argv)
    current = OUTPUT.read_text(encoding="utf-8")
    text = render(current)
    if args.check:
        if current != text:
            print(
                f"{OUTPUT}'s CPU fallback table is stale: run python scripts/{Path(__file__).name}",
                file=sys.stderr,
            )
            return 1
        return 0
    if current != text:
        OUTPUT.write_text(text, encoding="utf-8")
        print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
