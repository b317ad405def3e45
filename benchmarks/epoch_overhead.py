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
    ap.add_argument(
        "--span-graph",
        action="store_true",
        help="GPU: also time the epochs as replays of one captured epoch (islands.span_graph)",
    )
    a = ap.parse_args(argv)
    from hydra.utils import instantiate  # noqa: PLC0415
    from isles.islands.coordinator import Coordinator  # noqa: PLC0415
    from isles.islands.group import IslandGroup  # noqa: PLC0415

    from tests.helpers import make_cfg, plain, run_span  # noqa: PLC0415

    cfg = plain(
        make_cfg(
            "+experiment=de_islands",
            "problem=sphere",
            "problem.dim=8",
            "algorithm.pop_size=16",
            f"islands.n={a.islands}",
            "islands.migration_interval=1",
            "topology=ring",
            "logger=none",
            "progress=false",
            f"device={a.device}",
        )
    )
    co = Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False)
    ids = list(range(a.islands))
    g = IslandGroup(co.executor.spec(ids, a.device))
    g.span_graph = "never"  # the plain epochs (islands.span_graph=never); --span-graph times the replays
    topo = co.topology
    run_span(g, [1] * 20, topo)  # warm-up: compilation, graph capture
    t = time.perf_counter()
    run_span(g, [1] * a.epochs, topo, epoch0=20, span=2)
    ms = (time.perf_counter() - t) / a.epochs * 1e3
    print(
        f"# {a.device}: {a.islands} DE islands (sphere D=8, N=16), ring, 1 generation per epoch: {ms:.3f} ms per epoch",
        flush=True,
    )
    if a.span_graph:  # the same group's epochs as replays of one captured epoch (islands/span_graph.py)
        from isles.islands.transport.kinds import NCCL  # noqa: PLC0415
        from isles.islands.transport.nccl import NcclComm  # noqa: PLC0415

        g._nccl = NcclComm(NcclComm.unique_id(), 1, 0)
        g.span_graph = "always"  # islands.span_graph=always: over NCCL too
        run_span(g, [1] * 20, topo, epoch0=20 + 2 * a.epochs, span=4, transport=NCCL)  # warm-up
        t = time.perf_counter()
        run_span(g, [1] * a.epochs, topo, epoch0=40 + 2 * a.epochs, span=5, transport=NCCL)
        ms_g = (time.perf_counter() - t) / a.epochs * 1e3
        print(
            f"# the same, islands.span_graph=always over a 1-rank NCCL communicator: {ms_g:.3f} ms per epoch "
            f"({ms / ms_g:.1f}x faster)",
            flush=True,
        )
    pr = cProfile.Profile()
    pr.enable()
    run_span(g, [1] * a.epochs, topo, epoch0=20 + a.epochs, span=3)
    pr.disable()
    pstats.Stats(pr).sort_stats("cumulative").print_stats(a.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
