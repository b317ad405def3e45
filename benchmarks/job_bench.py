"""The main job as users run it: whole-process and evolution wall time of ``python run.py ...``.

Each case runs ``--repeats`` times as a fresh process in a scratch directory of its own (so
MLflow's ``mlflow.db`` exists after the first run, as for a user's second run; the first run,
which also creates the database, is reported apart); the cases and versions take turns, so that
the machine's drift hits each alike. Whole process: the wall clock around the process
(start-up, Ray, MLflow, evolution, artifacts, shutdown). Evolution: the ``wall=`` of the result
line that ``progress=false`` prints (the coordinator's own timer: actors started, device
synchronised at every epoch's end); start-up is their difference. Record: from the process's start until its MLflow record is written
(the run's process exits before its tracking process has finished, issue 34 §4: the record's
``mlflow_state.json`` says ``done``; a version that writes none waits for its record; ``-`` for a
case without MLflow). The next process starts once the record is written. One more, untimed process
per case runs under ``python -X importtime`` to list which of the heavy optional modules
(:data:`WATCHED`) it imported (or tried to: ``-X importtime`` lists a module that is not
installed too, e.g. ``cupy`` on a CPU machine with ``device=auto``): a local run needs neither
Ray nor Optuna. Prints one Markdown table (medians).

    python benchmarks/job_bench.py                                   # the README's first command
    python benchmarks/job_bench.py --case "device=cpu logger=none" --case "device=cpu" --case ""  # start-up
    python benchmarks/job_bench.py --experiment de_islands --case "device=cpu logger=none"

    python benchmarks/job_bench.py --case "device=gpu" --case "device=gpu logger=none"
    python benchmarks/job_bench.py --cold --case "device=gpu logger=none"   # every run with an empty kernel cache

``--cold`` gives every process an empty CuPy kernel cache (``CUPY_CACHE_DIR``, a fresh folder
each), as on a fresh GPU machine; without it the runs share one cache, warmed by the first run.
``--bytecode cached`` lets Python write and reuse its bytecode (``PYTHONDONTWRITEBYTECODE`` unset,
``PYTHONPYCACHEPREFIX`` a folder of the scratch directory, filled by each version's first run), as after
``pip install`` or a checkout's first run; ``as-is`` (default) keeps this shell's setting. Where Python
writes no bytecode and finds none (``PYTHONDONTWRITEBYTECODE=1`` beside packages installed without
``.pyc`` files, as on the lent GPU machines' bundle), every process compiles every module it imports:
about 1.5 s of the main job's start-up on one H200 (docs/startup.md). The table's heading says which.
    python benchmarks/job_bench.py --bytecode cached --case "device=gpu logger=none"
    taskset -c 0,1 python benchmarks/job_bench.py --case "ray.num_cpus=2"   # a 2-core machine
    git worktree add /tmp/old HEAD~5 && python benchmarks/job_bench.py --baseline /tmp/old --repeats 5
"""

from __future__ import annotations

import argparse
import json
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

#: optional modules whose import alone costs a second or more (issue 16 §4)
WATCHED = ("ray", "optuna", "mlflow", "cupy")


def run_once(
    experiment: str, case: str, cwd: str, run_py: Path = ROOT / "run.py", cold: bool = False, pyc: str | None = None
) -> tuple[float, float, str, float]:
    """One process of ``run_py``: ``(whole-process seconds, evolution seconds, result line, seconds
    until its MLflow record is written)``; ``cold``: with an empty CuPy kernel cache of its own
    (``CUPY_CACHE_DIR``); ``pyc``: Python's bytecode written to and read from that folder
    (:func:`bytecode_env`). The unfinished records are listed in ``cwd`` (``ISLES_PENDING_DIR``).

    Raises:
        SystemExit: the run failed (its stderr's tail is shown)."""
    cmd = [sys.executable, str(run_py), f"+experiment={experiment}", "progress=false", *shlex.split(case)]
    env = {**bytecode_env(pyc), "ISLES_PENDING_DIR": os.path.join(cwd, "pending")}
    if cold:
        env["CUPY_CACHE_DIR"] = tempfile.mkdtemp(dir=cwd)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    whole = time.perf_counter() - t0
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("isles: best f=")), None)
    if p.returncode != 0 or line is None:
        raise SystemExit(f"job_bench: {' '.join(cmd)} failed (exit {p.returncode}):\n{p.stderr[-3000:]}")
    # the MLflow record, written after the run's process exited: done once its state says so
    state = Path(re.search(r" solution=(\S+)", line).group(1)).parent / "mlflow_state.json"
    while state.is_file() and not json.loads(state.read_text() or "{}").get("done"):
        if time.perf_counter() - t0 > 600:
            raise SystemExit(f"job_bench: the MLflow record of {state.parent} was not written within 600 s")
        time.sleep(0.01)
    record = time.perf_counter() - t0
    return whole, float(re.search(r" wall=([\d.]+)s", line).group(1)), line, record


