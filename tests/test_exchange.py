"""The device-to-device exchange of a sync span (islands/transport/nccl.py) on NumPy, with an in-process
communicator in place of NCCL: packing keeps every leaf, the plan's sends are the peers' receives,
and groups that exchange through it run the same epochs, bit for bit, as through their inboxes."""

import threading
from collections import deque
from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np
import pytest
from hydra.utils import instantiate
from isles.algorithms.core.population import Population, PopulationRoles
from isles.islands.coordinator import Coordinator
from isles.islands.migration.planner import migration_edges
from isles.islands.migration.topology import FullyConnected, RandomGraph, Ring
from isles.islands.transport.kinds import NCCL, POSTS
from isles.islands.transport.nccl import exchange, island_bytes, layout, pack, plan, unpack

from tests.helpers import make_cfg, plain, run_span
from tests.test_spmd import DE


class Mailboxes:
    """What the in-process ranks have sent, ``{(sender, receiver): deque of buffers}``."""

    def __init__(self):
        self.cond = threading.Condition()
        self.box: dict = {}


class LoopbackComm:
    """NCCL's send/recv semantics in one process: sends are queued at once, the receives of a group
    call wait for the peer's message after the group's sends."""

    def __init__(self, boxes: Mailboxes, rank: int):
        self.boxes, self.rank, self._recvs, self.calls = boxes, rank, None, 0

    @contextmanager
    def group(self):
        self._recvs = []
        yield
        for buf, peer in self._recvs:
            with self.boxes.cond:
                q = self.boxes.box.setdefault((peer, self.rank), deque())
                assert self.boxes.cond.wait_for(lambda q=q: len(q) > 0, timeout=120), "no message from the peer"
                data = q.popleft()
            assert data.size == buf.size, "the sender's and the receiver's plans differ"
            buf[...] = data
        self._recvs = None
        self.calls += 1

    def send(self, buf, peer):
        with self.boxes.cond:
            self.boxes.box.setdefault((self.rank, peer), deque()).append(buf.copy())
            self.boxes.cond.notify_all()

    def recv(self, buf, peer):
        self._recvs.append((buf, peer))

    def abort(self):
        pass


def _pop(rng, k=2, d=5, genome_dtype=np.float32, extras=True):
    ex = {"eta": rng.random((1, k, d)), "steps": rng.integers(0, 9, (1, k, 3)).astype(np.int16)} if extras else {}
    g = (
        rng.integers(0, 2**32, (1, k, d), dtype=np.uint64).astype(genome_dtype)
        if genome_dtype != np.float32
        else rng.random((1, k, d)).astype(np.float32)
    )
    return Population(g, rng.random((1, k)), rng.random((1, k)).astype(np.float32), ex)


def _same(a, b):
    la, lb = a.leaves(), b.leaves()
    assert la.keys() == lb.keys()
    for key in la:
        assert la[key].dtype == lb[key].dtype and la[key].shape == lb[key].shape
        np.testing.assert_array_equal(la[key], lb[key])


@pytest.mark.parametrize("genome_dtype", [np.float32, np.uint32])
def test_pack_unpack_keeps_every_leaf_and_dtype(genome_dtype):
    rng = np.random.default_rng(0)
    pops = [_pop(rng, genome_dtype=genome_dtype) for _ in range(3)]
    lay = layout(pops[0])
    buf = pack(np, pops, lay)
    assert buf.dtype == np.uint8 and buf.size == 3 * island_bytes(lay) and island_bytes(lay) % 16 == 0
    for a, b in zip(pops, unpack(buf, lay, 3), strict=False):
        _same(a, b)
    roles = PopulationRoles({"x": pops[0], "y": _pop(rng, k=1, d=2, extras=False)})
    back = unpack(pack(np, [roles], layout(roles)), layout(roles), 1)[0]
    assert isinstance(back, PopulationRoles) and set(back) == {"x", "y"}
    _same(back["x"], roles["x"])
    _same(back["y"], roles["y"])


def test_pack_refuses_emigrants_of_another_shape():
    rng = np.random.default_rng(1)
    with pytest.raises(
        ValueError, match=r"emigrants of another shape: extras.eta is \(1, 2, 4\) float64, the layout says \(1, 2, 5\)"
    ):
        pack(np, [_pop(rng, d=4)], layout(_pop(rng, d=5)))


@pytest.mark.parametrize("topology", [Ring(), FullyConnected(), RandomGraph(p=0.4)])
def test_every_groups_sends_are_the_peers_receives_in_order(topology):
    groups = [[0, 1, 2], [3, 4], [5, 6, 7]]
    where = {gid: g for g, ids in enumerate(groups) for gid in ids}
    for epoch in range(1, 6):
        edges = migration_edges(topology, 8, 3, epoch)
        plans = [plan(edges, {gid: p for p, gid in enumerate(ids)}, where) for ids in groups]
        for g, (sends, _) in enumerate(plans):
            for h, srcs in sends.items():
                assert plans[h][1][g] == srcs  # h receives exactly g's sources for it, in the same order
        for g, (_, receives) in enumerate(plans):
            want = sorted({s for s, d in edges if d in groups[g] and s not in groups[g]})
            assert sorted(s for srcs in receives.values() for s in srcs) == want


