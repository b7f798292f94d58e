"""No import cycle in pyaclnn, read off the imports of every module.

A cycle makes the order of initialisation an accident (a module half-run when
another reads it) and ties two modules into one: neither can be understood,
tested or replaced alone. The graph has an edge for every import, at the top
of a module or inside a function (a lazy import is still a dependency); an
import under ``if TYPE_CHECKING:`` is for type checkers only and does not count.
An import of ``pkg.mod`` is an edge to ``pkg.mod`` alone: that Python runs the
package ``pkg`` first is how packages work, not a dependency of the importer.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pyaclnn

PACKAGE = Path(pyaclnn.__file__).parent


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING`` (the condition of a block for type checkers)."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of ``tree``, at any depth, except those under ``if TYPE_CHECKING:``
    (its ``else:`` branch runs, and counts)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the package under ``root`` it imports."""
    paths = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
                continue
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from . import x` imports the module package.x when there is one, else a name of package
            submodules = {f"{target}.{alias.name}" for alias in node.names} & paths.keys()
            found.update(submodules or {target})
        graph[name] = {m for m in found if m in paths and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: each strongly connected component of more than one module
    (Tarjan's algorithm, iterative), as one cycle through it from its smallest name."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[set[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    return sorted(_cycle_through(graph, component) for component in components)


def _cycle_through(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle from the smallest module of ``component`` back to it (breadth first)."""
    first = min(component)
    paths = {first: [first]}
    frontier = [first]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & component):
                if child == first:
                    return paths[node] + [first]
                if child not in paths:
                    paths[child] = paths[node] + [child]
                    following.append(child)
        frontier = following
    raise AssertionError(f"{sorted(component)} is no strongly connected component")


def test_pyaclnn_has_no_import_cycle():
    found = cycles(import_graph(PACKAGE))
    assert found == [], "import cycles: " + "; ".join(" -> ".join(c) for c in found)


# -- the checker itself --------------------------------------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def test_the_checker_finds_a_cycle_through_an_import_inside_a_function(tmp_path):
    root = _package(
        tmp_path,
        {
            "__init__.py": "from . import a\n",
            "a.py": "from . import b\n",
            "b.py": "from .sub import c\n",
            "sub/__init__.py": "",
            "sub/c.py": "def f():\n    from .. import a\n    return a\n",
        },
    )
    graph = import_graph(root)
    assert graph["pkg.sub.c"] == {"pkg.a"} and graph["pkg.b"] == {"pkg.sub.c"}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]]


def test_the_checker_ignores_imports_for_type_checkers_and_parent_packages(tmp_path):
    root = _package(
        tmp_path,
        {
            "__init__.py": "from .a import A\n",
            "a.py": """\
                import typing
                from typing import TYPE_CHECKING
                from . import b
                if TYPE_CHECKING:
                    from .b import B
                class A: ...
                """,
            "b.py": """\
                import typing
                if typing.TYPE_CHECKING:
                    from .a import A
                else:
                    from . import c
                """,
            "c.py": "import pkg.b\n",
        },
    )
    graph = import_graph(root)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.c"}
    # c imports pkg.b, which runs pkg first: no edge to pkg, so pkg -> a -> b -> c is no cycle,
    # but the else branch of the TYPE_CHECKING block counts: b -> c -> b is one.
    assert cycles(graph) == [["pkg.b", "pkg.c", "pkg.b"]]


def test_the_checker_reads_names_of_a_package_as_the_package(tmp_path):
    root = _package(
        tmp_path,
        {
            "__init__.py": "from . import x\nVERSION = 1\n",
            "x.py": "def f():\n    from . import VERSION\n    return VERSION\n",
        },
    )
    assert cycles(import_graph(root)) == [["pkg", "pkg.x", "pkg"]]
