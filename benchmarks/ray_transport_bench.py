"""What one exchange between island-group actors costs in Ray's transport alone: the per-epoch
round trip of ``run_epoch``-sized messages through Ray tasks (what the sync loop does today)
beside the same exchange through a Ray Compiled Graph (shared-memory channels), side by side in
one process. No evolution: each actor returns a summary-sized dict of NumPy arrays at once.

    python benchmarks/ray_transport_bench.py                 # 2 CPU actors, 2000 epochs each way
    python benchmarks/ray_transport_bench.py --actors 4 --epochs 5000

Prints one Markdown row per transport: milliseconds per epoch (all actors called, all answers
back) and the ratio to tasks. This is the evidence behind the docs/runtime.md's "what would close it"
for migrations between actors. The runtime (issue 19) no longer routes emigrants through the driver:
CPU actors of one node exchange them through Compiled Graph's shared-memory channels, one per pair
(``islands/transport/channels.py``), and actors on different nodes post them to each other's inbox with
one-sided actor calls (``islands/transport/link.py``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actors", type=int, default=2, help="actors (one CPU each)")
    ap.add_argument("--epochs", type=int, default=2000, help="round trips per transport")
    ap.add_argument("--islands", type=int, default=4, help="islands per actor (sets the message size)")
    ap.add_argument("--dim", type=int, default=8, help="genome length (sets the message size)")
    a = ap.parse_args()

    import ray
    from ray.dag import InputNode, MultiOutputNode

    ray.init(
        address="local",
        num_cpus=a.actors,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="error",
        configure_logging=False,
    )

    @ray.remote(num_cpus=1)
    class Group:
        """Answers like IslandGroup.run_epoch: per-island bests and one emigrant per island."""

        def __init__(self, islands: int, dim: int):
            self.out = {
                "best_x": np.zeros((islands, dim)),
                "best_f": np.zeros(islands),
                "emigrants": np.zeros((islands, 1, dim)),
                "generation": 0,
            }

        def run_epoch(self, plan):
            self.out["generation"] = plan
            return self.out

    groups = [Group.remote(a.islands, a.dim) for _ in range(a.actors)]
    ray.get([g.run_epoch.remote(0) for g in groups])

    def per_epoch(call) -> float:
        call(0)  # warm-up
        t0 = time.perf_counter()
        for e in range(a.epochs):
            call(e)
        return (time.perf_counter() - t0) / a.epochs

    tasks = per_epoch(lambda e: ray.get([g.run_epoch.remote(e) for g in groups]))
    with InputNode() as inp:
        dag = MultiOutputNode([g.run_epoch.bind(inp) for g in groups])
    compiled = dag.experimental_compile()
    try:
        graph = per_epoch(lambda e: ray.get(compiled.execute(e)))
    finally:
        compiled.teardown()
    ray.shutdown()
    print(f"| transport ({a.actors} CPU actors, {a.islands} islands x D={a.dim} each) | ms per epoch | ratio |")
    print("|---|---|---|")
    print(f"| Ray tasks (`.remote` + `ray.get`) | {tasks * 1e3:.3f} | 1.00x |")
    print(f"| Ray Compiled Graph (`experimental_compile`) | {graph * 1e3:.3f} | {tasks / graph:.2f}x faster |")


if __name__ == "__main__":
    main()
