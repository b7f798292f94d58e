"""Write docs/api.md: the reference of pyaclnn's public names, from their docstrings.

Every name of ``pyaclnn.__all__`` gets an entry: its signature (as
``inspect.signature`` gives it, annotations as written in the source) and its
NumPy-style docstring turned into Markdown; a class also gets its public
methods and properties. ``pyaclnn.constants`` is summarised by group. The type
aliases the signatures use (``ArrayIn``, ``IntOrSeq``, ...) are listed with
their definitions, read from the source. tests/test_api_docs.py fails while
the file is stale.

Usage::

    python scripts/generate_api_docs.py           # write docs/api.md
    python scripts/generate_api_docs.py --check   # exit 1 if docs/api.md is not current
"""

from __future__ import annotations

import argparse
import ast
import builtins
import importlib
import importlib.util
import inspect
import re
import sys
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "api.md"
# The checkout's pyaclnn, not an installed copy: the reference describes this tree.
sys.path.insert(0, str(ROOT))

import pyaclnn  # noqa: E402
from pyaclnn import functional as _functional  # noqa: E402

#: (section title, what it holds, names of pyaclnn.__all__ in it). Names of __all__ that no
#: section lists go to "Other names", so a new public name is never left out.
SECTIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "Operators",
        "The four aclnn operators. NumPy arrays in give NumPy arrays out; a DeviceArray in gives "
        "DeviceArrays out, with the work queued on a stream.",
        tuple(_functional.__all__),
    ),
    (
        "Backends",
        "Which implementation of the C API runs the calls: CANN on an NPU, or the NumPy emulation.",
        ("get_backend", "set_backend"),
    ),
    (
        "Devices",
        "The calling thread's current device.",
        ("Device", "device_count", "get_device", "set_device"),
    ),
    (
        "Device memory",
        "Arrays in device memory and the memory pool behind them.",
        ("DeviceArray", "to_device", "empty", "zeros", "from_torch", "memory_pool"),
    ),
    (
        "Streams and events",
        "Queues of device work, and points in them for waiting and timing.",
        ("Stream", "ExternalStream", "Event", "current_stream", "default_stream", "synchronize"),
    ),
    (
        "Graphs",
        "Calls on DeviceArrays captured once on a stream and replayed (CANN's aclmdlRI stream capture).",
        ("Graph", "graph"),
    ),
    ("Process-wide settings", "", ("set_deterministic", "finalize")),
    ("Errors", "", ("AclError", "AclnnError", "AclOutOfMemoryError", "GraphCaptureError")),
    ("Data types and constants", "", ("bfloat16", "constants")),
)

#: Classes that public calls return but that are not public names themselves, and the
#: members meant for users (the others serve the runtime).
RETURNED_CLASSES: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {
    "MemoryPool": (pyaclnn.memory_pool, ("free_all_blocks", "stats")),
}

#: Objects of other packages that pyaclnn re-exports: their own docstrings are not ours to render
#: (and change with that package's version).
FOREIGN = {
    "bfloat16": (
        "`ml_dtypes.bfloat16` itself, re-exported: the scalar type, as `numpy.float16` is to NumPy. "
        "`pyaclnn.bfloat16(1.5)` makes a value, and it is accepted wherever a dtype is "
        "(`numpy.dtype(pyaclnn.bfloat16)` is the bfloat16 dtype). ml_dtypes is imported on the "
        "first use of the attribute, not with pyaclnn: it takes most of a second, all of it in "
        "registering every dtype of ml_dtypes with NumPy, which pyaclnn cannot narrow to bfloat16 "
        "(see `pyaclnn.dtypes`)."
    ),
}

#: numpydoc sections rendered as lists of entries; the others (Notes, Examples, ...) as prose.
FIELD_SECTIONS = {
    "Parameters",
    "Other Parameters",
    "Returns",
    "Yields",
    "Raises",
    "Warns",
    "Attributes",
    "See Also",
}
_ROLE = re.compile(r":(?:func|meth|class|data|attr|mod|exc|obj):`~?([^`]+)`")
_LINE_WIDTH = 88


