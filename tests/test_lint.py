"""``ruff check`` over the repository, as configured in ``pyproject.toml`` (errors, undefined and
unused names), with the tests: CI and the README's test command run it. ``ruff`` comes with the
``test`` extra."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_passes():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).is_file():
        pytest.fail("ruff is not installed: python -m pip install -e '.[test]'", pytrace=False)
    p = subprocess.run(
        [ruff, "check", "--output-format", "concise", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
