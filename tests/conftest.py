"""Put the repository root on ``sys.path`` so tests import ``problems``/``algorithms`` uninstalled,
and keep CPU tests from picking a GPU by chance (issue 16 §3)."""

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
# the unfinished MLflow records of the tests' runs are listed apart from the user's (isles.app.tracking_journal)
if "ISLES_PENDING_DIR" not in os.environ:
    os.environ["ISLES_PENDING_DIR"] = tempfile.mkdtemp(prefix="isles-pending-")
    atexit.register(shutil.rmtree, os.environ["ISLES_PENDING_DIR"], True)


def _argv(args) -> list[str]:
    """A subprocess' command line as a list of strings."""
    return [str(a) for a in args] if isinstance(args, (list, tuple)) else str(args).split()


def _runs_isles(args: list[str]) -> bool:
    """Whether a command line starts an isles run (``run.py``, ``-m isles`` or the ``isles`` command;
    not ``isles show PATH``, which prints a saved result, nor ``isles sync`` and ``isles precompile``,
    which run no evolution)."""
    names = [Path(a).name for a in args]
    if {"show", "sync", "precompile"} & set(args[1:4]):
        return False
    return (
        "run.py" in names
        or "isles" in names[:1]
        or any(a == "-m" and b == "isles" for a, b in zip(args, args[1:], strict=False))
    )


@pytest.fixture(autouse=True)
def _sigint_disposition_kept():
    """Every test starts with the SIGINT handler the worker had, and one that a test (or a library
    it ran in this process) left changed is put back after it: a handler left as ``SIG_IGN`` would
    be inherited by the later tests' ``run.py`` processes, whose Python then ignores Ctrl-C until
    isles installs its own handler (seen under load: a SIGINT during the imports lost, exit 0)."""
    before = signal.getsignal(signal.SIGINT)
    yield
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # also where a session fixture's setup left it
        signal.signal(signal.SIGINT, signal.default_int_handler)
    elif signal.getsignal(signal.SIGINT) is not before and before is not None:
        signal.signal(signal.SIGINT, before)


@pytest.fixture(autouse=True)
def cpu_tests_name_their_device(request, monkeypatch):
    """A test without ``@pytest.mark.gpu`` that runs isles must say ``device=cpu``: ``device``
    defaults to ``auto``, which takes the GPU on a GPU workstation, so such a test would pass here
    and fail there. This guard fails it on every machine instead, at the two doors of a run: a
    :class:`Coordinator` (in-process runs and ``run_job``; it hands its island groups a concrete
    device) and a subprocess running ``run.py``/``isles`` without a ``device=`` override. It
    forces nothing: a test that names no device fails with a message saying so. (Not patched:
    ``IslandGroup``, whose class Ray pickles into its actors.)"""
    if request.node.get_closest_marker("gpu"):
        return
    from isles.islands.coordinator import Coordinator  # noqa: PLC0415

    def refuse(where: str):
        pytest.fail(
            f"{request.node.nodeid}: {where} with device=auto; a CPU test must say device=cpu "
            "(or carry @pytest.mark.gpu)",
            pytrace=False,
        )

    coordinator_init, popen_init = Coordinator.__init__, subprocess.Popen.__init__

    def coordinator(self, cfg, *a, **k):
        if cfg.get("device", "auto") == "auto":
            refuse("Coordinator")
        coordinator_init(self, cfg, *a, **k)

    def popen(self, args, *a, **k):
        argv = _argv(args)
        # a resumed run takes its device from the checkpoint's config
        if _runs_isles(argv) and not any(x.startswith(("device=", "++device=", "checkpoint.resume=")) for x in argv):
            refuse(f"subprocess {' '.join(argv)[:200]}")
        popen_init(self, args, *a, **k)

    monkeypatch.setattr(Coordinator, "__init__", coordinator)
    monkeypatch.setattr(subprocess.Popen, "__init__", popen)


def _program(argv: list[str]) -> int:
    """The index in ``argv`` (an isles run's command line) of the program: ``run.py``, ``isles`` after
    ``-m``, or the ``isles`` command; what follows it are Hydra's flags and overrides."""
    for i, a in enumerate(argv):
        if Path(a).name == "run.py" or (a == "isles" and (i == 0 or argv[i - 1] == "-m")):
            return i
    return 0


