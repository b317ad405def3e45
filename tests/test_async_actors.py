"""Async mode (issue 27): actors that never wait. Each actor runs its epochs back to back, posts its
emigrants without waiting and immigrates whatever has arrived; the driver only collects. The tests
assert orders of events, which the machine's load cannot change: one actor, or the driver, is held
until the others have done their work (``tests.user_problems.HeldSphere``), and the objective's own
log per process (``TimedSphere``) tells what ran before what. How busy the actors are, in seconds:
``benchmarks/async_idle.py``."""

import time
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate
from isles.algorithms.core.population import Population
from isles.islands.control import checkpoint
from isles.islands.control.callbacks import Callback
from isles.islands.control.pool import Claims, SharedBudget, shares_itself, spendable
from isles.islands.coordinator import Coordinator
from isles.islands.records import Route
from isles.islands.transport.link import ActorTransport, Arrivals, Inbox

from tests.helpers import make_cfg, plain

DE = [
    "+experiment=de_islands",
    "problem.dim=4",
    "algorithm.pop_size=8",
    "generations=20",
    "islands.n=3",  # two actors: islands [0, 1] and [2], the first group costs twice the second
    "islands.migration_interval=2",
    "logger=none",
    "progress=false",
    "device=cpu",
]
#: the problem (``tests.user_problems``), a hang guard for the held problem and driver: generous, the
#: tests pass on orders of events, never on how long they took
PROBLEM, HOLD_S = "problem._target_=tests.user_problems.{}", 300


def coordinator(*overrides, callbacks=(), use_ray=True, problem="TimedSphere"):
    cfg = plain(make_cfg(*DE, PROBLEM.format(problem), *overrides))
    return Coordinator(cfg, instantiate(cfg["topology"]), None, callbacks=callbacks, use_ray=use_ray)


def calls(log_dir: Path) -> dict:
    """``{log file: sorted (start, end) of each objective call}`` of each process that evaluated
    (``TimedSphere``'s log, ``time.time()`` seconds; the first call is the initial population's)."""
    rows = {path: (line.split() for line in path.read_text().splitlines()) for path in sorted(log_dir.glob("*.log"))}
    return {path: sorted((float(a), float(b)) for _, a, b in r) for path, r in rows.items()}


def logged(log_dir: Path) -> int:
    """The objective calls logged so far in ``log_dir`` (whole lines: a line being written is not one yet)."""
    return sum(path.read_text().count("\n") for path in log_dir.glob("*.log"))


class HeldBooks(Callback):
    """A driver that holds its first record's books until the objective's log in ``log_dir`` has
    ``total`` calls (every evaluation of the run) or ``HOLD_S`` seconds have passed (a hang guard);
    ``seen``: the calls logged when it let go."""

    def __init__(self, log_dir: Path, total: int):
        self.log_dir, self.total, self.seen = log_dir, total, None

    def on_epoch(self, record):
        if self.seen is not None:
            return
        deadline = time.monotonic() + HOLD_S
        while (seen := logged(self.log_dir)) < self.total and time.monotonic() < deadline:
            time.sleep(0.01)
        self.seen = seen


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
def test_async_actors_wait_for_neither_the_driver_nor_each_other(tmp_path):
    """In async mode an actor's epochs wait for neither the driver's books nor another actor: the costly
    actor (islands 0 and 1) is held at its first generation until the cheap one (island 2) has run
    all its 20 generations, and the driver is held at its first record until every evaluation of
    the run is done; the run gets all of them (2 x 21 calls) with the driver's first record still
    open. In sync mode the actors wait for each other at every epoch: each epoch's first call in
    either process starts after the epoch before has ended in both (the objective's own log). Before
    issue 27 each actor's next epoch waited for the driver's books."""
    held = tmp_path / "async"
    held.mkdir()
    books = HeldBooks(held, total=2 * 21)
    hold = [f"+problem.log_dir={held}", "+problem.row_s=0", "+problem.hold_islands=2", "+problem.until=21"]
    args = [
        "islands.mode=async",
        "islands.async_budget=island",
        "islands.n_actors=2",
        *hold,
        f"+problem.hold_s={HOLD_S}",
    ]
    result = coordinator(*args, callbacks=[books], problem="HeldSphere").run()
    assert result.generations == 20 and result.evaluations == 3 * 8 * 21
    assert (held / "held").read_text() == "released 21\n"  # the cheap actor ran its 20 generations meanwhile
    assert books.seen == 2 * 21  # ... and the costly one its 20, the driver's first record still open
    sync = tmp_path / "sync"
    sync.mkdir()
    result = coordinator("islands.n_actors=2", f"+problem.log_dir={sync}", "+problem.row_s=0.001").run()
    assert result.generations == 20 and result.evaluations == 3 * 8 * 21
    spans = list(calls(sync).values())
    assert len(spans) == 2 and all(len(s) == 21 for s in spans), spans
    for g in range(2, 20, 2):  # the last generation of each epoch but the last (call g: generation g)
        assert max(s[g][1] for s in spans) < min(s[g + 1][0] for s in spans), g


