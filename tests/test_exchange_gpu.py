"""Emigrants from GPU to GPU over NCCL (islands/transport/nccl.py), on 2 GPUs (marked ``gpu``; skipped with
fewer). Two island groups, one per GPU, each in a process of its own, run a span of epochs
exchanging over a real NCCL communicator; every epoch equals the same span over their inboxes (two
threads), bit for bit. And a whole run over 2 actors (Ray, one GPU each) with ``islands.transport=nccl`` equals
``islands.transport=ray`` and one actor; so does CMEPSO with a replica of its master swarm in each actor."""

import threading
from types import SimpleNamespace

import numpy as np
import pytest

from tests.gpu import cupy_or_skip

cp = cupy_or_skip()
if cp.cuda.runtime.getDeviceCount() < 2:
    pytest.skip("needs 2 GPUs", allow_module_level=True)

from hydra.utils import instantiate  # noqa: E402
from isles.islands.coordinator import Coordinator  # noqa: E402
from isles.islands.span_graph import SpanGraph  # noqa: E402
from isles.islands.transport.kinds import NCCL  # noqa: E402
from isles.islands.transport.nccl import NcclComm  # noqa: E402

from tests.helpers import make_cfg, plain, run_span  # noqa: E402
from tests.test_exchange import assert_same_spans  # noqa: E402
from tests.test_spmd import DE  # noqa: E402

pytestmark = pytest.mark.gpu
GPU = [o for o in DE if o != "device=cpu"] + ["device=gpu"]


SPAN = (*GPU, "islands.n=5", "topology=fully_connected")
SPAN_IDS = [[0, 1, 2], [3, 4]]


def _span_group(i: int):
    """Group ``i`` of :data:`SPAN_IDS` on GPU ``i`` and the route fields of a span (no peers yet):
    ``(group, topology, route)`` (:func:`tests.helpers.run_span`)."""
    from isles.islands.group import IslandGroup  # noqa: PLC0415

    cfg = plain(make_cfg(*SPAN))
    coordinator = Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False)
    route = {"peers": [None, None], "index": i, "groups": SPAN_IDS, "timeout_s": 60}
    return IslandGroup(coordinator.executor.spec(SPAN_IDS[i], "gpu")), coordinator.topology, route


def _nccl_rank(i: int, uid, results) -> None:
    """Rank ``i`` of the NCCL span, in a process of its own (as in an actor: an NCCL rank that
    waits on the GPU must not hold a GIL its peer needs)."""
    try:
        cp.cuda.Device(i).use()
        group, topology, route = _span_group(i)
        group._nccl = NcclComm(uid, 2, i)
        group.span_graph = "always"  # islands.span_graph=always: across actors too
        out = run_span(group, [1] * 8, topology, transport=NCCL, **route)
        results.put((i, out, SpanGraph.captures))
    except BaseException as err:  # noqa: BLE001
        results.put((i, None, repr(err)))


def test_nccl_span_equals_the_inbox_span_on_two_gpus():
    """The same span of 8 epochs on 2 GPUs: over NCCL (two processes, one rank each; epochs 2..7
    are replays of one captured epoch, NCCL exchange included) and over the groups' inboxes (two
    threads of this process, no graph); every epoch the same, bit for bit."""
    import multiprocessing as mp  # noqa: PLC0415

    assert NcclComm.available() is None
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    uid = NcclComm.unique_id()
    procs = [ctx.Process(target=_nccl_rank, args=(i, uid, queue)) for i in range(2)]
    [p.start() for p in procs]
    got = [queue.get(timeout=240) for _ in procs]
    [p.join(60) for p in procs]
    assert all(out is not None for _, out, _ in got), got
    assert [c for _, _, c in got] == [1, 1]  # epochs 2..7 replayed one captured epoch (islands/span_graph.py)
    nccl = {i: out for i, out, _ in got}

    groups, out, errors = [None, None], {}, []
    ready, compose = threading.Barrier(2), threading.Lock()  # Hydra's compose is not thread-safe

    def rank(i):
        try:
            with cp.cuda.Device(i):
                with compose:
                    groups[i], topology, route = _span_group(i)
                ready.wait(120)
                route["peers"] = [
                    SimpleNamespace(post=SimpleNamespace(remote=lambda *a, j=j: groups[j].post(*a))) for j in range(2)
                ]
                out[i] = run_span(groups[i], [1] * 8, topology, **route)
        except Exception as err:  # noqa: BLE001
            errors.append(err)
            ready.abort()  # the other group stops waiting

    threads = [threading.Thread(target=rank, args=(i,)) for i in range(2)]
    [t.start() for t in threads]
    [t.join(300) for t in threads]
    assert not errors, errors
    assert_same_spans(out, nccl)
    assert any(m for s in nccl[0] for m in s.migrations)  # emigrants were taken in


def test_a_run_over_two_gpu_actors_is_the_same_over_nccl(ray_local):
    def run(*o):
        cfg = plain(make_cfg(*GPU, *o))
        return Coordinator(cfg, instantiate(cfg["topology"]), None).run()

    nccl = run("islands.n_actors=2", "islands.transport=nccl")
    ray_ = run("islands.n_actors=2", "islands.transport=ray")
    one = run("islands.n_actors=1")
    for other in (ray_, one):
        assert nccl.best_f == other.best_f and nccl.evaluations == other.evaluations
        assert nccl.migrations == other.migrations
        for a, b in zip(nccl.history, other.history, strict=False):
            np.testing.assert_array_equal(a.island_best_f, b.island_best_f)


def test_cmepso_over_two_gpu_actors_with_master_replicas_equals_one_actor(ray_local):
    """CMEPSO over 2 GPU actors: a replica of the master swarm in each (islands/plugin.py), the
    slaves' bests all-gathered over NCCL every epoch; the run equals 1 actor (the master beside the
    slaves on one GPU), bit for bit, with the master's best sent to the islands and without."""
    from tests.test_spmd import CMEPSO, assert_same_master_runs  # noqa: PLC0415

    def run(*o):
        cfg = plain(make_cfg(*[x for x in CMEPSO if x != "device=cpu"], "device=gpu", *o))
        return Coordinator(cfg, instantiate(cfg["topology"]), [instantiate(p) for p in cfg["plugins"]]).run()

    for sends in ("false", "true"):
        nccl = run("islands.n_actors=2", "islands.transport=nccl", f"plugins.0.sends_best={sends}")
        assert_same_master_runs(nccl, run("islands.n_actors=1", f"plugins.0.sends_best={sends}"))
