"""Reading CANN's operator headers: where they are, and the two-phase operators they declare.

An aclnn operator ``X`` is a pair of declarations::

    aclnnStatus aclnnXGetWorkspaceSize(<parameters>, uint64_t *workspaceSize, aclOpExecutor **executor);
    aclnnStatus aclnnX(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);

(phase 2 also comes with ``const`` on its last two parameters). The headers around
them hold long comment blocks, export macros (``ACLNN_API``,
``__attribute__((visibility("default")))``), ``extern "C"`` guards, includes and
declarations over several lines. The reading is in two steps: a light
preprocessing (comments, preprocessor lines, attributes and macros out) finds
each ``aclnnStatus aclnn...(...);`` declaration, and pycparser, the C parser cffi
itself uses, parses the parameters of every pair into their C types. A type the
parser does not know is declared to it as an opaque struct, so its operator
still parses, and is refused later by the type table (:mod:`._types`) with the
type's name.

Nothing here imports the rest of pyaclnn: the catalogue is facts read from
files, which the generic call layer and the command line use.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .._optable import PHASE1_SUFFIX, TwoPhaseNames, snake_case

#: Where a CANN home keeps its operator headers, in the order looked at: the toolkit's own
#: folder (CANN <= 8.3), then ``include/aclnnop`` (a link to it there; the folder itself on
#: CANN >= 8.5).
HEADER_FOLDERS = ("opp/built-in/op_impl/ai_core/tbe/op_api/include/aclnnop", "include/aclnnop")
#: Where a custom operator package (a vendor folder) keeps its generated headers.
VENDOR_HEADERS = "op_api/include"
#: The ``source`` of an operator of CANN's own operator packages (a custom one's is its folder).
BUILT_IN = "built-in"

# The types that close every phase 1 and make every phase 2 (names vary: ``workspace_size``).
_PHASE1_TAIL = ("uint64_t*", "aclOpExecutor**")
_PHASE2 = ("void*", "uint64_t", "aclOpExecutor*", "aclrtStream")

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_PREPROCESSOR = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.MULTILINE)
_ATTRIBUTE = re.compile(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)|__declspec\s*\([^()]*\)")
_MACROS = re.compile(r"\b(?:ACLNN_API|ACL_FUNC_VISIBILITY|extern\s+\"C\")\b")
_DECLARATION = re.compile(r"\baclnnStatus\s+(aclnn\w+)\s*\(([^;{}()]*)\)\s*;")
_NAME_ONLY = re.compile(r"\baclnnStatus\s+(aclnn\w+)" + PHASE1_SUFFIX + r"\s*\(")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")

#: What pycparser is told before a declaration: the ACL types, the fixed-width integers and
#: ``bool``, as C declares them (their sizes do not matter here, only that they are types).
_KNOWN_TYPES = {
    "aclTensor": "struct aclTensor",
    "aclScalar": "struct aclScalar",
    "aclIntArray": "struct aclIntArray",
    "aclFloatArray": "struct aclFloatArray",
    "aclBoolArray": "struct aclBoolArray",
    "aclTensorList": "struct aclTensorList",
    "aclScalarList": "struct aclScalarList",
    "aclOpExecutor": "struct aclOpExecutor",
    "aclrtStream": "void *",
    "aclDataType": "int",
    "aclFormat": "int",
    "aclnnStatus": "int",
    "bool": "_Bool",
    "size_t": "unsigned long",
    **{f"{u}int{n}_t": "long" for u in ("", "u") for n in (8, 16, 32, 64)},
}
_C_WORDS = frozenset(
    "const volatile void char short int long float double signed unsigned struct enum union _Bool".split()
)


def python_operator_name(name: str) -> str:
    """``Add`` -> ``add``: the operator table's rule (:func:`pyaclnn._optable.snake_case`), so an
    operator read off a header has the Python name the functional layer gives it."""
    return snake_case(name)


class HeaderError(ValueError):
    """A folder that holds no operator headers, or a declaration the reader cannot take."""


@dataclass(frozen=True)
class CParam:
    """One parameter of a C declaration: its type as declared (``const`` kept, spacing normalised:
    ``"const aclTensor*"``) and its name."""

    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type} {self.name}"


@dataclass(frozen=True)
class Declaration(TwoPhaseNames):
    """One two-phase operator as a header declares it.

    ``params`` are phase 1's parameters without ``workspaceSize`` and ``executor``;
    ``refused`` says why pyaclnn cannot call the operator (None when it can).
    """

    name: str  # "Add": the C name without "aclnn"
    header: Path
    params: tuple[CParam, ...]
    phase2_params: tuple[CParam, ...]
    refused: str | None = None
    source: str = BUILT_IN  # or the vendor folder of a custom operator package
    library: Path | None = None  # a custom package's library, which alone exports its phases
    written: tuple[str, ...] | None = None  # the C names of the tensors it writes, when known

    @property
    def phase1_prototype(self) -> str:
        """Phase 1 as a C prototype, every parameter as declared (for cffi and the docs)."""
        tail = (CParam("uint64_t*", "workspaceSize"), CParam("aclOpExecutor**", "executor"))
        params = ", ".join(str(p) for p in (*self.params, *tail))
        return f"aclnnStatus {self.phase1_api}({params});"

    @property
    def phase2_prototype(self) -> str:
        """Phase 2 as a C prototype, as declared."""
        return f"aclnnStatus {self.phase2_api}({', '.join(str(p) for p in self.phase2_params)});"


def _clean(text: str) -> str:
    """Header text without comments, preprocessor lines, attributes and export macros."""
    text = _COMMENT.sub(" ", text)
    text = _PREPROCESSOR.sub(" ", text)
    text = _ATTRIBUTE.sub(" ", text)
    return _MACROS.sub(" ", text)


def header_folder(path: str | Path) -> Path:
    """The folder of operator headers that ``path`` names: an ``aclnnop`` folder (or any folder
    holding ``.h`` files), else a CANN home (:data:`HEADER_FOLDERS` looked at in order) or a
    custom package's vendor folder (its ``op_api/include``).

    Raises
    ------
    HeaderError
        When neither holds a header; the message lists the places looked at.
    """
    root = Path(path).expanduser()
    tried = [root, *(root / sub for sub in (*HEADER_FOLDERS, VENDOR_HEADERS))]
    candidates = [root] if root.name == "aclnnop" else [*tried[1:], root]
    for folder in candidates:
        if folder.is_dir() and next(folder.rglob("*.h"), None) is not None:
            return folder
    looked = ", ".join(str(t) for t in tried)
    raise HeaderError(f"no operator headers (*.h) under {root}: looked in {looked}")


def header_files(folder: Path) -> list[Path]:
    """Every ``.h`` under ``folder``, the folder's own first, then each subfolder's, by name."""
    return sorted(folder.rglob("*.h"), key=lambda p: (len(p.relative_to(folder).parts), str(p)))


@functools.lru_cache(maxsize=4096)
def _cleaned(path: Path) -> str:
    return _clean(path.read_text(encoding="utf-8", errors="replace"))


def scan(files: Iterable[Path]) -> dict[str, Path]:
    """``{"Add": header, ...}``: the operators whose phase 1 each file declares, the first file
    that declares one winning (the reading of a first use: names only, nothing parsed)."""
    found: dict[str, Path] = {}
    for path in files:
        for match in _NAME_ONLY.finditer(_cleaned(path)):
            found.setdefault(match[1][len("aclnn") :], path)
    return found


def declarations_in(path: Path, text: str | None = None) -> Iterator[Declaration]:
    """The operators declared in header ``path`` (or in C ``text`` standing for it), in order.

    A phase 1 without its phase 2 in the same text is a refused declaration.
    """
    cleaned = _cleaned(path) if text is None else _clean(text)
    raw = {m[1]: " ".join(m[2].split()) for m in _DECLARATION.finditer(cleaned)}
    for api, params in raw.items():
        if not api.endswith(PHASE1_SUFFIX):
            continue
        name = api[len("aclnn") : -len(PHASE1_SUFFIX)]
        phase2 = raw.get(f"aclnn{name}")
        yield _declaration(name, path, params, phase2)


def _declaration(name: str, path: Path, phase1: str, phase2: str | None) -> Declaration:
    try:
        params = parse_parameters(phase1)
    except HeaderError as exc:
        return Declaration(name, path, (), (), f"cannot read aclnn{name}{PHASE1_SUFFIX}: {exc}")
    if phase2 is None:
        return Declaration(name, path, params, (), f"no phase 2 aclnn{name}(...) declared beside phase 1")
    try:
        phase2_params = parse_parameters(phase2)
    except HeaderError as exc:
        return Declaration(name, path, params, (), f"cannot read aclnn{name}: {exc}")
    if tuple(p.type for p in params[-2:]) != _PHASE1_TAIL:
        reason = "phase 1 does not end with uint64_t *workspaceSize, aclOpExecutor **executor"
        return Declaration(name, path, params, phase2_params, reason)
    if tuple(p.type.removeprefix("const ") for p in phase2_params) != _PHASE2:
        shown = ", ".join(str(p) for p in phase2_params)
        reason = f"phase 2 takes ({shown}), not (void *, uint64_t, aclOpExecutor *, aclrtStream)"
        return Declaration(name, path, params[:-2], phase2_params, reason)
    return Declaration(name, path, params[:-2], phase2_params)


_parser_lock = threading.Lock()


@functools.cache
def _parser() -> object:
    from pycparser import c_parser  # on first use: importing pyaclnn reads no header

    return c_parser.CParser()


def parse_parameters(text: str) -> tuple[CParam, ...]:
    """The parameters of a C parameter list (the text between the parentheses), parsed by pycparser."""
    from pycparser import c_ast

    unknown = sorted(
        {w for w in _IDENTIFIER.findall(text) if w not in _KNOWN_TYPES and w not in _C_WORDS} - _names(text)
    )
    preamble = "".join(f"typedef {c} {t};\n" for t, c in _KNOWN_TYPES.items() if t in text)
    preamble += "".join(f"typedef struct {t} {t};\n" for t in unknown)
    source = f"{preamble}int f({text});"
    try:
        with _parser_lock:  # one parser object, which is not reentrant
            tree = _parser().parse(source)  # type: ignore[attr-defined]
    except Exception as exc:  # pycparser's ParseError, or an unknown construct
        raise HeaderError(str(exc).replace("<unknown>", "").strip(": ")) from None
    function = tree.ext[-1].type
    params = function.args.params if function.args is not None else []
    result = []
    for param in params:
        if isinstance(param, c_ast.EllipsisParam) or param.name is None:
            if isinstance(param, c_ast.Typename) and _type_text(param.type) == "void":
                continue  # f(void)
            raise HeaderError(f"a parameter without a name in ({text})")
        result.append(CParam(_type_text(param.type), param.name))
    return tuple(result)


def _names(text: str) -> set[str]:
    """The parameter names of a parameter list: the last identifier of each parameter."""
    names = set()
    for part in text.split(","):
        words = _IDENTIFIER.findall(part.split("[")[0])
        if words:
            names.add(words[-1])
    return names


def _type_text(node: object) -> str:
    """A pycparser type node as the catalogue writes it: ``const aclTensor*``, ``aclOpExecutor**``,
    ``const aclTensor* const*`` (a const pointer), ``int64_t[]`` (an array)."""
    from pycparser import c_ast

    if isinstance(node, c_ast.PtrDecl):
        inner = _type_text(node.type)
        return inner + "*" + (" const" if "const" in node.quals else "")
    if isinstance(node, c_ast.ArrayDecl):
        return _type_text(node.type) + "[]"
    if isinstance(node, c_ast.TypeDecl):
        quals = " ".join(node.quals)
        inner = node.type
        if isinstance(inner, c_ast.IdentifierType):
            base = " ".join(inner.names)
        elif isinstance(inner, (c_ast.Struct, c_ast.Enum, c_ast.Union)):
            base = f"{type(inner).__name__.lower()} {inner.name}"
        else:
            base = type(inner).__name__
        return f"{quals} {base}" if quals else base
    if isinstance(node, c_ast.FuncDecl):
        return "function pointer"
    return type(node).__name__


class Catalogue:
    """The operators of one source of declarations: a folder of headers, or C texts by file name
    (the numpy backend's references), read lazily.

    :meth:`find` reads what one operator needs (its likely header first, named by CANN's
    rule ``aclnn_<python name>.h``; every header's names otherwise); :meth:`declarations`
    reads everything. Safe to use from several threads.
    """

    def __init__(self, source: Path | dict[str, str]) -> None:
        self.source = source
        self._lock = threading.Lock()
        self._texts: dict[Path, str] = {}
        if isinstance(source, Path):
            self.folder: Path | None = source
            self._files: list[Path] | None = None
        else:
            self.folder = None
            self._texts = {Path(name): text for name, text in source.items()}
            self._files = list(self._texts)
        self._index: dict[str, Path] | None = None  # C name -> header
        self._parsed: dict[Path, dict[str, Declaration]] = {}

    def files(self) -> list[Path]:
        with self._lock:
            if self._files is None:
                assert self.folder is not None
                self._files = header_files(self.folder)
            return self._files

    def relative(self, header: Path) -> str:
        """A header's path as the catalogue shows it: relative to the folder (``level2/aclnn_x.h``)."""
        if self.folder is not None:
            try:
                return str(header.relative_to(self.folder))
            except ValueError:
                pass
        return str(header)

    def _declarations_of(self, header: Path) -> dict[str, Declaration]:
        with self._lock:
            found = self._parsed.get(header)
        if found is None:
            found = {d.name: d for d in declarations_in(header, self._texts.get(header))}
            with self._lock:
                self._parsed[header] = found
        return found

    def index(self) -> dict[str, Path]:
        """Every operator's C name (``Add``) -> the first header declaring it."""
        if self._index is None:
            files = self.files()
            if self._texts:
                index: dict[str, Path] = {}
                for header in files:
                    for match in _NAME_ONLY.finditer(_clean(self._texts[header])):
                        index.setdefault(match[1][len("aclnn") :], header)
            else:
                index = scan(files)
            self._index = index
        return self._index

    def find(self, python_name: str, header: str | None = None) -> Declaration | None:
        """The declaration of the operator called ``python_name`` in Python (:func:`python_name`),
        or None. ``header`` (a file name) is where to look first; by default the file CANN
        would name after the operator, ``aclnn_<python name>.h``. Only if it does not declare
        the operator are the names of every header read."""
        if self._index is None:
            guess = self.folder / (header or f"aclnn_{python_name}.h") if self.folder else None
            if guess is not None and guess.is_file():
                for declaration in self._declarations_of(guess).values():
                    if python_operator_name(declaration.name) == python_name:
                        return declaration
        for c_name, path in self.index().items():
            if python_operator_name(c_name) == python_name:
                return self._declarations_of(path).get(c_name)
        return None

    def declarations(self) -> list[Declaration]:
        """Every operator, in the order of the headers (each from the first header declaring it)."""
        result = []
        for c_name, header in self.index().items():
            declaration = self._declarations_of(header).get(c_name)
            if declaration is not None:
                result.append(declaration)
        return result
