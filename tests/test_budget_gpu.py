"""GPU: ``stop.max_evaluations`` stops the fused kernels, the epoch kernels (DE, GA, FEP, CDE) and
the captured span graphs (CMEPSO's iteration with its master) at the same generation and count as
the NumPy run, and ``evaluations`` / ``payoff_evaluations`` agree with it.
``python -m pytest -m gpu tests/test_budget_gpu.py``."""

import pytest
from hydra.utils import instantiate

from tests.gpu import cupy_or_skip  # noqa: E402

cp = cupy_or_skip()
pytestmark = pytest.mark.gpu

from isles.islands.coordinator import Coordinator  # noqa: E402

from tests.helpers import make_cfg, plain  # noqa: E402

COMMON = ["logger=none", "progress=false"]
#: (overrides, budget): each a GPU path of its own (fused or epoch kernel, span graph)
CASES = {
    "de_epoch": (
        [
            "+experiment=de_islands",
            "problem=sphere",
            "problem.dim=8",
            "algorithm.pop_size=16",
            "islands.migration_interval=7",
            "generations=500",
        ],
        12345,
    ),
    "fep_epoch": (
        [
            "+experiment=fep_islands",
            "problem.dim=8",
            "algorithm.pop_size=16",
            "islands.migration_interval=9",
            "generations=500",
        ],
        23456,
    ),
    "ga_onemax": (
        [
            "+experiment=ga_onemax",
            "problem.n_bits=256",
            "algorithm.pop_size=64",
            "stop.f_target=null",
            "generations=500",
        ],
        7777,
    ),
    "cde_p1": (
        [
            "+experiment=cde_runs",
            "problem.dim=10",
            "algorithm.pop_size=16",
            "algorithm.gens_x=4",
            "algorithm.gens_y=3",
            "algorithm.n_cycles=200",
            "islands.n=4",
        ],
        9999,
    ),
    "cde_g07": (
        [
            "+experiment=cde",
            "problem=g07",
            "algorithm.pop_size=16",
            "algorithm.gens_x=4",
            "algorithm.gens_y=3",
            "algorithm.n_cycles=200",
        ],
        5555,
    ),
    "cmepso_span": (["+experiment=cmepso", "generations=500"], 30000),
}


def run(overrides, device):
    cfg = plain(make_cfg(*overrides, *COMMON, f"device={device}"))
    plugins = [instantiate(p) for p in cfg["plugins"]]
    return Coordinator(cfg, instantiate(cfg["topology"]), plugins, use_ray=False).run()


@pytest.mark.parametrize("case", sorted(CASES))
def test_max_evaluations_on_the_gpu_paths(case):
    overrides, budget = CASES[case]
    overrides = [*overrides, f"stop.max_evaluations={budget}"]
    gpu, cpu = run(overrides, "gpu"), run(overrides, "cpu")
    assert any(p != "numpy" for p in gpu.gpu_paths.values())
    assert (gpu.evaluations, gpu.generations, gpu.payoff_evaluations) == (
        cpu.evaluations,
        cpu.generations,
        cpu.payoff_evaluations,
    )
    per = (cpu.evaluations - cpu.history[0].evaluations) / max(1, cpu.generations - cpu.history[0].generation)
    assert budget <= gpu.evaluations < budget + per + 1
    assert gpu.generations < 500 and gpu.history[-1].generation == gpu.generations