@dataclass
class Entry:
    """One documented object: its heading and where links to it point."""

    heading: str  # the text inside the heading's backticks, e.g. "pyaclnn.to_device"
    keys: tuple[str, ...]  # names a docstring may use for it (``to_device``, ``pyaclnn.to_device``)

    @property
    def anchor(self) -> str:
        return slug(f"`{self.heading}`")


@dataclass
class Renderer:
    """Builds the document; ``entries`` names every object that a role may link to."""

    entries: dict[str, Entry] = field(default_factory=dict)
    #: alias name -> (its definition as written, the ``#:`` comment above it)
    aliases: dict[str, tuple[str, str]] = field(default_factory=dict)

    def register(self, heading: str, *keys: str) -> None:
        entry = Entry(heading, (heading, *keys))
        for key in entry.keys:
            self.entries.setdefault(key, entry)

    # -- inline text -------------------------------------------------------------

    def link(self, target: str, owner: str | None) -> str:
        """``target`` as inline code, linked to its entry when it has one."""
        name = target.removesuffix("()")
        for key in (f"{owner}.{name}" if owner else None, name, name.removeprefix("pyaclnn.")):
            if key and key in self.entries:
                return f"[`{target}`](#{self.entries[key].anchor})"
        return f"`{target}`"

    def inline(self, text: str, owner: str | None = None) -> str:
        """reST inline markup of a docstring as Markdown; ``owner`` resolves ``:meth:`x```."""
        text = _ROLE.sub(lambda m: "\0" + self.link(m.group(1), owner) + "\0", text)
        text = re.sub(r"``(.+?)``", lambda m: "\0`" + m.group(1) + "`\0", text)
        # Outside code, '*' would start emphasis (d*H*W) and '<' an HTML tag.
        pieces = text.split("\0")
        for i in range(0, len(pieces), 2):
            pieces[i] = pieces[i].replace("*", r"\*").replace("<", "&lt;")
        return "".join(pieces)

    # -- docstrings ----------------------------------------------------------------

    def docstring(self, obj: Any, owner: str | None = None) -> str:
        """The docstring of ``obj`` as Markdown ("" when it has none)."""
        doc = inspect.getdoc(obj) or ""
        out: list[str] = []
        for title, lines in _sections(doc):
            if title is None:
                out.append(self.prose(lines, owner))
            elif title in FIELD_SECTIONS:
                out.append(f"**{title}**\n\n" + self.fields(lines, title, owner))
            else:
                out.append(f"**{title}**\n\n" + self.prose(lines, owner))
        return "\n\n".join(part for part in out if part.strip())

    def prose(self, lines: list[str], owner: str | None) -> str:
        """Paragraphs; a ``::`` literal block or a ``>>>`` example becomes a code block."""
        out: list[str] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.lstrip().startswith(">>>"):
                block = []
                while i < len(lines) and lines[i].strip():
                    block.append(lines[i])
                    i += 1
                out += ["```pycon", *textwrap.dedent("\n".join(block)).splitlines(), "```"]
                continue
            if line.rstrip().endswith("::"):
                head = line.rstrip()[:-2].rstrip()
                if head:
                    out.append(self.inline(head + ":", owner))
                i += 1
                block = []
                while i < len(lines) and (not lines[i].strip() or lines[i][:1].isspace()):
                    block.append(lines[i])
                    i += 1
                code = textwrap.dedent("\n".join(block)).strip("\n")
                out += ["", "```python", *code.splitlines(), "```", ""]
                continue
            out.append(self.inline(line, owner))
            i += 1
        return "\n".join(out).strip("\n")

    def fields(self, lines: list[str], title: str, owner: str | None) -> str:
        """The entries of a Parameters-like section as a Markdown list."""
        entries: list[tuple[str, list[str]]] = []
        for line in lines:
            if line.strip() and not line[:1].isspace():
                entries.append((line.strip(), []))
            elif entries:
                entries[-1][1].append(line.strip())
        items = []
        for head, body in entries:
            names, sep, kind = head.partition(" : ")
            if sep:
                label = ", ".join(f"`{n.strip()}`" for n in names.split(","))
                label += f" ({self.inline(kind.strip(), owner)})"
            elif title in ("Raises", "Warns", "See Also"):
                label = self.link(head, owner) if title == "See Also" else f"`{head}`"
            else:
                label = f"`{head}`"
            paragraphs = " ".join(body).split("  ")  # a blank line in the body: a new paragraph
            text = "\n\n  ".join(self.inline(p.strip(), owner) for p in paragraphs if p.strip())
            items.append(f"- {label}: {text}" if text else f"- {label}")
        return "\n".join(items)

    # -- signatures ------------------------------------------------------------------

    def signature(self, name: str, obj: Any, *, drop_first: bool = False) -> str:
        """``name(params) -> result`` in a code block, one parameter a line when it is long."""
        try:
            sig = inspect.signature(obj)
        except (TypeError, ValueError):
            return f"```python\n{name}(...)\n```"
        params = list(sig.parameters.values())[1 if drop_first else 0 :]
        parts = _parameter_texts(params)
        for p in params:
            self.note_annotation(p.annotation, obj)
        result = ""
        if sig.return_annotation is not inspect.Signature.empty:
            result = f" -> {_annotation(sig.return_annotation)}"
            self.note_annotation(sig.return_annotation, obj)
        one_line = f"{name}({', '.join(parts)}){result}"
        if len(one_line) <= _LINE_WIDTH:
            return f"```python\n{one_line}\n```"
        body = "".join(f"    {part},\n" for part in parts)
        return f"```python\n{name}(\n{body}){result}\n```"

    def note_annotation(self, annotation: Any, obj: Any) -> None:
        """Record the type aliases that ``annotation`` (source text) names, with their definitions."""
        if annotation is inspect.Parameter.empty or not isinstance(annotation, str):
            return
        module = inspect.getmodule(obj)
        if module is None:
            return
        for word in re.findall(r"\b[A-Z]\w*\b", annotation):
            if word in self.aliases or hasattr(builtins, word):
                continue
            definition = _alias_definition(module.__name__, word)
            if definition is not None:
                self.aliases[word] = definition


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


