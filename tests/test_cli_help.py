"""``python -m pyaclnn ... --help`` reads as plain text and works outside a source checkout.

"Outside a checkout" is a copy of the package alone in a temporary directory,
run from another one, as an installed wheel is: no benchmarks/ next to the
package or in the working directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pyaclnn import __main__ as cli

ROOT = Path(__file__).resolve().parent.parent
# reStructuredText markup the docstrings use and a terminal shows verbatim.
RST = ("``", ":func:", ":class:", ":mod:")


def _pyaclnn(*args: str, cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYACLNN_BACKEND")}
    env["COLUMNS"] = "1000"  # argparse wraps at the terminal width, inside paths too
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [sys.executable, "-m", "pyaclnn", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(site directory holding a copy of the package alone, an empty working directory)."""
    base = tmp_path_factory.mktemp("installed")
    site, cwd = base / "site", base / "elsewhere"
    shutil.copytree(ROOT / "pyaclnn", site / "pyaclnn", ignore=shutil.ignore_patterns("__pycache__"))
    cwd.mkdir()
    return site, cwd


@pytest.mark.parametrize(
    "args", [(), ("info",), ("selftest",), ("bench",)], ids=lambda a: " ".join(a) or "top"
)
def test_help_is_plain_text(args):
    proc = _pyaclnn(*args, "--help", cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: python -m pyaclnn {' '.join(args)}".rstrip())
    for markup in RST:
        assert markup not in proc.stdout, f"{markup!r} in the help:\n{proc.stdout}"


def test_the_top_level_help_names_the_commands_in_plain_words():
    proc = _pyaclnn("--help", cwd=ROOT)
    assert "Command line: python -m pyaclnn [--version] info | ops | selftest | bench" in " ".join(
        proc.stdout.split()
    )


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("info", "What pyaclnn runs on: version, active backend and why"),
        ("selftest", "The four operators on a backend against the NumPy reference kernels"),
    ],
)
def test_a_command_help_says_what_it_does(command, says):
    proc = _pyaclnn(command, "--help", cwd=ROOT)
    assert says in " ".join(proc.stdout.split()), proc.stdout


def test_bench_help_outside_a_checkout_prints_help_saying_where_the_scripts_are(installed):
    site, cwd = installed
    for flag in ("--help", "-h"):
        proc = _pyaclnn("bench", flag, cwd=cwd, pythonpath=site)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stderr == ""
        text = " ".join(proc.stdout.split())
        assert text.startswith("usage: python -m pyaclnn bench [-h] [--json DIR] [--strict]")
        assert "--json DIR write DIR/<benchmark>.json" in text and "--strict" in text
        assert "Needs a source checkout: the benchmark scripts are in benchmarks/" in text
        assert str(site / "benchmarks") in text and str(cwd / "benchmarks") in text


def test_bench_outside_a_checkout_fails_in_one_line(installed):
    site, cwd = installed
    proc = _pyaclnn("bench", "--quick", cwd=cwd, pythonpath=site)
    assert proc.returncode == cli.EXIT_USAGE
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("bench: needs a source checkout: the benchmark scripts are in benchmarks/")
    assert str(site / "benchmarks") in proc.stderr


def test_bench_help_in_a_checkout_names_its_scripts_and_runs_nothing(monkeypatch, capsys):
    monkeypatch.setattr(cli, "bench", lambda extra: pytest.fail(f"bench ran with {extra}"))
    assert cli.main(["bench", "--quick", "--help"]) == 0
    assert f"The scripts: {ROOT / 'benchmarks'}." in " ".join(capsys.readouterr().out.split())


def test_help_after_the_separator_reaches_the_scripts(tmp_path, monkeypatch, capfd):
    for script in cli.BENCHMARKS:
        (tmp_path / script).write_text("import sys\nprint('args', sys.argv[1:])\n")
    monkeypatch.setattr(cli, "_benchmarks_dir", lambda: tmp_path)
    monkeypatch.setattr(cli, "_have_torch", lambda: True)
    assert cli.main(["bench", "--", "--quick", "--help"]) == 0
    out = capfd.readouterr().out
    assert out.count("args ['--quick', '--help']") == len(cli.BENCHMARKS), out


def test_the_selftest_module_help_is_plain_text_too():
    # python -m pyaclnn.selftest builds its own parser (selftest/cli.py).
    proc = subprocess.run(
        [sys.executable, "-m", "pyaclnn.selftest", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "selftest" in proc.stdout
    for markup in RST:
        assert markup not in proc.stdout, f"{markup!r} in the help:\n{proc.stdout}"