def bytecode_env(pyc: str | None) -> dict:
    """This process's environment, with Python's bytecode written to and read from the folder ``pyc``
    (``PYTHONPYCACHEPREFIX``, ``PYTHONDONTWRITEBYTECODE`` unset); as it is for ``None``."""
    if pyc is None:
        return dict(os.environ)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": pyc}


def bytecode_words(pyc: str | None) -> str:
    """How the runs treat Python's bytecode, for the table's heading."""
    if pyc is not None:
        return "bytecode cached (written by each version's first run)"
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return (
            "bytecode not written (PYTHONDONTWRITEBYTECODE set: sources without a .pyc are compiled by every process)"
        )
    return "bytecode as this shell writes it"


def imported(experiment: str, case: str, cwd: str, run_py: Path = ROOT / "run.py") -> str:
    """Which of :data:`WATCHED` one process of ``run_py`` imports (``python -X importtime``), e.g.
    ``"mlflow"``, or ``"-"`` for none."""
    cmd = [
        sys.executable,
        "-X",
        "importtime",
        str(run_py),
        f"+experiment={experiment}",
        "progress=false",
        *shlex.split(case),
    ]
    err = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True).stderr
    mods = {m.group(1).split(".")[0] for m in re.finditer(r"^import time:.*\|\s*(\S+)$", err, re.M)}
    return ", ".join(m for m in WATCHED if m in mods) or "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experiment", default="cmepso")
    ap.add_argument("--case", action="append", help="overrides of one case (repeatable); default: none")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cold", action="store_true", help="every process with an empty CuPy kernel cache")
    ap.add_argument(
        "--bytecode",
        choices=("as-is", "cached"),
        default="as-is",
        help="cached: Python writes and reuses its bytecode (a folder of the scratch directory); as-is: this shell's setting",
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        help="another checkout (e.g. a `git worktree` of an older "
        "commit): its run.py runs each case too, interleaved with this one's, side by side",
    )
    args = ap.parse_args()
    cases = args.case or [""]
    versions = {"this checkout": ROOT / "run.py"}
    if args.baseline:
        versions[f"baseline {args.baseline}"] = args.baseline.resolve() / "run.py"
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        pairs = [(case, v) for case in cases for v in versions]
        cwds = {pair: tempfile.mkdtemp(dir=scratch) for pair in pairs}
        pyc = os.path.join(scratch, "pyc") if args.bytecode == "cached" else None
        first = {(c, v): run_once(args.experiment, c, cwds[c, v], versions[v], args.cold, pyc) for c, v in pairs}
        mods = {(c, v): imported(args.experiment, c, cwds[c, v], versions[v]) for c, v in pairs}
        runs = {pair: [] for pair in pairs}
        for _ in range(args.repeats):  # interleaved: the machine's drift hits every case and version alike
            for c, v in pairs:
                runs[c, v].append(run_once(args.experiment, c, cwds[c, v], versions[v], args.cold, pyc))
    for case, v in pairs:
        done = runs[case, v]
        whole = statistics.median(r[0] for r in done)
        evo = statistics.median(r[1] for r in done)
        mlflow = "logger=none" not in case and "logger.enabled=false" not in case
        record = f"{statistics.median(r[3] for r in done):.2f}" if mlflow else "-"
        rows.append((v, case or "(defaults)", first[case, v][0], whole, evo, record, mods[case, v], done[-1][2]))
        print(
            f"{v}, {case or '(defaults)'}: first {first[case, v][0]:.2f} s, whole {whole:.2f} s, "
            f"evolution {evo:.2f} s, record {record} s, imports {mods[case, v]}",
            flush=True,
        )
    print(f"\n{'cold (an empty kernel cache each run)' if args.cold else 'warm kernel cache'}, {bytecode_words(pyc)}:")
    print(
        f"\n| version | `+experiment={args.experiment}` overrides | first run, whole process s | whole process s "
        f"(median of {args.repeats}) | evolution s | start-up s (whole - evolution) | MLflow record written s | "
        f"imports of {'/'.join(WATCHED)} | result |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for version, case, first, whole, evo, record, mods, line in rows:
        f = re.search(r"best f=(\S+) (\S+)", line)
        print(
            f"| {version} | `{case}` | {first:.2f} | {whole:.2f} | {evo:.2f} | {whole - evo:.2f} | {record} | {mods} | "
            f"f={f.group(1)} {f.group(2)} |"
        )


if __name__ == "__main__":
    main()