class _Text(str):
    """Source text that ``inspect`` prints as it is (a ``str`` annotation would be quoted)."""

    def __repr__(self) -> str:
        return str(self)


def _annotation(annotation: Any) -> str:
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def _default(value: Any) -> str:
    if inspect.isclass(value):  # dtype=np.float32
        return f"{value.__module__}.{value.__qualname__}"
    return repr(value)


def _parameter_texts(params: list[inspect.Parameter]) -> list[str]:
    """Each parameter as ``inspect`` prints it, with ``/`` and ``*`` where they belong."""
    parts: list[str] = []
    star_done = False
    for i, p in enumerate(params):
        if p.kind is p.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        if p.kind is p.VAR_POSITIONAL:
            star_done = True
        shown = p.replace(
            annotation=_Text(_annotation(p.annotation)) if p.annotation is not p.empty else p.empty,
            default=_Text(_default(p.default)) if p.default is not p.empty else p.empty,
        )
        parts.append(str(shown))
        last_positional_only = p.kind is p.POSITIONAL_ONLY and (
            i + 1 == len(params) or params[i + 1].kind is not p.POSITIONAL_ONLY
        )
        if last_positional_only:
            parts.append("/")
    return parts


def _sections(doc: str) -> list[tuple[str | None, list[str]]]:
    """``(title or None for the opening prose, lines)`` of a NumPy-style docstring."""
    lines = doc.splitlines()
    result: list[tuple[str | None, list[str]]] = [(None, [])]
    i = 0
    while i < len(lines):
        underline = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if lines[i].strip() and re.fullmatch(r"-{3,}", underline) and not lines[i][:1].isspace():
            result.append((lines[i].strip(), []))
            i += 2
            continue
        result[-1][1].append(lines[i])
        i += 1
    return [(title, body) for title, body in result if title is not None or any(x.strip() for x in body)]


def _module_file(module_name: str) -> Path | None:
    module = sys.modules.get(module_name) or importlib.import_module(module_name)
    source = getattr(module, "__file__", None)
    return Path(source) if source and source.endswith(".py") else None


