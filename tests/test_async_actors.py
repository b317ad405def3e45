"""Async mode (issue 27): actors that never wait. Each actor runs its epochs back to back, posts its
emigrants without waiting and immigrates whatever has arrived; the driver only collects. Idle time
is measured from the objective's own busy intervals per process (``tests.user_problems.TimedSphere``),
not from the runtime's bookkeeping."""

import time
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate

from isles.algorithms.core.population import Population
from isles.islands.coordinator import Coordinator
from isles.islands.records import Route
from isles.islands.transport.link import ActorTransport, Arrivals, Inbox
from tests.helpers import make_cfg, plain

DE = [
    "+experiment=de_islands",
    "problem._target_=tests.user_problems.TimedSphere",
    "problem.dim=4",
    "algorithm.pop_size=8",
    "generations=20",
    "islands.n=3",  # two actors: islands [0, 1] and [2], the first group costs twice the second
    "islands.migration_interval=2",
    "logger=none",
    "progress=false",
    "device=cpu",
]


def coordinator(*overrides, callbacks=(), use_ray=True):
    cfg = plain(make_cfg(*DE, *overrides))
    return Coordinator(cfg, instantiate(cfg["topology"]), None, callbacks=callbacks, use_ray=use_ray)


def idle_fractions(log_dir: Path) -> list:
    """Per process that evaluated: the fraction of its time between its first generation's evaluation
    and its last one's end that it spent outside the objective (``TimedSphere``'s log; the initial
    population's evaluation, when the group is built before the run starts, left out)."""
    out = []
    for path in sorted(log_dir.glob("*.log")):
        spans = sorted((float(a), float(b)) for _, a, b in (line.split() for line in path.read_text().splitlines()))
        spans = spans[1:]
        window = spans[-1][1] - spans[0][0]
        out.append(1.0 - sum(b - a for a, b in spans) / window)
    return out


class SlowBooks:
    """A driver that is slow at its books (a tracker that takes 60 ms an epoch)."""

    def on_epoch(self, record):
        time.sleep(0.06)


def test_arrivals_post_without_waiting_and_take_what_has_arrived():
    """The async link: a post lands in the destination group's inbox at once (no reply awaited); the
    destination takes the latest emigrants of each source that came, and nothing when none did."""
    groups = [[0, 1], [2]]
    inboxes = [Inbox(), Inbox()]

    class Peer:  # an in-process peer: ActorTransport calls its post directly
        def __init__(self, inbox):
            self.post = inbox.post

    peers = [Peer(b) for b in inboxes]
    link = [Arrivals(Route(i, groups, None, 3, 0, peers=peers), ActorTransport(peers, i, inboxes[i])) for i in (0, 1)]

    def emigrants(values):  # Population (I, 1) of 1-D genomes
        x = np.array(values, dtype=float).reshape(-1, 1, 1)
        return Population(x, x[..., 0], np.zeros_like(x[..., 0]))

    assert link[1].arrived() == ([], {})  # nothing yet: returns at once
    link[0].send(1, emigrants([1.0, 2.0]), [(0, 2), (1, 0), (1, 2)], None)  # (1, 0) stays in the group
    link[0].send(2, emigrants([3.0, 4.0]), [(1, 2)], None)
    edges, got = link[1].arrived()
    assert edges == [(0, 2), (1, 2)]
    assert got[0].genome.ravel().tolist() == [1.0] and got[1].genome.ravel().tolist() == [4.0]  # the latest of 1
    assert link[1].arrived() == ([], {}) and link[0].arrived() == ([], {})  # taken once; none went back


@pytest.mark.usefixtures("ray_local")
def test_async_actors_are_never_idle_while_their_work_remains(tmp_path):
    """Uneven costs (one actor's islands cost twice the other's) and a slow driver: in async mode each
    actor evaluates back to back until its generations are done: idle under a fifth of its time
    (measured: the objective's busy intervals per process). Before, each actor's next epoch waited
    for the driver's books (the fast one idled most of the time); in sync mode the fast actor
    waits for the slow one at every epoch, which the same measure shows."""
    logs = {mode: tmp_path / mode for mode in ("async", "sync")}
    for mode, log_dir in logs.items():
        log_dir.mkdir()
        args = [f"islands.mode={mode}", "islands.n_actors=2", f"+problem.log_dir={log_dir}", "+problem.row_s=0.004"]
        result = coordinator(*args, callbacks=[SlowBooks()] if mode == "async" else []).run()
        assert result.generations == 20 and result.evaluations == 3 * 8 * 21
    idle = {mode: idle_fractions(d) for mode, d in logs.items()}
    assert len(idle["async"]) == len(idle["sync"]) == 2, idle
    assert max(idle["async"]) < 0.2, idle
    assert max(idle["sync"]) > 0.35, idle  # the measure sees waiting where there is some


@pytest.mark.usefixtures("ray_local")
def test_async_on_one_actor_is_the_sync_run():
    """On one actor every migrant stays inside it: the async run is the sync run, bit for bit."""
    sync = coordinator("islands.n_actors=1", "+problem.row_s=0", use_ray=False).run()
    run = coordinator("islands.mode=async", "islands.n_actors=1", "+problem.row_s=0").run()
    assert run.best_f == sync.best_f and np.array_equal(run.best_x, sync.best_x)
    assert [h.epoch for h in run.history] == [h.epoch for h in sync.history]
    for a, b in zip(run.history, sync.history):
        np.testing.assert_array_equal(a.island_best_f, b.island_best_f)
    assert run.migration_count == sync.migration_count > 0


@pytest.mark.usefixtures("ray_local")
def test_async_without_migrants_across_actors_is_reproducible():
    """No migrant crosses actors (unconnected islands): two async actors give the sync run's islands bit
    for bit (the random numbers are the islands' own on any actor); with a ring the migrants cross."""
    sync = coordinator("topology=unconnected", "+problem.row_s=0", use_ray=False).run()
    run = coordinator("islands.mode=async", "islands.n_actors=2", "topology=unconnected", "+problem.row_s=0").run()
    np.testing.assert_array_equal(run.history[-1].island_best_f, sync.history[-1].island_best_f)
    assert run.best_f == sync.best_f and run.evaluations == sync.evaluations
    ring = coordinator("islands.mode=async", "islands.n_actors=2", "+problem.row_s=0").run()
    crossed = {(m[1], m[2]) for m in ring.migrations} & {(1, 2), (2, 0), (0, 2), (2, 1)}
    assert crossed, ring.migrations[:5]
