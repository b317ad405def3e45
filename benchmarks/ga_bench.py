"""Binary GA benchmark (issue 6): isles' GA per generation, beside the anchors of ``ga_anchors.py``.

Usage (repository root)::

    python benchmarks/ga_bench.py --device gpu --workload all --anchors     # H100: everything
    python benchmarks/ga_bench.py --device cpu --workload all --anchors --scale 0.1
    python benchmarks/ga_bench.py --device gpu --workload trap              # isles only

Workloads (``--scale`` multiplies every population, genome length and island count; 0.1 is the
CPU run at a tenth of the size):

* **A** (``trap``): concatenated trap-5, ``L = 100,000`` bits, ``N = 4096``, one island; isles' GA
  defaults (binary tournament, one-point crossover ``p_c = 0.9``, per-bit mutation ``p_m = 1/L``,
  1 elite), packed genomes (``encoding=bits``). Rows: isles (fused CUDA generation on CuPy; the
  array path on NumPy), on the GPU also isles' array path (``fused=False``) as a reference, and
  with ``--anchors`` every anchor of :mod:`ga_anchors` (plain CuPy/NumPy, PyTorch eager and
  ``torch.compile``, EvoX's tournament in the torch GA, DEAP, pygmo) on the same operators.
  Microseconds per generation; the ratio column is the row's time over isles' time (> 1: isles is
  faster);
* **B** (``seed``): seed 002's Rastrigin (:class:`isles.problems.benchmarks.Rastrigin`, 2 variables in
  ``[-1, 1]``, ``encoding=seed002``: 64 bits), ``N = 2240``: one island (us/generation) and 100
  islands of ``N = 2240`` (us per generation of the batch and per island-generation). The ratio
  of the 100-island row is the 1-island time per generation over the batch's time per
  island-generation (what batching gains).

``--epoch`` (GPU) times issue 18's GA epoch kernel (:mod:`isles.algorithms.ga.epoch`, one launch
per ``GA.run`` call) against the per-generation kernels (graph replays) on the same plan, from the
same state: workload B at 100 and at 1 island, small islands in a batch (Rastrigin seed002,
``N = 64``, 1024 islands), and workload A (trap-5, 10^5 bits, ``N = 4096``), which has no epoch
kernel (the reason is printed). CUDA events around ``plan.run(state, --epoch-gens)``, median of
``--repeats``; the table also gives which path the plan's own timed choice keeps (``choose()``).

Timing: on the GPU, CUDA events around ``GA.run`` (the fused path replays a captured CUDA graph
of 64 generations; blocks of multiples of 64 generations) after a warm-up ``run`` that compiles,
self-checks and captures; on the CPU, ``time.perf_counter``. A probe block sets the number of
generations so that ``--repeats`` blocks take about ``--budget`` seconds; the median block is
reported. Anchors: see :mod:`ga_anchors` (CUDA events / ``torch.cuda.Event`` on the GPU,
``perf_counter`` for the CPU libraries; DEAP and pygmo run a smaller population and are scaled).
Prints progress lines, then one Markdown table; ``--json`` writes the rows.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import ga_anchors  # noqa: E402
import numpy as np  # noqa: E402
from ga_anchors_workload import scaled_workload_a  # noqa: E402
from ga_bench_isles import Row, _fail, load_isles, measure_isles  # noqa: E402

#: workload B (seed 002): Rastrigin D = 2 in [-1, 1], seed002 encoding, N = 2240, 1 and 100 islands
WORKLOAD_B = {"dim": 2, "lower": -1.0, "upper": 1.0, "pop": 2240, "islands": 100, "nvdec": 8, "nvbin": 4}


#: --epoch's rows: (name, problem maker, GAParams fields, islands)
def epoch_workloads(I) -> list:
    """The rows of ``--epoch``: ``(name, problem, GAParams fields, islands)``."""
    w = WORKLOAD_B
    rast = lambda: I["Rastrigin"](w["dim"], w["lower"], w["upper"])  # noqa: E731
    seed = dict(encoding="seed002", nvdec=w["nvdec"], nvbin=w["nvbin"])
    return [
        ("B: Rastrigin D=2, N=2240", rast, dict(pop_size=w["pop"], **seed), w["islands"]),
        ("B: Rastrigin D=2, N=2240", rast, dict(pop_size=w["pop"], **seed), 1),
        ("small islands: Rastrigin D=2, N=64", rast, dict(pop_size=64, **seed), 1024),
        ("A: trap-5, L=100,000, N=4096", lambda: I["Trap"](100000), dict(pop_size=4096, encoding="bits"), 1),
    ]


def run_epoch_table(I, xp, args, log) -> str:
    """``--epoch``: per-generation kernels vs the epoch kernel on :func:`epoch_workloads` (CUDA
    events, median of ``--repeats`` calls of ``--epoch-gens`` generations); a Markdown table of
    microseconds per generation (of the whole batch) and the path the plan's ``choose()`` keeps."""
    import cupy as cp  # noqa: PLC0415

    dtype = I["dtype_of"](args.dtype)
    lines = [
        "| workload | islands | per-generation us/gen | epoch us/gen | epoch/per-gen | plan keeps "
        "| choose() us/gen (per-gen, epoch) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, make, params, islands in epoch_workloads(I):
        if args.epoch_only and args.epoch_only not in name:
            continue
        ga = I["GA"](I["GAParams"](**params))
        ctx = I["Context"](xp, dtype, I["Evaluator"](make()), I["CounterRNG"](xp, args.seed, range(islands)))
        state = ga.init(ctx)
        plan = ga.fused_plan(ctx)
        kept = plan.gpu_path
        if args.epoch_eblock and plan.epoch is not None:
            from isles.algorithms.ga.epoch import EpochGA  # noqa: PLC0415

            plan.epoch = EpochGA(plan, plan.epoch_src, args.epoch_eblock)
            name += f" (eblock {args.epoch_eblock})"
        times = {}
        for use in (False, True) if plan.epoch is not None else (False,):
            plan.use_epoch = use
            plan.run(state, args.epoch_gens)  # warm-up: graph capture
            ts = []
            for _ in range(args.repeats):
                a, b = cp.cuda.Event(), cp.cuda.Event()
                a.record()
                plan.run(state, args.epoch_gens)
                b.record()
                b.synchronize()
                ts.append(cp.cuda.get_elapsed_time(a, b) * 1e3 / args.epoch_gens)
            times[use] = float(np.median(ts))
        plan.use_epoch = kept == "epoch kernel"
        ep = times.get(True)
        ch = "-" if plan.timings is None else f"{plan.timings[0]:.2f}, {plan.timings[1]:.2f}"
        row = (
            f"| {name} | {islands} | {times[False]:.2f} | "
            f"{'-' if ep is None else f'{ep:.2f}'} | {'-' if ep is None else f'{ep / times[False]:.2f}'} | "
            f"{kept} | {ch} |"
        )
        log(row + ("" if plan.epoch is not None else f"  (no epoch kernel: {plan.epoch_reason})"))
        lines.append(row)
        del plan, ga, ctx, state
        xp.get_default_memory_pool().free_all_blocks()
    return "\n".join(lines)


def workload_a_params(w: dict) -> dict:
    return {
        "pop_size": w["pop"],
        "group_size": w["group_size"],
        "crossover": "one_point",
        "p_c": w["p_c"],
        "mutation": "per_bit",
        "p_m": w["p_m"],
        "n_elite": w["n_elite"],
        "renewal": 0.0,
        "encoding": "bits",
        "nvdec": 8,
        "nvbin": 4,
    }


def run_trap(I, xp, args, log) -> tuple[list[Row], dict | None]:
    w = scaled_workload_a(args.scale)
    name = f"A: trap-5 L={w['n_bits']} N={w['pop']}"
    log(f"# {name}: tournament {w['group_size']}, one-point p_c={w['p_c']}, per-bit p_m=1/L, {w['n_elite']} elite")
    prob = I["Trap"](n_bits=w["n_bits"], k=w["k"])
    params = workload_a_params(w)
    rows = [measure_isles(I, xp, args, name, prob, params, 1, fused=True)]
    log(_progress(rows[-1]))
    if xp is not np and not args.no_array_ref:
        rows.append(measure_isles(I, xp, args, name, prob, params, 1, fused=False, label="isles GA, fused=False"))
        log(_progress(rows[-1]))
    ref = rows[0]
    for r in rows[1:]:
        r.ratio, r.ratio_of = _ratio(r.us_per_gen, ref.us_per_gen), "row / isles"
    ref.ratio, ref.ratio_of = 1.0, "reference"
    ev = None
    if args.anchors:
        only = [s for s in args.only.split(",") if s] if args.only else None
        anchors, ev = ga_anchors.run_anchors(
            "gpu" if xp is not np else "cpu",
            w,
            only,
            args.seed,
            args.budget,
            args.repeats,
            args.compile_on_cpu,
            args.deap_pop,
            args.pygmo_pop,
            log=lambda s: log("  " + s),
        )
        for a in anchors:
            rows.append(
                Row(
                    name,
                    a.name,
                    a.device,
                    a.pop,
                    1,
                    a.n_bits,
                    a.us_per_gen,
                    a.generations,
                    a.best_f0,
                    a.best_f,
                    a.setup_s,
                    a.note,
                    _ratio(a.us_per_gen, ref.us_per_gen),
                    "anchor / isles",
                )
            )
    return rows, ev


def run_seed(I, xp, args, log) -> list[Row]:
    N = max(8, int(round(WORKLOAD_B["pop"] * args.scale)))
    n_isl = max(1, int(round(WORKLOAD_B["islands"] * args.scale)))
    prob = I["Rastrigin"](dim=WORKLOAD_B["dim"], lower=WORKLOAD_B["lower"], upper=WORKLOAD_B["upper"])
    params = {
        "pop_size": N,
        "group_size": 2,
        "crossover": "one_point",
        "p_c": 0.9,
        "mutation": "per_bit",
        "p_m": None,
        "n_elite": 1,
        "renewal": 0.0,
        "encoding": "seed002",
        "nvdec": WORKLOAD_B["nvdec"],
        "nvbin": WORKLOAD_B["nvbin"],
    }
    log(f"# B: seed 002 Rastrigin D=2 in [-1, 1], seed002 encoding, N={N}, 1 and {n_isl} islands")
    one = measure_isles(I, xp, args, f"B: Rastrigin seed002 N={N}, 1 island", prob, params, 1)
    one.ratio, one.ratio_of = 1.0, "reference"
    log(_progress(one))
    many = measure_isles(I, xp, args, f"B: Rastrigin seed002 N={N}, {n_isl} islands", prob, params, n_isl)
    many.ratio = _ratio(one.us_per_gen, many.us_per_island_gen)
    many.ratio_of = "1-island us/gen / us per island-gen"
    log(_progress(many))
    return [one, many]


def _ratio(a, b):
    return None if a is None or b is None or b <= 0 else a / b


def _fmt(x, digits=1):
    return "--" if x is None else f"{x:,.{digits}f}"


def _fbest(r: Row) -> str:
    return "--" if r.best_f is None else f"{r.best_f0:.6g} → {r.best_f:.6g}"


def _progress(r: Row) -> str:
    return (
        f"  {r.impl:<34} {r.device:<4} N={r.pop} I={r.islands} L={r.n_bits}: "
        f"{_fmt(r.us_per_gen, 2)} us/gen, {_fmt(r.us_per_island_gen, 3)} us/island-gen; best f {_fbest(r)}; "
        f"{r.note}"
    )


def markdown(rows: list[Row]) -> str:
    lines = [
        "| workload | implementation | device | N × islands | L | gens timed | µs/gen | µs/island-gen "
        "| ratio | best f (start → end) | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = "--" if r.ratio is None else f"{r.ratio:,.2f}× ({r.ratio_of})"
        note = r.note.replace("|", "/")
        lines.append(
            f"| {r.workload} | {r.impl} | {r.device} | {r.pop} × {r.islands} | {r.n_bits} | {r.generations} "
            f"| {_fmt(r.us_per_gen)} | {_fmt(r.us_per_island_gen, 3)} | {ratio} | {_fbest(r)} | {note} |"
        )
    return "\n".join(lines)


def parse(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--device", default="gpu", choices=("gpu", "cpu"))
    p.add_argument("--workload", default="all", choices=("trap", "seed", "all"))
    p.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="multiplies populations, genome length (A) and islands (B); 0.1 for the CPU run",
    )
    p.add_argument("--anchors", action="store_true", help="also time the anchors of ga_anchors.py on workload A")
    p.add_argument(
        "--only",
        default=None,
        help="comma list of anchors (gpu: cupy,torch,torch_compile,evox,deap,pygmo; cpu: numpy,torch,deap,pygmo,evox)",
    )
    p.add_argument("--budget", type=float, default=10.0, help="seconds of timed generations per row")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--deap-pop", type=int, default=None, help="DEAP's population (default: automatic, scaled)")
    p.add_argument("--pygmo-pop", type=int, default=None, help="pygmo's population (default: automatic, scaled)")
    p.add_argument("--compile-on-cpu", action="store_true", help="also try torch.compile with --device cpu")
    p.add_argument("--no-array-ref", action="store_true", help="skip isles' array-path row on the GPU")
    p.add_argument("--json", default=None, help="also write the rows to this JSON file")
    p.add_argument(
        "--epoch",
        action="store_true",
        help="only the epoch-kernel table (GPU): per-generation vs epoch kernel, module docstring",
    )
    p.add_argument("--epoch-gens", type=int, default=640, help="generations per timed call of --epoch")
    p.add_argument(
        "--epoch-eblock",
        type=int,
        default=None,
        help="--epoch: threads per block of the epoch kernel (default: algorithms/ga/epoch.py)",
    )
    p.add_argument("--epoch-only", default=None, help="--epoch: only the rows whose workload contains this text")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    I = load_isles()
    try:
        xp = I["get_xp"](args.device)
    except Exception as e:  # noqa: BLE001
        _fail(f"--device {args.device}: {e}")

    def log(s):
        print(s, flush=True)

    t_all = time.perf_counter()
    log(
        f"# device: {I['device_name'](xp)}; timer: {'CUDA events' if xp is not np else 'perf_counter'}; "
        f"dtype {args.dtype}; scale {args.scale}; budget {args.budget} s x median of {args.repeats}"
    )
    rows, ev = [], None
    if args.epoch:
        if xp is np:
            _fail("--epoch needs --device gpu")
        log(f"# --epoch: plan.run(state, {args.epoch_gens}) per call, median of {args.repeats} calls")
        log("")
        log(run_epoch_table(I, xp, args, log))
        return 0
    if args.workload in ("trap", "all"):
        r, ev = run_trap(I, xp, args, log)
        rows += r
    if args.workload in ("seed", "all"):
        rows += run_seed(I, xp, args, log)
    log("")
    log(markdown(rows))
    if ev is not None:
        log("")
        log(f"EvoX: {ev['message']}")
    log(f"\n# total wall {time.perf_counter() - t_all:.1f} s")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"args": vars(args), "rows": [asdict(r) for r in rows], "evox": ev}, indent=1, default=str)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
