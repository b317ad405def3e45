"""The default placement (issue 35): the cost model with injected costs, the choice it makes from a
real probe on the CPU (CPU actors standing in for GPUs), and a run that takes it. Timing is not
asserted here: ``benchmarks/placement_bench.py`` compares the default with ``islands.n_actors=1``."""

import pytest
from isles.app import job
from isles.app.job import prepare, run_job
from isles.islands.config.schema import Validated
from isles.islands.control import autoplace
from isles.islands.control.autoplace import candidates, choose
from isles.islands.control.cost_model import DeviceCosts, Workload, pick, predicted
from mlflow.tracking import MlflowClient

from tests.helpers import make_cfg

TINY_RING = (
    "+experiment=de_islands",
    "problem=sphere",
    "problem.dim=8",
    "algorithm.pop_size=16",
    "generations=1000",
    "islands.migration_interval=1",
    "topology=ring",
    "logger=none",
    "progress=false",
)
EXPENSIVE = (  # about 5 ms of CPU a design: 4 islands x 8 designs = 0.16 s a generation on one core
    "+experiment=de_islands",
    "problem._target_=tests.user_problems.BusyDesign",
    "problem.dim=4",
    "algorithm.pop_size=8",
    "islands.n=4",
    "generations=400",
    "islands.migration_interval=10",
    "logger=none",
    "progress=false",
)
TWO_CORES = {"CPU": 2, "GPU": 0}


def cheap(device="cpu", units=2, **kw):
    """A tiny island's costs: an epoch of 0.5 ms, mostly the epoch's own Python."""
    return DeviceCosts(device, units, 0.5e-3, 0.3e-3, 0.05e-3, 0.02e-3, **kw)


def costly(device="cpu", units=2, per_island=0.05):
    """An expensive objective's costs: a generation is ``per_island`` seconds an island, nothing else."""
    return DeviceCosts(device, units, 10 * 4 * per_island, 0.0, 0.0, per_island)


def checked(*overrides, n_actors=None, device="cpu"):
    """The run config of ``overrides`` as the job checks it (before the placement); ``device=gpu`` is
    set after the checks (this machine may have no GPU: the choice is made from injected costs)."""
    extra = [f"device={'auto' if device == 'gpu' else device}"] + ([f"islands.n_actors={n_actors}"] if n_actors else [])
    p = prepare(make_cfg(*overrides, *extra))
    p.plain["device"] = device
    return p


def injected(costs: dict):
    """A ``measure`` that hands out ``costs`` by device and records what was asked for."""
    asked = []

    def measure(device, units):
        asked.append((device, units))
        return costs[device]

    measure.asked = asked
    return measure


# -- the cost model, deterministic ----------------------------------------------------------------
def test_tiny_islands_stay_on_one_actor_and_an_expensive_objective_spreads():
    ring = Workload(n=8, interval=1, generations=1000)
    assert pick({"cpu": cheap()}, ring, [("cpu", 1), ("cpu", 2)], ("cpu", 1)) == ("cpu", 1)
    busy = Workload(n=4, interval=10, generations=400)
    assert pick({"cpu": costly(units=4)}, busy, [("cpu", a) for a in (1, 2, 3, 4)], ("cpu", 1)) == ("cpu", 4)
    # nor on a machine whose cores other work keeps busy: Ray's start stretches with the load
    busy_machine = Workload(n=4, interval=10, generations=400, load=10.0)
    assert pick({"cpu": costly(units=4)}, busy_machine, [("cpu", a) for a in (1, 2, 3, 4)], ("cpu", 1)) == ("cpu", 1)
    # a short run does not pay for the actors' start
    short = Workload(n=4, interval=10, generations=20)
    assert pick({"cpu": costly(units=4)}, short, [("cpu", a) for a in (1, 2, 3, 4)], ("cpu", 1)) == ("cpu", 1)


