"""The Python examples of the README and of the guide run as written, their links lead somewhere,
and what they say about the tree holds.

Every ```` ```python ```` block of README.md and of docs/*.md runs in a new process, on the
numpy backend and on the npu backend over the C emulator, with only the environment the block
states (docs/api.md's blocks are signatures generated from the docstrings: they are checked to
be signatures instead). A block's first comment lines follow the convention the guide documents
(docs/README.md, "The examples in these pages run"):

- ``# Continues the example above.``: run after the Python block before it on the same page;
- ``# Environment: NAME=value ... (why)``: run with those variables set;
- ``# Needs an NPU: why``: not run here (a pytest skip with that reason).

A block passes when it exits 0 and prints no hazard (memory freed under queued
work, a stream destroyed with work pending, ...). Every relative link of README.md and docs/
must name a file that exists and, after a ``#``, a heading of it. The other tests check the
prose against the code it describes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
GUIDE = DOCS / "README.md"
#: Generated from the docstrings (scripts/generate_api_docs.py): its Python blocks are signatures.
SIGNATURES = DOCS / "api.md"
#: Every page whose Python blocks run, the README first.
PAGES = [README, *sorted(p for p in DOCS.glob("*.md") if p != SIGNATURES)]

CONTINUES = "# Continues the example above."
ENVIRONMENT = "# Environment:"
NEEDS_NPU = "# Needs an NPU:"
#: Variables that would choose a backend, a CANN home or emulation settings the block did not ask for.
_INHERITED_OUT = ("PYACLNN_", "ASCEND_")
_FENCE = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
_ASSIGNMENT = re.compile(r"([A-Z][A-Z0-9_]*)=(\S+)")


@dataclass
class Block:
    """One Python block of a page and what its first comment lines ask for."""

    line: int  # of the opening fence, 1-based
    code: str
    continues: bool = False
    environment: dict[str, str] = field(default_factory=dict)
    needs_npu: str | None = None


def parse_blocks(text: str, page: str = "README.md") -> list[Block]:
    """The Python blocks of ``text`` in order, with their markers read off the first comment lines.

    Raises
    ------
    ValueError
        For an ``# Environment:`` line that sets nothing (a typo would otherwise run the block
        without what it needs).
    """
    blocks = []
    for match in _FENCE.finditer(text):
        block = Block(line=text.count("\n", 0, match.start()) + 1, code=match.group(1))
        for raw in block.code.splitlines():
            line = raw.strip()
            if not line.startswith("#"):
                break  # markers come first: a comment further down is an ordinary comment
            if line == CONTINUES:
                block.continues = True
            elif line.startswith(ENVIRONMENT):
                for word in line[len(ENVIRONMENT) :].split():
                    assignment = _ASSIGNMENT.fullmatch(word)
                    if assignment is None:
                        break  # the rest of the line says why
                    block.environment[assignment.group(1)] = assignment.group(2)
                if not block.environment:
                    raise ValueError(f"{page}:{block.line}: {line!r} sets no NAME=value")
            elif line.startswith(NEEDS_NPU):
                block.needs_npu = line[len(NEEDS_NPU) :].strip() or "real CANN on an Atlas NPU"
        blocks.append(block)
    return blocks


def script_of(blocks: list[Block], index: int, page: str = "README.md") -> tuple[str, dict[str, str]]:
    """The program block ``index`` runs as, with the blocks it continues first, and their environment."""
    chain = [blocks[index]]
    while chain[0].continues:
        position = blocks.index(chain[0])
        if position == 0:
            raise ValueError(f"{page}:{chain[0].line}: the first block continues nothing")
        chain.insert(0, blocks[position - 1])
    environment: dict[str, str] = {}
    for block in chain:
        environment.update(block.environment)
    return "".join(block.code for block in chain), environment


def run_block(script: str, environment: dict[str, str], backend: str, home: Path | None, tmp_path: Path):
    """Run ``script`` in a new process on ``backend``, with ``environment`` on top of a clean one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_INHERITED_OUT)}
    env["PYACLNN_BACKEND"] = backend
    env["PYTHONPATH"] = str(ROOT)  # this checkout's pyaclnn, not an installed one
    if home is not None:
        env["PYACLNN_ASCEND_HOME"] = str(home)
    env["PYACLNN_EMU_HAZARD_FATAL"] = "1"  # a hazard aborts, with the stack that caused it
    env.update(environment)
    path = tmp_path / "readme_block.py"
    path.write_text(script, encoding="utf-8")
    # In tmp_path: nothing a block writes lands in the checkout.
    return subprocess.run(
        [sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


#: Each page's blocks, and every block as (page, index) for the parametrized run.
BLOCKS_OF = {_name(page): parse_blocks(page.read_text(encoding="utf-8"), _name(page)) for page in PAGES}
BLOCKS = BLOCKS_OF["README.md"]
ALL_BLOCKS = [(page, i) for page, blocks in BLOCKS_OF.items() for i in range(len(blocks))]


@pytest.mark.parametrize("backend", ["numpy", "npu"])
@pytest.mark.parametrize(
    "page, index", ALL_BLOCKS, ids=[f"{page}:{BLOCKS_OF[page][i].line}" for page, i in ALL_BLOCKS]
)
def test_the_python_block_runs_as_written(page, index, backend, request, tmp_path):
    blocks = BLOCKS_OF[page]
    block = blocks[index]
    if block.needs_npu:
        pytest.skip(f"{page}:{block.line}: needs an NPU: {block.needs_npu}")
    home = request.getfixturevalue("emulator_home") if backend == "npu" else None
    script, environment = script_of(blocks, index, page)
    proc = run_block(script, environment, backend, home, tmp_path)
    where = f"{page}:{block.line} on {backend} with {environment or 'no extra environment'}"
    assert proc.returncode == 0, f"{where}:\n{proc.stdout}\n{proc.stderr}"
    assert "HAZARD" not in proc.stderr, f"{where}:\n{proc.stderr}"


# -- the convention ----------------------------------------------------------------------


def test_the_guide_documents_each_marker_in_use():
    prose = _FENCE.sub("", GUIDE.read_text(encoding="utf-8"))  # explained outside the blocks
    for marker in (CONTINUES, ENVIRONMENT, NEEDS_NPU):
        assert f"`{marker}" in prose, marker
    # Every marker kind is in use, so none of them is documented for nothing.
    every = [b for blocks in BLOCKS_OF.values() for b in blocks]
    assert any(b.continues for b in every)
    assert any(b.environment for b in every)
    assert any(b.needs_npu for b in every)
    # The README points a reader at the guide, where the convention is.
    assert "(docs/README.md)" in README.read_text(encoding="utf-8")


def test_every_page_of_docs_is_run_or_is_the_generated_reference():
    pages = {p.name for p in DOCS.glob("*.md")}
    assert pages == {p.name for p in PAGES if p.parent == DOCS} | {SIGNATURES.name}
    # The guide's table of contents links every page.
    contents = GUIDE.read_text(encoding="utf-8")
    assert [p for p in sorted(pages - {GUIDE.name}) if f"]({p})" not in contents] == []


def _compiles(code: str) -> bool:
    try:
        compile(code, "<block>", "exec")
    except SyntaxError:
        return False
    return True


def _is_signature(code: str) -> bool:
    """Whether ``code`` is ``dotted.name(parameters) -> result``: compiles as a ``def`` of its last name."""
    name, paren, rest = " ".join(code.split()).partition("(")
    if not paren or not re.fullmatch(r"(class )?[A-Za-z_]\w*(\.\w+)*", name):
        return False
    return _compiles(f"def {name.rsplit('.', 1)[-1].removeprefix('class ')}({rest}: ...")


def test_the_python_blocks_of_the_api_reference_are_signatures_or_compile():
    # Not run: docs/api.md is generated from the docstrings. Its blocks are signatures, as the
    # generator writes them, and a few fragments of docstrings (a type alias, a line of use).
    blocks = parse_blocks(SIGNATURES.read_text(encoding="utf-8"), _name(SIGNATURES))
    signatures = [b for b in blocks if _is_signature(b.code)]
    assert len(signatures) > 50
    bad = [b.line for b in blocks if b not in signatures and not _compiles(b.code)]
    assert bad == [], f"docs/api.md: the blocks at lines {bad} are neither signatures nor Python"
    # What tells them apart: a call with annotations is no Python, and a statement no signature.
    assert _is_signature("pyaclnn.f(x: int, *, y: str = 'a') -> None") and not _compiles("f(x: int)")
    assert not _is_signature("print(1)\nx = 2") and not _is_signature("x = f(1)")


def test_the_markers_are_read_from_the_first_comment_lines_only():
    text = (
        "```python\n# Environment: PYACLNN_EMU_DEVICES=4 A_B=x (why)\n# Continues the example above.\n"
        "print(1)\n# Needs an NPU: not a marker here\n```\n"
        "```python\n# Needs an NPU: torch_npu\nimport torch\n```\n"
    )
    first, second = parse_blocks(text)
    assert first.environment == {"PYACLNN_EMU_DEVICES": "4", "A_B": "x"}
    assert first.continues and first.needs_npu is None and first.line == 1
    assert second.needs_npu == "torch_npu" and not second.environment
    with pytest.raises(ValueError, match="sets no NAME=value"):
        parse_blocks("```python\n# Environment: four devices\n```\n")


def test_a_block_that_continues_runs_after_the_one_above_with_both_environments():
    blocks = parse_blocks(
        "```python\n# Environment: A=1\nx = 1\n```\ntext\n"
        "```python\n# Continues the example above.\n# Environment: B=2\nprint(x)\n```\n"
    )
    script, environment = script_of(blocks, 1)
    assert script.index("x = 1") < script.index("print(x)")
    assert environment == {"A": "1", "B": "2"}
    with pytest.raises(ValueError, match="continues nothing"):
        script_of(parse_blocks("```python\n# Continues the example above.\n```\n"), 0)


def test_a_block_without_the_environment_it_needs_fails(tmp_path):
    # The Devices example uses devices 1-3: without its Environment line it must fail, so the
    # passing run above shows the line is what makes it work.
    page, index = next((p, i) for p, i in ALL_BLOCKS if "pyaclnn.Device(1)" in BLOCKS_OF[p][i].code)
    script, environment = script_of(BLOCKS_OF[page], index, page)
    assert environment == {"PYACLNN_EMU_DEVICES": "4"}
    proc = run_block(script, {}, "numpy", None, tmp_path)
    assert proc.returncode != 0
    assert "device 1 does not exist" in proc.stderr


def test_a_hazard_fails_a_block(tmp_path):
    # What the check above relies on: a hazard shows on stderr and fails the run.
    # Memory freed while a memset queued on it may still run (each task takes 200 ms here).
    script = (
        "from pyaclnn import acl\nfrom pyaclnn.acl import rt\n"
        "acl.init(); rt.set_device(0); s = rt.create_stream()\n"
        "ptr = rt.malloc(64)\nrt.memset_async(ptr, 64, 0, 64, s)\nrt.free(ptr)\n"
    )
    proc = run_block(script, {"PYACLNN_EMU_KERNEL_US": "200000"}, "numpy", None, tmp_path)
    assert proc.returncode != 0 and "HAZARD" in proc.stderr, proc.stderr


# -- the prose ---------------------------------------------------------------------------


def _paragraph_at(text: str, position: int) -> str:
    start = text.rfind("\n\n", 0, position) + 2
    end = text.find("\n\n", position)
    return text[start : end if end >= 0 else len(text)]


def test_the_two_phases_are_defined_where_they_are_first_named():
    text = README.read_text(encoding="utf-8")
    first = re.search(r"phase [12]", text, re.IGNORECASE)
    assert first is not None
    paragraph = _paragraph_at(text, first.start())
    assert first.group(0).lower() == "phase 1", paragraph
    for part in ("phase 2", "GetWorkspaceSize", "executor", "launches"):
        assert part in paragraph.replace("*", ""), (part, paragraph)


def test_the_sample_ends_with_the_line_the_guide_gives():
    text = " ".join((DOCS / "samples.md").read_text(encoding="utf-8").split())
    claims = re.findall(r"`python (samples/[\w./-]+\.py)` ends with `([^`]+)`", text)
    assert claims, "docs/samples.md no longer says how a sample ends"
    for sample, last_line in claims:
        env = {k: v for k, v in os.environ.items() if not k.startswith(_INHERITED_OUT)}
        proc = subprocess.run(
            [sys.executable, str(ROOT / sample), "--backend", "numpy"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines()[-1] == last_line, (sample, proc.stdout)


def test_the_bench_command_is_described_with_every_script_it_runs():
    from pyaclnn.__main__ import BENCHMARKS

    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    bullet = re.search(r"^- `bench` runs .*?(?=^- |^\n|^#|\Z)", text, re.MULTILINE | re.DOTALL)
    assert bullet is not None
    named = re.findall(r"benchmarks/(\w+\.py)", bullet.group(0))
    assert named == list(BENCHMARKS), bullet.group(0)
    count = {2: "two", 3: "three", 4: "four"}.get(len(BENCHMARKS), str(len(BENCHMARKS)))
    assert f"runs {count} scripts" in " ".join(bullet.group(0).split())


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_the_readme_says_what_the_binding_was_checked_against():
    from pyaclnn.backends.npu import _discovery

    section = " ".join(
        _section(README.read_text(encoding="utf-8"), "What it was built and checked against").split()
    )
    # Every library the discovery looks for, with the CANN versions of each layout.
    for lib in (
        *_discovery.RUNTIME_LIBS,
        _discovery.NNOPBASE_LIB,
        *_discovery.SPLIT_OP_LIBS,
        _discovery.CLASSIC_OP_LIB,
    ):
        assert f"`{lib}`" in section, lib
    for fact in ("CANN ≤ 8.3", "CANN ≥ 8.5", "8.1.RC1", "hicann/runtime", "hicann/opbase"):
        assert fact in section, fact
    # Honest about hardware: no run on an NPU, and what stood in for one.
    assert "No run on real Atlas A2/A3 hardware, or on any NPU, has been made by this project." in section
    for stand_in in ("NumPy backend", "C emulator", "PyTorch CPU"):
        assert stand_in in section, stand_in


def test_the_readme_links_the_api_reference():
    assert "(docs/api.md)" in README.read_text(encoding="utf-8")


def _extras() -> dict[str, list[str]]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["optional-dependencies"]


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[<>=!~ ;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_test_extra_holds_what_the_suite_runs_and_the_linters_are_in_dev():
    extras = _extras()
    test = _names(extras["test"])
    # What the suite itself runs: pytest, hypothesis, setuptools (test_packaging), mypy (test_typing).
    assert {"pytest", "hypothesis", "setuptools", "mypy"} <= test
    assert "ruff" not in test  # only CI's style checks run it
    dev = _names(extras["dev"])
    assert "ruff" in dev and "pyaclnn" in dev  # pyaclnn[test]: dev includes the test extra
    assert any(r.replace(" ", "") == "pyaclnn[test]" for r in extras["dev"])
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'pip install --quiet ".[dev]"' in ci
    assert ci.index('".[dev]"') < ci.index("ruff check")
    text = README.read_text(encoding="utf-8")
    assert 'pip install ".[dev]"' in text and "ruff" in _section(text, "Install")


# -- the links -----------------------------------------------------------------------------

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_ANY_FENCE = re.compile(r"^```.*?^```$", re.MULTILINE | re.DOTALL)


def slug(heading: str) -> str:
    """The anchor a Markdown renderer gives ``heading``: lower case, punctuation dropped, spaces as -."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of ``text``'s headings (outside code blocks); a repeated one gets -1, -2, ..."""
    seen: dict[str, int] = {}
    for line in _ANY_FENCE.sub("", text).splitlines():
        heading = re.match(r"#{1,6} (.+)", line)
        if heading is None:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        if count:
            seen.setdefault(f"{base}-{count}", 1)
    return set(seen)


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """Relative links of ``page`` to a file that does not exist, or to a heading it does not have."""
    text = page.read_text(encoding="utf-8")
    problems = []
    for target in _LINK.findall(_ANY_FENCE.sub("", text)):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:: not a file of the tree
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(root).as_posix()}: {target}"
        if not linked.exists():
            problems.append(f"{where}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked.read_text(encoding="utf-8")):
            problems.append(f"{where}: no such heading")
    return problems


def test_every_relative_link_of_the_readme_and_the_guide_leads_somewhere():
    pages = [README, *sorted(DOCS.glob("*.md")), ROOT / "benchmarks" / "README.md"]
    problems = [p for page in pages for p in broken_links(page)]
    assert problems == [], "\n".join(problems)


def test_the_link_check_sees_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "a.md").write_text(
        "# A page\n\n## Streams and events: what waits\n\n## Twice\n\n## Twice\n\n"
        "```\n## Not a heading\n```\n",
        encoding="utf-8",
    )
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](guide/a.md) [ok](guide/a.md#streams-and-events-what-waits) [ok](guide/a.md#twice-1)\n"
        "[web](https://example.org/x) [here](#top)\n\n# Top\n\n"
        "[gone](guide/b.md) [no heading](guide/a.md#not-a-heading) ![pic](guide/x.svg)\n",
        encoding="utf-8",
    )
    assert broken_links(page, tmp_path) == [
        "README.md: guide/b.md: no such file",
        "README.md: guide/a.md#not-a-heading: no such heading",
        "README.md: guide/x.svg: no such file",
    ]
