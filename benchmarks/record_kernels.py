"""Record the CUDA kernels each experiment compiles, for the first GPU run on a fresh machine.

Runs ``python run.py +experiment=NAME device=gpu logger=none progress=false`` for each experiment
(default: every ``conf/experiment/*.yaml``), each with an empty CuPy kernel cache of its own and
``ISLES_RECORD_KERNELS`` set (:func:`isles.algorithms.core.kernel_lists.record_to`), and writes the
kernel lists file ``algorithms/core/kernels.json.gz`` that :func:`isles.algorithms.core.precompile.start`
compiles in parallel when a run starts. Run it on a GPU machine after a change to a kernel, a
problem's array code or CuPy's version (a list made with another CuPy version is not used)::

    python benchmarks/record_kernels.py                       # every experiment, 4 at a time
    python benchmarks/record_kernels.py --experiment cmepso   # one (the others are kept from the file)
    python benchmarks/record_kernels.py --tests               # also the GPU tests' list (pytest -m gpu, minutes)

The GPU tests' list, ``tests-gpu`` in ``tests/data/gpu_test_kernels.json.gz`` (``--tests-out``), is
what ``python -m pytest -m gpu`` compiles at its start (``tests/conftest.py``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TESTS_LIST = ROOT / "tests" / "data" / "gpu_test_kernels.json.gz"

from isles.algorithms.core import kernel_lists  # noqa: E402


def record(experiment: str, scratch: str, timeout_s: float) -> tuple[str, list | None, str]:
    """One experiment's compilations ``(name, [{"entry", "s"}, ...] or None, message)``."""
    out = os.path.join(scratch, f"{experiment}.json")
    env = {
        **os.environ,
        "CUPY_CACHE_DIR": tempfile.mkdtemp(dir=scratch),
        "ISLES_RECORD_KERNELS": out,
        "ISLES_PRECOMPILE": "0",
    }
    cmd = [
        sys.executable,
        str(ROOT / "run.py"),
        f"+experiment={experiment}",
        "device=gpu",
        "logger=none",
        "progress=false",
    ]
    try:
        p = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return experiment, None, "timed out"
    if p.returncode != 0 or not os.path.isfile(out):
        return experiment, None, f"exit {p.returncode}: {p.stderr.strip()[-300:]}"
    with open(out, encoding="utf-8") as fh:
        calls = json.load(fh)
    return experiment, calls, f"{len(calls)} kernels, {sum(c['s'] for c in calls):.1f} s of compiling"


def record_tests(scratch: str, timeout_s: float, log: Path | None = None) -> tuple[list | None, str]:
    """The GPU tests' compilations (``python -m pytest -m gpu tests``, in this process only);
    pytest's output goes to ``log`` where given."""
    out = os.path.join(scratch, "tests-gpu.json")
    env = {
        **os.environ,
        "CUPY_CACHE_DIR": tempfile.mkdtemp(dir=scratch),
        "ISLES_RECORD_KERNELS_TESTS": out,
        "ISLES_PRECOMPILE": "0",
    }
    try:
        p = subprocess.run(
            [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "tests"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return None, "timed out"
    if log is not None:
        log.write_text(p.stdout + p.stderr, encoding="utf-8")
    if not os.path.isfile(out):
        return None, f"exit {p.returncode}: {p.stdout.strip()[-300:]}"
    with open(out, encoding="utf-8") as fh:
        calls = json.load(fh)
    tail = p.stdout.strip().splitlines()[-1:] or [""]
    return calls, f"{len(calls)} kernels, {sum(c['s'] for c in calls):.1f} s of compiling ({tail[0]})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experiment", action="append", help="an experiment (repeatable); default: all")
    ap.add_argument("--jobs", type=int, default=4, help="experiments recorded at once")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per experiment")
    ap.add_argument("--out", type=Path, default=kernel_lists.LIST_PATH)
    ap.add_argument("--tests", action="store_true", help="also record the GPU tests' list (tests-gpu)")
    ap.add_argument(
        "--no-experiments", action="store_true", help="record no experiment (with --tests: that list alone)"
    )
    ap.add_argument("--tests-timeout", type=float, default=900.0)
    ap.add_argument("--tests-log", type=Path, help="write the GPU tests' output here")
    ap.add_argument("--tests-out", type=Path, default=TESTS_LIST, help="the GPU tests' kernel list file")
    args = ap.parse_args()
    import cupy  # noqa: PLC0415

    names = (
        []
        if args.no_experiments
        else (args.experiment or sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml")))
    )
    old = kernel_lists.load_lists(args.out) if args.out.is_file() else {}
    records = {}
    if old.get("cupy") == cupy.__version__:  # the experiments not recorded now keep their lists
        for name, idx in old.get("experiments", {}).items():
            if name == "tests-gpu":  # kept in its own file (--tests-out)
                continue
            records[name] = [{"entry": old["kernels"][i], "s": old["seconds"][i]} for i in idx]
    with tempfile.TemporaryDirectory() as scratch, ThreadPoolExecutor(args.jobs) as pool:
        for name, calls, message in pool.map(lambda n: record(n, scratch, args.timeout), names):
            print(f"{name}: {message}", flush=True)
            if calls is not None:
                records[name] = calls
        if args.tests:
            calls, message = record_tests(scratch, args.tests_timeout, args.tests_log)
            print(f"tests-gpu: {message}", flush=True)
            if calls is not None:
                write(args.tests_out, kernel_lists.merge({"tests-gpu": calls}, cupy.__version__))
    if names:
        write(args.out, kernel_lists.merge(records, cupy.__version__))


def write(path: Path, lists: dict) -> None:
    """Write a kernel lists file (gzip JSON) and say what it holds."""
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(lists, fh, separators=(",", ":"))
    print(
        f"{path}: {len(lists['kernels'])} distinct kernels of {len(lists['experiments'])} lists, "
        f"{path.stat().st_size / 1024:.0f} KiB"
    )


if __name__ == "__main__":
    main()
