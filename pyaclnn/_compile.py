"""Compiling pyaclnn's optional C sources on first use, into a cache shared by processes.

Two parts of pyaclnn ship C source as package data and build it the first time they are
wanted: the compiled CPU kernels (:mod:`pyaclnn.kernels._accel`, a plain library) and the
compiled repeated call (:mod:`pyaclnn._repeat`, a CPython extension). Both build here: the
compiler is ``$CC``, else Python's configured one, else ``cc``; the file's name holds a
hash of the source, the command and the machine, so an edited source or another compiler
builds a new file; concurrent processes serialise on a lock file and publish atomically.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import _env


class NoCompiler(RuntimeError):
    """No C compiler on PATH (or ``$CC`` is not on it), or nothing it needs: the C source
    cannot be built."""


class CompilerFailed(RuntimeError):
    """The C compiler ran and failed; its output is in the message."""


def cc() -> str:
    """``$CC`` as set ("" when unset or blank)."""
    return os.environ.get("CC", "").strip()


def compiler() -> list[str] | None:
    """The C compiler command: $CC, else Python's configured CC, else cc; None if none is on PATH.

    Raises
    ------
    NoCompiler
        ``$CC`` is set but not on PATH: the user named a compiler, so no
        other one is tried in its place.
    """
    import shlex
    import shutil
    import sysconfig  # here and below: only building needs them, `import pyaclnn` does not

    if cc():
        try:
            words = shlex.split(cc())
        except ValueError as exc:  # e.g. an unclosed quote
            raise NoCompiler(f"CC={cc()}: not a command ({exc})") from None
        if not shutil.which(words[0]):
            raise NoCompiler(f"CC={cc()}: {words[0]} is not on PATH")
        return words
    for candidate in (sysconfig.get_config_var("CC") or "", "cc"):
        words = shlex.split(candidate)
        if words and shutil.which(words[0]):
            return words
    return None


def cache_dir() -> Path:
    """Where the built files go: ``$PYACLNN_CACHE_DIR``, else ``$XDG_CACHE_HOME/pyaclnn`` or
    ``~/.cache/pyaclnn``."""
    explicit = _env.text("PYACLNN_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pyaclnn"


def file_name(source: Path, stem: str, suffix: str, command: list[str], flags: tuple[str, ...]) -> str:
    """The built file's name: ``stem``, a hash of everything that changes the binary, ``suffix``."""
    import hashlib
    import platform

    key = hashlib.sha256(source.read_bytes())
    key.update(repr((command, flags, platform.machine(), platform.system())).encode())
    return f"{stem}-{key.hexdigest()[:16]}{suffix}"


def build(
    source: Path,
    stem: str,
    suffix: str,
    flags: tuple[str, ...],
    directory: Path | None = None,
    announce: str | None = None,
) -> Path:
    """Compile ``source`` with ``flags`` into ``directory`` (default: :func:`cache_dir`), unless
    already there; the path of the built file. ``announce``, when given, is printed on stderr
    (one line) when it compiles.

    Raises
    ------
    NoCompiler
        No compiler on PATH, or ``$CC`` is not on it.
    CompilerFailed
        The compiler failed (its output in the message).
    """
    import fcntl
    import subprocess
    import sys
    import tempfile

    command = compiler()
    if command is None:
        raise NoCompiler("no C compiler found (set CC, or install gcc or clang)")
    directory = directory or cache_dir()
    target = directory / file_name(source, stem, suffix, command, flags)
    if target.is_file():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".accel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same file
        if target.is_file():
            return target
        if announce is not None:
            print(announce.format(directory=directory), file=sys.stderr, flush=True)
        fd, temporary = tempfile.mkstemp(suffix=suffix, dir=directory)
        os.close(fd)
        try:
            proc = subprocess.run(
                [*command, *flags, "-o", temporary, str(source)],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            if proc.returncode != 0:
                output = f": {proc.stdout.strip()}" if proc.stdout.strip() else ""
                raise CompilerFailed(f"{' '.join(command)} failed ({proc.returncode}){output}")
            os.replace(temporary, target)  # other processes see the whole file or none
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    return target
