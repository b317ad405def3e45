"""The island runtime's speed targets (issue 26), each run as users run it, in one command.

    python benchmarks/runtime_targets.py --cpu            # the CPU rows (actor scaling)
    python benchmarks/runtime_targets.py --gpu            # one GPU: the main job, the span graph
    python benchmarks/runtime_targets.py --gpus 2         # a 2-GPU machine: cross-GPU epoch, CMEPSO
    python benchmarks/runtime_targets.py --cpu --gpu --gpus 2 --only cmepso

Each row runs its benchmark in a subprocess (``scaling_bench.py``, ``span_graph_bench.py`` or
``run.py``), reads the figure from its output, and prints one Markdown row: the workload, the
figure, the target, whether it is met, whether both runs found the same best f, and the command.
Rows needing more GPUs than ``--gpus`` are listed as not run. Timings depend on the machine: run
the rows to compare in one call.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TINY = "+experiment=de_islands problem=sphere problem.dim=8 algorithm.pop_size=16 topology=ring"
#: the host builds' island threads (algorithms/core/threads.py) off: one actor of the 1-actor run
#: would otherwise run its 8 islands on 8 threads, and the rows compare processes, not threads
ONE_THREAD = "ISLES_HOST_THREADS=1"
DE8 = (
    "+experiment=de_benchmark islands.n=8 problem.dim=100 algorithm.pop_size=100 generations=2048 "
    "islands.migration_interval=64 topology=ring"
)


@dataclass(frozen=True)
class Target:
    """One row: ``name`` (for ``--only``), the workload, the command (relative to the repository),
    what to read (``read``: a column of scaling_bench's actor row, ``epoch_ms`` of span_graph_bench's
    ``auto`` row, or ``wall`` of the job's result line), the bound and its sense (``at_most``), and the
    device it needs (``cpu``, ``gpu`` or a number of GPUs); ``env``: ``NAME=VALUE`` words set for the
    command (shown before it)."""

    name: str
    workload: str
    command: str
    read: str
    bound: float
    at_most: bool
    needs: str | int
    env: str = ""


TARGETS = [
    Target(
        "cpu2",
        "2 CPU actors against 1, tiny ring, interval 1 (wall over 1 actor's)",
        f"benchmarks/scaling_bench.py --actors 2 {TINY} device=cpu generations=1000 islands.migration_interval=1",
        "wall_over",
        1.5,
        True,
        "cpu",
    ),
    Target(
        "cpu4",
        "8 DE islands D=100 N=100, interval 64: 4 CPU actors against 1, one thread each (steady evals/s)",
        f"benchmarks/scaling_bench.py --actors 4 {DE8} device=cpu",
        "ratio",
        3.2,
        False,
        "cpu",
        ONE_THREAD,
    ),
    Target(
        "cpu8",
        "8 DE islands D=100 N=100, interval 64: 8 CPU actors against 1, one thread each (steady evals/s)",
        f"benchmarks/scaling_bench.py --actors 8 {DE8} device=cpu",
        "ratio",
        6.5,  # issue 37 (issue 26 asked 5x)
        False,
        "cpu",
        ONE_THREAD,
    ),
    Target(
        "cpu8t",
        "the same 8 islands: one process on 8 host threads against one thread (steady evals/s)",
        f"benchmarks/scaling_bench.py --actors 1 --threads 8 {DE8} device=cpu",
        "ratio",
        6.5,
        False,
        "cpu",
    ),
    Target(
        "cmepso",
        "the main job's evolution on one GPU (second run: compiled kernels cached), s",
        "run.py +experiment=cmepso device=gpu logger=none progress=false",
        "wall",
        0.3,
        True,
        "gpu",
    ),
    Target(
        "span",
        "one GPU actor, 8 tiny DE islands, exchange every generation (auto), ms per epoch",
        "benchmarks/span_graph_bench.py",
        "epoch_ms",
        0.3,
        True,
        "gpu",
    ),
    Target(
        "xgpu",
        "one cross-GPU epoch, 2 GPUs, tiny ring, interval 1, ms per epoch",
        f"benchmarks/scaling_bench.py --actors 2 {TINY} device=gpu generations=3000 islands.migration_interval=1",
        "epoch_ms",
        0.3,
        True,
        2,
    ),
    Target(
        "cmepso2",
        "CMEPSO 10x4096, interval 1, 2 GPUs against 1 (steady evals/s)",
        "benchmarks/scaling_bench.py --actors 2 +experiment=cmepso device=gpu algorithm.n_particles=4096",
        "ratio",
        1.7,
        False,
        2,
    ),
    Target(
        "de16",
        "16 DE islands on 4 GPUs against 1 (steady evals/s)",
        "benchmarks/scaling_bench.py --actors 4 +experiment=de_benchmark device=gpu islands.n=16 "
        "generations=65536 islands.migration_interval=16384",
        "ratio",
        3.6,
        False,
        4,
    ),
    Target(
        "weak8",
        "weak scaling, 8 GPUs, 8x the islands of 1 (steady evals/s)",
        "benchmarks/scaling_bench.py --actors 8 +experiment=de_benchmark device=gpu islands.n=64 "
        "generations=8192 islands.migration_interval=1024",
        "ratio",
        7.5,
        False,
        8,
    ),
]
COLUMNS = {"ratio": 2, "wall_over": 4, "epoch_ms": 5}  # scaling_bench's row: | actors | evals/s | ratio | ...


def shown(t: Target) -> str:
    """``t``'s command as a user types it (its environment words first)."""
    return f"{t.env + ' ' if t.env else ''}python {t.command}"


def number(cell: str) -> float:
    """The first number of a Markdown cell (``1.07x``, ``0.812 ms``, ``2.3 M``)."""
    return float(re.search(r"[-+]?\d[\d,]*\.?\d*(?:e[-+]?\d+)?", cell).group().replace(",", ""))


def measure(t: Target) -> tuple[float, bool | None, str]:
    """Run ``t``'s command; ``(figure, same best f in both runs or None, output tail)``.

    Raises:
        RuntimeError: the command failed or printed no figure (its output's tail in the message).
    """
    out = ""
    for _ in range(2 if t.read == "wall" else 1):  # a job twice: the second finds its kernels compiled
        env = {**os.environ, **dict(w.split("=", 1) for w in t.env.split())}
        proc = subprocess.run([sys.executable, *t.command.split()], cwd=ROOT, capture_output=True, text=True, env=env)
        out += proc.stdout + proc.stderr
    rows = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in out.splitlines()
        if line.startswith("| ") and not line.startswith("| actors") and not line.startswith("| islands")
    ]
    try:
        if t.read == "wall":  # the job's result line: ... wall=1.22s ...; the figure of the last (warm) run
            return number(re.findall(r"wall=([\d.]+)s", out)[-1]), None, out[-400:]
        best = {r[-1] if t.name == "span" else r[-2] for r in rows}  # scaling_bench's last cell: devices
        if t.name == "span":  # span_graph_bench: | mode | wall | per epoch | best f |, the auto row
            return number([r for r in rows if r[0] == "auto"][0][2]), len(best) == 1, out[-400:]
        return number(rows[-1][COLUMNS[t.read]]), len(best) == 1, out[-400:]
    except (IndexError, AttributeError) as err:
        raise RuntimeError(f"{t.name}: exit {proc.returncode}, no figure ({err}); output ends: {out[-600:]}") from None