def _alias_definition(module_name: str, name: str, depth: int = 0) -> tuple[str, str] | None:
    """``(name = ..., comment)``: the assignment as written at the top level of ``module_name``
    (or of the module it is imported from) and the ``#:`` comment above it; None for a class
    or anything else."""
    path = _module_file(module_name)
    if path is None or depth > 3:
        return None
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    lines = source.splitlines()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            comments = []
            row = node.lineno - 2
            while row >= 0 and lines[row].startswith("#:"):
                comments.insert(0, lines[row][2:].strip())
                row -= 1
            text = ast.get_source_segment(source, node) or ""
            return text, " ".join(comments)
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            base = importlib.util.resolve_name(
                "." * node.level + (node.module or ""), module_name.rpartition(".")[0]
            )
            if base.startswith("pyaclnn"):
                return _alias_definition(base, name, depth + 1)
    return None


# -- the document ---------------------------------------------------------------------


def _sections_in_use() -> list[tuple[str, str, list[str]]]:
    public = list(pyaclnn.__all__)
    listed = {name for _, _, names in SECTIONS for name in names}
    result = [(title, text, [n for n in names if n in public]) for title, text, names in SECTIONS]
    rest = [n for n in public if n not in listed]
    if rest:
        result.append(("Other names", "", rest))
    return [(title, text, names) for title, text, names in result if names]


def _public_members(cls: type) -> list[tuple[str, Any, type]]:
    """``(name, attribute, defining class)`` of the public members of ``cls`` defined in
    pyaclnn, in definition order, the class's own first; ``__enter__`` counts as public."""
    seen: set[str] = set()
    members = []
    for klass in cls.__mro__:
        if not klass.__module__.startswith("pyaclnn"):
            continue
        for name, value in vars(klass).items():
            if name in seen or (name.startswith("_") and name != "__enter__"):
                continue
            seen.add(name)
            members.append((name, value, klass))
    return members


