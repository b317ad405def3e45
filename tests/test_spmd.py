"""The SPMD loop: every island group runs its epochs in its own Ray actor and exchanges emigrants
with its peers directly (islands/transport/link.py), and the result is that of in-process groups (one
thread each) and of one group, bit for bit; the inbox of the transport; the typed records across Ray."""

import threading
import time

import numpy as np
import pytest
from hydra.utils import instantiate
from isles.islands.control.callbacks import Callback
from isles.islands.coordinator import Coordinator
from isles.islands.transport.link import Aborted, Inbox

from tests.helpers import make_cfg, plain, run_span

DE = [
    "+experiment=de_islands",
    "problem=sphere",
    "problem.dim=6",
    "algorithm.pop_size=12",
    "generations=40",
    "islands.n=5",
    "islands.migration_interval=1",
    "islands.n_migrants=2",
    "topology=ring",
    "logger=none",
    "progress=false",
    "device=cpu",
]


#: CMEPSO scaled down: 4 slave swarms and the master swarm (conf/experiment/cmepso.yaml)
CMEPSO = [
    "+experiment=cmepso",
    "problem=sphere",
    "problem.dim=4",
    "algorithm.n_particles=8",
    "algorithm.n_replicas=2",
    "plugins.0.n_particles=4",
    "plugins.0.n_replicas=2",
    "generations=12",
    "islands.n=4",
    "topology=ring",
    "logger=none",
    "progress=false",
    "device=cpu",
]


def run(*overrides, use_ray=True):
    cfg = plain(make_cfg(*DE, *overrides))
    return Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=use_ray).run()


def run_master(*overrides, use_ray=True, callbacks=()):
    """A scaled-down CMEPSO run (:data:`CMEPSO`) with its master swarm."""
    cfg = plain(make_cfg(*CMEPSO, *overrides))
    return Coordinator(
        cfg,
        instantiate(cfg["topology"]),
        [instantiate(p) for p in cfg["plugins"]],
        callbacks=callbacks,
        use_ray=use_ray,
    ).run()


def assert_same_master_runs(a, b) -> None:
    """Two CMEPSO runs, bit for bit: the result, every epoch's island bests and master best, the migrations."""
    assert a.best_f == b.best_f and a.evaluations == b.evaluations and a.nan_evals == b.nan_evals
    np.testing.assert_array_equal(a.best_x, b.best_x)
    assert a.migrations == b.migrations
    assert len(a.history) == len(b.history)
    for x, y in zip(a.history, b.history, strict=False):
        for key in ("best_f", "best_v", "evaluations", "master_best_f", "migrations_accepted"):
            assert x.metrics()[key] == y.metrics()[key], (x.epoch, key)
        np.testing.assert_array_equal(x.island_best_f, y.island_best_f)


@pytest.mark.parametrize("topology", ["ring", "fully_connected"])
def test_spmd_actors_equal_in_process_groups_and_one_group(ray_local, monkeypatch, topology):
    spans = []
    # counted in the driver: the driver's loop calls run_span on the actors (a span of several epochs)
    from isles.islands.control import sync_loop  # noqa: PLC0415

    real = sync_loop.SyncLoop.start_span
    monkeypatch.setattr(sync_loop.SyncLoop, "start_span", lambda self, *a: spans.append(a[5]) or real(self, *a))
    spmd = run(f"topology={topology}", "islands.n_actors=2")
    monkeypatch.undo()
    assert max(spans) > 1  # spans of several epochs ran in the actors
    driver = run(f"topology={topology}", "islands.n_actors=2", use_ray=False)  # two in-process groups, in threads
    one = run(f"topology={topology}", "islands.n_actors=1", use_ray=False)
    for other in (driver, one):
        assert spmd.best_f == other.best_f and spmd.evaluations == other.evaluations
        np.testing.assert_array_equal(spmd.best_x, other.best_x)
        assert spmd.migrations == other.migrations and len(spmd.migrations) > 40
        assert len(spmd.history) == len(other.history) == 40
        for a, b in zip(spmd.history, other.history, strict=False):
            assert (a.best_f, a.evaluations, a.migrations_accepted) == (b.best_f, b.evaluations, b.migrations_accepted)
            np.testing.assert_array_equal(a.island_best_f, b.island_best_f)


