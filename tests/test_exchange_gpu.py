"""Emigrants from GPU to GPU over NCCL (islands/exchange.py), on 2 GPUs (marked ``gpu``; skipped with
fewer). Two island groups, one per GPU, each in a thread with its own device, run a span of epochs
exchanging over a real NCCL communicator; every epoch equals the same span over their inboxes, bit
for bit. And a whole run over 2 actors (Ray, one GPU each) with ``islands.transport=nccl`` equals
``islands.transport=ray`` and one actor."""
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
from isles.islands.exchange import NcclComm  # noqa: E402
from tests.helpers import make_cfg, plain  # noqa: E402
from tests.test_exchange import assert_same_spans  # noqa: E402
from tests.test_spmd import DE  # noqa: E402

pytestmark = pytest.mark.gpu
GPU = [o for o in DE if o != "device=cpu"] + ["device=gpu"]


def test_nccl_span_equals_the_inbox_span_on_two_gpus():
    from isles.islands.group import IslandGroup  # noqa: PLC0415

    assert NcclComm.available() is None
    cfg = plain(make_cfg(*GPU, "islands.n=5", "topology=fully_connected"))
    coordinator = Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False)
    ids = [[0, 1, 2], [3, 4]]
    results = {}
    for mode in ("inbox", "nccl"):
        groups = [None, None]
        uid = NcclComm.unique_id()
        out, errors = {}, []
        ready = threading.Barrier(2)

        def rank(i):
            try:
                with cp.cuda.Device(i):
                    groups[i] = IslandGroup(coordinator._spec(ids[i], "gpu"))
                    if mode == "nccl":
                        groups[i]._nccl = NcclComm(uid, 2, i)
                    ready.wait(60)
                    peers = [SimpleNamespace(post=SimpleNamespace(remote=lambda *a, j=j: groups[j].post(*a)))
                             for j in range(2)]
                    route = {"peers": peers, "index": i, "groups": ids, "topology": coordinator.topology,
                             "n": 5, "seed": 0, "timeout_s": 60, "nccl": mode == "nccl"}
                    out[i] = groups[i].run_span(1, ({}, {}), [1] * 8, 0, route)
                    cp.cuda.Device(i).synchronize()
            except Exception as err:  # noqa: BLE001
                errors.append(err)

        threads = [threading.Thread(target=rank, args=(i,)) for i in range(2)]
        [t.start() for t in threads]
        [t.join(300) for t in threads]
        assert not errors, errors
        results[mode] = out
    assert_same_spans(results["inbox"], results["nccl"])


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
        for a, b in zip(nccl.history, other.history):
            np.testing.assert_array_equal(a["island_best_f"], b["island_best_f"])