def test_exchange_delivers_each_source_islands_emigrants():
    rng = np.random.default_rng(2)
    groups = [[0, 1], [2, 3], [4]]
    where = {gid: g for g, ids in enumerate(groups) for gid in ids}
    emig = {gid: _pop(rng) for gid in range(5)}
    edges = migration_edges(FullyConnected(), 5, 0, 1)
    boxes, out = Mailboxes(), {}

    def rank(g):
        mine = {gid: p for p, gid in enumerate(groups[g])}
        sends, receives = plan(edges, mine, where)
        stacked = Population.concat([emig[gid] for gid in groups[g]], axis=0)
        out[g] = exchange(LoopbackComm(boxes, g), np, stacked, mine, sends, receives, layout(emig[0]))

    threads = [threading.Thread(target=rank, args=(g,)) for g in range(3)]
    [t.start() for t in threads]
    [t.join(120) for t in threads]
    for g, got in out.items():
        assert sorted(got) == sorted({s for s, d in edges if d in groups[g] and s not in groups[g]})
        for src, pop in got.items():
            _same(pop, emig[src])


def _groups(n_groups=2, *overrides):
    from isles.islands.group import IslandGroup  # noqa: PLC0415

    cfg = plain(make_cfg(*DE, "islands.n=5", *overrides))
    coordinator = Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False)
    ids = [[0, 1, 2], [3, 4]]
    return [IslandGroup(coordinator.executor.spec(i, "cpu")) for i in ids], ids, coordinator.topology


def assert_same_spans(a: dict, b: dict) -> None:
    """Two runs of a span, ``{group index: [summary per epoch]}``: every epoch's bests and
    migrations are the same, bit for bit."""
    assert sorted(a) == sorted(b)
    for i in a:
        assert len(a[i]) == len(b[i])
        for x, y in zip(a[i], b[i], strict=False):
            np.testing.assert_array_equal(x.best_f, y.best_f)
            np.testing.assert_array_equal(x.best.genome, y.best.genome)
            assert x.migrations == y.migrations


@pytest.mark.parametrize("topology", ["ring", "fully_connected"])
def test_a_span_over_the_exchange_equals_the_span_over_inboxes(topology):
    """Two groups in threads run a span of 6 epochs twice: emigrants through the device exchange
    (an in-process communicator for NCCL's) and through their inboxes; every epoch's summary is
    the same, bit for bit."""
    inbox = _spans("inbox", topology, [1] * 6)
    calls = []
    out = _spans("exchange", topology, [1] * 6, calls)
    assert calls == [5, 5]  # one group call per epoch after the first
    assert_same_spans(inbox, out)
    assert any(m for s in out[0] for m in s.migrations)  # emigrants were taken in


def _spans(mode, topology, ks, calls=None, made=None, transport=None):
    """``{group index: summaries}`` of one span ``ks`` of two groups in threads, emigrants through
    their inboxes or through the in-process communicator (``mode``); ``calls`` gets each group's
    number of communicator group calls. ``made``: ``(groups, ids, topology)`` instead of
    :func:`_groups`' (``topology`` unused then); ``transport``: the route's, instead of ``mode``'s."""
    groups, ids, topo = made or _groups(2, f"topology={topology}")
    boxes = Mailboxes()
    peers = [SimpleNamespace(post=SimpleNamespace(remote=g.post)) for g in groups]
    for i, g in enumerate(groups):
        g._nccl = LoopbackComm(boxes, i) if mode == "exchange" else None
    out = {}

    def span(i):
        out[i] = run_span(
            groups[i],
            ks,
            topo,
            groups=ids,
            index=i,
            peers=peers,
            timeout_s=20,
            transport=transport or (NCCL if mode == "exchange" else POSTS),
        )

    threads = [threading.Thread(target=span, args=(i,)) for i in range(len(groups))]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    assert sorted(out) == list(range(len(groups)))
    if calls is not None:
        calls.extend(g._nccl.calls for g in groups)
    return out


