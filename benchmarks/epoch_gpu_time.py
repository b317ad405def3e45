"""GPU time of one replay of a job's captured epoch (CUDA events) beside its host launch time.

Runs the job once in this process; on its first span graph that replays 50 epochs or more it
times 1 and then 200 extra launches of the captured graph, back to back on the graph's stream
(the extra replays change that run's result: the figure, not the run, is what counts here)::

    python benchmarks/epoch_gpu_time.py +experiment=cmepso device=gpu logger=none

One H100 (CuPy 14): the main job's epoch took 874 us a replay before the fused EPSO generation,
383 us after (docs/runtime.md, issue 26).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cupy as cp  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from isles.app.job import run_job  # noqa: E402
from isles.islands import span_graph  # noqa: E402


def timed(run):
    """``SpanGraph.run`` that first times the graph's replays, once a run."""
    done = []

    def run_and_time(self, n_epochs):
        if not done and n_epochs >= 50:
            done.append(True)
            stream = self.stepper.stream
            cp.cuda.get_current_stream().synchronize()
            stream.synchronize()
            for reps in (1, 200):
                start, end = cp.cuda.Event(), cp.cuda.Event()
                start.record(stream)
                t0 = time.perf_counter()
                for _ in range(reps):
                    self.stepper.graph.launch(stream)
                host = time.perf_counter() - t0
                end.record(stream)
                end.synchronize()
                gpu = cp.cuda.get_elapsed_time(start, end) / reps * 1e3
                print(f"replays={reps}: GPU {gpu:.1f} us a replay, host launch {host / reps * 1e6:.1f} us", flush=True)
        return run(self, n_epochs)

    return run_and_time


def main() -> None:
    """CLI: Hydra overrides of the job."""
    span_graph.SpanGraph.run = timed(span_graph.SpanGraph.run)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[*sys.argv[1:], "progress=false"])
    run_job(cfg)


if __name__ == "__main__":
    main()
