"""``python -m isles`` from the folder that holds a checkout named ``isles`` (issue 25): the usual
layout after ``git clone ... isles && pip install -e isles``. Python's ``-m`` puts that folder first
on ``sys.path``, where the checkout (no ``__init__.py`` at its top) is a namespace package
``isles``; an editable install's finder comes after Python's own, so the namespace hid the package
(``cannot import name 'refuse_old_name' from 'isles' (unknown location)``)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]


def editable_install(site: Path) -> None:
    """What ``pip install -e`` of this checkout installs, into the folder ``site`` (put on
    ``PYTHONPATH``): setuptools' own editable finder (a ``sys.meta_path`` finder mapping isles'
    packages to the checkout's folders, after Python's path finder), installed at start-up by a
    ``sitecustomize`` (pip's ``.pth`` file is read only in site-packages). It goes before any
    editable install of another checkout that this Python already has."""
    editable = pytest.importorskip("setuptools.command.editable_wheel")
    if not hasattr(editable, "_finder_template"):
        pytest.skip("this setuptools writes its editable finder differently")
    dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    mapping = {name: str(ROOT / folder) for name, folder in dirs.items()}
    site.mkdir()
    (site / "isles_test_finder.py").write_text(editable._finder_template("isles_test_finder", mapping, {}))
    (site / "sitecustomize.py").write_text(
        "import sys\nimport isles_test_finder as f\nf.install()\n"
        "sys.meta_path.remove(f._EditableFinder)\n"
        "sys.meta_path.insert(next(i for i, m in enumerate(sys.meta_path) if getattr(m, '__name__', '') == "
        "'PathFinder') + 1, f._EditableFinder)\n"
    )


def test_python_m_isles_beside_a_checkout_named_isles(tmp_path):
    editable_install(tmp_path / "site")
    work = tmp_path / "work"
    work.mkdir()
    (work / "isles").symlink_to(ROOT, target_is_directory=True)  # git clone ... isles
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "isles",
            "+experiment=cmepso",
            "generations=5",
            "logger=none",
            "progress=false",
            "device=cpu",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "isles: best f=" in p.stdout and "feasible" in p.stdout
    # the package came from the checkout through the install, the user's modules still from here
    (work / "here_problem.py").write_text(
        "from isles.problems.base import Problem\n\n\nclass P(Problem):\n"
        "    def __init__(self):\n        super().__init__(2, -1.0, 1.0)\n\n"
        "    def objective(self, X):\n        return (X ** 2).sum(axis=-1)\n"
    )
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "isles",
            "problem._target_=here_problem.P",
            "generations=5",
            "islands.n=1",
            "logger=none",
            "progress=false",
            "device=cpu",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0 and "isles: best f=" in p.stdout, p.stderr[-3000:]