@pytest.mark.usefixtures("ray_local")
def test_async_on_one_actor_is_the_sync_run():
    """On one actor every migrant stays inside it: the async run is the sync run, bit for bit."""
    sync = coordinator("islands.n_actors=1", "+problem.row_s=0", use_ray=False).run()
    run = coordinator("islands.mode=async", "islands.n_actors=1", "+problem.row_s=0").run()
    assert run.best_f == sync.best_f and np.array_equal(run.best_x, sync.best_x)
    assert [h.epoch for h in run.history] == [h.epoch for h in sync.history]
    for a, b in zip(run.history, sync.history, strict=False):
        np.testing.assert_array_equal(a.island_best_f, b.island_best_f)
    assert run.migration_count == sync.migration_count > 0


@pytest.mark.usefixtures("ray_local")
def test_async_without_migrants_across_actors_is_reproducible(tmp_path):
    """No migrant crosses actors (unconnected islands): two async actors give the sync run's islands bit
    for bit (the random numbers are the islands' own on any actor); with a ring the migrants cross:
    island 2's, posted while its actor ran its 20 generations and the other actor was held at its
    first, land on island 0 at that actor's next epoch. (Unheld, under load one actor could run its
    whole share before the other's first epoch: nothing crossed.)"""
    sync = coordinator("topology=unconnected", "+problem.row_s=0", use_ray=False).run()
    island = ["islands.mode=async", "islands.async_budget=island", "islands.n_actors=2"]
    run = coordinator(*island, "topology=unconnected", "+problem.row_s=0").run()
    np.testing.assert_array_equal(run.history[-1].island_best_f, sync.history[-1].island_best_f)
    assert run.best_f == sync.best_f and run.evaluations == sync.evaluations
    hold = [f"+problem.log_dir={tmp_path}", "+problem.row_s=0", "+problem.hold_islands=2", "+problem.until=21"]
    ring = coordinator(*island, *hold, f"+problem.hold_s={HOLD_S}", problem="HeldSphere").run()
    assert (tmp_path / "held").read_text() == "released 21\n"
    crossed = {(m[1], m[2]) for m in ring.migrations} & {(1, 2), (2, 0), (0, 2), (2, 1)}
    assert (2, 0) in crossed, ring.migrations[:5]


