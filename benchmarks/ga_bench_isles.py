"""isles' side of the GA benchmark (``ga_bench.py``): its pieces, loaded with a clear message where
one is missing (:func:`load_isles`), the table's :class:`Row`, and the timing of isles' GA on one
workload (:func:`measure_isles`)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from ga_anchors_workload import _perf_timer, _timed_generations

GA_FIELDS = (
    "pop_size",
    "group_size",
    "crossover",
    "p_c",
    "mutation",
    "p_m",
    "n_elite",
    "renewal",
    "encoding",
    "nvdec",
    "nvbin",
    "fused",
)


def _fail(msg: str):
    raise SystemExit(f"ga_bench: {msg}")


def load_isles():
    """isles' pieces: ``dict(GA, GAParams, Trap, Rastrigin, Context, Evaluator, CounterRNG, get_xp,
    device_name, dtype_of)``; a clear ``SystemExit`` where one is missing (the GA and the binary
    problems are being written alongside this script)."""
    out = {}
    try:
        from isles.algorithms.core.backend import device_name, dtype_of, get_xp  # noqa: PLC0415
        from isles.algorithms.core.base import Context  # noqa: PLC0415
        from isles.algorithms.core.random import CounterRNG  # noqa: PLC0415
        from isles.problems.constraints import Evaluator  # noqa: PLC0415
    except Exception as e:  # noqa: BLE001
        _fail(f"isles' core is not importable ({type(e).__name__}: {e}); run from the repository root")
    out.update(
        Context=Context,
        CounterRNG=CounterRNG,
        Evaluator=Evaluator,
        get_xp=get_xp,
        device_name=device_name,
        dtype_of=dtype_of,
    )
    try:
        from isles.algorithms.ga.ga import GA, GAParams  # noqa: PLC0415
    except Exception as e:  # noqa: BLE001
        _fail(
            f"isles' GA is not importable yet: `from isles.algorithms.ga.ga import GA, GAParams` raised "
            f"{type(e).__name__}: {e}"
        )
    fields = set(getattr(GAParams, "__dataclass_fields__", {}))
    missing = [f for f in GA_FIELDS if f not in fields]
    if missing:
        _fail(f"isles.algorithms.ga.ga.GAParams lacks the fields {missing} this benchmark sets (has {sorted(fields)})")
    try:
        from isles.problems.binary import Trap  # noqa: PLC0415
    except Exception as e:  # noqa: BLE001
        _fail(
            f"the binary problems are not importable yet: `from isles.problems.binary import Trap` raised "
            f"{type(e).__name__}: {e}"
        )
    try:
        from isles.problems.benchmarks import Rastrigin  # noqa: PLC0415
    except Exception as e:  # noqa: BLE001
        _fail(f"`from isles.problems.benchmarks import Rastrigin` raised {type(e).__name__}: {e}")
    out.update(GA=GA, GAParams=GAParams, Trap=Trap, Rastrigin=Rastrigin)
    return out


@dataclass
class Row:
    """One line of the table."""

    workload: str
    impl: str
    device: str
    pop: int
    islands: int
    n_bits: int
    us_per_gen: float | None
    generations: int = 0
    best_f0: float | None = None
    best_f: float | None = None
    setup_s: float | None = None
    note: str = ""
    ratio: float | None = None
    ratio_of: str = ""

    @property
    def us_per_island_gen(self):
        return None if self.us_per_gen is None else self.us_per_gen / self.islands


def _cuda_timer(cp):
    def timer(fn):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        fn()
        e.record()
        e.synchronize()
        return cp.cuda.get_elapsed_time(s, e) * 1e-3

    return timer


def measure_isles(
    I, xp, args, workload: str, problem, params: dict, islands: int, fused: bool = True, label: str = "isles GA"
) -> Row:
    """Time isles' GA on ``problem`` with ``params`` (GAParams fields) and ``islands`` islands."""
    GA, GAParams = I["GA"], I["GAParams"]
    dtype = I["dtype_of"](args.dtype)
    gpu = xp is not np
    ga = GA(GAParams(**params, fused=fused))
    ctx = I["Context"](xp, dtype, I["Evaluator"](problem), I["CounterRNG"](xp, args.seed, range(islands)))
    t0 = time.perf_counter()
    state = ga.init(ctx)
    best0 = float(state["f"].min())
    plan = ga.fused_plan(ctx) if gpu else None
    path = "fused" if plan is not None else "array"
    note = ""
    if gpu and fused and plan is None:
        try:
            from isles.algorithms.ga.cuda_source import unsupported_reason  # noqa: PLC0415

            note = f"fused path unavailable: {unsupported_reason(ga, ctx) or 'self-check failed (see warnings)'}; "
        except Exception as e:  # noqa: BLE001
            note = f"fused path unavailable ({type(e).__name__}); "
    if gpu and path == "fused":
        warm, probe, lo, hi, mult = 64, 64, 64, 65536, 64
    elif gpu:
        warm, probe, lo, hi, mult = 2, 3, 5, 2000, 1
    else:
        warm, probe, lo, hi, mult = 1, 1, 2, 1000, 1
    st = [state]

    def advance(n):
        st[0] = ga.run(ctx, st[0], n)  # noqa: F821  (ga and ctx are deleted once advance is done with)

    timer = _cuda_timer(xp) if gpu else _perf_timer
    timer(lambda: advance(warm))  # compile, self-check, graph capture
    setup = time.perf_counter() - t0
    t, n, times = _timed_generations(
        advance, timer, budget_s=args.budget, repeats=args.repeats, probe=probe, lo=lo, hi=hi, multiple=mult
    )
    best = float(st[0]["f"].min())
    note += f"{path} path, median of {args.repeats} x {n} gens, setup {setup:.1f} s"
    row = Row(
        workload,
        f"{label} ({path})",
        "gpu" if gpu else "cpu",
        params["pop_size"],
        islands,
        ga.n_bits(ctx),
        t * 1e6,
        n * args.repeats,
        best0,
        best,
        setup,
        note,
    )
    del st[:], state, plan, ga, ctx
    if gpu:
        xp.get_default_memory_pool().free_all_blocks()
    return row