def test_another_placement_must_gain_the_margin():
    w = Workload(n=2, interval=1, generations=1000, ray_anyway=True)  # no Ray start: only the epochs count
    one = DeviceCosts("cpu", 2, 1.0e-2, 0.0, 0.0, 5.0e-3, exchange_s=0.0, actor_start_s=0.0)
    fast = predicted(one, w, 1)
    for share, taken in ((0.9, False), (0.8, True)):  # two actors predicted at 90 % / 80 % of one's time
        c = DeviceCosts("cpu", 2, 1.0e-2, 0.0, 0.0, 5.0e-3, exchange_s=(share - 0.5) * 1.0e-2, actor_start_s=0.0)
        assert predicted(c, w, 2) < fast
        got = pick({"cpu": c}, w, [("cpu", 1), ("cpu", 2)], ("cpu", 1))
        assert got == (("cpu", 2) if taken else ("cpu", 1))


def test_the_candidates_follow_the_config_and_the_machine():
    every, allowed = candidates(8, "auto", None, {"gpu": 4, "cpu": 16})
    assert ("gpu", 4) in every and ("cpu", 8) in every and ("cpu", 9) not in every and allowed == every
    _, allowed = candidates(8, "gpu", None, {"gpu": 4, "cpu": 16})
    assert allowed == [("gpu", a) for a in (1, 2, 3, 4)]
    _, allowed = candidates(8, "auto", 2, {"gpu": 4, "cpu": 16})
    assert allowed == [("gpu", 2), ("cpu", 2)]
    every, _ = candidates(3, "cpu", None, {"gpu": 0, "cpu": 16})
    assert every == [("cpu", 1), ("cpu", 2), ("cpu", 3)]


def test_four_gpus_with_cheap_islands_take_one_and_say_why():
    p = checked(*TINY_RING, device="auto")
    m = injected({"gpu": cheap("gpu", 4), "cpu": DeviceCosts("cpu", 16, 2e-3, 1e-3, 1e-4, 1e-4)})
    c = choose(p.plain, p.plugins, p.topology, resources={"GPU": 4, "CPU": 16}, measure=m)
    assert (c.device, c.n_actors) == ("gpu", 1) and c.warning is None
    assert c.line.startswith("4 GPUs; using 1: an epoch computes in 0.5 ms on one GPU (2 ms on the CPU), ")
    assert "an exchange between GPUs costs 3.3 ms" in c.line
    out = c.applied(p.plain)
    assert isinstance(out, Validated) and out["islands"]["n_actors"] == 1 and out["device"] == "gpu"
    assert p.plain["islands"]["n_actors"] is None and p.plain["device"] == "auto"  # the config is not changed
    params = c.params()
    assert params["placement.n_actors"] == 1 and params["placement.device"] == "gpu"
    assert params["placement.gpu.epoch_one_ms"] == 0.5 and params["placement.line"] == c.line


def test_the_cpu_where_the_gpu_is_slower_and_a_given_device_is_honoured_with_a_warning():
    gpu_slow = {"gpu": DeviceCosts("gpu", 1, 0.56, 0.0, 0.011, 0.0), "cpu": costly(units=16, per_island=0.002)}
    p = checked("+experiment=cmaes", device="auto")
    c = choose(p.plain, p.plugins, p.topology, resources={"GPU": 1, "CPU": 16}, measure=injected(gpu_slow))
    assert c.device == "cpu" and c.warning is None and "using the CPU (" in c.line
    p = checked("+experiment=cmaes", device="gpu")
    c = choose(p.plain, p.plugins, p.topology, resources={"GPU": 1, "CPU": 16}, measure=injected(gpu_slow))
    assert (c.device, c.n_actors) == ("gpu", 1)
    assert c.warning.startswith("device=gpu: predicted ") and "(the default placement: leave it out" in c.warning


def test_a_given_actor_count_is_honoured_and_warned_about_where_slower():
    p = checked(*TINY_RING, n_actors=4, device="gpu")
    slow_cpu = DeviceCosts("cpu", 16, 50e-3, 1e-3, 1e-3, 6e-3)
    c = choose(
        p.plain,
        p.plugins,
        p.topology,
        resources={"GPU": 4, "CPU": 16},
        measure=injected({"gpu": cheap("gpu", 4), "cpu": slow_cpu}),
    )
    assert (c.device, c.n_actors) == ("gpu", 4) and c.default == ("gpu", 1)
    assert c.warning.startswith("device=gpu islands.n_actors=4: predicted ")
    assert "s on 4 GPUs against " in c.warning and "s on 1 GPU (the default placement: leave them out" in c.warning


