"""The span graph as users get it: the same run with ``islands.span_graph=never`` and ``=auto``
(islands/span_graph.py), side by side in one process, on one actor; tiny DE islands with an
exchange every generation, where an epoch's Python is the whole cost.

    python benchmarks/span_graph_bench.py                       # 8 DE islands (sphere D=8, N=16), ring, GPU
    python benchmarks/span_graph_bench.py islands.migration_interval=4 generations=8000

Prints one Markdown row per mode: the evolution wall, the wall per epoch after the first (which
holds compilation and capture) and the best f, which must be the same in both rows.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scaling_bench import run  # noqa: E402

BASE = [
    "+experiment=de_islands",
    "device=gpu",
    "problem=sphere",
    "problem.dim=8",
    "algorithm.pop_size=16",
    "generations=3000",
    "islands.migration_interval=1",
    "topology=ring",
    "islands.n=8",
]


def main() -> None:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="Hydra overrides after the defaults above")
    a = ap.parse_args()
    print("| islands.span_graph | evolution wall | wall per epoch after the first | best f |")
    print("|---|---|---|---|")
    for mode in ("never", "auto"):
        result, epoch_s, *_ = run([*BASE, *a.overrides, f"islands.span_graph={mode}"], 1)
        print(f"| {mode} | {result.wall_s:.2f} s | {epoch_s * 1e3:.3f} ms | {result.best_f:.7g} |", flush=True)


if __name__ == "__main__":
    main()