@pytest.mark.parametrize("topology,ks", [("ring", [1] * 7), ("fully_connected", [2] * 5 + [1])])
def test_a_span_of_replayed_epochs_equals_the_plain_span(monkeypatch, topology, ks):
    """The span graph's epoch (islands/span_graph.py; on NumPy its twin calls the epoch directly)
    from the third epoch on, over the in-process communicator, against the plain span over the
    inboxes: every epoch's summary the same, bit for bit (the GPU replays are checked the same
    way in tests/test_exchange_gpu.py). With a last epoch of other generations, the graph stops
    before it and the plain loop runs it."""
    from isles.islands import span_graph  # noqa: PLC0415
    from isles.islands.span_graph import SpanGraph  # noqa: PLC0415

    plainly = _spans("inbox", topology, ks)
    monkeypatch.setattr(span_graph, "eligible", lambda group, across: True)  # as on CuPy
    before = SpanGraph.captures
    replayed = _spans("exchange", topology, ks)
    assert SpanGraph.captures - before == 2  # one captured epoch per group
    assert_same_spans(plainly, replayed)
    assert any(m for s in replayed[0][2:] for m in s.migrations)  # the replayed epochs took immigrants in


def test_transport_is_checked_in_one_line():
    from isles.islands.config.schema import check_values, with_defaults  # noqa: PLC0415

    cfg = with_defaults(plain(make_cfg(*DE, "islands.transport=tcp")))
    with pytest.raises(ValueError, match=r"^islands\.transport='tcp': allowed values are auto\|ray\|nccl\|channel$"):
        check_values(cfg)
    cfg = with_defaults(plain(make_cfg(*DE, "islands.transport=nccl", "device=cpu")))
    with pytest.raises(
        ValueError, match=r"^islands\.transport=nccl: .* device=cpu; allowed values here are auto\|ray\|channel$"
    ):
        check_values(cfg)


def _master_groups(ids, send_master: bool):
    """Groups ``ids`` of a scaled-down CMEPSO (5 slave swarms, ring), each with its replica of the
    master swarm plug-in (the same factory, seed and stream: islands/plugin.py)."""
    from isles.islands.group import IslandGroup  # noqa: PLC0415

    from tests.test_spmd import CMEPSO  # noqa: PLC0415

    cfg = plain(make_cfg(*CMEPSO, "islands.n=5", f"plugins.0.sends_best={send_master}"))
    plugins = [instantiate(p) for p in cfg["plugins"]]
    coordinator = Coordinator(cfg, instantiate(cfg["topology"]), plugins, use_ray=False)
    return [IslandGroup(coordinator.executor.spec(i, "cpu")) for i in ids], ids, coordinator.topology


@pytest.mark.parametrize("send_master", [False, True])
def test_master_replicas_gather_the_bests_over_the_exchange_as_over_inboxes(monkeypatch, send_master):
    """Two groups with master replicas run a span of 6 epochs: the bests all-gathered over the
    in-process communicator (one more group call an epoch) and through the inboxes (with the
    emigrants) give the same epochs and masters, bit for bit, and the same as one group of all 5
    islands; every replica ends in the same state. The exchange's span replays one captured epoch,
    the plug-in's replica inside it (the NumPy twin of the span graph)."""
    from isles.islands import span_graph  # noqa: PLC0415
    from isles.islands.span_graph import SpanGraph  # noqa: PLC0415

    monkeypatch.setattr(span_graph, "eligible", lambda group, across: True)  # as on CuPy: ring is a fixed plan
    before, ks = SpanGraph.captures, [1] * 6
    runs = {}
    for mode in ("inbox", "exchange", "one"):
        made = _master_groups([[0, 1, 2, 3, 4]] if mode == "one" else [[0, 1, 2], [3, 4]], send_master)
        calls = []
        runs[mode] = (
            _spans("inbox" if mode == "one" else mode, None, ks, calls if mode == "exchange" else None, made=made),
            [g.plugin_states()[0] for g in made[0]],
        )
        if mode == "exchange":
            assert calls == [6 + 5, 6 + 5]  # the bests every epoch, the emigrants after the first
    (inbox, states), (out, states_x), (one, states_1) = runs["inbox"], runs["exchange"], runs["one"]
    assert_same_spans(inbox, out)
    for e in range(len(ks)):
        for i in (0, 1):
            for run in (inbox, out):
                (best, metrics), (best_1, metrics_1) = run[i][e].plugins[0], one[0][e].plugins[0]
                assert metrics == metrics_1 and set(metrics) == {"master_best_f", "evaluations", "nan_evaluations"}
                for name, leaf in best.leaves().items():  # x, f, v
                    np.testing.assert_array_equal(leaf, best_1.leaves()[name])
        np.testing.assert_array_equal(np.concatenate([inbox[0][e].best_f, inbox[1][e].best_f]), one[0][e].best_f)
    for st in states + states_x:
        assert sorted(st) == sorted(states_1[0])
        for key, a in st.items():
            np.testing.assert_array_equal(np.asarray(a), np.asarray(states_1[0][key]))
    assert any(m[0] == -1 for s in out[0] for m in s.migrations) == send_master
    assert SpanGraph.captures - before == 2 + 1  # a captured epoch with the plug-in: each group's, and the one group's