def _constants_summary(renderer: Renderer) -> str:
    """The groups of constants.py (its ``# group`` comments), with a count and the first names."""
    path = _module_file("pyaclnn.constants")
    assert path is not None
    groups: list[tuple[str, list[str]]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# ") and not line.startswith(("# GENERATED", "# Regenerate", "# tests/")):
            groups.append((line[2:], []))
        match = re.match(r"([A-Z][A-Z0-9_]*) = ", line)
        if match and groups:
            groups[-1][1].append(match.group(1))
    rows = ["| group | names |", "|---|---|"]
    for title, names in groups:
        shown = ", ".join(f"`{n}`" for n in names[:4]) + (", ..." if len(names) > 4 else "")
        rows.append(f"| {renderer.inline(title)} | {len(names)}: {shown} |")
    return "\n".join(rows)


def _class_entry(renderer: Renderer, name: str, cls: type, only: Iterable[str] | None = None) -> list[str]:
    """A class's heading, constructor and docstring, then its members; with ``only``, the
    heading and those members alone (a class users get from a call, never construct)."""
    out = [f"### `{name}`"]
    if only is None:
        out += ["", renderer.signature(name, cls)]
        doc = renderer.docstring(cls, owner=cls.__name__)
        if doc:
            out += ["", doc]
    keep = set(only) if only is not None else None
    attributes, inherited = [], {}
    for member, value, owner in _public_members(cls):
        if keep is not None and member not in keep:
            continue
        if owner is not cls and owner.__name__ in pyaclnn.__all__:
            inherited.setdefault(owner.__name__, []).append(member)
            continue
        qualified = f"{cls.__name__}.{member}"
        if type(value).__name__ == "member_descriptor":  # a __slots__ field: a plain attribute
            attributes.append(member)
            continue
        if isinstance(value, property):
            kind, target = "property", value.fget
            annotation = inspect.signature(target).return_annotation if target else inspect.Signature.empty
            shown = f" → `{_annotation(annotation)}`" if annotation is not inspect.Signature.empty else ""
            out += ["", f"#### `{qualified}`", "", f"*property*{shown}"]
        elif member == "__enter__":
            if not inspect.getdoc(value):
                continue  # the class's docstring says what its ``with`` block does
            target = value
            out += ["", f"#### `with {cls.__name__}(...)`"]
        else:
            function = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
            if not callable(function):
                continue
            target = function
            kind = {classmethod: "*classmethod*", staticmethod: "*staticmethod*"}.get(type(value), "")
            bound = getattr(cls, member)
            out += ["", f"#### `{qualified}`", "", renderer.signature(qualified, bound, drop_first=not kind)]
            if kind:
                out += ["", kind]
        text = renderer.docstring(target, owner=cls.__name__) if target else ""
        if text:
            out += ["", text]
    if attributes:
        out += ["", "Attributes: " + ", ".join(f"`{a}`" for a in attributes) + "."]
    for base, names in inherited.items():
        links = ", ".join(
            renderer.link(f"{base}.{n}" if n != "__enter__" else f"with {base}(...)", None) for n in names
        )
        out += ["", f"Also those of {renderer.link(base, None)}: {links}."]
    return out


def _register(renderer: Renderer) -> None:
    """Every entry first, so that a docstring may link to one further down."""
    for _, _, names in _sections_in_use():
        for name in names:
            renderer.register(f"pyaclnn.{name}", name)
            obj = getattr(pyaclnn, name)
            if inspect.isclass(obj) and name not in FOREIGN:
                for member, _, owner in _public_members(obj):
                    if owner is obj and member != "__enter__":
                        renderer.register(f"{name}.{member}")
                    elif member == "__enter__":
                        renderer.register(f"with {name}(...)", f"{name}.__enter__")
    for name, (_, members) in RETURNED_CLASSES.items():
        renderer.register(name)
        for member in members:
            renderer.register(f"{name}.{member}")


def render() -> str:
    """The text of docs/api.md for the package as it is now."""
    renderer = Renderer()
    _register(renderer)
    sections = _sections_in_use()
    body: list[str] = []
    for title, text, names in sections:
        body += ["", f"## {title}"]
        if text:
            body += ["", text]
        for name in names:
            obj = getattr(pyaclnn, name)
            qualified = f"pyaclnn.{name}"
            if name in FOREIGN:
                body += ["", f"### `{qualified}`", "", FOREIGN[name]]
            elif inspect.ismodule(obj):
                body += [
                    "",
                    f"### `{qualified}`",
                    "",
                    renderer.docstring(obj),
                    "",
                    _constants_summary(renderer),
                ]
            elif inspect.isclass(obj):
                body += [""] + _class_entry(renderer, qualified, obj)
            else:
                body += ["", f"### `{qualified}`", "", renderer.signature(qualified, obj)]
                doc = renderer.docstring(obj)
                if doc:
                    body += ["", doc]
    if RETURNED_CLASSES:
        body += ["", "## Classes the calls return", ""]
        body += ["Not public names: reached through the call that returns them."]
        for name, (source, members) in RETURNED_CLASSES.items():
            cls = source.__globals__[name]
            heading, *rest = _class_entry(renderer, name, cls, only=members)
            body += ["", heading, "", f"Returned by {renderer.link(source.__name__, None)}.", *rest]
    if renderer.aliases:
        body += ["", "## Types in the signatures", ""]
        body += ["Aliases the annotations above use, as the source defines them."]
        for alias, (definition, comment) in sorted(renderer.aliases.items()):
            body += ["", f"### `{alias}`", "", f"```python\n{definition}\n```"]
            if comment:
                body += ["", renderer.inline(comment)]
    contents = [f"- [{title}](#{slug(title)})" for title, _, _ in sections]
    if RETURNED_CLASSES:
        contents.append(f"- [Classes the calls return](#{slug('Classes the calls return')})")
    if renderer.aliases:
        contents.append(f"- [Types in the signatures](#{slug('Types in the signatures')})")
    head = [
        "<!-- GENERATED by scripts/generate_api_docs.py from pyaclnn's docstrings: do not edit.",
        "     Regenerate with `python scripts/generate_api_docs.py`; tests/test_api_docs.py fails",
        "     while this file is stale. -->",
        "# pyaclnn API reference",
        "",
        "Every public name of `pyaclnn` (its `__all__`), with its signature and docstring. The",
        "[guide](README.md) explains how the parts work together; the low-level API (`pyaclnn.acl`,",
        "`pyaclnn.aclnn`: one function per C function) is described in [low-level.md](low-level.md).",
        "",
        *contents,
    ]
    return "\n".join(head + body).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write docs/api.md, or with ``--check`` compare it; the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/api.md is not current")
    args = parser.parse_args(argv)
    text = render()
    current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
    if args.check:
        if current != text:
            print(f"{OUTPUT} is not current: run python scripts/{Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    if current != text:
        OUTPUT.write_text(text, encoding="utf-8")
        print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
