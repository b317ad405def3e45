"""GPU: async mode on one GPU actor is the sync run on the GPU, bit for bit (every migrant stays
inside the actor; issue 27). ``python -m pytest -m gpu tests/test_async_gpu.py``."""

import numpy as np
import pytest
from hydra.utils import instantiate

from tests.gpu import cupy_or_skip

cp = cupy_or_skip()
pytestmark = pytest.mark.gpu

from isles.islands.coordinator import Coordinator  # noqa: E402

from tests.helpers import make_cfg, plain  # noqa: E402

DE = [
    "+experiment=de_islands",
    "problem.dim=10",
    "algorithm.pop_size=16",
    "generations=40",
    "islands.n=4",
    "islands.migration_interval=5",
    "logger=none",
    "progress=false",
    "device=gpu",
]


@pytest.mark.usefixtures("ray_local")
def test_async_on_one_gpu_actor_is_the_sync_run():
    def run(*overrides, use_ray):
        cfg = plain(make_cfg(*DE, *overrides))
        return Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=use_ray).run()

    sync = run(use_ray=False)
    run_async = run("islands.mode=async", "islands.n_actors=1", use_ray=True)
    assert run_async.best_f == sync.best_f and run_async.evaluations == sync.evaluations
    for a, b in zip(run_async.history, sync.history, strict=True):
        np.testing.assert_array_equal(a.island_best_f, b.island_best_f)