def main() -> None:
    """CLI entry point: one Markdown row per target."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu", action="store_true", help="run the CPU rows")
    ap.add_argument("--gpu", action="store_true", help="run the one-GPU rows")
    ap.add_argument("--gpus", type=int, default=0, help="GPUs of this machine for the multi-GPU rows")
    ap.add_argument("--only", nargs="*", default=None, help="row names: " + " ".join(t.name for t in TARGETS))
    a = ap.parse_args()
    print("| workload | figure | target | met | same best f | command |")
    print("|---|---|---|---|---|---|")
    for t in TARGETS:
        if a.only is not None and t.name not in a.only:
            continue
        bound = f"{'<=' if t.at_most else '>='} {t.bound:g}"
        runs = (
            (t.needs == "cpu" and a.cpu)
            or (t.needs == "gpu" and (a.gpu or a.gpus))
            or (isinstance(t.needs, int) and a.gpus >= t.needs)
        )
        if not runs:
            print(f"| {t.workload} | not run (needs {t.needs}) | {bound} | - | - | `{shown(t)}` |", flush=True)
            continue
        try:
            figure, same, _ = measure(t)
        except RuntimeError as err:
            print(f"| {t.workload} | failed: {str(err)[:300]!r} | {bound} | no | - | `{shown(t)}` |", flush=True)
            continue
        met = figure <= t.bound if t.at_most else figure >= t.bound
        print(
            f"| {t.workload} | {figure:.3g} | {bound} | {'yes' if met else 'no'} | "
            f"{'-' if same is None else 'yes' if same else 'NO'} | `{shown(t)}` |",
            flush=True,
        )


if __name__ == "__main__":
    main()