@pytest.mark.parametrize("sends,interval", [("false", 1), ("true", 1), ("true", 3)])
def test_master_replicas_in_two_actors_equal_one_actor_and_in_process(ray_local, monkeypatch, sends, interval):
    """CMEPSO over 2 actors: each runs the spans with a replica of the master swarm (islands/plugin.py),
    the bests all-gathered through the inboxes; the run equals 1 actor and the in-process run, bit
    for bit, and every epoch ran in a span (the driver is not in the per-epoch path)."""
    from isles.islands.control import sync_loop  # noqa: PLC0415

    over = [f"plugins.0.sends_best={sends}", f"islands.migration_interval={interval}"]
    spans, real = [], sync_loop.SyncLoop.start_span
    monkeypatch.setattr(sync_loop.SyncLoop, "start_span", lambda self, *a: spans.append(a[5]) or real(self, *a))
    monkeypatch.setattr(sync_loop, "BATCH_S", 1e9)  # spans by their cap, not by the epochs' seconds (load)
    two = run_master(*over, "islands.n_actors=2")
    monkeypatch.undo()
    assert sum(spans) == len(two.history) == 12 // interval and max(spans) > 1
    assert "master_best_f" in two.history[-1].plugin_metrics
    assert any(m[1] == -1 for m in two.migrations) == (sends == "true")  # the master's best reached the islands
    assert_same_master_runs(two, run_master(*over, "islands.n_actors=1", use_ray=False))
    if interval == 1:
        assert_same_master_runs(two, run_master(*over, "islands.n_actors=1"))  # the loop in one actor


@pytest.mark.slow
def test_an_actor_killed_with_master_replicas_restarts_and_the_result_is_unchanged(ray_local, caplog):
    """A lost actor's replica is attached again from the snapshot's master state (every survivor's
    too): the run ends with the uninterrupted result."""
    slow = [
        "problem._target_=tests.user_problems.SlowSphere",
        "+problem.delay_s=0.002",
        "generations=40",
        "islands.snapshot_every=5",
        "plugins.0.sends_best=true",
        "islands.migration_interval=1",
    ]
    reference = run_master(*slow, "islands.n_actors=1", use_ray=False)
    kill = KillMidSpan(epoch=3)
    with caplog.at_level("WARNING", logger="isles.islands.coordinator"):
        result = run_master(*slow, "islands.n_actors=2", callbacks=[kill])
    assert list(kill.restarted) == [1] and "died" in caplog.text
    assert_same_master_runs(result, reference)
    assert [h.epoch for h in result.history] == list(range(1, 41))


def test_inbox_waits_for_every_sender_and_merges():
    box = Inbox()
    box.post(1, 3, 0, {0: "a"})
    t = time.monotonic()  # before the timer starts: the late post comes >= 0.05 s after t, however loaded the machine
    threading.Timer(0.05, box.post, (1, 3, 2, {4: "b"})).start()
    assert box.take(1, 3, [0, 2], timeout_s=5) == {0: "a", 4: "b"}
    assert time.monotonic() - t >= 0.04  # it waited for the late sender
    with pytest.raises(TimeoutError, match=r"group\(s\) \[1\]"):
        box.take(1, 4, [1], timeout_s=0.05)


def test_inbox_poll_does_not_wait_and_abort_wakes_a_waiting_take():
    box = Inbox()
    assert box.poll(1, 1, [0]) == {}
    box.post(1, 1, 0, {3: "x"})
    assert box.poll(1, 1, [0]) == {3: "x"} and box.poll(1, 1, [0]) == {}
    threading.Timer(0.05, box.abort, (1,)).start()
    with pytest.raises(Aborted):
        box.take(1, 2, [0], timeout_s=5)
    box.post(1, 2, 0, {3: "late"})  # a post of an aborted span is dropped
    box.post(2, 2, 0, {3: "new"})
    box.start(2)
    assert box.take(2, 2, [0], timeout_s=1) == {3: "new"}


def test_start_of_a_span_drops_the_messages_of_earlier_spans():
    box = Inbox()
    box.post(1, 5, 0, {1: "old"})
    box.start(2)
    assert box.poll(1, 5, [0]) == {}


SLOW = [
    "problem._target_=tests.user_problems.SlowSphere",
    "+problem.delay_s=0.002",
    "generations=60",
    "islands.n=4",
    "islands.snapshot_every=5",
]


