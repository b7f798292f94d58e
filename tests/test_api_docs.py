"""docs/api.md, the API reference, is generated from the docstrings and current.

scripts/generate_api_docs.py writes it; these tests fail while it is stale, when
a public name, method or property has no entry, or when one of its links points
at no heading.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import pyaclnn

ROOT = Path(__file__).resolve().parent.parent
API = ROOT / "docs" / "api.md"


@pytest.fixture(scope="module")
def generator() -> Iterator[ModuleType]:
    """scripts/generate_api_docs.py as a module (scripts/ is not a package)."""
    path = ROOT / "scripts" / "generate_api_docs.py"
    spec = importlib.util.spec_from_file_location("generate_api_docs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def test_the_api_reference_is_current(generator):
    assert API.read_text(encoding="utf-8") == generator.render(), (
        "docs/api.md is stale: run python scripts/generate_api_docs.py"
    )


def test_the_check_mode_exits_zero_when_current_and_one_when_a_docstring_changed(generator, monkeypatch):
    assert generator.main(["--check"]) == 0
    monkeypatch.setattr(pyaclnn.get_backend, "__doc__", "Changed without regenerating.")
    assert generator.main(["--check"]) == 1


def test_every_public_name_has_an_entry():
    text = API.read_text(encoding="utf-8")
    missing = [name for name in pyaclnn.__all__ if f"\n### `pyaclnn.{name}`\n" not in text]
    assert missing == []


def _entry(text: str, name: str) -> str:
    start = text.index(f"\n### `pyaclnn.{name}`\n")
    end = text.find("\n### ", start + 1)
    return text[start:end]


def test_every_public_method_and_property_of_a_class_is_listed():
    text = API.read_text(encoding="utf-8")
    for name in pyaclnn.__all__:
        cls = getattr(pyaclnn, name)
        if not inspect.isclass(cls) or not cls.__module__.startswith("pyaclnn"):
            continue
        entry = _entry(text, name)
        headings = set(re.findall(r"^#### `([^`]+)`$", entry, re.MULTILINE))
        inherited = set(
            re.findall(r"\[`(\w+\.\w+)`\]", "".join(re.findall(r"^Also those of .*$", entry, re.M)))
        )
        attributes = set(re.findall(r"`(\w+)`", "".join(re.findall(r"^Attributes: .*$", entry, re.M))))
        for member in dir(cls):
            owner = next((k for k in cls.__mro__ if member in vars(k)), None)
            if member.startswith("_") or owner is None or not owner.__module__.startswith("pyaclnn"):
                continue
            # Its own heading, a link to the base class's entry, or the list of attributes.
            assert (
                f"{cls.__name__}.{member}" in headings
                or f"{owner.__name__}.{member}" in inherited
                or member in attributes
            ), f"{name}.{member}"


def test_every_link_of_the_reference_points_at_one_of_its_headings(generator):
    text = API.read_text(encoding="utf-8")
    headings = {generator.slug(h) for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert links and links <= headings, sorted(links - headings)


def test_a_numpy_docstring_becomes_markdown(generator):
    def sample(x, *, stream=None):
        """Scale ``x`` on :func:`to_device`'s stream.

        Parameters
        ----------
        x : ndarray
            The input; d*H*W elements.
        stream : Stream, optional

        Raises
        ------
        ValueError
            For <bad> input.
        """

    renderer = generator.Renderer()
    renderer.register("pyaclnn.to_device", "to_device")
    assert renderer.docstring(sample) == (
        "Scale `x` on [`to_device`](#pyaclnnto_device)'s stream.\n\n"
        "**Parameters**\n\n"
        "- `x` (ndarray): The input; d\\*H\\*W elements.\n"
        "- `stream` (Stream, optional)\n\n"
        "**Raises**\n\n"
        "- `ValueError`: For &lt;bad> input."
    )


def test_a_long_signature_is_written_one_parameter_a_line(generator):
    text = generator.Renderer().signature("pyaclnn.grid_sampler3d", pyaclnn.grid_sampler3d)
    lines = text.splitlines()
    assert lines[0] == "```python" and lines[1] == "pyaclnn.grid_sampler3d("
    assert "    interpolation_mode: InterpolationMode = 'bilinear'," in lines
    assert "    *," in lines
