"""Put the repository root on ``sys.path`` so tests import ``problems``/``algorithms`` uninstalled,
and keep CPU tests from picking a GPU by chance (issue 16 §3)."""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
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
    return "run.py" in names or "isles" in names[:1] or any(a == "-m" and b == "isles" for a, b in zip(args, args[1:]))


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


def pytest_sessionstart(session):
    """GPU test runs (``-m gpu``) compile the CUDA kernels the GPU tests use in worker processes
    at once (kernel list ``tests-gpu`` of ``tests/data/gpu_test_kernels.json.gz``,
    :mod:`isles.algorithms.core.precompile`), so that a fresh
    machine's empty kernel cache costs seconds, not minutes; ``ISLES_RECORD_KERNELS_TESTS=PATH``
    records that list instead (``benchmarks/record_kernels.py --tests``)."""
    from isles.algorithms.core import kernel_lists, precompile  # noqa: PLC0415

    if os.environ.get("ISLES_RECORD_KERNELS_TESTS"):
        kernel_lists.record_to(os.environ["ISLES_RECORD_KERNELS_TESTS"])
    elif "gpu" in (session.config.option.markexpr or "").replace("not gpu", ""):
        precompile.start("tests-gpu", Path(__file__).parent / "data" / "gpu_test_kernels.json.gz")


@pytest.fixture(scope="module")
def ray_local():
    """A Ray of this test module's own (``address="local"``, 2 CPUs), not a cluster another
    session's ``ray start`` left on the machine; shut down after the module."""
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="error", configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.fixture()
def store(tmp_path):
    """A fresh local MLflow store (``sqlite:///.../mlflow.db``) for one test; MLflow's global
    tracking URI is reset afterwards."""
    yield f"sqlite:///{tmp_path}/mlflow.db"
    import mlflow  # noqa: PLC0415

    mlflow.set_tracking_uri(None)
