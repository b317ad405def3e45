"""Packaging (issue 10 §1): the wheel installs one top-level package, ``isles``, with every part
and the configs, and runs the main job from an empty directory."""
from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PARTS = {"isles.algorithms": "algorithms", "isles.problems": "problems", "isles.islands": "islands"}


def test_every_subpackage_is_listed():
    """``pyproject.toml`` lists its packages by hand (package-dir mapping): a new folder with an
    ``__init__.py`` must be listed, or the wheel would lack it."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"isles", "isles.conf"}
    for name, folder in PARTS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *rel)))
    assert found == listed


def test_no_old_top_level_imports():
    """Nothing imports ``algorithms``/``problems``/``islands`` as top-level modules any more."""
    bad = []
    for path in ROOT.rglob("*.py"):
        if any(p in path.parts for p in (".wt", ".devbundle", "outputs", "build")):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            s = line.strip()
            if s.startswith(("from algorithms", "from problems", "from islands", "import algorithms",
                             "import problems", "import islands")):
                bad.append(f"{path.relative_to(ROOT)}:{n}: {s}")
    assert not bad, "\n".join(bad)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "-w", str(out), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (whl,) = out.glob("isles-*.whl")
    return whl


def test_wheel_has_one_top_level_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"isles"}
    for must in ("isles/algorithms/de/cuda.py", "isles/islands/coordinator.py", "isles/problems/base.py",
                 "isles/conf/config.yaml", "isles/conf/experiment/cmepso.yaml", "isles/cli.py"):
        assert must in names, must
    entry = [n for n in names if n.endswith("entry_points.txt")]
    assert entry and "isles = isles.cli:main" in zipfile.ZipFile(wheel).read(entry[0]).decode()


def test_wheel_runs_the_main_job_from_an_empty_directory(wheel, tmp_path):
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target",
                    str(site), str(wheel)], check=True, capture_output=True, timeout=300)
    work = tmp_path / "empty"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    probe = subprocess.run([sys.executable, "-c", "import isles; print(isles.__file__, isles.CHECKOUT)"],
                           cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert probe.stdout.startswith(str(site)) and probe.stdout.split()[-1] == "None", probe.stdout + probe.stderr
    proc = subprocess.run([sys.executable, "-m", "isles", "+experiment=cmepso", "generations=20", "logger=none",
                           "progress=false"], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "isles: best f=" in proc.stdout and "feasible" in proc.stdout
