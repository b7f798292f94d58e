"""The low-level API's one generic call path (pyaclnn/acl/_call.py).

Each wrapper names its C function once, as a string; these tests check that the
string names a function of the backend interface (so a typo fails here, not on
first use), that out-parameters come back, and that a failure raises with the C
name and CANN's message.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import pytest

import pyaclnn
from pyaclnn import acl
from pyaclnn.acl._call import call
from pyaclnn.backends._interface import Backend

PACKAGE = Path(pyaclnn.__file__).parent
WRAPPER_FILES = [PACKAGE / "acl" / "__init__.py", PACKAGE / "acl" / "rt.py", PACKAGE / "aclnn.py"]


def called_names(path: Path) -> list[str]:
    """The C names passed as strings to ``_call(backend, "name", ...)`` in ``path``."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_call":
            api = node.args[1]
            assert isinstance(api, ast.Constant) and isinstance(api.value, str), ast.dump(api)
            names.append(api.value)
    return names


@pytest.mark.parametrize("path", WRAPPER_FILES, ids=lambda p: p.name)
def test_every_name_a_wrapper_calls_is_a_function_of_the_backend_interface(path):
    names = called_names(path)
    assert names
    interface = {name for name, _ in inspect.getmembers(Backend, inspect.isfunction)}
    assert sorted(set(names) - interface) == []


def test_every_name_a_wrapper_calls_is_the_one_its_docstring_names():
    for module in (acl, acl.rt, pyaclnn.aclnn):
        for name in module.__all__:
            fn = getattr(module, name)
            if not callable(fn) or not fn.__doc__:
                continue
            source = textwrap.dedent(inspect.getsource(fn))  # made wrappers are nested functions
            for api in called_names_in_source(source):
                assert fn.__doc__.startswith(f"``{api}``"), (module.__name__, name, api)


def called_names_in_source(source: str) -> list[str]:
    tree = ast.parse(source)
    return [
        node.args[1].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "_call"
        and isinstance(node.args[1], ast.Constant)
    ]


def test_out_parameters_come_back_as_one_value_or_a_tuple(backend):
    acl.rt.set_device(0, backend=backend)  # aclrtGetMemInfo and aclrtSynchronizeDevice need a device
    assert isinstance(acl.rt.get_device_count(backend=backend), int)
    free_bytes, total = acl.rt.get_mem_info(backend=backend)
    assert 0 <= free_bytes <= total
    assert call(backend, "aclrtSynchronizeDevice") is None


def test_a_failing_status_raises_with_the_c_name_and_cann_message(backend):
    with pytest.raises(pyaclnn.AclError) as caught:
        acl.rt.set_device(10_000, backend=backend)
    assert caught.value.api == "aclrtSetDevice"
    assert caught.value.status != 0
    assert acl.get_recent_err_msg(backend=backend) == ""  # read once, by the raise
