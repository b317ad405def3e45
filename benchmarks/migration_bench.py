"""One island group's migration alone on the GPU, the generic array code against the fused kernels
(islands/migration/fused.py): emigrant selection (``emigrants_of``) plus routing, replacement and
events (``immigrate``), as a plain call (wall, Python and launches included) and as replays of one
captured CUDA graph (device time per migration, CUDA events).

    python benchmarks/migration_bench.py                        # 8 islands, N=16, D=8, ring, k=1
    python benchmarks/migration_bench.py --islands 8 --pop 100 --dim 100 --k 3 --plan full

Prints one Markdown row per path.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> None:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--islands", type=int, default=8)
    ap.add_argument("--pop", type=int, default=16)
    ap.add_argument("--dim", type=int, default=8)
    ap.add_argument("--k", type=int, default=1)
    ap.add_argument("--plan", choices=["ring", "full"], default="ring")
    ap.add_argument("--calls", type=int, default=2000)
    a = ap.parse_args(argv)
    import cupy as cp  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    from isles.islands.migration import fused as fm  # noqa: PLC0415
    from isles.islands.migration import moves as migration  # noqa: PLC0415
    from isles.islands.migration.policies import FairReplace, SelectBest  # noqa: PLC0415

    from tests.fused_migration_cases import Plain, plans, random_state  # noqa: PLC0415

    ids, inbound = plans(a.islands)[0 if a.plan == "ring" else 1]
    state, _ = random_state(
        np.random.default_rng(0), a.islands, a.pop, np.float64, np.float64, "float64", (a.dim,), levels=1000
    )
    state = {k: cp.asarray(v) if hasattr(v, "shape") else v for k, v in state.items()}
    algo, ctx, policy, sel = Plain(), SimpleNamespace(xp=cp), FairReplace(), SelectBest()

    def migrate(s):
        em = migration.emigrants_of(algo, s, a.k, sel)
        return migration.immigrate(algo, ctx, s, ids, em, inbound, {}, policy)

    print(f"| path ({a.islands} islands, N={a.pop}, D={a.dim}, k={a.k}, {a.plan}) | plain call | captured replay |")
    print("|---|---|---|")
    for fused in ("0", "1"):
        os.environ[fm.ENV] = fused
        for _ in range(20):
            migrate(state)
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(a.calls):
            migrate(state)
        cp.cuda.Device().synchronize()
        plain_ms = (time.perf_counter() - t0) / a.calls * 1e3
        stream, pool = cp.cuda.Stream(non_blocking=True), cp.cuda.MemoryPool()
        with stream, cp.cuda.using_allocator(pool.malloc):
            migrate(state)  # fills the private pool's cache: no cudaMalloc during capture
            stream.synchronize()
            stream.begin_capture()
            out = migrate(state)
            graph = stream.end_capture()
            start, end = cp.cuda.Event(), cp.cuda.Event()
            graph.launch(stream)
            start.record(stream)
            for _ in range(a.calls):
                graph.launch(stream)
            end.record(stream)
            end.synchronize()
            del out
        replay_us = cp.cuda.get_elapsed_time(start, end) / a.calls * 1e3
        name = "fused kernels" if fused == "1" else "generic array code"
        print(f"| {name} | {plain_ms:.3f} ms | {replay_us:.1f} us |", flush=True)


if __name__ == "__main__":
    main()
