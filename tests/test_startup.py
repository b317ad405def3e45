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


def imported_modules(*args: str, full: bool = False) -> set[str]:
    """The top-level modules ``python -X importtime run.py ARGS`` imported (the run must succeed);
    ``full``: every module's full name."""
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "run.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "isles: best f=" in p.stdout, p.stdout[-2000:]
    names = {m.group(1) for m in re.finditer(r"^import time:.*\|\s*(\S+)$", p.stderr, re.M)}
    return names if full else {n.split(".")[0] for n in names}


@pytest.mark.slow  # a whole run
def test_local_run_imports_neither_ray_nor_optuna():
    """``+experiment=cmepso device=cpu logger=none``: one island group in this process, so no Ray
    (Ray is not even imported to ask whether it is running) and no Optuna."""
    mods = imported_modules(
        "+experiment=cmepso", "device=cpu", "logger=none", "generations=5", "progress=false", full=True
    )
    assert "numpy" in mods  # the parse found the imports
    top = {m.split(".")[0] for m in mods}
    assert not top & {"ray", "optuna", "mlflow"}, sorted(top & {"ray", "optuna", "mlflow"})
    assert "unittest.mock" not in mods  # (and asyncio, ssl with it) only where Ray starts: isles.app.local_ray


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


COUNT_COMPOSITIONS = """
import atexit, sys
from hydra._internal.config_loader_impl import ConfigLoaderImpl
load, count = ConfigLoaderImpl.load_configuration, []
def counted(self, *args, **kwargs):
    count.append(1)
    return load(self, *args, **kwargs)
ConfigLoaderImpl.load_configuration = counted
atexit.register(lambda: print("compositions", len(count), file=sys.stderr))
sys.argv = ["run.py", *sys.argv[1:]]
from isles.cli import main
main()
"""


@pytest.mark.slow  # a whole run
def test_hydra_composes_a_runs_config_once(tmp_path):
    """Hydra composed every run's config twice, the first time only to read ``hydra.mode``, which
    no config of a plain run sets (issue 34 §4: a fifth of a short CPU run's process)."""
    args = ["+experiment=cmepso", "device=cpu", "logger=none", "generations=2", "progress=false"]
    p = subprocess.run(
        [sys.executable, "-c", COUNT_COMPOSITIONS, *args, f"hydra.run.dir={tmp_path}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0 and "isles: best f=" in p.stdout, p.stderr[-3000:]
    assert "compositions 1" in p.stderr, p.stderr[-2000:]


@pytest.mark.parametrize(
    ("argv", "skipped"),
    [
        (["+experiment=cmepso", "device=cpu"], True),
        (["-m", "+experiment=cmepso", "seed=0,1"], True),  # -m says it: Hydra's mode from the flag
        (["+experiment=de_islands", "hparams_search=de_optuna"], False),  # sets hydra.mode: MULTIRUN
        (["+experiment=cmepso", "hydra.mode=MULTIRUN"], False),
        (["+experiment=cmepso", "++hydra.mode=MULTIRUN"], False),
        (["+experiment=cmepso", "hydra.searchpath=[file:///elsewhere]"], False),
        (["--config-dir=/elsewhere", "+experiment=mine"], False),
        (["-cd", "/elsewhere", "+experiment=mine"], False),
    ],
)
def test_hydras_mode_is_composed_only_where_a_config_may_set_it(argv, skipped, monkeypatch):
    from hydra._internal.hydra import Hydra

    from isles.cli import compose_once

    monkeypatch.setattr(Hydra, "get_mode", Hydra.get_mode)  # restored after the test
    before = Hydra.get_mode
    assert compose_once(argv) is skipped
    assert (Hydra.get_mode is not before) is skipped
    if skipped:
        assert Hydra.get_mode(None, None, argv) is None


RECORDING_CUPY = '''
"""A stand-in for CuPy that records which thread imported it and what was asked of the runtime."""
import threading

IMPORTED_IN = threading.current_thread().name
CALLS = []


class _Runtime:
    @staticmethod
    def getDeviceCount():
        CALLS.append("getDeviceCount")
        return 1

    @staticmethod
    def free(ptr):
        CALLS.append(f"free {ptr}")


class cuda:
    runtime = _Runtime
'''

EARLY = """
import sys
from isles import early
t = early.start(sys.argv[1:])
again = early.start(sys.argv[1:])
t.join(60)
import cupy
print(t.name, cupy.IMPORTED_IN, cupy.CALLS, again)
"""


def test_cupy_and_the_cuda_context_are_started_in_a_thread_before_the_imports(tmp_path):
    """The entry points start CuPy's import and the CUDA context in a thread of their own (issue 34 §4:
    about 0.65 s in line on an H200), once: a stand-in ``cupy`` records the thread that imported it and
    that the device's primary context was made (``cudaFree(0)``)."""
    (tmp_path / "cupy").mkdir()
    (tmp_path / "cupy" / "__init__.py").write_text(RECORDING_CUPY)
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"}
    p = subprocess.run(
        [sys.executable, "-c", EARLY, "+experiment=cmepso", "device=gpu"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().split(maxsplit=2) == [
        "isles-early-cuda",
        "isles-early-cuda",
        "['getDeviceCount', 'free 0'] None",
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["+experiment=cmepso", "device=cpu"],
        ["-m", "+experiment=cmepso", "seed=0,1"],  # a sweep's jobs start apart
        ["+experiment=cmepso", "ray.address=auto"],  # a cluster's actors hold the GPUs
        ["show", "outputs/best_solution.json"],
        ["sync"],
        ["precompile"],
    ],
)
def test_no_cuda_thread_where_the_command_uses_no_gpu_here(argv, monkeypatch):
    from isles import early

    monkeypatch.setattr(early, "_started", None)
    assert early.start(argv) is None
    assert early._started is None


def test_no_cuda_thread_when_turned_off(monkeypatch):
    from isles import early

    monkeypatch.setattr(early, "_started", None)
    monkeypatch.setenv("ISLES_EARLY_CUDA", "0")
    assert early.start(["+experiment=cmepso", "device=gpu"]) is None


def test_job_bench_can_time_runs_with_their_bytecode_cached(monkeypatch, tmp_path):
    """``benchmarks/job_bench.py --bytecode cached``: the runs write and reuse Python's bytecode in one
    folder although this shell sets ``PYTHONDONTWRITEBYTECODE`` (the lent GPU machines do, beside
    packages without ``.pyc`` files: every run compiled every module); ``as-is`` keeps the setting."""
    from benchmarks.job_bench import bytecode_env, bytecode_words

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    assert bytecode_env(None)["PYTHONDONTWRITEBYTECODE"] == "1"
    assert "not written" in bytecode_words(None)
    env = bytecode_env(str(tmp_path))
    assert "PYTHONDONTWRITEBYTECODE" not in env and env["PYTHONPYCACHEPREFIX"] == str(tmp_path)
    assert "cached" in bytecode_words(str(tmp_path))
