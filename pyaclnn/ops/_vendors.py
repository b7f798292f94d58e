"""Custom operator packages (vendor folders): where CANN finds them, their prototypes, and the
layered catalogue that puts them in front of the built-in operators.

An installed package is a vendor folder: generated headers in ``op_api/include/``
(``aclnn_<op>.h``), the library exporting both phases in ``op_api/lib/libcust_opapi.so``,
the operator prototypes in ``op_proto/inc/*.h`` (``REG_OP(MyOp).INPUT(x, ...).OUTPUT(y, ...)``).
CANN's order, as torch_npu's op-plugin and CANN's samples look them up: each folder of
``ASCEND_CUSTOM_OPP_PATH`` (colon-separated) in order; then the vendors named by the
``load_priority=`` line of ``<opp>/vendors/config.ini`` (``<opp>`` is ``ASCEND_OPP_PATH``,
else the CANN home's ``opp``), in order; then, behind them, the folders given to
``pyaclnn.ops.load``; then the built-in operators. The first place that declares an
operator wins.

Roles: a generated header does not say which tensors are written (a single output is
renamed ``out``, several keep their names, all may be declared ``const``). The header
lists the prototype's inputs (``INPUT``, ``OPTIONAL_INPUT``, ``DYNAMIC_INPUT``), then its
attributes, then its outputs (``OUTPUT``, ``DYNAMIC_OUTPUT``), a tensor that is both an
input and an output once, as ``<name>Ref``: matched by position, the prototype says which
parameters are outputs. ``outputs=`` of ``pyaclnn.ops.load`` names them where neither tells.
"""

from __future__ import annotations

import configparser
import dataclasses
import os
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from ._headers import BUILT_IN, VENDOR_HEADERS, Catalogue, Declaration, HeaderError

LIBRARY = "op_api/lib/libcust_opapi.so"
PROTOTYPES = "op_proto/inc"
_REG_OP = re.compile(r"REG_OP\s*\(\s*(\w+)\s*\)(.*?)OP_END_FACTORY_REG\s*\(\s*\1\s*\)", re.DOTALL)
_ENTRY = re.compile(
    r"\.\s*(INPUT|OPTIONAL_INPUT|DYNAMIC_INPUT|OUTPUT|DYNAMIC_OUTPUT|REQUIRED_ATTR|ATTR)\s*\(\s*(\w+)"
)
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_INPUTS = ("INPUT", "OPTIONAL_INPUT", "DYNAMIC_INPUT")
_OUTPUTS = ("OUTPUT", "DYNAMIC_OUTPUT")


class VendorError(ValueError):
    """A folder given as a custom operator package that is not one."""


@dataclasses.dataclass(frozen=True)
class Vendor:
    """One custom operator package, as found or loaded."""

    folder: Path
    found_by: str  # "ASCEND_CUSTOM_OPP_PATH", "config.ini" or "pyaclnn.ops.load"
    outputs: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    @property
    def headers(self) -> Path:
        return self.folder / VENDOR_HEADERS

    @property
    def library(self) -> Path:
        return self.folder / LIBRARY


def check_vendor(folder: Path) -> None:
    """VendorError naming ``folder`` and what is missing, unless it has headers or a library."""
    headers = folder / VENDOR_HEADERS
    has_headers = headers.is_dir() and next(headers.rglob("*.h"), None) is not None
    if not has_headers and not (folder / LIBRARY).is_file():
        raise VendorError(
            f"{folder} is not a custom operator package: it has no headers under {VENDOR_HEADERS}/ "
            f"and no {LIBRARY}"
        )


def found_vendors(environ: Mapping[str, str], home: Path | None) -> list[Vendor]:
    """The vendor folders CANN would use, in its order (see the module docstring); folders that
    do not exist are left out."""
    found: list[Vendor] = []
    for entry in environ.get("ASCEND_CUSTOM_OPP_PATH", "").split(":"):
        if entry.strip():
            found.append(Vendor(Path(entry.strip()).expanduser(), "ASCEND_CUSTOM_OPP_PATH"))
    opp_path = environ.get("ASCEND_OPP_PATH")
    opp = Path(opp_path).expanduser() if opp_path else (home / "opp" if home is not None else None)
    if opp is not None:
        for name in load_priority(opp / "vendors" / "config.ini"):
            found.append(Vendor(opp / "vendors" / name, "config.ini"))
    unique: dict[Path, Vendor] = {}
    for vendor in found:
        if vendor.folder.is_dir():
            unique.setdefault(vendor.folder.resolve(), vendor)
    return list(unique.values())


def load_priority(config: Path) -> list[str]:
    """The vendors of ``config``'s ``load_priority=`` line, in order (none when it is missing)."""
    try:
        text = config.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    parser = configparser.ConfigParser()
    try:
        parser.read_string(text if text.lstrip().startswith("[") else "[vendors]\n" + text)
    except configparser.Error:
        return []
    for section in parser.sections():
        value = parser.get(section, "load_priority", fallback=None)
        if value is not None:
            return [v.strip() for v in value.split(",") if v.strip()]
    return []


