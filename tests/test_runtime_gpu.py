"""GPU: one in-process island group runs its epochs in spans on the device; with CMEPSO's
master swarm plug-in beside the slaves, a span's like epochs are replays of one captured epoch
body (slaves, their bests, the master's replica; islands/span_graph.py). Same records and result
as the plain, uncaptured path; close to the NumPy run. ``python -m pytest -m gpu tests/test_runtime_gpu.py``."""

import numpy as np
import pytest
from hydra.utils import instantiate

from tests.gpu import cupy_or_skip  # noqa: E402

cp = cupy_or_skip()
pytestmark = pytest.mark.gpu

from isles.islands.coordinator import Coordinator  # noqa: E402
from isles.islands.transport.kinds import NCCL, POSTS  # noqa: E402

from tests.helpers import make_cfg, plain, run_span  # noqa: E402

CMEPSO = ["+experiment=cmepso", "generations=60", "islands.snapshot_every=7", "logger=none", "progress=false"]


def run(*overrides):
    cfg = plain(make_cfg(*CMEPSO, *overrides))
    return Coordinator(cfg, instantiate(cfg["topology"]), [instantiate(p) for p in cfg["plugins"]], use_ray=False).run()


def test_captured_cmepso_iteration_equals_the_plain_path():
    from isles.islands.span_graph import SpanGraph  # noqa: PLC0415

    before = SpanGraph.captures
    captured = run("device=gpu")  # islands.span_graph=auto: the epoch body captured with the master's replica
    assert SpanGraph.captures > before  # the captured iteration did run
    plain_path = run("device=gpu", "islands.span_graph=never")
    assert captured.best_f == plain_path.best_f and captured.evaluations == plain_path.evaluations
    np.testing.assert_array_equal(captured.best_x, plain_path.best_x)
    for a, b in zip(captured.history, plain_path.history, strict=True):
        master = a.plugin_metrics["master_best_f"], b.plugin_metrics["master_best_f"]
        assert (a.best_f, master[0], a.nan_evaluations) == (b.best_f, master[1], b.nan_evaluations)
        np.testing.assert_array_equal(a.island_best_f, b.island_best_f)
    on_cpu = run("device=cpu")
    np.testing.assert_allclose(captured.history[-1].island_best_f, on_cpu.history[-1].island_best_f, rtol=1e-6)


def one_group_of_four():
    """``(Coordinator, route)`` of one group of 4 tiny DE islands on a GPU, on a ring, with no peer
    (skips where CuPy has no NCCL)."""
    from isles.islands.transport.nccl import NcclComm  # noqa: PLC0415

    if NcclComm.available() is not None:
        pytest.skip(NcclComm.available())
    cfg = plain(
        make_cfg(
            "+experiment=de_islands",
            "problem=sphere",
            "problem.dim=8",
            "algorithm.pop_size=16",
            "islands.n=4",
            "islands.n_migrants=2",
            "topology=ring",
            "logger=none",
            "progress=false",
            "device=gpu",
        )
    )
    co = Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False)
    return co, {"peers": [None], "timeout_s": 30}


def test_a_span_over_nccl_replays_one_captured_epoch_equal_to_the_plain_span():
    """islands.span_graph=always on one GPU: a group of 4 DE islands on a ring (all local) over a 1-rank
    NCCL communicator replays one captured epoch from the third epoch on (islands/span_graph.py),
    and every epoch's summary equals the plain span's (no communicator), bit for bit. The 2-GPU
    exchange inside the capture: tests/test_exchange_gpu.py."""
    from isles.islands.group import IslandGroup  # noqa: PLC0415
    from isles.islands.span_graph import SpanGraph  # noqa: PLC0415
    from isles.islands.transport.nccl import NcclComm  # noqa: PLC0415

    from tests.test_exchange import assert_same_spans  # noqa: PLC0415

    co, route = one_group_of_four()
    out = {}
    for mode in ("plain", "graph"):
        g = IslandGroup(co.executor.spec([0, 1, 2, 3], "gpu"))
        g.span_graph = "never"  # the plain span
        if mode == "graph":
            g._nccl = NcclComm(NcclComm.unique_id(), 1, 0)
            g.span_graph = "always"  # islands.span_graph=always: over NCCL too
        before = SpanGraph.captures
        out[mode] = {
            0: run_span(g, [1] * 9, co.topology, transport=NCCL if mode == "graph" else POSTS, **route)
            + run_span(
                g, [3] * 5 + [1], co.topology, epoch0=9, span=2, transport=NCCL if mode == "graph" else POSTS, **route
            )
        }
        assert SpanGraph.captures - before == (2 if mode == "graph" else 0)
    assert_same_spans(out["plain"], out["graph"])
    assert any(m for s in out["graph"][0][2:] for m in s.migrations)