@pytest.fixture(autouse=True)
def runs_write_outside_the_checkout(monkeypatch, tmp_path_factory):
    """A run that a test starts in the checkout (``cwd`` the repository root) without naming its output
    folder wrote Hydra's ``outputs/DATE/TIME`` (``multirun/...`` with ``-m``) into the checkout: the
    checkout filled up, and two pytest-xdist workers starting runs in the same second shared one
    folder (its ``run.log``, its checkpoint). Such a run gets ``hydra.run.dir`` (``hydra.sweep.dir``)
    in a temporary folder of its own, appended to its overrides; a run that names its folder, runs
    elsewhere or is a subcommand (``isles show PATH``) is left as it is."""
    popen_init = subprocess.Popen.__init__

    def popen(self, args, *a, **k):
        argv = _argv(args) if isinstance(args, (list, tuple)) else []
        cwd = Path(k["cwd"]).resolve() if k.get("cwd") is not None else Path.cwd()
        if argv and _runs_isles(argv) and str(cwd) == ROOT:
            after = argv[_program(argv) + 1 :]
            key = "hydra.sweep.dir" if ("-m" in after or "--multirun" in after) else "hydra.run.dir"
            named = any(x.lstrip("+").startswith(("hydra.run.dir=", "hydra.sweep.dir=")) for x in after)
            subcommand = bool(after) and "=" not in after[0] and not after[0].startswith("-")
            if not named and not subcommand:
                args = [*args, f"{key}={tmp_path_factory.mktemp('outputs')}"]
        popen_init(self, args, *a, **k)

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)


def _gpu_run(config) -> bool:
    """Whether this run selects the GPU tests (``-m gpu``; not addopts' ``not gpu``)."""
    return "gpu" in (config.option.markexpr or "").replace("not gpu", "")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """GPU test runs (``-m gpu``) and kernel recording (``ISLES_RECORD_KERNELS_TESTS``) run in this one
    process, whatever addopts' ``-n`` says: their kernels are compiled ahead in worker processes of
    this one (:func:`pytest_sessionstart`) and recorded from it, and their tests share one GPU.
    (Before pytest-xdist's own ``pytest_configure``, which starts the workers.)"""
    if getattr(config.option, "numprocesses", None) and (
        _gpu_run(config) or os.environ.get("ISLES_RECORD_KERNELS_TESTS")
    ):
        config.option.numprocesses, config.option.dist, config.option.tx = 0, "no", []


def pytest_sessionstart(session):
    """GPU test runs (``-m gpu``) compile the CUDA kernels the GPU tests use in worker processes
    at once (kernel list ``tests-gpu`` of ``tests/data/gpu_test_kernels.json.gz``,
    :mod:`isles.algorithms.core.precompile`), so that a fresh
    machine's empty kernel cache costs seconds, not minutes; ``ISLES_RECORD_KERNELS_TESTS=PATH``
    records that list instead (``benchmarks/record_kernels.py --tests``)."""
    from isles.algorithms.core import kernel_lists, precompile  # noqa: PLC0415

    if os.environ.get("ISLES_RECORD_KERNELS_TESTS"):
        kernel_lists.record_to(os.environ["ISLES_RECORD_KERNELS_TESTS"])
    elif _gpu_run(session.config):
        precompile.start("tests-gpu", Path(__file__).parent / "data" / "gpu_test_kernels.json.gz")


#: the local Ray of :func:`ray_local` (``address="local"``): 2 CPUs, no dashboard
RAY_LOCAL = dict(num_cpus=2, include_dashboard=False, logging_level="error", configure_logging=False)


def _ray_fits(ray) -> bool:
    """Whether the Ray this process is connected to is a local one of :data:`RAY_LOCAL`'s 2 CPUs with
    all of them free (no actor or placement group left holding some), waiting a few seconds for
    the actors of the module before to go."""
    for _ in range(50):
        total, free = ray.cluster_resources(), ray.available_resources()
        if len(ray.nodes()) != 1 or total.get("CPU") != RAY_LOCAL["num_cpus"]:
            return False
        if free.get("CPU") == total["CPU"]:
            return True
        time.sleep(0.1)
    return False


@pytest.fixture(scope="module")
def ray_local():
    """A Ray of this process' own (``address="local"``, 2 CPUs), not a cluster another session's
    ``ray start`` left on the machine. One Ray serves the modules that run one after another in
    this process (the serial run, or one pytest-xdist worker): a module takes the one the module
    before left, if it is such a Ray with its CPUs free, and starts one otherwise (a start took
    5-30 s on the loaded 2-core machine); the session's end shuts it down
    (:func:`pytest_sessionfinish`). A module that needs a Ray of other options (a cluster) shuts
    down what it finds first."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized() and not _ray_fits(ray):
        ray.shutdown()
    if not ray.is_initialized():
        ray.init(address="local", **RAY_LOCAL)
    yield ray


def pytest_sessionfinish(session, exitstatus):
    """Shut down the Ray that :func:`ray_local` (or a run in this process) left running."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


@pytest.fixture()
def store(tmp_path):
    """A fresh local MLflow store (``sqlite:///.../mlflow.db``) for one test; MLflow's global
    tracking URI is reset afterwards."""
    yield f"sqlite:///{tmp_path}/mlflow.db"
    import mlflow  # noqa: PLC0415

    mlflow.set_tracking_uri(None)