def prototypes(folder: Path) -> dict[str, list[tuple[str, str]]]:
    """``{OpType: [(entry, name), ...]}`` of the ``REG_OP`` blocks under ``op_proto/inc``."""
    found: dict[str, list[tuple[str, str]]] = {}
    root = folder / PROTOTYPES
    if not root.is_dir():
        return found
    for path in sorted(root.rglob("*.h")):
        text = _COMMENT.sub(" ", path.read_text(encoding="utf-8", errors="replace"))
        for match in _REG_OP.finditer(text):
            found.setdefault(match[1], [(m[1], m[2]) for m in _ENTRY.finditer(match[2])])
    return found


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def written_by_prototype(
    declaration: Declaration, entries: Sequence[tuple[str, str]]
) -> tuple[str, ...] | None:
    """The C names of the parameters the prototype ``entries`` makes outputs, matched by position;
    None when the header does not list what the prototype says (then the name rule applies)."""
    inputs = [name for kind, name in entries if kind in _INPUTS]
    outputs = [name for kind, name in entries if kind in _OUTPUTS]
    attributes = [name for kind, name in entries if kind not in _INPUTS + _OUTPUTS]
    both = set(inputs) & set(outputs)
    expected_outputs = [n for n in outputs if n not in both]
    layout = [("output" if n in both else "input") for n in inputs]
    layout += ["attribute"] * len(attributes) + ["output"] * len(expected_outputs)
    params = declaration.params
    if len(params) != len(layout):
        return None
    written = [p.name for p, role in zip(params, layout) if role == "output"]
    # the outputs' names, as the generator writes them, must agree: a mismatch means another layout
    names = ["out"] if len(expected_outputs) == 1 else [_camel(n) for n in expected_outputs]
    tail = [p.name for p, role in zip(params, layout) if role == "output"][len(both) :]
    if [n.removesuffix("Optional") for n in tail] != [n.removesuffix("Optional") for n in names]:
        return None
    return tuple(written)


class Layered:
    """The catalogue of a backend: custom packages in front, the built-in operators behind; the
    first that declares an operator wins. The interface of :class:`~._headers.Catalogue`, with
    declarations that carry their source, library and written tensors."""

    def __init__(self, vendors: Sequence[Vendor], builtin: Catalogue) -> None:
        self.builtin = builtin
        self.folder = builtin.folder
        self._lock = threading.Lock()
        self._vendors: list[tuple[Vendor, Catalogue | None, dict[str, list[tuple[str, str]]]]] = []
        for vendor in vendors:
            self._vendors.append(self._read(vendor))

    @staticmethod
    def _read(vendor: Vendor) -> tuple[Vendor, Catalogue | None, dict[str, list[tuple[str, str]]]]:
        headers = vendor.headers
        catalogue = Catalogue(headers) if headers.is_dir() else None
        return vendor, catalogue, prototypes(vendor.folder)

    def vendors(self) -> list[Vendor]:
        return [v for v, _, _ in self._vendors]

    def add(self, vendor: Vendor) -> list[str]:
        """Put ``vendor`` behind the packages there and ahead of the built-ins; the C names
        (``aclnnMyOp``) of the operators it declares. Nothing when it is there already."""
        with self._lock:
            if any(v.folder.resolve() == vendor.folder.resolve() for v, _, _ in self._vendors):
                return []
            entry = self._read(vendor)
            self._vendors.append(entry)
        catalogue = entry[1]
        return [f"aclnn{name}" for name in catalogue.index()] if catalogue is not None else []

    def _complete(
        self,
        declaration: Declaration,
        entry: tuple[Vendor, Catalogue | None, dict[str, list[tuple[str, str]]]],
    ) -> Declaration:
        vendor, _, protos = entry
        written = None
        named = vendor.outputs.get(declaration.phase2_api) or vendor.outputs.get(declaration.name)
        if named is not None:
            written = tuple(named)
        elif declaration.name in protos:
            written = written_by_prototype(declaration, protos[declaration.name])
        return dataclasses.replace(
            declaration, source=str(vendor.folder), library=vendor.library, written=written
        )

    def relative(self, header: Path) -> str:
        for vendor, catalogue, _ in self._vendors:
            if catalogue is not None and header.is_relative_to(vendor.headers):
                return catalogue.relative(header)
        return self.builtin.relative(header)

    def find(self, python_name: str, header: str | None = None) -> Declaration | None:
        for entry in list(self._vendors):
            catalogue = entry[1]
            if catalogue is None:
                continue
            found = catalogue.find(python_name, header)
            if found is not None:
                return self._complete(found, entry)
        return self.builtin.find(python_name, header)

    def index(self) -> dict[str, Path]:
        merged: dict[str, Path] = {}
        for _, catalogue, _ in list(self._vendors):
            if catalogue is not None:
                for name, path in catalogue.index().items():
                    merged.setdefault(name, path)
        for name, path in self.builtin.index().items():
            merged.setdefault(name, path)
        return merged

    def declarations(self) -> list[Declaration]:
        seen: set[str] = set()
        result = []
        for entry in list(self._vendors):
            catalogue = entry[1]
            for declaration in catalogue.declarations() if catalogue is not None else ():
                if declaration.name not in seen:
                    seen.add(declaration.name)
                    result.append(self._complete(declaration, entry))
        for declaration in self.builtin.declarations():
            if declaration.name not in seen:
                seen.add(declaration.name)
                result.append(declaration)
        return result


def environment_vendors(home: Path | None, environ: Mapping[str, str] | None = None) -> list[Vendor]:
    """The vendors CANN finds from the environment (``os.environ`` by default)."""
    return found_vendors(os.environ if environ is None else environ, home)


__all__ = [
    "BUILT_IN",
    "HeaderError",
    "Layered",
    "Vendor",
    "VendorError",
    "check_vendor",
    "environment_vendors",
    "found_vendors",
    "load_priority",
    "prototypes",
    "written_by_prototype",
]