@pytest.mark.usefixtures("ray_local")
def test_the_shared_pool_gives_a_held_actors_work_to_the_others(tmp_path):
    """With each island's own generations (``islands.async_budget=island``) every island runs the run's
    20. With the shared pool (the default) the actors draw epochs until the run's 60
    island-generations are spent: the costly actor (islands 0 and 1) is held at its first generation
    until the cheap actor's island has run 24 generations, past its own 20 (with fixed shares it would
    idle there: the idle tail), and the run still spends the budget exactly (2 x g0 + g1 = 60
    island-generations, 3 x 8 x 21 evaluations). What that buys in busy time when the costs differ:
    ``benchmarks/async_idle.py``."""
    fixed = coordinator("islands.mode=async", "islands.async_budget=island", "islands.n_actors=2", "+problem.row_s=0")
    result = fixed.run()
    assert fixed.last_snapshot["async"]["gens"] == [20, 20]
    assert result.evaluations == 3 * 8 * 21 and result.generations == 20
    hold = [f"+problem.log_dir={tmp_path}", "+problem.row_s=0", "+problem.hold_islands=2", "+problem.until=25"]
    co = coordinator(
        "islands.mode=async", "islands.n_actors=2", *hold, f"+problem.hold_s={HOLD_S}", problem="HeldSphere"
    )
    result = co.run()
    seen = int((tmp_path / "held").read_text().split()[1])
    assert seen >= 25  # the cheap actor's initial call and 24 generations (the guard did not run out)
    # per group, at its last whole epoch (a snapshot ends on the migration grid: a resume is then the
    # uninterrupted run); the budget's exactness is the evaluations': 3 islands x 8 x (20 + the initial)
    gens = co.last_snapshot["async"]["gens"]
    assert gens[1] >= 24 and 2 * gens[0] + gens[1] <= 3 * 20, gens
    assert result.evaluations == 3 * 8 * 21 and result.generations == 20


def test_the_pool_grants_exactly_what_is_left():
    """The pool's grants: up to the epoch asked, never leaving a remainder that the groups still
    drawing cannot spend in whole epochs; a group refused stops drawing; a restarted group gives back
    what it claimed since its snapshot, and its lost incarnation's late claims get nothing."""
    assert spendable(0, []) and not spendable(1, []) and spendable(5, [2, 3]) and not spendable(1, [2, 3])
    assert spendable(7, [2, 3]) and not spendable(3, [2, 4]) and spendable(12, [5, 7])
    assert [g for g in range(30) if not spendable(g, [5, 7])] == [1, 2, 3, 4, 6, 8, 9, 11, 13, 16, 18, 23]
    pool = SharedBudget([2, 2], [0, 0], 4 * 10)  # 2 groups of 2 islands, 10 generations
    assert [pool.claim(j % 2, 5) for j in range(7)] == [5, 5, 5, 3, 1, 1, 0]  # the last epochs shorten
    pool = SharedBudget([2, 3], [0, 0], 7)  # groups of 2 and 3 islands, 7 island-generations
    assert pool.claim(1, 3) == 1  # 2 would leave 1: not whole epochs of either group
    assert pool.claim(0, 1) == 1 and pool.claim(1, 5) == 0  # 2 left: the group of 3 is refused, stops drawing
    assert pool.claim(1, 1) == 0 and pool.claim(0, 5) == 1 and pool.claim(0, 5) == 0
    assert pool.state() == {"left": 0, "claimed": [2, 1]}
    pool = SharedBudget([2, 1], [3, 1], 3 * 4)  # a resumed run: 7 of 12 spent
    assert list(Claims(pool, 1, 2)) == [2, 1, 1, 1]  # alone, the cheap group takes what is left
    assert pool.restart(1, 2, attempt=1) == 4  # back to its snapshot of 2 generations: 4 return
    assert pool.claim(1, 5, attempt=0) == 0  # the lost incarnation's late claim
    assert pool.claim(0, 1) == 1 and list(Claims(pool, 1, 5, attempt=1)) == [1, 1]
    assert pool.state() == {"left": 0, "claimed": [4, 4]}


def test_the_budget_setting_is_checked_and_a_shared_checkpoint_counts_its_spent_share():
    with pytest.raises(ValueError, match=r"^islands.async_budget='pooled': allowed values are shared\|island$"):
        coordinator("islands.mode=async", "islands.async_budget=pooled")
    assert checkpoint.generations_done({"mode": "async", "async": {"gens": [30, 15], "done": 20}}) == 20
    # families that share the budget per island themselves keep each island's generations
    assert shares_itself(plain(make_cfg("+experiment=lshade", "stop.max_evaluations=5000", "device=cpu")))
    assert not shares_itself(plain(make_cfg("+experiment=lshade", "stop.max_evaluations=null", "device=cpu")))
    assert not shares_itself(plain(make_cfg(*DE, "stop.max_evaluations=5000")))
