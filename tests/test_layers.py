"""docs/architecture.md's layer rule, read off the imports: each layer calls only the one below.

functional -> runtime -> low-level API (acl, aclnn) -> backends -> kernels; the
modules of shared facts (constants, dtypes, errors, the declarations) may be
imported from anywhere. The exceptions are listed with their reasons.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pyaclnn

PACKAGE = Path(pyaclnn.__file__).parent

FUNCTIONAL, RUNTIME, LOW_LEVEL, BACKEND, KERNELS = range(5)
LAYER_NAMES = ("functional", "runtime", "low-level API", "backend", "kernels")
# Facts every layer reads (no calls into another layer).
SHARED = {"pyaclnn.constants", "pyaclnn.dtypes", "pyaclnn.errors", "pyaclnn._decl"}
# The entry points use every layer on purpose: the package's public names, the CLI, the self-test.
ENTRY_POINTS = {"pyaclnn", "pyaclnn.__main__", "pyaclnn.selftest"}
# (importer, imported) pairs allowed outside the rule, and why.
EXCEPTIONS = {
    # Backend selection belongs to the runtime (docs/architecture.md) and lives in backends/__init__.py
    # beside the backends it chooses from; the runtime uses only that, never a backend module.
    ("runtime", "pyaclnn.backends"),
    # The rules of each op's plan are one module that the functional layer (through
    # _operators), phase 1 of the numpy backend and the kernels all use (docs/architecture.md).
    ("pyaclnn._operators", "pyaclnn.kernels"),
}


def layer_of(module: str) -> int:
    if module in ("pyaclnn.functional", "pyaclnn._docstrings"):
        return FUNCTIONAL
    if module in ("pyaclnn.aclnn", "pyaclnn._status") or module.startswith("pyaclnn.acl"):
        return LOW_LEVEL
    if module.startswith("pyaclnn.backends"):
        return BACKEND
    if module.startswith("pyaclnn.kernels"):
        return KERNELS
    return RUNTIME  # runtime.py and the modules it gathers (_array, _stream, _launch, ...)


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
            if node.module is None:
                found.update(f"{target}.{alias.name}" for alias in node.names)
            else:
                found.add(target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m == "pyaclnn" or m.startswith("pyaclnn.")}


def is_module(name: str) -> bool:
    relative = Path(*name.split(".")[1:])
    return (PACKAGE / relative).with_suffix(".py").exists() or (PACKAGE / relative / "__init__.py").exists()


def allowed(importer: str, imported: str) -> bool:
    if not is_module(imported):  # `from . import __version__` and other names, not modules
        return True
    if imported in SHARED or importer in ENTRY_POINTS:
        return True
    source, target = layer_of(importer), layer_of(imported)
    if target in (source, source + 1):
        return True
    for who, what in EXCEPTIONS:
        if (who == importer or (who == "runtime" and source == RUNTIME)) and imported == what:
            return True
    return False


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_each_module_imports_only_its_layer_and_the_one_below(path):
    importer = module_name(path)
    wrong = sorted(
        f"{imported} ({LAYER_NAMES[layer_of(imported)]})"
        for imported in imports_of(path)
        if not allowed(importer, imported)
    )
    assert wrong == [], f"{importer} ({LAYER_NAMES[layer_of(importer)]}) imports {wrong}"


def test_the_functional_layer_imports_neither_kernels_nor_the_low_level_api():
    imported = imports_of(PACKAGE / "functional.py")
    assert not {m for m in imported if m.startswith(("pyaclnn.kernels", "pyaclnn.acl"))}
    assert "pyaclnn.runtime" in imported


def test_the_rule_sees_an_import_that_skips_a_layer():
    # The checker itself: functional importing a kernel module is reported.
    assert not allowed("pyaclnn.functional", "pyaclnn.kernels.checks")
    assert not allowed("pyaclnn._launch", "pyaclnn.backends.numpy")
    assert allowed("pyaclnn._launch", "pyaclnn.acl")
