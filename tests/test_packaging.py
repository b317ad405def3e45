"""Packaging (issue 10 §1): the wheel installs one top-level package, ``isles``, with every part
and the configs, and runs the main job from an empty directory."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
PARTS = {"isles.algorithms": "algorithms", "isles.problems": "problems", "isles.islands": "islands", "isles.app": "app"}


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


OLD_PREFIXES = (
    "from algorithms",
    "from problems",
    "from islands",
    "import algorithms",
    "import problems",
    "import islands",
)


def tracked_python_files(root: Path) -> list[Path]:
    """The ``*.py`` files git tracks under ``root`` (``git ls-files``): never a ``.venv``'s
    site-packages, build output or anything else the checkout merely holds. Outside a git checkout
    (an unpacked sdist), the package folders of ``pyproject.toml`` plus ``tests`` and ``benchmarks``."""
    proc = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", "*.py"], capture_output=True, text=True)
    if proc.returncode == 0:
        return [root / rel for rel in proc.stdout.split("\0") if rel]
    folders = [*PARTS.values(), "isles", "tests", "benchmarks"]
    return [p for f in folders for p in (root / f).rglob("*.py")]


def old_top_level_imports(root: Path) -> list[str]:
    """``path:line: text`` of each line of :func:`tracked_python_files` that imports ``algorithms``,
    ``problems`` or ``islands`` as a top-level module."""
    bad = []
    for path in tracked_python_files(root):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            s = line.strip()
            if s.startswith(OLD_PREFIXES):
                bad.append(f"{path.relative_to(root)}:{n}: {s}")
    return bad


def test_no_old_top_level_imports():
    """Nothing imports ``algorithms``/``problems``/``islands`` as top-level modules any more."""
    bad = old_top_level_imports(ROOT)
    assert not bad, "\n".join(bad)


def test_old_import_check_reads_tracked_files_only(tmp_path):
    """Issue 16 §3: a ``.venv`` inside the checkout (site-packages with a file that is not UTF-8)
    is not read; an old import in a tracked file is still found."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "mine.py").write_text("import numpy\nfrom problems.base import Problem\n")
    site = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "bad.py").write_bytes(b"# \xff\xfe not UTF-8\nfrom problems import x\n")
    subprocess.run(["git", "-C", str(tmp_path), "add", "mine.py"], check=True)
    assert old_top_level_imports(tmp_path) == ["mine.py:2: from problems.base import Problem"]


ALGORITHM_NAMES = re.compile(r"cmepso|epso|\bcde\b|fep|\bga\b|\bde\b|pso", re.IGNORECASE)


def test_the_runtime_is_apart_from_the_application_and_the_algorithms():
    """Issue 19, layout: ``islands/`` (the runtime) imports nothing of ``app/`` (the application
    around it), names no algorithm (code, comments and docstrings), and no file of it is over
    500 lines."""
    for path in sorted((ROOT / "islands").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        assert len(lines) <= 500, f"{path.name}: {len(lines)} lines"
        for n, line in enumerate(lines, 1):
            assert not re.match(r"\s*(from|import) isles\.app\b", line), f"{path.name}:{n}: {line.strip()}"
            assert not ALGORITHM_NAMES.search(line), f"{path.name}:{n}: {line.strip()}"


def test_the_algorithms_import_nothing_of_the_runtime():
    """Issue 36 §1: ``algorithms/`` (the families and their core) imports nothing of ``islands/``, at
    the top of a module or inside a function (a mixed archipelago's layout is the runtime's,
    ``islands/mixed.py``), so the runtime depends on the algorithms and never the other way."""
    found = []
    for path in sorted((ROOT / "algorithms").rglob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.match(r"\s*(from|import) isles\.islands\b", line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, found


def test_moved_modules_name_their_new_home():
    """Issue 19: the application left ``islands/`` for ``app/``; an import of an old module is one
    ImportError line naming the new one (not ``No module named``), and ``app`` imported as a
    top-level package from a checkout (a second copy of isles' classes) is refused the same way."""
    for code, new in (
        ("from isles.islands.job import run_job", "isles.app.job"),
        ("import isles.islands.tracking", "isles.app.tracking"),
        ("import app", "from isles.app.job import run_job"),
    ):
        p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
        last = p.stderr.strip().splitlines()[-1]
        assert p.returncode != 0 and last.startswith("ImportError: ") and new in last, p.stderr
    from isles.app.job import run_job  # the new home imports

    assert callable(run_job)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a copy of the checkout (pip builds in the source tree: ``build/`` and
    ``isles.egg-info`` stay out of the checkout, which other test processes read meanwhile)."""
    out = tmp_path_factory.mktemp("wheel")
    src = tmp_path_factory.mktemp("source") / "isles"
    skip = (".git", "build", "*.egg-info", "outputs", "multirun", "mlruns", "mlflow.db*", "__pycache__", ".*_cache")
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*skip))
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (whl,) = out.glob("isles-*.whl")
    return whl


@pytest.mark.slow  # builds the wheel
def test_wheel_has_one_top_level_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"isles"}
    for must in (
        "isles/algorithms/de/cuda.py",
        "isles/islands/coordinator.py",
        "isles/app/job.py",
        "isles/problems/base.py",
        "isles/conf/config.yaml",
        "isles/conf/experiment/cmepso.yaml",
        "isles/cli.py",
    ):
        assert must in names, must
    entry = [n for n in names if n.endswith("entry_points.txt")]
    assert entry and "isles = isles.cli:main" in zipfile.ZipFile(wheel).read(entry[0]).decode()


@pytest.mark.slow  # builds the wheel
def test_wheel_carries_the_cuda_library(wheel):
    """Issue 18 section 1: every ``.cu``/``.cuh`` file of ``algorithms/core/cuda/`` is package data
    of the wheel (``pyproject.toml`` ``[tool.setuptools.package-data]``)."""
    names = set(zipfile.ZipFile(wheel).namelist())
    files = sorted(p.name for p in (ROOT / "algorithms" / "core" / "cuda").iterdir() if p.suffix in (".cu", ".cuh"))
    assert "rng.cuh" in files and "de.cu" in files
    missing = [f for f in files if f"isles/algorithms/core/cuda/{f}" not in names]
    assert not missing, missing


@pytest.mark.slow  # builds and installs the wheel, a whole run
def test_wheel_runs_the_main_job_from_an_empty_directory(wheel, tmp_path):
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    work = tmp_path / "empty"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    probe = subprocess.run(
        [sys.executable, "-c", "import isles; print(isles.__file__, isles.CHECKOUT)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert probe.stdout.startswith(str(site)) and probe.stdout.split()[-1] == "None", probe.stdout + probe.stderr
    # the installed CUDA library reads its files through importlib.resources (issue 18 section 1)
    lib = subprocess.run(
        [
            sys.executable,
            "-c",
            "from isles.algorithms.core import cuda_lib as c; "
            "print(len(c.names()), all(len(c.source(n)) > 0 for n in c.names()))",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert lib.returncode == 0 and lib.stdout.split()[-1] == "True" and int(lib.stdout.split()[0]) >= 10, (
        lib.stdout + lib.stderr
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "isles",
            "+experiment=cmepso",
            "generations=20",
            "logger=none",
            "progress=false",
            "device=cpu",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "isles: best f=" in proc.stdout and "feasible" in proc.stdout
