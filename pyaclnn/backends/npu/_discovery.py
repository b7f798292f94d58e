"""Where CANN's shared libraries are: a pure search, no library is opened.

A *home* is a CANN install root; its ``lib64`` must hold

* a runtime library: ``libascendcl.so`` (every release) or ``libacl_rt.so``
  (CANN >= 8.5, where ``libascendcl.so`` is kept for compatibility). With the
  new operator libraries ``libacl_rt.so`` is preferred, else ``libascendcl.so``;
* ``libnnopbase.so`` (the aclnn descriptors and executors);
* at least one operator library: ``libopapi_nn.so`` / ``libopapi_cv.so``
  (CANN >= 8.5: max-pool in the first, the grid sampler in the second) or
  ``libopapi.so`` (CANN <= 8.3, everything). The split libraries win when
  present: CANN never ships both kinds for use together.

and may hold ``libmsprofiler.so`` (the profiler, ``aclprof*``): optional, opened
when present; without it the ``aclprof*`` calls raise ACL_ERROR_API_NOT_SUPPORT.

Homes are tried in this order, the first complete one wins:
``$PYACLNN_ASCEND_HOME``, ``$ASCEND_HOME_PATH``, ``$ASCEND_TOOLKIT_HOME``,
``/usr/local/Ascend/cann``, ``/usr/local/Ascend/ascend-toolkit/latest``,
``~/Ascend/cann``, ``~/Ascend/ascend-toolkit/latest``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: Environment variables naming a CANN home, highest priority first.
ENV_VARS = ("PYACLNN_ASCEND_HOME", "ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")
#: Install roots of the new (cann) and classic (ascend-toolkit) layouts, root then user.
DEFAULT_HOMES = (
    "/usr/local/Ascend/cann",
    "/usr/local/Ascend/ascend-toolkit/latest",
    "~/Ascend/cann",
    "~/Ascend/ascend-toolkit/latest",
)
RUNTIME_LIBS = ("libascendcl.so", "libacl_rt.so")  # classic preference; reversed for the new layout
NNOPBASE_LIB = "libnnopbase.so"
SPLIT_OP_LIBS = ("libopapi_nn.so", "libopapi_cv.so")  # CANN >= 8.5
CLASSIC_OP_LIB = "libopapi.so"  # CANN <= 8.3
OPTIONAL_LIBS = ("libmsprofiler.so",)  # aclprof* (hicann/runtime src/dfx/msprof/.../msprofiler)

HOW_TO_FIX = (
    "Activate CANN first: `source /usr/local/Ascend/ascend-toolkit/set_env.sh` (CANN <= 8.3) or "
    "`source /usr/local/Ascend/cann/set_env.sh` (CANN >= 8.5), or set PYACLNN_ASCEND_HOME to the "
    "install root (the directory holding lib64/). Without an NPU, use PYACLNN_BACKEND=numpy."
)


class LibraryNotFoundError(ImportError):
    """CANN's shared libraries could not be found or opened.

    Attributes
    ----------
    discovery : Discovery | None
        The search that was made: every home tried and what it lacked.
    """

    def __init__(self, message: str, discovery: Discovery | None = None) -> None:
        super().__init__(message)
        self.discovery = discovery

    def one_line(self) -> str:
        """The message in one line, for a command-line tool that exits on it: what failed (its
        first line) and how to fix it (its last); the places searched in between are left to
        ``python -m pyaclnn info``."""
        first, *rest = str(self).splitlines() or [type(self).__name__]
        hint = f" {rest[-1]}" if rest else ""
        where = " (`python -m pyaclnn info` lists the places)." if first.endswith(":") else ""
        return f"{first.rstrip(':')}{where}{hint}"


@dataclass(frozen=True)
class Candidate:
    """One home that was searched and what its ``lib64`` holds.

    Attributes
    ----------
    home : Path
        The install root as given (``~`` expanded).
    source : str
        Where it came from: an environment variable name or ``"default location"``.
    runtime, nnopbase : Path | None
        The runtime library and libnnopbase, when present.
    op_libs : tuple[Path, ...]
        The operator libraries that will be loaded, in load order.
    missing : tuple[str, ...]
        Why the home is unusable, e.g. ``"no libnnopbase.so"`` (empty when usable).
    optional : tuple[Path, ...]
        The optional libraries present (``libmsprofiler.so``), opened after the others.
    """

    home: Path
    source: str
    runtime: Path | None = None
    nnopbase: Path | None = None
    op_libs: tuple[Path, ...] = ()
    missing: tuple[str, ...] = ()
    optional: tuple[Path, ...] = ()

    @property
    def lib_dir(self) -> Path:
        return self.home / "lib64"

    @property
    def ok(self) -> bool:
        return not self.missing

    @property
    def libraries(self) -> tuple[Path, ...]:
        """Libraries in dependency (load) order: runtime, nnopbase, operators."""
        found = (self.runtime, self.nnopbase, *self.op_libs)
        return tuple(p for p in found if p is not None)

    def describe(self) -> str:
        state = "usable" if self.ok else "; ".join(self.missing)
        return f"{self.lib_dir} (from {self.source}): {state}"


@dataclass(frozen=True)
class Discovery:
    """Result of :func:`discover`: every home tried, and the chosen one."""

    candidates: tuple[Candidate, ...] = field(default_factory=tuple)

    @property
    def chosen(self) -> Candidate | None:
        """The first usable home, or None."""
        return next((c for c in self.candidates if c.ok), None)

    def report(self) -> str:
        """One line per home searched, in search order."""
        return "\n".join("  " + c.describe() for c in self.candidates)

    def not_found_error(self) -> LibraryNotFoundError:
        """The error for "no usable home": every place searched, what each lacked, how to fix."""
        return LibraryNotFoundError(
            f"CANN's shared libraries were not found. Searched, in order:\n{self.report()}\n{HOW_TO_FIX}",
            self,
        )


def _inspect(home: Path, source: str) -> Candidate:
    lib_dir = home / "lib64"
    if not home.is_dir():
        return Candidate(home, source, missing=("does not exist",))
    if not lib_dir.is_dir():
        return Candidate(home, source, missing=("no lib64 directory",))

    def have(name: str) -> Path | None:
        path = lib_dir / name
        return path if path.is_file() else None

    nnopbase = have(NNOPBASE_LIB)
    op_libs = tuple(p for p in map(have, SPLIT_OP_LIBS) if p is not None)
    runtimes = RUNTIME_LIBS
    if op_libs:
        runtimes = runtimes[::-1]  # new layout: libacl_rt.so is the recommended runtime
    elif have(CLASSIC_OP_LIB) is not None:
        op_libs = (lib_dir / CLASSIC_OP_LIB,)
    runtime = next((p for p in map(have, runtimes) if p is not None), None)
    missing = []
    if runtime is None:
        missing.append("no " + " or ".join(RUNTIME_LIBS))
    if nnopbase is None:
        missing.append("no " + NNOPBASE_LIB)
    if not op_libs:
        missing.append(f"no operator library ({CLASSIC_OP_LIB} or {' / '.join(SPLIT_OP_LIBS)})")
    optional = tuple(p for p in map(have, OPTIONAL_LIBS) if p is not None)
    return Candidate(home, source, runtime, nnopbase, op_libs, tuple(missing), optional)


def search_homes(environ: Mapping[str, str] | None = None) -> list[tuple[Path, str]]:
    """The homes to try, in priority order, without duplicates: ``(home, source)``.

    Every place is listed, existing or not, so that the report of a failed
    search shows all of them (and a typo in a variable shows up).
    """
    env = os.environ if environ is None else environ
    homes: list[tuple[Path, str]] = []
    seen: set[str] = set()

    def add(raw: str, source: str) -> None:
        home = Path(os.path.expanduser(raw))
        key = os.path.normpath(str(home))
        if key in seen:
            return
        seen.add(key)
        homes.append((home, source))

    for var in ENV_VARS:
        value = env.get(var, "")
        if value:
            add(value, var)
    for default in DEFAULT_HOMES:
        if default.startswith("~") and env.get("HOME"):
            default = env["HOME"] + default[1:]  # honour a HOME from `environ` too
        add(default, "default location")
    return homes


def discover(environ: Mapping[str, str] | None = None) -> Discovery:
    """Search for CANN's libraries; nothing is loaded.

    Parameters
    ----------
    environ : Mapping[str, str], optional
        Environment to read ``PYACLNN_ASCEND_HOME``, ``ASCEND_HOME_PATH``,
        ``ASCEND_TOOLKIT_HOME`` and ``HOME`` from; ``os.environ`` by default.

    Returns
    -------
    Discovery
        Every home tried with what it holds or lacks; ``.chosen`` is the
        first usable one (None if none is).
    """
    return Discovery(tuple(_inspect(home, source) for home, source in search_homes(environ)))
