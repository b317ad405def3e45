"""The default placement on a GPU machine (issue 35): ``device=auto`` probes the GPU and the CPU and
takes the faster. Marked ``gpu`` and skipped where CuPy or a CUDA device is missing. What is asserted:
the choices whose margin is wide (CMA-ES and L-SHADE at D = 10: the GPU 7-15x slower than the CPU,
issue 35; a D = 1000 DE island of 500: the GPU far faster), and that a run which takes the CPU gives the
``device=cpu`` run's result. The times themselves are in ``benchmarks/placement_bench.py``."""

from __future__ import annotations

import pytest

from tests.gpu import cupy_or_skip

cp = cupy_or_skip()

from isles.app import job  # noqa: E402
from isles.app.job import prepare, run_job  # noqa: E402
from isles.islands.control import autoplace  # noqa: E402
from isles.islands.control.autoplace import choose  # noqa: E402
from isles.islands.control.cost_model import pick  # noqa: E402

from tests.helpers import make_cfg  # noqa: E402

pytestmark = pytest.mark.gpu
QUIET = ("logger=none", "progress=false")


def chosen(*overrides):
    """The placement :func:`choose` takes for ``overrides`` on this machine."""
    p = prepare(make_cfg(*overrides, *QUIET))
    return choose(p.plain, p.plugins, p.topology)


def test_auto_probes_both_devices_and_takes_the_models_choice():
    c = chosen("+experiment=de_islands", "problem=sphere", "problem.dim=8", "algorithm.pop_size=16",
               "islands.migration_interval=1", "topology=ring", "generations=1000")  # fmt: skip
    assert set(c.costs) == {"gpu", "cpu"} and all(x.epoch_s > 0 for x in c.costs.values())
    every = [(d, a) for d, x in c.costs.items() for a in range(1, min(8, x.units) + 1)]
    assert (c.device, c.n_actors) == pick(c.costs, c.workload, every, ("gpu", 1))


@pytest.mark.parametrize("experiment", ["cmaes", "lshade"])
def test_small_cmaes_and_lshade_take_the_cpu(experiment):
    c = chosen(f"+experiment={experiment}")
    assert c.device == "cpu", c.line
    given = chosen(f"+experiment={experiment}", "device=gpu")  # honoured, with a warning
    assert given.device == "gpu" and given.warning.startswith("device=gpu"), given.line


def test_a_large_de_island_takes_the_gpu():
    assert chosen("+experiment=de_benchmark", "generations=512", "islands.migration_interval=256").device == "gpu"


def test_a_run_that_takes_the_cpu_gives_the_cpu_runs_result(monkeypatch):
    taken = []

    def spy(*a, **k):
        taken.append(autoplace.choose(*a, **k))
        return taken[-1]

    monkeypatch.setattr(job, "choose", spy)
    budget = ("+experiment=cmaes", "stop.max_evaluations=20000", *QUIET)
    auto, _ = run_job(make_cfg(*budget))
    assert taken[0].device == "cpu"
    cpu, _ = run_job(make_cfg(*budget, "device=cpu"))
    assert auto.best_f == cpu.best_f and set(auto.devices.values()) == {"cpu"}
