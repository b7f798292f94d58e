"""docs/architecture.md's layer rule, read off the imports: each layer calls only the one below.

The layers, the modules outside them (shared facts, entry points) and the
exceptions are read from the tables of the document's "Layers" section, so the
rule has one home: change the document and this test follows.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import pyaclnn

PACKAGE = Path(pyaclnn.__file__).parent
DOCUMENT = PACKAGE.parent / "docs" / "architecture.md"


def _tables(text: str) -> dict[str, list[list[str]]]:
    """The tables of the "Layers" section by the title of their first column, rows as cells."""
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    tables: dict[str, list[list[str]]] = {}
    rows: list[list[str]] | None = None
    for line in section.splitlines():
        if not line.startswith("|"):
            rows = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if rows is None:
            rows = tables.setdefault(cells[0], [])
        elif not set(cells[0]) <= {"-"}:
            rows.append(cells)
    return tables


def _names(cell: str) -> list[str]:
    """The module names of a cell (in backticks), as ``pyaclnn.x``."""
    return [f"pyaclnn.{m}" if m != "__init__" else "pyaclnn" for m in re.findall(r"`([\w.]+)`", cell)]


_TABLES = _tables(DOCUMENT.read_text(encoding="utf-8"))
#: The layers from the top, each with its modules.
LAYERS: list[tuple[str, list[str]]] = [(row[0], _names(row[1])) for row in _TABLES["layer"]]
LAYER_NAMES = tuple(name for name, _ in LAYERS)
_OUTSIDE = {row[0]: _names(row[1]) for row in _TABLES["kind"]}
SHARED = set(_OUTSIDE["shared facts"])
ENTRY_POINTS = set(_OUTSIDE["entry points"])
#: (importer, imported): an importer is a module or a whole layer by name.
EXCEPTIONS = [
    (row[0] if row[0] in LAYER_NAMES else _names(row[0])[0], _names(row[1])[0]) for row in _TABLES["importer"]
]


def covers(name: str, module: str) -> bool:
    """Whether module ``name`` of the document covers ``module`` (itself or its subpackage;
    the package itself, ``__init__``, covers only itself)."""
    return module == name or (name != "pyaclnn" and module.startswith(name + "."))


def layer_of(module: str) -> int | None:
    """The index of the layer listing ``module``; None for shared facts and entry points."""
    for index, (_, modules) in enumerate(LAYERS):
        if any(covers(name, module) for name in modules):
            return index
    return None


def listed(module: str) -> bool:
    return layer_of(module) is not None or any(covers(n, module) for n in SHARED | ENTRY_POINTS)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """The pyaclnn modules ``path`` imports (``from . import x`` counts as ``package.x``)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from .kernels import checks` imports the module pyaclnn.kernels.checks
            submodules = {f"{target}.{alias.name}" for alias in node.names} - {f"{target}.*"}
            modules = {m for m in submodules if is_module(m)}
            found.update(modules if modules else {target})
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m == "pyaclnn" or m.startswith("pyaclnn.")}


def is_module(name: str) -> bool:
    relative = Path(*name.split(".")[1:])
    return (PACKAGE / relative).with_suffix(".py").exists() or (PACKAGE / relative / "__init__.py").exists()


def allowed(importer: str, imported: str) -> bool:
    if not is_module(imported):  # `from . import __version__` and other names, not modules
        return True
    if any(covers(n, imported) for n in SHARED) or any(covers(n, importer) for n in ENTRY_POINTS):
        return True
    source, target = layer_of(importer), layer_of(imported)
    assert source is not None and target is not None, (importer, imported)
    if target in (source, source + 1):
        return True
    for who, what in EXCEPTIONS:
        by = who == LAYER_NAMES[source] or covers(who, importer)
        if by and imported == what:  # exactly that module (`backends` is backends/__init__.py)
            return True
    return False


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_each_module_imports_only_its_layer_and_the_one_below(path):
    importer = module_name(path)
    assert listed(importer), f"{importer} is in no table of {DOCUMENT.name}'s Layers section: place it there"
    wrong = sorted(imported for imported in imports_of(path) if not allowed(importer, imported))
    assert wrong == [], f"{importer} imports {wrong}, against {DOCUMENT.name}"


def test_the_document_lists_five_layers_and_only_existing_modules():
    assert LAYER_NAMES == ("functional", "runtime", "low-level API", "backend", "kernels")
    named = [m for _, modules in LAYERS for m in modules] + sorted(SHARED | ENTRY_POINTS)
    assert [m for m in named if not is_module(m)] == []
    assert EXCEPTIONS == [
        ("runtime", "pyaclnn.backends"),
        ("pyaclnn.ops", "pyaclnn.kernels.references"),
        ("pyaclnn._operators", "pyaclnn.kernels.checks"),
    ]


def test_the_functional_layer_imports_neither_kernels_nor_the_low_level_api():
    imported = imports_of(PACKAGE / "functional.py")
    assert not {m for m in imported if m.startswith(("pyaclnn.kernels", "pyaclnn.acl"))}
    assert "pyaclnn.runtime" in imported


def test_the_rule_sees_an_import_that_skips_a_layer():
    # The checker itself: functional importing a kernel module is reported.
    assert not allowed("pyaclnn.functional", "pyaclnn.kernels.checks")
    assert not allowed("pyaclnn._launch", "pyaclnn.backends.numpy")
    assert allowed("pyaclnn._launch", "pyaclnn.acl")