def test_nothing_is_probed_where_there_is_nothing_to_choose():
    m = injected({"cpu": cheap()})
    p = checked(*TINY_RING)
    assert choose(p.plain, p.plugins, p.topology, resources={"CPU": 1, "GPU": 0}, measure=m) is None  # one core
    q = checked(*TINY_RING, n_actors=2)  # device=cpu and islands.n_actors given
    assert choose(q.plain, q.plugins, q.topology, resources=TWO_CORES, measure=m) is None
    r = checked(*TINY_RING, "islands.placement=strict_spread")
    assert choose(r.plain, r.plugins, r.topology, resources=TWO_CORES, measure=m) is None
    g = checked(*TINY_RING, n_actors=4, device="auto")  # more GPU actors than GPUs: the plan's error, not the CPU
    assert choose(g.plain, g.plugins, g.topology, resources={"CPU": 16, "GPU": 2}, measure=m) is None
    # device=cpu never looks for a GPU: only the CPU is probed
    assert choose(p.plain, p.plugins, p.topology, resources={"CPU": 2, "GPU": 4}, measure=m).device == "cpu"
    assert m.asked == [("cpu", 2)]


def test_a_failed_probe_keeps_the_default_placement(caplog):
    def broken(device, units):
        raise RuntimeError("objective crashed (test)")

    caplog.set_level("DEBUG", logger="isles.islands.coordinator")  # silent otherwise: the run says what fails
    p = checked(*TINY_RING)
    assert choose(p.plain, p.plugins, p.topology, resources=TWO_CORES, measure=broken) is None
    assert "the probe failed (RuntimeError: objective crashed (test))" in caplog.text


# -- the probe, on this machine's CPU -----------------------------------------------------------
def test_a_cheap_tiny_ring_chooses_one_group():
    p = checked(*TINY_RING)
    c = choose(p.plain, p.plugins, p.topology, resources=TWO_CORES)
    assert (c.device, c.n_actors) == ("cpu", 1)
    cost = c.costs["cpu"]
    assert 0 < cost.epoch_s < 1.0 and cost.overhead_s >= 0 and cost.probe_s > 0


def test_an_expensive_objective_chooses_several_actors():
    p = checked(*EXPENSIVE)
    c = choose(p.plain, p.plugins, p.topology, resources=TWO_CORES, load=1.0)  # a quiet machine
    assert (c.device, c.n_actors) == ("cpu", 2)
    assert c.line.startswith("2 CPU cores; using 2: ")


@pytest.mark.slow
def test_the_default_tiny_ring_runs_as_one_actor_with_its_result(monkeypatch, store):
    """The cheap ring's default run takes one group (no Ray) and ends with the n_actors=1 run's f; the
    choice is recorded in MLflow (``placement.*``)."""
    chosen = []
    real = autoplace.choose

    def spy(*a, **k):
        chosen.append(real(*a, **k))
        return chosen[-1]

    monkeypatch.setattr(job, "choose", spy)
    tracked = [x for x in TINY_RING if x != "logger=none"] + [f"logger.tracking_uri={store}"]
    default, run_id = run_job(make_cfg(*tracked, "device=cpu", "generations=200"))
    assert chosen[0] is not None and (chosen[0].device, chosen[0].n_actors) == ("cpu", 1)
    one, _ = run_job(make_cfg(*TINY_RING, "device=cpu", "generations=200", "islands.n_actors=1"))
    assert default.best_f == one.best_f
    params = MlflowClient(tracking_uri=store).get_run(run_id).data.params
    assert params["placement.n_actors"] == "1" and params["placement.device"] == "cpu"
    assert " CPU cores; using 1: an epoch computes in " in params["placement.line"]


def test_a_one_time_cost_in_the_first_generation_is_not_taken_for_the_generations_cost():
    """The probe's first generation may hold a one-time cost (a host build compiled on an empty
    cache: 2.46 s taken for an epoch, and a tiny ring sent to 2 actors, before the fix); the faster
    of it and one more generation is the figure."""
    import time

    import numpy as np
    from isles.islands.control import probe

    class FirstIsSlow:
        xp = np

        def __init__(self):
            self.calls = 0

        def evolve(self, k):
            self.calls += 1
            if self.calls == 1:
                time.sleep(0.3)

    assert probe.generation_s(FirstIsSlow()) < probe.EXPENSIVE_S