class KillMidSpan(Callback):
    """Callback: when epoch ``epoch`` is published, SIGKILL group ``group``'s actor ``delay_s``
    seconds later, inside the next span (its peer is then waiting for its emigrants)."""

    def __init__(self, epoch: int, group: int = 1, delay_s: float = 0.05):
        self.epoch, self.group, self.delay_s, self.pids, self.timer, self.restarted = (
            epoch,
            group,
            delay_s,
            [],
            None,
            {},
        )

    def on_start(self, info):
        self.pids = [g["pid"] for g in info["groups"]]

    def on_restart(self, info):
        self.restarted.update(info["groups"])

    def on_epoch(self, rec):
        if rec.epoch == self.epoch and self.timer is None:
            import os  # noqa: PLC0415
            import signal  # noqa: PLC0415

            self.timer = threading.Timer(self.delay_s, os.kill, (self.pids[self.group], signal.SIGKILL))
            self.timer.start()


@pytest.mark.slow
def test_actor_killed_inside_a_span_aborts_its_peer_and_the_result_is_unchanged(ray_local, caplog):
    """A peer waiting in a span for a lost actor's emigrants is aborted; both groups go back to the
    last snapshot and the run ends with the uninterrupted result."""
    reference = run(*SLOW, "islands.n_actors=2", use_ray=False)
    kill = KillMidSpan(epoch=3)
    # a wait for a lost peer's emigrants times out after islands.restart_timeout_s: a run that waited it
    # out would take over 300 s; this one takes seconds (10-30 s under load: the bound is no timing)
    cfg = plain(make_cfg(*DE, *SLOW, "islands.n_actors=2", "islands.restart_timeout_s=300"))
    with caplog.at_level("WARNING", logger="isles.islands.coordinator"):
        t = time.monotonic()
        result = Coordinator(cfg, instantiate(cfg["topology"]), None, callbacks=[kill], use_ray=True).run()
    assert list(kill.restarted) == [1] and "died" in caplog.text
    assert time.monotonic() - t < 300  # the waiting peer was aborted, it did not wait out its timeout
    assert result.best_f == reference.best_f and result.migrations == reference.migrations
    np.testing.assert_array_equal(result.best_x, reference.best_x)
    assert [h.epoch for h in result.history] == list(range(1, 61))


@pytest.mark.parametrize("topology", ["ring", "fully_connected", "random"])
def test_every_group_cuts_the_same_plan_from_the_topology_the_seed_and_the_epoch(topology):
    """The planner: two calls with the same (topology, n, seed, epoch) give the same edges; the
    groups' shares of the plan, cut independently, are together the whole plan (each edge once,
    at its destination's group), and another epoch gives another sample where the topology samples."""
    from isles.islands.migration.planner import group_plan, migration_edges  # noqa: PLC0415

    cfg = plain(make_cfg(*DE, f"topology={topology}", "islands.n=7"))
    topo = instantiate(cfg["topology"])
    edges = migration_edges(topo, 7, 3, 5)
    assert edges == migration_edges(instantiate(cfg["topology"]), 7, 3, 5)
    groups = [[0, 1, 2], [3, 4], [5, 6]]
    emigrants = {gid: f"emigrants of {gid}" for gid in range(7)}
    seen = []
    for ids in groups:
        inbound, remote = group_plan(edges, ids, emigrants)
        seen += [(src, ids[p]) for p, srcs in inbound.items() for src in srcs]
        assert remote == {src: emigrants[src] for srcs in inbound.values() for src in srcs if src not in ids}
    assert sorted(seen) == sorted(edges) and edges
    if topology == "random":
        assert any(migration_edges(topo, 7, 3, e) != edges for e in range(6, 10))


def test_a_snapshot_load_waits_for_the_aborted_span_to_leave(monkeypatch):
    """The driver loads a snapshot into a survivor after aborting its span: the load waits until
    the span's thread has left (it would otherwise write its epoch over the loaded state)."""
    from isles.islands.group import IslandGroup  # noqa: PLC0415

    cfg = plain(make_cfg(*DE, "islands.n=4"))
    coordinator = Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False)
    group = IslandGroup(coordinator.executor.spec([0, 1], "cpu"))
    saved = group.state_dict()
    errors, loaded, sent = [], threading.Event(), threading.Event()

    def span():  # epoch 2 waits for group 1's emigrants, which never come
        try:
            run_span(group, [1, 1], coordinator.topology, groups=[[0, 1], [2, 3]], peers=[None, None], timeout_s=300)
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    import isles.islands.transport.link as transport  # noqa: PLC0415

    monkeypatch.setattr(transport.ActorTransport, "send", lambda self, *a: sent.set())  # inside the span
    t = threading.Thread(target=span)
    t.start()
    assert sent.wait(120)  # epoch 1 ran: the span holds the state (a hang guard, however loaded the machine)
    loader = threading.Thread(target=lambda: (group.load_state_dict(saved), loaded.set()))
    loader.start()
    assert not loaded.wait(0.3)  # the span holds the state
    group.abort(1)
    t.join(120)
    assert loaded.wait(120) and isinstance(errors[0], Aborted)
    assert group.state_dict()["generation"] == saved["generation"]  # the snapshot's state, not the span's


