"""One rule for ``with``: the table of docs/coming-from-cupy-and-torch.md, checked row by row.

An object that selects something (a stream, a device, a capture, a profile)
makes it current for the block and puts back what was current; one that owns a
resource (an event, a graph, a device array) closes it at the end of the block.
The test reads the table's first column, so a row added there without a check
here (or a check without its row) fails.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import pyaclnn
from pyaclnn import _profile, acl

DOC = Path(__file__).resolve().parent.parent / "docs" / "coming-from-cupy-and-torch.md"
X = np.arange(64, dtype=np.float32).reshape(1, 1, 4, 4, 4)


def _rows() -> list[str]:
    """The objects of the table of "One rule for `with`", by name (``Stream``, ``graph``, ...)."""
    section = DOC.read_text().split("## One rule for `with`", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `pyaclnn\.(\w+)", section, re.MULTILINE)


def _check_stream(backend, tmp_path):
    s = pyaclnn.Stream(backend=backend)
    before = pyaclnn.current_stream(backend=backend)
    with s as entered:
        assert entered is s and pyaclnn.current_stream(backend=backend) is s
    assert pyaclnn.current_stream(backend=backend) is before and not s.closed
    s.close()


def _check_external_stream(backend, tmp_path):
    pyaclnn.synchronize(backend=backend)  # binds device 0 for the raw call
    handle = acl.rt.create_stream(backend=backend)
    s = pyaclnn.ExternalStream(handle, backend=backend)
    with s:
        assert pyaclnn.current_stream(backend=backend) is s
    assert pyaclnn.current_stream(backend=backend) is not s and not s.closed
    s.close()
    acl.rt.destroy_stream(handle, backend=backend)


def _check_device(backend, tmp_path):
    before = pyaclnn.get_device(backend)
    with pyaclnn.Device(0, backend=backend) as d:
        assert pyaclnn.get_device(backend) == d.id == 0
    assert pyaclnn.get_device(backend) == before


def _check_graph_capture(backend, tmp_path):
    g = pyaclnn.Graph(backend=backend)
    x = pyaclnn.to_device(X, backend=backend)
    pyaclnn.synchronize(backend=backend)
    before = pyaclnn.current_stream(backend=backend)
    with pyaclnn.graph(g) as captured:
        assert captured is g and pyaclnn.current_stream(backend=backend) is not before
        out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend)
    assert pyaclnn.current_stream(backend=backend) is before
    g.replay()
    np.testing.assert_array_equal(out.numpy(), X[..., 1::2, 1::2, 1::2])  # g stays, replayable
    for obj in (out, idx, g, x):
        obj.close()


def _check_profile(backend, tmp_path):
    with pyaclnn.profile(str(tmp_path / "trace"), backend=backend) as p:
        assert _profile._active is p
    assert _profile._active is None and Path(p.trace_path).exists()


def _check_closes(make):
    def check(backend, tmp_path):
        obj = make(backend)
        before = pyaclnn.current_stream(backend=backend)
        with obj as entered:
            assert entered is obj and not obj.closed
            assert pyaclnn.current_stream(backend=backend) is before  # selects nothing
        assert obj.closed

    return check


CHECKS = {
    "Stream": _check_stream,
    "ExternalStream": _check_external_stream,
    "Device": _check_device,
    "graph": _check_graph_capture,
    "profile": _check_profile,
    "Event": _check_closes(lambda b: pyaclnn.Event(backend=b)),
    "Graph": _check_closes(lambda b: pyaclnn.Graph(backend=b)),
    "DeviceArray": _check_closes(lambda b: pyaclnn.to_device(X, backend=b)),
}


def test_the_table_and_the_checks_name_the_same_objects():
    assert sorted(_rows()) == sorted(CHECKS)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_with_does_what_the_table_says(backend, tmp_path, name):
    CHECKS[name](backend, tmp_path)
