"""The span graph (islands/span_graph.py) on NumPy, where its epoch runs directly (the twin of the
GPU's replays): a group's batch of like epochs through it equals the plain epochs, bit for bit; a
failed capture falls back to the plain epochs; which batches fit. The GPU replays:
``tests/test_runtime_gpu.py`` (one GPU), ``tests/test_exchange_gpu.py`` (NCCL, 2 GPUs); the span
over the in-process communicator: ``tests/test_exchange.py``."""

import logging

import numpy as np
import pytest
from hydra.utils import instantiate
from isles.islands import span_graph
from isles.islands.coordinator import Coordinator
from isles.islands.migration.planner import migration_edges
from isles.islands.migration.topology import FullyConnected, RandomGraph, Ring
from isles.islands.span_graph import SpanGraph

from tests.helpers import make_cfg, plain, run_span
from tests.test_exchange import _groups, assert_same_spans
from tests.test_spmd import DE


def _batch(ks, topology="ring"):
    """A coordinator of 5 islands (one group of all) and the span's epochs ``ks``: no migration
    before the first epoch, then the topology's (fixed) plan."""
    cfg = plain(make_cfg(*DE, "islands.n=5", f"topology={topology}"))
    return Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False), ks


def _run_batch(ks, co):
    from isles.islands.group import IslandGroup  # noqa: PLC0415

    g = IslandGroup(co.executor.spec(list(range(5)), "cpu"))
    return g, run_span(g, ks, co.topology)


@pytest.mark.parametrize("ks", [[1] * 8, [2] * 6 + [1]])
def test_a_batch_of_like_epochs_through_the_span_graph_equals_the_plain_batch(monkeypatch, ks):
    co, plans = _batch(ks)
    _, plainly = _run_batch(plans, co)
    monkeypatch.setattr(span_graph, "eligible", lambda group, across: True)  # as on CuPy
    before = SpanGraph.captures
    g, replayed = _run_batch(plans, co)
    assert SpanGraph.captures - before == 1  # epochs 2.. of the like run
    assert_same_spans({0: plainly}, {0: replayed})
    assert any(m for s in replayed[2:] for m in s.migrations)


def test_a_span_of_one_group_through_the_span_graph_equals_the_plain_span(monkeypatch):
    """One actor's span (no peer, so no exchange: the group's own plan) with islands.span_graph on,
    against the plain span, bit for bit."""
    from isles.islands.group import IslandGroup  # noqa: PLC0415

    co, _ = _batch([1])
    out = {}
    for mode in ("plain", "graph"):
        if mode == "graph":
            monkeypatch.setattr(span_graph, "eligible", lambda group, across: True)
        before = SpanGraph.captures
        g = IslandGroup(co.executor.spec(list(range(5)), "cpu"))
        out[mode] = {0: run_span(g, [1] * 7, co.topology)}
        assert SpanGraph.captures - before == (1 if mode == "graph" else 0)
    assert_same_spans(out["plain"], out["graph"])


def test_a_failed_capture_falls_back_to_the_plain_epochs(monkeypatch, caplog):
    co, plans = _batch([1] * 6)
    _, plainly = _run_batch(plans, co)
    monkeypatch.setattr(span_graph, "eligible", lambda group, across: True)

    def refuse(self, *a, **kw):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(SpanGraph, "__init__", refuse)
    with caplog.at_level(logging.WARNING):
        g, fell_back = _run_batch(plans, co)
    assert_same_spans({0: plainly}, {0: fell_back})
    assert g.span_graph == "never" and "could not be captured" in caplog.text


def test_span_graph_fits_only_like_epochs_of_an_eligible_run():
    from isles.islands.span_graph import MAX_K, SpanGraph, eligible, most_sources  # noqa: PLC0415

    groups, _, topo = _groups(2)
    g = groups[0]
    em = g.emigrants()
    most = most_sources(migration_edges(topo, 5, 0, 1))
    assert most == 2  # a bidirectional ring
    assert SpanGraph.fits(g, [1, 1, 1], True, em, most)
    assert not SpanGraph.fits(g, [1, 1], False, em, most)  # not eligible
    assert not SpanGraph.fits(g, [1, 2], True, em, most)  # epochs of other lengths
    assert not SpanGraph.fits(g, [MAX_K + 1] * 2, True, em, most)
    assert not SpanGraph.fits(g, [1, 1], True, em, 13)  # more sources than an island holds individuals (12)
    for across in (False, True):
        assert not eligible(g, across)  # NumPy: nothing to capture
    g.span_graph = "never"
    assert not eligible(g, False)


def test_fixed_plan_tells_fixed_topologies_from_random_ones():
    from isles.islands.migration.planner import fixed_plan  # noqa: PLC0415

    assert fixed_plan(Ring(), 6) and fixed_plan(FullyConnected(), 6)
    assert not fixed_plan(RandomGraph(p=0.4), 6)


def test_span_graph_is_checked_in_one_line():
    from isles.islands.config.schema import check_values, with_defaults  # noqa: PLC0415

    cfg = with_defaults(plain(make_cfg(*DE, "islands.span_graph=sometimes")))
    with pytest.raises(ValueError, match=r"^islands\.span_graph='sometimes': allowed values are auto\|always\|never$"):
        check_values(cfg)


def test_a_run_with_a_plug_in_through_the_span_graph_in_blocks_of_rows_equals_the_plain_run(monkeypatch):
    """CMEPSO (the master swarm plug-in: device metrics and a host counter) with islands.span_graph
    on (the NumPy twin), its rows written by the captured epoch into a ring of 3 rows (blocks of 3
    replays, then a shorter one), a snapshot every 4 epochs: the records equal the plain run's."""
    import functools  # noqa: PLC0415

    from isles.algorithms.core.graph import RowRing  # noqa: PLC0415

    def run(*overrides):
        cfg = plain(
            make_cfg("+experiment=cmepso", "device=cpu", "generations=23", "algorithm.n_particles=8", *overrides)
        )
        plugins = [instantiate(p) for p in cfg["plugins"]]
        return Coordinator(cfg, instantiate(cfg["topology"]), plugins, use_ray=False).run()

    plainly = run("islands.snapshot_every=4")
    monkeypatch.setattr(span_graph, "eligible", lambda group, across: True)  # as on CuPy
    monkeypatch.setattr(span_graph, "RowRing", functools.partial(RowRing, max_rows=3))
    before = SpanGraph.captures
    replayed = run("islands.snapshot_every=4")
    assert SpanGraph.captures > before
    assert (replayed.best_f, replayed.evaluations, replayed.nan_evals) == (
        plainly.best_f,
        plainly.evaluations,
        plainly.nan_evals,
    )
    np.testing.assert_array_equal(replayed.best_x, plainly.best_x)
    assert len(replayed.history) == len(plainly.history) == 23
    for a, b in zip(replayed.history, plainly.history, strict=True):
        assert (a.generation, a.evaluations, a.best_f, a.nan_evaluations) == (
            b.generation,
            b.evaluations,
            b.best_f,
            b.nan_evaluations,
        )
        assert a.plugin_metrics == b.plugin_metrics
        np.testing.assert_array_equal(a.island_best_f, b.island_best_f)
