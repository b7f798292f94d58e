"""Warnings that point at the user's line, not at pyaclnn's.

A warning is about the user's call: its location is the first frame outside
the package (and outside the import machinery, as ``warnings.warn`` skips it, and
the standard library's thread starts),
however deep in pyaclnn it is raised. A fixed ``stacklevel`` cannot say that (a
reader of the environment runs at many depths), nor can ``skip_file_prefixes``
before Python 3.12, so the frame is found here and the warning issued with
``warnings.warn_explicit`` as ``warnings.warn`` would issue it there (that
frame's module, its ``__warningregistry__`` for the "once per location" filters).

Where no frame is the user's (at interpreter exit, in ``atexit``), a warning
goes where the thing it is about was made (:func:`user_line` recorded then),
when known, else to pyaclnn's own line; its message says what was left.

A shared fact (docs/architecture.md): every layer may use it, and it calls into none.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from types import FrameType

# pyaclnn's frames, and those that start a thread (a thread pyaclnn started has no user line; a
# user's thread reaches the user's function before them).
_NOT_THE_USERS = (
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
    threading.__file__,
    os.path.join(os.path.dirname(threading.__file__), "concurrent", "futures", ""),
)


def _internal(filename: str) -> bool:
    """Whether a frame of ``filename`` is never the user's: pyaclnn's, a thread's start, the imports'."""
    return filename.startswith(_NOT_THE_USERS) or ("importlib" in filename and "_bootstrap" in filename)


def _user_frame() -> FrameType | None:
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and _internal(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def user_line() -> tuple[str, int] | None:
    """``(filename, line)`` of the user's line running now; None when none is (at exit)."""
    frame = _user_frame()
    return None if frame is None else (frame.f_code.co_filename, frame.f_lineno)


def warn(message: str, category: type[Warning], *, made_at: tuple[str, int] | None = None) -> None:
    """Warn ``message`` at the user's line; with no user frame running, at ``made_at`` (where the
    thing the message is about was made, from :func:`user_line`), else at the caller's line."""
    frame = _user_frame()
    if frame is not None:
        globals_ = frame.f_globals
        filename, line = frame.f_code.co_filename, frame.f_lineno
        module = globals_.get("__name__", "<string>")
        registry = globals_.setdefault("__warningregistry__", {})
        warnings.warn_explicit(message, category, filename, line, module, registry, globals_)
    elif made_at is not None:
        warnings.warn_explicit(message, category, made_at[0], made_at[1])
    else:
        warnings.warn(message, category, stacklevel=2)