def test_a_snapshot_inside_a_replayed_span_keeps_the_state_of_its_epoch():
    """A snapshot due after epoch 6 of a 9-epoch span over a 1-rank NCCL communicator: the replays
    stop at epoch 6 (IslandGroup.run_span cuts them there), the group keeps its state and that
    epoch's emigrants in the summary, and both equal the plain span's, bit for bit."""
    from isles.islands.group import IslandGroup  # noqa: PLC0415
    from isles.islands.transport.nccl import NcclComm  # noqa: PLC0415

    from tests.test_exchange import assert_same_spans  # noqa: PLC0415

    co, route = one_group_of_four()
    out = {}
    for mode in ("plain", "graph"):
        g = IslandGroup(co.executor.spec([0, 1, 2, 3], "gpu"))
        g.span_graph = "never"
        if mode == "graph":
            g._nccl = NcclComm(NcclComm.unique_id(), 1, 0)
            g.span_graph = "always"
        out[mode] = {
            0: run_span(g, [1] * 9, co.topology, snapshots=[6], transport=NCCL if mode == "graph" else POSTS, **route)
        }
    assert_same_spans(out["plain"], out["graph"])
    kept = {mode: out[mode][0][5] for mode in out}  # the summary of epoch 6
    assert all(k.snapshot is not None and k.emigrants is not None for k in kept.values())
    assert not any(s.snapshot is not None for mode in out for j, s in enumerate(out[mode][0]) if j != 5)
    for key, value in kept["plain"].snapshot.state.items():
        np.testing.assert_array_equal(value, kept["graph"].snapshot.state[key], err_msg=key)
    for name, leaf in kept["plain"].emigrants.leaves().items():
        np.testing.assert_array_equal(leaf, kept["graph"].emigrants.leaves()[name], err_msg=name)


@pytest.mark.parametrize("overrides", [(), ("islands.migration_interval=3", "topology=fully_connected")])
def test_an_in_process_run_replays_its_like_epochs_with_the_same_result(overrides):
    """islands.span_graph=auto (the default) against never: a run of tiny DE islands in one
    process, one (or three) generations per epoch, replays one captured epoch per batch
    (islands/span_graph.py) and gives the same history, bit for bit."""
    from isles.islands.span_graph import SpanGraph  # noqa: PLC0415

    def go(mode):
        cfg = plain(
            make_cfg(
                "+experiment=de_islands",
                "problem=sphere",
                "problem.dim=8",
                "algorithm.pop_size=16",
                "islands.n=4",
                "islands.n_migrants=2",
                "generations=300",
                "islands.migration_interval=1",
                "topology=ring",
                "logger=none",
                "progress=false",
                "device=gpu",
                f"islands.span_graph={mode}",
                *overrides,
            )
        )
        return Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False).run()

    before = SpanGraph.captures
    auto = go("auto")
    assert SpanGraph.captures > before
    never = go("never")
    assert auto.best_f == never.best_f and auto.migrations == never.migrations
    for a, b in zip(auto.history, never.history, strict=False):
        np.testing.assert_array_equal(a.island_best_f, b.island_best_f)