def test_snapshots_fall_inside_spans_and_one_taken_there_resumes_to_the_same_run(ray_local, monkeypatch, tmp_path):
    """A span is not cut where a snapshot falls due: the groups keep their states after that epoch
    (IslandGroup._keep_snapshot) and the driver's snapshot needs no call; such a snapshot, saved as a
    checkpoint, resumes in-process to the uninterrupted result."""
    from isles.app.job import run_job  # noqa: PLC0415
    from isles.islands.control import (
        checkpoint,
        recovery,
        sync_loop,  # noqa: PLC0415
    )

    spans, taken = [], []
    real_span, real_snapshot = sync_loop.SyncLoop.start_span, recovery.Recovery.snapshot
    monkeypatch.setattr(sync_loop.SyncLoop, "start_span", lambda self, *a: spans.append(a[5]) or real_span(self, *a))
    monkeypatch.setattr(
        recovery.Recovery,
        "snapshot",
        lambda self, groups, placement, loop, carried=None: (
            taken.append((loop.epoch, carried is not None, real_snapshot(self, groups, placement, loop, carried)))
            or taken[-1][2]
        ),
    )
    overrides = ["islands.n_actors=2", "islands.snapshot_every=3", "generations=40"]
    result = run(*overrides)
    monkeypatch.undo()
    assert max(spans) > 3  # spans run past the snapshot epochs
    inside = [(e, snap) for e, carried, snap in taken if carried]
    assert [e for e, _ in inside] == list(range(3, 41, 3))
    assert result.history[-1].epoch == 40 and 3 in [e for e, _ in inside]
    path = tmp_path / "mid_span.pkl"
    checkpoint.save(path, inside[2][1])  # epoch 9, inside a span
    resumed, _ = run_job(make_cfg(*DE, *overrides[1:], f"checkpoint.resume={path}"), use_ray=False)
    assert resumed.best_f == result.best_f and resumed.migrations == result.migrations
    np.testing.assert_array_equal(resumed.best_x, result.best_x)
    assert [h.island_best_f.tolist() for h in resumed.history] == [h.island_best_f.tolist() for h in result.history]


def test_a_group_keeps_its_state_and_emigrants_where_a_snapshot_falls_due_inside_a_span():
    """run_span with a snapshot due after epoch 6 of 9: that epoch's summary carries the group's
    state and emigrants, equal to those of a group that ran 6 epochs and stopped; no other does."""
    from isles.islands.group import IslandGroup  # noqa: PLC0415

    cfg = plain(make_cfg(*DE, "islands.n=4"))
    co = Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False)
    long = run_span(IslandGroup(co.executor.spec([0, 1, 2, 3], "cpu")), [1] * 9, co.topology, snapshots=[6])
    short_group = IslandGroup(co.executor.spec([0, 1, 2, 3], "cpu"))
    short = run_span(short_group, [1] * 6, co.topology)
    assert [j for j, s in enumerate(long) if s.snapshot is not None] == [5]
    snap = long[5].snapshot
    assert snap.plugins == []  # no plug-in
    for key, value in short_group.state_dict().items():
        np.testing.assert_array_equal(snap.state[key], value, err_msg=key)
    for name, leaf in short[-1].emigrants.leaves().items():
        np.testing.assert_array_equal(long[5].emigrants.leaves()[name], leaf, err_msg=name)


def test_the_next_span_starts_before_the_driver_books_the_last_one(ray_local, monkeypatch):
    """The driver starts span k + 1 (its first migration from span k's last emigrants) before it
    books span k's epochs (SyncLoop.start_ahead), so the actors evolve while it does; not where
    a checkpoint falls due at the span's end. The run is the in-process one, bit for bit."""
    from isles.islands.control import sync_loop  # noqa: PLC0415

    log = []

    class Books(Callback):
        def on_epoch(self, rec):
            log.append(("booked", rec.epoch))

    real = sync_loop.SyncLoop.start_span
    monkeypatch.setattr(
        sync_loop.SyncLoop, "start_span", lambda self, *a: log.append(("started", a[2])) or real(self, *a)
    )
    cfg = plain(make_cfg(*DE, "islands.n_actors=2", "generations=300"))
    result = Coordinator(cfg, instantiate(cfg["topology"]), None, callbacks=[Books()], use_ray=True).run()
    monkeypatch.undo()
    starts = [e for kind, e in log if kind == "started"]
    assert len(starts) >= 3
    # span k + 1 starts at epoch E (the end of span k) before the driver has booked epoch E
    ahead = [e for e in starts if e > 0 and log.index(("started", e)) < log.index(("booked", e))]
    assert ahead == starts[1:]
    reference = run("islands.n_actors=1", "generations=300", use_ray=False)
    assert result.best_f == reference.best_f and result.migrations == reference.migrations
    np.testing.assert_array_equal(result.best_x, reference.best_x)


