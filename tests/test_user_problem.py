"""A user's own problem as the README's "Your own problem" tells it: the example file and command
taken from the README and run from an empty directory, the module found from the launch
directory by every entry point (and by Ray actors, locally and on a cluster), and the old
top-level imports (``problems.*``) refused with one line naming ``isles.problems.*``."""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
QUIET = ["device=cpu", "logger=none", "progress=false"]


def readme_block(marker: str) -> str:
    """The fenced code block that follows the comment ``<!-- test: user-problem MARKER ...-->``."""
    m = re.search(r"<!-- test: user-problem " + re.escape(marker) + r".*?-->\s*```\w*\n(.*?)```", README, re.S)
    assert m, f"README: no code block after <!-- test: user-problem {marker} -->"
    return m.group(1)


def readme_command() -> list[str]:
    """The README's command, continuation lines joined, as the shell would split it."""
    return shlex.split(readme_block("command").replace("\\\n", " "))


def isles_env(**extra) -> dict:
    """The environment of a user who installed isles: the package importable, nothing else of the
    checkout (``PYTHONPATH`` names only the checkout, as an editable install would)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(ROOT), **extra)
    return env


def run(cmd, cwd, env=None, timeout=300):
    return subprocess.run(cmd, cwd=cwd, env=env or isles_env(), capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def project(tmp_path) -> Path:
    """An empty folder holding only the README's ``pressure_vessel.py``."""
    (tmp_path / "pressure_vessel.py").write_text(readme_block("file=pressure_vessel.py"))
    return tmp_path


def _feasible_line(p) -> str:
    assert p.returncode == 0, p.stderr[-3000:]
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("isles: best f=")]
    assert line, p.stdout[-2000:]
    return line[-1]


def test_readme_user_problem_from_an_empty_directory(project):
    """The README's file and command, to the letter, from a folder holding nothing else."""
    cmd = readme_command()
    assert cmd[:3] == ["python", "-m", "isles"]
    p = run([sys.executable, *cmd[1:], *QUIET], cwd=project)
    line = _feasible_line(p)
    assert " feasible " in line
    f = float(re.search(r"best f=([0-9.eE+-]+)", line).group(1))
    assert 5885.0 < f < 6100.0, line  # the best known design costs 5885.33


@pytest.mark.parametrize("entry", ["run.py", "isles command"])
def test_launch_directory_is_importable_for_every_entry_point(project, tmp_path_factory, entry):
    """``python run.py`` (a checkout's script, launched from elsewhere) and the ``isles`` console
    script find the user's module in the launch directory, as ``python -m isles`` does."""
    if entry == "run.py":
        script = ROOT / "run.py"
    else:  # what pip writes for [project.scripts] isles = "isles.cli:main"
        script = tmp_path_factory.mktemp("bin") / "isles"
        script.write_text("import sys\nfrom isles.cli import main\nsys.exit(main())\n")
    cmd = readme_command()[3:]
    p = run([sys.executable, str(script), *cmd, "generations=20", *QUIET], cwd=project)
    assert " feasible " in _feasible_line(p)


@pytest.mark.slow  # 43 s on 2 shared cores: mostly the start of two Ray actors
def test_user_module_in_the_launch_directory_reaches_two_local_ray_actors(project):
    """Two CPU actors of a local Ray import the user's module from the launch directory."""
    cmd = readme_command()[3:]
    p = run(
        [
            sys.executable,
            str(ROOT / "run.py"),
            *[c.replace("cmepso", "de_islands") for c in cmd],
            "generations=40",
            "islands.n=2",
            "islands.n_actors=2",
            "islands.migration_interval=20",
            *QUIET,
        ],
        cwd=project,
    )
    assert " feasible " in _feasible_line(p)


