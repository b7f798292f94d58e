"""The repository cites only documents it holds.

Every ``docs/<file>`` named anywhere in the tree must exist, and no file may
point at notes kept outside the repository (they are not shipped, so a reader
of the sdist or of a clone could not follow the reference). The rules of the
operators are in docs/operator-semantics.md, the design in docs/architecture.md
and docs/reliability.md.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

#: Directories that are not the project's files: version control, build products, caches.
SKIPPED_DIRS = {
    ".git",
    "build",
    "dist",
    ".emulator-build",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
}
#: Documents outside the repository that files used to cite (spelled in two parts, so that
#: this file does not cite them itself).
OUTSIDE = tuple(
    a + b
    for a, b in (
        ("op-semantics", ".md"),
        ("DESIGN", ".md"),
        ("spec-async", ".md"),
        ("acl-abi", ".md"),
        ("research_cann_runtime", ".md"),
        ("shared/", "reference"),
    )
)
# "docs/<path>" where a path starts (not "ops-nn/docs/...").
_DOCS_PATH = re.compile(r"(?<![\w./-])docs/([\w.-]+(?:/[\w.-]+)*)")


def project_files(root: Path = ROOT) -> list[Path]:
    """Every text file of the tree under ``root``, build products and caches left out."""
    files = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = [
            d
            for d in subdirs
            if d not in SKIPPED_DIRS
            and not d.endswith(".egg-info")
            and not (Path(directory) / d / "pyvenv.cfg").exists()  # a virtual environment: not ours
        ]
        files.extend(Path(directory) / name for name in names)
    return sorted(files)


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):  # binary data (the golden .npz), a dangling link
        return None


def cited_docs(text: str, docs: Path = DOCS) -> list[str]:
    """The paths under this repository's docs/ that ``text`` names.

    Only paths whose first part is a file or folder name of docs/, or a single file
    name: ``docs/zh/...`` of an upstream repository (CANN's documentation, cited with
    its repository) is not ours.
    """
    found = []
    for match in _DOCS_PATH.finditer(text):
        first, inside, _ = match.group(1).partition("/")
        if inside and not (docs / first).exists():
            continue  # another repository's docs/ tree
        found.append("docs/" + match.group(1).rstrip("./"))  # a sentence's full stop is not part of it
    return found


def problems_of(path: Path, root: Path = ROOT) -> list[str]:
    """What ``path`` cites that the repository does not hold, as ``file:line: ...`` lines."""
    text = _text(path)
    if text is None:
        return []
    where = path.relative_to(root).as_posix()
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        problems += [
            f"{where}:{number}: cites {name}, a document outside the repository"
            for name in OUTSIDE
            if name in line
        ]
        problems += [
            f"{where}:{number}: cites {cited}, which does not exist"
            for cited in cited_docs(line, root / "docs")
            if not (root / cited).exists()
        ]
    return problems


def test_a_virtual_environment_inside_the_checkout_is_not_the_projects(tmp_path):
    # `python -m venv venv` in the checkout, then the README's test command: the packages
    # installed there cite their own docs/, which must not fail this project's tests.
    docs = "docs" + "/"  # split, so that this file cites nothing itself
    (tmp_path / "docs").mkdir()
    (tmp_path / "notes.md").write_text(f"see {docs}missing.md\n", encoding="utf-8")
    site = tmp_path / "venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n", encoding="utf-8")
    (site / "other.py").write_text(f"# see {docs}conf.py\n", encoding="utf-8")
    files = project_files(tmp_path)
    assert [f.relative_to(tmp_path).as_posix() for f in files] == ["notes.md"]
    assert [p for f in files for p in problems_of(f, tmp_path)] == [
        f"notes.md:1: cites {docs}missing.md, which does not exist"
    ]


def test_every_cited_document_is_in_the_repository():
    problems = [p for path in project_files() for p in problems_of(path)]
    assert problems == [], "\n".join(problems)


def test_the_operator_rules_have_their_document():
    text = (DOCS / "operator-semantics.md").read_text(encoding="utf-8")
    for op in (
        "MaxPool3dWithArgmax",
        "MaxPool3dWithArgmaxBackward",
        "GridSampler3D",
        "GridSampler3DBackward",
    ):
        assert f"### {op}: check order" in text, op
        assert f"### {op}: differences from PyTorch" in text, op


def test_the_checker_sees_a_missing_document_and_an_outside_one(tmp_path):
    docs = "docs" + "/"  # in two parts: this file cites neither document
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "here.md").write_text("# here\n")
    (tmp_path / "a.py").write_text(
        f"# {docs}here.md, section 2\n"  # fine
        f"# see {docs}gone.md.\n"  # missing
        f"# hicann/runtime `{docs}zh/api_ref/x.md`\n"  # another repository's docs: not ours
        f"# as in {OUTSIDE[0]} section 5\n"  # outside
    )
    assert problems_of(tmp_path / "a.py", tmp_path) == [
        f"a.py:2: cites {docs}gone.md, which does not exist",
        f"a.py:4: cites {OUTSIDE[0]}, a document outside the repository",
    ]
