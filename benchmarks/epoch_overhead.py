"""What an epoch costs an island group beside its generations: one group runs spans of epochs of one
generation each (``IslandGroup.run_span``, the SPMD loop's body, here without peers), and the
script prints milliseconds per epoch and the functions that take the time (cProfile).

    python benchmarks/epoch_overhead.py --device gpu     # tiny DE islands: sphere D=8, N=16, 4 islands
    python benchmarks/epoch_overhead.py --device cpu --epochs 500
    python benchmarks/epoch_overhead.py --device gpu --span-graph  # also as replays of one captured epoch

On a GPU the wall of a span includes its one host synchronisation (the summaries' copy), so the
per-epoch figure is the loop's whole cost: launches, Python, migration and the summary.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    """Print ms per epoch and the profile's top functions."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--epochs", type=int, default=300)
    ap.add_argument("--islands", type=int, default=4)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--span-graph", action="store_true",
                    help="GPU: also time the epochs as replays of one captured epoch (islands.span_graph)")
    a = ap.parse_args(argv)
    from hydra.utils import instantiate  # noqa: PLC0415

    from isles.islands.coordinator import Coordinator  # noqa: PLC0415
    from isles.islands.group import IslandGroup  # noqa: PLC0415
    from tests.helpers import make_cfg, plain  # noqa: PLC0415

    cfg = plain(make_cfg("+experiment=de_islands", "problem=sphere", "problem.dim=8", "algorithm.pop_size=16",
                         f"islands.n={a.islands}", "islands.migration_interval=1", "topology=ring", "logger=none",
                         "progress=false", f"device={a.device}"))
    co = Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False)
    ids = list(range(a.islands))
    g = IslandGroup(co._spec(ids, a.device))
    g.span_graph = "never"  # the plain epochs (islands.span_graph=never); --span-graph times the replays
    route = {"peers": [None], "index": 0, "groups": [ids], "topology": co.topology, "n": a.islands, "seed": 0,
             "timeout_s": 30}
    g.run_span(1, ({}, {}), [1] * 20, 0, route)  # warm-up: compilation, graph capture
    t = time.perf_counter()
    g.run_span(2, ({}, {}), [1] * a.epochs, 20, route)
    ms = (time.perf_counter() - t) / a.epochs * 1e3
    print(f"# {a.device}: {a.islands} DE islands (sphere D=8, N=16), ring, 1 generation per epoch: "
          f"{ms:.3f} ms per epoch", flush=True)
    if a.span_graph:  # the same group's epochs as replays of one captured epoch (islands/span_graph.py)
        from isles.islands.exchange import NcclComm  # noqa: PLC0415

        g._nccl = NcclComm(NcclComm.unique_id(), 1, 0)
        g.span_graph = "always"  # islands.span_graph=always: over NCCL too
        graph = dict(route, nccl=True)
        g.run_span(4, ({}, {}), [1] * 20, 20 + 2 * a.epochs, graph)  # warm-up
        t = time.perf_counter()
        g.run_span(5, ({}, {}), [1] * a.epochs, 40 + 2 * a.epochs, graph)
        ms_g = (time.perf_counter() - t) / a.epochs * 1e3
        print(f"# the same, islands.span_graph=always over a 1-rank NCCL communicator: {ms_g:.3f} ms per epoch "
              f"({ms / ms_g:.1f}x faster)", flush=True)
    pr = cProfile.Profile()
    pr.enable()
    g.run_span(3, ({}, {}), [1] * a.epochs, 20 + a.epochs, route)
    pr.disable()
    pstats.Stats(pr).sort_stats("cumulative").print_stats(a.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