def test_the_typed_records_that_cross_ray_equal_the_in_process_ones(ray_local, monkeypatch):
    """CMEPSO (the master swarm's best sent to the islands) over 2 Ray actors and as 2 in-process
    groups: the summaries that reach the driver are :class:`EpochSummary` dataclasses, the order that
    reached each group a :class:`SpanOrder` (with its :class:`Route` and first :class:`Plan`), and
    every field of every epoch (bests, counters, migrations, the plug-in's best and metrics) equals the
    in-process run's, bit for bit (spans may cut the epochs differently: only the span's last summary
    carries the emigrants)."""
    from dataclasses import fields  # noqa: PLC0415

    from isles.algorithms.core.population import Population  # noqa: PLC0415
    from isles.islands.control import sync_loop  # noqa: PLC0415
    from isles.islands.records import EpochSummary, Plan, Route, SpanOrder  # noqa: PLC0415

    def summaries(use_ray):
        from isles.islands.control.executor import Executor  # noqa: PLC0415

        seen, orders, real_end, real_call = [], [], sync_loop.SyncLoop.end_span, Executor.call

        def call(self, group, method, *args):
            if method.startswith("run_span"):
                orders.append(args[0])
            return real_call(self, group, method, *args)

        monkeypatch.setattr(Executor, "call", call)
        monkeypatch.setattr(sync_loop, "BATCH_S", 1e9)  # spans by their cap, not by the epochs' seconds (load)
        monkeypatch.setattr(
            sync_loop.SyncLoop, "end_span", lambda self, *a: seen.extend(out := real_end(self, *a)) or out
        )
        result = run_master("plugins.0.sends_best=true", "islands.n_actors=2", use_ray=use_ray)
        monkeypatch.undo()
        return result, [s for _, s in seen], orders

    ray_run, over_ray, spans = summaries(True)  # spans: the orders sent, every group's
    local_run, in_process, _ = summaries(False)
    assert_same_master_runs(ray_run, local_run)
    assert len(over_ray) == len(in_process) == 12 and len(spans) < 2 * 12  # spans of several epochs
    skip = {"compute_s", "emigrants", "snapshot", "device", "best", "plugins"}
    for epoch, (a, b) in enumerate(zip(over_ray, in_process, strict=False), 1):
        assert sorted(a) == sorted(b) == [0, 1]
        for i in (0, 1):
            x, y = a[i], b[i]
            assert type(x) is EpochSummary and type(y) is EpochSummary
            assert x.island_ids == [[0, 1], [2, 3]][i] and x.generation == epoch
            for f in fields(EpochSummary):
                if f.name not in skip:
                    np.testing.assert_array_equal(getattr(x, f.name), getattr(y, f.name), err_msg=f.name)
            for name, leaf in x.best.leaves().items():
                np.testing.assert_array_equal(leaf, y.best.leaves()[name], err_msg=name)
            ((pbest, metrics),), ((pbest_y, metrics_y),) = x.plugins, y.plugins
            assert isinstance(pbest, Population) and pbest.shape == (1, 1)
            assert metrics == metrics_y and set(metrics) == {"master_best_f", "evaluations", "nan_evaluations"}
            np.testing.assert_array_equal(pbest.genome, pbest_y.genome)
    assert any(m[0] == -1 for s in over_ray for i in (0, 1) for m in s[i].migrations)  # the plug-in's migrants
    # what the driver sent each actor: a typed order (its route and its first epoch's plan)
    assert all(type(o) is SpanOrder and type(o.route) is Route and type(o.first) is Plan for o in spans)
    assert [o.route.index for o in spans[:2]] == [0, 1] and all(o.route.groups == [[0, 1], [2, 3]] for o in spans)
    assert all(o.first.inbound for o in spans[2:])  # a later span's first epoch takes the plug-in's migrants in
