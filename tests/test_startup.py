"""Start-up (issue 16 §4): a local run imports neither Ray nor Optuna; CuPy is imported without
the Optuna import that ``cupyx`` makes; a CPU run's islands share one actor unless asked.
Timings are in ``benchmarks/job_bench.py``, never here."""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from isles.islands.control.placement import needs_ray
from tests.helpers import make_cfg, plain

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(*args: str) -> set[str]:
    """The top-level modules ``python -X importtime run.py ARGS`` imported (the run must succeed)."""
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "run.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "isles: best f=" in p.stdout, p.stdout[-2000:]
    return {m.group(1).split(".")[0] for m in re.finditer(r"^import time:.*\|\s*(\S+)$", p.stderr, re.M)}


@pytest.mark.slow  # a whole run
def test_local_run_imports_neither_ray_nor_optuna():
    """``+experiment=cmepso device=cpu logger=none``: one island group in this process, so no Ray
    (Ray is not even imported to ask whether it is running) and no Optuna."""
    mods = imported_modules("+experiment=cmepso", "device=cpu", "logger=none", "generations=5", "progress=false")
    assert "numpy" in mods  # the parse found the imports
    assert not mods & {"ray", "optuna"}, sorted(mods & {"ray", "optuna"})


def test_cpu_islands_share_one_actor_unless_asked():
    """``+experiment=de_islands`` on the CPU: 8 islands in one group, in this process (no Ray
    actors to start: 15-25 s of a 17-32 s run on 2 cores); ``islands.n_actors=2`` asks for Ray."""
    cfg = plain(make_cfg("+experiment=de_islands", "logger=none", "device=cpu", "ray.num_cpus=2"))
    assert not needs_ray(cfg)
    cfg = plain(make_cfg("+experiment=de_islands", "logger=none", "device=cpu", "ray.num_cpus=2", "islands.n_actors=2"))
    assert needs_ray(cfg)


FAKE_CUPY = '''
"""A stand-in for CuPy 13's import: ``cupy`` imports ``cupyx``, whose ``cupyx.optimizing``
tries ``import optuna``."""
import cupyx.optimizing  # noqa: F401


class _Runtime:
    @staticmethod
    def getDeviceCount():
        return 1


class cuda:
    runtime = _Runtime
'''

FAKE_OPTIMIZING = """
try:
    import optuna  # noqa: F401
    OPTUNA = True
except ImportError:
    OPTUNA = False
"""

PROBE = """
import sys
from isles.algorithms.core.backend import cupy_or_none
cp = cupy_or_none()
import cupyx.optimizing
print("cupy", cp is not None, "optuna_at_import", cupyx.optimizing.OPTUNA, "optuna_loaded", "optuna" in sys.modules)
import cupyx.optimizing._later  # CuPy 14: reached later, from the first evaluation (cupyx.scipy.special)
print("optuna_later_in_cupyx", cupyx.optimizing._later.OPTUNA, "optuna_loaded", "optuna" in sys.modules)
import optuna
print("optuna_elsewhere", optuna.__name__)
"""


def test_cupy_is_imported_without_optuna(tmp_path):
    """``cupy_or_none`` (how isles finds the GPU) imports a CuPy whose ``cupyx.optimizing`` tries
    ``import optuna``, at CuPy's import (CuPy 13) or later (CuPy 14, from the first evaluation):
    both are refused, and an ``import optuna`` from elsewhere (a sweep) still works. Fake ``cupy`` and
    ``optuna`` packages stand in for the real ones (no GPU here)."""
    (tmp_path / "cupy").mkdir()
    (tmp_path / "cupy" / "__init__.py").write_text(textwrap.dedent(FAKE_CUPY))
    (tmp_path / "cupyx" / "optimizing").mkdir(parents=True)
    (tmp_path / "cupyx" / "__init__.py").write_text("")
    (tmp_path / "cupyx" / "optimizing" / "__init__.py").write_text(FAKE_OPTIMIZING)
    (tmp_path / "cupyx" / "optimizing" / "_later.py").write_text(FAKE_OPTIMIZING)
    (tmp_path / "optuna").mkdir()
    (tmp_path / "optuna" / "__init__.py").write_text("")
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"}
    p = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == [
        "cupy",
        "True",
        "optuna_at_import",
        "False",
        "optuna_loaded",
        "False",
        "optuna_later_in_cupyx",
        "False",
        "optuna_loaded",
        "False",
        "optuna_elsewhere",
        "optuna",
    ]
