"""``python -m pyaclnn ops``: the operators of a catalogue with their Python signatures, and the
refused ones with the reason."""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path
from typing import Any, TextIO

from . import _types
from ._headers import VENDOR_HEADERS, Catalogue, Declaration, header_folder
from ._vendors import Layered, Vendor


def _matches(pattern: str | None, declaration: Declaration) -> bool:
    if not pattern:
        return True
    names = (declaration.name, declaration.phase2_api, _types.python_operator_name(declaration.name))
    if any(c in pattern for c in "*?["):
        return any(fnmatch.fnmatchcase(n.lower(), pattern.lower()) for n in names)
    return any(pattern.lower() in n.lower() for n in names)


def describe(
    catalogue: Layered, source: str, pattern: str | None = None, backend: str | None = None
) -> dict[str, Any]:
    """The catalogue as ``--json`` prints it: ``{"headers", "operators", "refused"}``. With
    ``backend`` (the npu backend's name), a custom package's operator whose library does not
    export both phases is refused too."""
    operators: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    for declaration in catalogue.declarations():
        if not _matches(pattern, declaration):
            continue
        header = catalogue.relative(declaration.header)
        reason = _types.refusal(declaration)
        if reason is None and backend is not None and declaration.library is not None:
            from .. import _generic

            reason = _generic.unavailable(declaration, backend)
        if reason is not None:
            refused.append(
                {
                    "name": declaration.phase2_api,
                    "header": header,
                    "source": declaration.source,
                    "reason": reason,
                }
            )
            continue
        params = [
            {"name": p.c.name, "python": p.python_name, "type": p.c.type, "role": p.role or _types.INPUT}
            for p in _types.parameters(declaration)
        ]
        operators.append(
            {
                "name": declaration.phase2_api,
                "python": _types.python_operator_name(declaration.name),
                "header": header,
                "source": declaration.source,
                "params": params,
            }
        )
    return {"headers": source, "operators": operators, "refused": refused}


def _signature(entry: dict[str, Any]) -> str:
    return f"{entry['python']}({', '.join(p['python'] for p in entry['params'])}, *, stream=None)"


def run(pattern: str | None, headers: str | None, as_json: bool, out: TextIO) -> int:
    """List the catalogue of ``headers`` (a folder of operator headers, a CANN home or a custom
    package's vendor folder), else of the active backend; returns the exit status (2 when
    ``headers`` holds no header)."""
    backend = None
    if headers is not None:
        try:
            folder = header_folder(Path(headers))
        except ValueError as exc:
            print(f"pyaclnn ops: {exc}", file=out)
            return 2
        root = Path(headers).expanduser()
        if folder == root / VENDOR_HEADERS:  # a custom package: its prototypes give the roles
            catalogue, source = Layered([Vendor(root, "--headers")], Catalogue({})), str(root)
        else:
            catalogue, source = Layered([], Catalogue(folder)), str(folder)
    else:
        from .. import _generic

        backend = _generic.active_backend()
        catalogue = _generic.catalogue(backend)
        source = (
            str(catalogue.folder) if catalogue.folder is not None else f"{backend} backend (NumPy references)"
        )
    report = describe(
        catalogue, source, pattern, None if headers is not None or backend == "numpy" else backend
    )
    if as_json:
        json.dump(report, out, indent=2)
        out.write("\n")
        return 0
    print(f"{len(report['operators'])} operators from {source}", file=out)
    for entry in report["operators"]:
        print(f"  {_signature(entry):70s} {entry['name']}  [{entry['header']}]", file=out)
    if report["refused"]:
        print(f"{len(report['refused'])} refused:", file=out)
        for entry in report["refused"]:
            print(f"  {entry['name']}  [{entry['header']}]: {entry['reason']}", file=out)
    return 0