def test_old_top_level_import_from_a_checkout_names_the_new_one():
    """From a checkout (its root on sys.path) ``from problems.base import Problem`` used to import a
    second copy of the base class; now one ImportError line names the new import."""
    for part, new in (
        ("problems", "from isles.problems.base import Problem"),
        ("algorithms", "from isles.algorithms.de.de import DE"),
        ("islands", "from isles.islands.coordinator import Coordinator"),
    ):
        p = run([sys.executable, "-c", f"import {part}"], cwd=ROOT)
        assert p.returncode != 0
        last = p.stderr.strip().splitlines()[-1]
        assert last.startswith("ImportError: the package") and new in last, last


@pytest.mark.parametrize("layout", ["checkout", "installed"])
def test_cli_names_the_new_import_for_an_old_one(project, tmp_path_factory, layout):
    """A user's module written against the old names, run through the CLI: one line naming the new
    import, never Hydra's "Are you sure that module ... is installed?". ``installed``: isles
    importable without the checkout's root on sys.path, as a wheel installs it."""
    old = project / "old_vessel.py"
    old.write_text(
        (project / "pressure_vessel.py")
        .read_text()
        .replace("from isles.problems.base import", "from problems.base import")
    )
    env = isles_env()
    if layout == "installed":
        site = tmp_path_factory.mktemp("site")
        (site / "isles").symlink_to(ROOT / "isles")
        env["PYTHONPATH"] = str(site)
    cmd = [c.replace("pressure_vessel.", "old_vessel.") for c in readme_command()[3:]]
    p = run([sys.executable, "-m", "isles", *cmd, *QUIET], cwd=project, env=env)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "installed?" not in lines[0], p.stderr
    assert lines[0].startswith("isles: error: problem._target_='old_vessel.PressureVessel': cannot import it")
    assert "from isles.problems.base import Problem" in lines[0]


def test_missing_module_is_one_line_saying_where_isles_looks(tmp_path):
    p = run([sys.executable, "-m", "isles", "problem._target_=no_such_module.Vessel", *QUIET], cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "isles: error: problem._target_='no_such_module.Vessel': no module named 'no_such_module': run isles "
        "from the folder that holds no_such_module.py (or its package folder), or add that folder to PYTHONPATH"
    ]


def test_user_module_paths_lists_only_the_users_code(project, monkeypatch):
    """What travels to a cluster's workers as py_modules: the user's file, not isles, not installed
    packages, not what a shipped working_dir already holds."""
    from isles.app.user_modules import user_module_paths

    monkeypatch.syspath_prepend(str(project))
    cfg = {
        "problem": {"_target_": "pressure_vessel.PressureVessel"},
        "algorithm": {"_target_": "isles.algorithms.de.de.DE"},
        "topology": {"_target_": "numpy.zeros"},
        "hydra": {"callbacks": [{"_target_": "no_such.Thing"}]},
    }
    assert user_module_paths(cfg) == [str((project / "pressure_vessel.py").resolve())]
    assert user_module_paths(cfg, shipped=(str(project),)) == []


@pytest.mark.slow
def test_user_module_reaches_a_clusters_workers(project):
    """``ray.address=...`` from a checkout ships the checkout as Ray's working_dir, and then Ray no
    longer adds the driver's directory to its workers' path: without py_modules the actors could
    not import the user's module from the launch directory (a ModuleNotFoundError inside them)."""
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    # short: Ray's Unix socket paths under it must stay within 107 bytes, and pytest-xdist's worker
    # folder (popen-gwN) made tmp_path_factory's too long for them
    temp = tempfile.mkdtemp(prefix="isles-node")
    c = Cluster(initialize_head=True, connect=False, head_node_args={"num_cpus": 2, "temp_dir": temp})
    try:
        cmd = [x.replace("cmepso", "de_islands") for x in readme_command()[3:]]
        p = run(
            [
                sys.executable,
                str(ROOT / "run.py"),
                *cmd,
                f"ray.address={c.address}",
                "generations=40",
                "islands.n=2",
                "islands.n_actors=2",
                "islands.migration_interval=20",
                *QUIET,
            ],
            cwd=project,
        )
        assert " feasible " in _feasible_line(p)
    finally:
        c.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
