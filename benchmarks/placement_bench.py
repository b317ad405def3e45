"""The default placement against the placements it chose among (issue 35): whole process and evolution
of ``python run.py ...`` with ``islands.n_actors`` and ``device`` left to the default, beside the
same run with them given, each a fresh process (median of ``--repeats``), and the default's choice
(its ``placement:`` line: the probe's figures and the prediction).

    python benchmarks/placement_bench.py                      # --preset cpu: the CI cases, on this machine
    python benchmarks/placement_bench.py --preset gpu         # a GPU machine: CMA-ES, L-SHADE D=10, the main job
    python benchmarks/placement_bench.py --runs "+experiment=cmepso" --against "islands.n_actors=1 device=gpu"

Presets (each row's overrides after ``logger=none``):

* ``cpu``: a cheap tiny ring (DE sphere D = 8, N = 16, 8 islands, an exchange every generation, 1000
  generations: the default must take one group, and be no slower than ``islands.n_actors=1``), and
  an expensive objective (``tests.user_problems.BusyDesign``, 5 ms of CPU a design; 4 islands of 8,
  200 generations: the default must take several actors) against ``islands.n_actors=1``;
* ``gpu``: ``+experiment=cmaes`` and ``+experiment=lshade`` (D = 10) with ``device`` left to the
  default against ``device=gpu`` and ``device=cpu``; ``+experiment=cmepso`` against
  ``islands.n_actors=1 device=gpu`` (on a machine with several GPUs: the default must take one).

Prints one Markdown table.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TINY_RING = (
    "+experiment=de_islands device=cpu problem=sphere problem.dim=8 algorithm.pop_size=16 "
    "generations=1000 islands.migration_interval=1 topology=ring"
)
BUSY = (
    "+experiment=de_islands device=cpu problem._target_=tests.user_problems.BusyDesign problem.dim=4 "
    "algorithm.pop_size=8 islands.n=4 generations=200 islands.migration_interval=10"
)
#: preset -> [(the default's overrides, [the overrides it is compared with])]
PRESETS = {
    "cpu": [(TINY_RING, ["islands.n_actors=1", "islands.n_actors=2"]), (BUSY, ["islands.n_actors=1"])],
    "gpu": [
        ("+experiment=cmaes", ["device=gpu", "device=cpu"]),
        ("+experiment=lshade", ["device=gpu", "device=cpu"]),
        ("+experiment=cmepso", ["islands.n_actors=1 device=gpu"]),
    ],
}


def run_once(args: str, cwd: str) -> tuple[float, float, str]:
    """One process of ``run.py ARGS logger=none``: ``(whole-process seconds, evolution seconds, the
    placement line or "")``.

    Raises:
        SystemExit: the run failed (its stderr's tail is shown)."""
    cmd = [sys.executable, str(ROOT / "run.py"), *shlex.split(args), "logger=none"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)  # tests.user_problems on the path
    whole = time.perf_counter() - t0
    wall = re.search(r"wall time ([0-9.]+) s", p.stdout)
    if p.returncode != 0 or wall is None:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    line = next((ln[len("placement: ") :] for ln in p.stdout.splitlines() if ln.startswith("placement: ")), "")
    warn = next((ln for ln in p.stderr.splitlines() if "predicted" in ln and "isles: warning:" in ln), "")
    return whole, float(wall.group(1)), line or warn


def main(argv=None) -> int:
    """CLI entry point: prints the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="cpu")
    ap.add_argument("--runs", help="the default's overrides (instead of a preset)")
    ap.add_argument("--against", action="append", default=[], help="overrides it is compared with (repeatable)")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)
    rows = [(a.runs, a.against or ["islands.n_actors=1"])] if a.runs else PRESETS[a.preset]
    print("| run | placement | whole s (median) | evolution s | against the default: whole, evolution | choice |")
    print("|---|---|---|---|---|---|")
    cwd = tempfile.mkdtemp(prefix="isles-placement-")
    for base, others in rows:
        cases = [("default", base)] + [(o, f"{base} {o}") for o in others]
        got = {name: [] for name, _ in cases}
        for _ in range(a.repeats):  # interleaved: a busy machine's slow minute falls on every case
            for name, args in cases:
                got[name].append(run_once(args, cwd))
        ref_whole = statistics.median(w for w, _, _ in got["default"])
        ref_evo = statistics.median(e for _, e, _ in got["default"])
        for name, _ in cases:
            whole = statistics.median(w for w, _, _ in got[name])
            evo = statistics.median(e for _, e, _ in got[name])
            note = next((x for _, _, x in got[name] if x), "")
            print(
                f"| `{base}` | {name} | {whole:.2f} | {evo:.2f} | {whole / ref_whole:.2f}x, {evo / max(ref_evo, 1e-9):.2f}x "
                f"| {note} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
