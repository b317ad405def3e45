"""What an epoch costs an island group beside its generations: one group runs spans of epochs of one
generation each (``IslandGroup.run_span``, the SPMD loop's body, here without peers), and the
script prints milliseconds per epoch and the functions that take the time (cProfile).

    python benchmarks/epoch_overhead.py --device gpu     # tiny DE islands: sphere D=8, N=16, 4 islands
    python benchmarks/epoch_overhead.py --device cpu --epochs 500

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
    route = {"peers": [None], "index": 0, "groups": [ids], "topology": co.topology, "n": a.islands, "seed": 0,
             "timeout_s": 30}
    g.run_span(1, ({}, {}), [1] * 20, 0, route)  # warm-up: compilation, graph capture
    t = time.perf_counter()
    g.run_span(2, ({}, {}), [1] * a.epochs, 20, route)
    ms = (time.perf_counter() - t) / a.epochs * 1e3
    print(f"# {a.device}: {a.islands} DE islands (sphere D=8, N=16), ring, 1 generation per epoch: "
          f"{ms:.3f} ms per epoch", flush=True)
    pr = cProfile.Profile()
    pr.enable()
    g.run_span(3, ({}, {}), [1] * a.epochs, 20 + a.epochs, route)
    pr.disable()
    pstats.Stats(pr).sort_stats("cumulative").print_stats(a.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
