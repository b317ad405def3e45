"""``ruff`` over the repository, as configured in ``pyproject.toml``, with the tests: CI and the
README's test command run them (``.ci/run``: ``python -m pytest``). ``ruff check``: errors,
undefined and unused names; ``ruff format --check``: the tree is as the formatter writes it; and
no Python file is over 500 lines once formatted (issue 26 §7). ``ruff`` comes with the ``test``
extra."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: the folders of the package and its tests, benchmarks and configs, whose ``*.py`` files
#: :func:`test_no_python_file_is_over_500_lines` measures, and the top-level script
FOLDERS = ("algorithms", "app", "islands", "problems", "isles", "conf", "benchmarks", "tests")
SCRIPTS = ("run.py",)
MAX_LINES = 500


def _ruff(*args: str) -> subprocess.CompletedProcess:
    """``ruff ARGS`` run in the repository root (the one installed beside this Python if it is
    not on ``PATH``); fails the test with the install command where ruff is missing."""
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).is_file():
        pytest.fail("ruff is not installed: python -m pip install -e '.[test]'", pytrace=False)
    return subprocess.run([ruff, *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def python_files() -> list[Path]:
    """The ``*.py`` files of :data:`FOLDERS` (recursively) and :data:`SCRIPTS`, sorted."""
    found = [p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")]
    found += [ROOT / name for name in SCRIPTS if (ROOT / name).is_file()]
    return sorted(found)


def test_ruff_check_passes():
    p = _ruff("check", "--output-format", "concise", ".")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]


def test_ruff_format_check_passes():
    """``ruff format --check .``: no file would be changed by the formatter (the files it would
    reformat are listed)."""
    p = _ruff("format", "--check", ".")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]


def test_the_line_count_sees_the_package():
    """The scan of :func:`python_files` finds every part (else the next test passes vacuously)."""
    names = {p.relative_to(ROOT).as_posix() for p in python_files()}
    for folder in FOLDERS:
        assert any(name.startswith(f"{folder}/") for name in names), folder
    assert {"run.py", "app/job.py", "tests/test_lint.py", "conf/__init__.py"} <= names
    assert len(names) > 150


def test_no_python_file_is_over_500_lines():
    """Issue 26 §7: no ``*.py`` file of the package, its tests, benchmarks or configs is over 500
    lines; with :func:`test_ruff_format_check_passes`, that is 500 lines as the formatter writes
    them, not lines packed to stay under the cap."""
    over = {}
    for path in python_files():
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_LINES:
            over[path.relative_to(ROOT).as_posix()] = n
    assert not over, f"over {MAX_LINES} lines: {over}"
