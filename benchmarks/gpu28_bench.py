"""Issue 28's GPU speed targets on one GPU: L-SHADE's epoch kernel, batched CMA-ES against EvoX, and
time-to-target on CEC 2014 against EvoX.

Parts (``--part a b c``, default all; about 4 minutes in all on an H100):

* **a** -- L-SHADE on 64 islands x (N = 100, D = 50), Rosenbrock: microseconds per L-SHADE
  generation of the 64 islands and per island-generation (target <= 0.05), for the epoch kernel
  (:mod:`isles.algorithms.lshade.epoch`, ``--lgens`` generations per launch) and for the plain
  array code (one runtime generation = one L-SHADE generation of N = 100 trials). CUDA events,
  median of 5.
* **b** -- 128 CMA-ES instances at D = 100, ``lambda = 4 + floor(3 ln D) = 17``, sphere: isles'
  batched CuPy CMA-ES (:mod:`isles.algorithms.cmaes.cmaes`; one batched ``eigh`` of the 128
  covariances per generation, where the tutorial's lazy rule gives an interval of 1 at this D and
  lambda; plain ``step`` calls and the generation captured as a CUDA graph) against EvoX's
  ``CMAES`` (torch) on the same 128 instances, vmapped (``evox.core.use_state`` + ``vmap``) where
  that works, else one instance after another (the row says which; EvoX 1.4's decomposition
  ``torch.cond`` taken eagerly, :func:`_evox_cmaes_class`: torch 2.9 rejects it). The same process and GPU,
  CUDA events, median of 5; float32 on both sides (EvoX's default; ``--dtype``).
* **c** -- time-to-target at D = 30 on CEC 2014 F1 (rotated high-conditioned elliptic), F8
  (shifted Rastrigin) and F10 (shifted Schwefel) (``--functions``): wall time (CUDA events around
  the loop, whose best-so-far checks every few generations synchronise on both sides) until the
  best error reaches pygmo ``sade``'s median final error (``--seeds`` runs of 10000 D evaluations,
  computed first on the CPU, or ``--targets``), for isles' L-SHADE and CMA-ES (BIPOP) on the GPU
  and EvoX's SHADE and CMA-ES on the GPU, each capped at ``--cap`` seconds and 10000 D
  evaluations (the row names each isles path: L-SHADE's epoch kernel on F8 and F10, whose rebuilt
  functions carry a fused objective, its array code on F1). The functions run on the GPU
  (:mod:`benchmarks.cec_gpu`), rebuilt from pygmo's
  ``cec2014`` (the oracle; no CEC data in this repository): F1 is a quadratic form
  ``(x - o)^T Q (x - o) + 100``, recovered exactly by ``D (D + 3) / 2 + 1`` probes; F8 and F10 are
  separable, their shift ``o`` found coordinate by coordinate (grid, then golden section); each
  rebuilt function is checked against pygmo on random points (the max relative difference is
  printed).

Usage (repository root, GPU machine with CuPy; ``evox`` and ``torch`` for b and c, ``pygmo`` for c)::

    python benchmarks/gpu28_bench.py                      # all parts
    python benchmarks/gpu28_bench.py --part a --eblock 256 512 800
    python benchmarks/gpu28_bench.py --part c --functions 1 8 --targets 1e3 5

Prints one markdown table per part.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402

from benchmarks.cec_gpu import CECRebuilt, sade_targets  # noqa: E402


def _table(header, rows):
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |")
    print()


def _cupy_time(cp, fn, repeats: int = 5) -> float:
    """Median milliseconds of ``fn()`` between two CUDA events."""
    out = []
    for _ in range(repeats):
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        out.append(cp.cuda.get_elapsed_time(e0, e1))
    return statistics.median(out)


def _torch_time(torch, fn, repeats: int = 5) -> float:
    """Median milliseconds of ``fn()`` between two torch CUDA events."""
    out = []
    for _ in range(repeats):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        out.append(e0.elapsed_time(e1))
    return statistics.median(out)


# -- part a: L-SHADE 64 x (100, 50) ----------------------------------------------------------------
def part_a(args) -> None:
    import cupy as cp  # noqa: PLC0415
    from isles.algorithms.lshade.epoch import EpochLSHADE, default_block, virtual_lanes  # noqa: PLC0415
    from isles.algorithms.lshade.jso import JSO  # noqa: PLC0415
    from isles.algorithms.lshade.lshade import LSHADE  # noqa: PLC0415
    from isles.problems import make_problem  # noqa: PLC0415

    I, N, D = 64, 100, 50
    prob = make_problem("rosenbrock", dim=D)
    rows = []
    for dt in args.dtype:
        dtype = np.dtype(dt)
        # MAX_NFE large: N stays 100 over the timed generations (LPSR's first cut after ~1e4 of them)
        kw = dict(dim=D, pop_size=N, max_generations=10**6, evals_per_generation=N)
        alg = LSHADE(**kw)
        ctx = Context(cp, dtype, Evaluator(prob), CounterRNG(cp, 0, range(I)))
        s = alg.init(ctx)
        s = alg.run(ctx, s, 2)  # archive and memories in use
        blocks = args.eblock or [default_block(N, virtual_lanes(D))]
        for eb in blocks:
            k = EpochLSHADE(alg, ctx, eblock=eb)
            k.run(s, 4, s["evals"])  # compiled
            ms = _cupy_time(cp, lambda k=k, s=s: k.run(s, args.lgens, s["evals"]))
            us = 1e3 * ms / args.lgens
            rows.append(
                ("epoch kernel", dt, eb, f"{us:.2f}", f"**{us / I:.4f}**", "met" if us / I <= 0.05 else "missed")
            )
        # jSO (its schedules, pbest != i early; H = 5, r_arc = 1: a state of its own)
        jso = JSO(**kw)
        sj = jso.run(ctx, jso.init(ctx), 2)
        kj = EpochLSHADE(jso, ctx)
        kj.run(sj, 4, sj["evals"])
        us = 1e3 * _cupy_time(cp, lambda kj=kj, sj=sj: kj.run(sj, args.lgens, sj["evals"])) / args.lgens
        rows.append(
            ("epoch kernel, jSO", dt, kj.block, f"{us:.2f}", f"{us / I:.4f}", "met" if us / I <= 0.05 else "missed")
        )
        off = LSHADE(**kw, epoch=False)
        off.run(ctx, s, 2)
        gens = 20
        ms = _cupy_time(cp, lambda off=off, ctx=ctx, s=s, gens=gens: off.run(ctx, s, gens), repeats=3)
        us = 1e3 * ms / gens
        rows.append(("array code", dt, "-", f"{us:.1f}", f"{us / I:.3f}", "missed" if us / I > 0.05 else "met"))
    print(
        f"## a. L-SHADE, {I} islands x (N = {N}, D = {D}), Rosenbrock ({cp.cuda.runtime.getDeviceProperties(0)['name'].decode()})\n"
    )
    _table(
        [
            "path",
            "dtype",
            "threads/block",
            "us per generation (64 islands)",
            "us per island-generation",
            "target <= 0.05",
        ],
        rows,
    )


# -- part b: 128 CMA-ES at D = 100 ------------------------------------------------------------------
def _evox_cmaes_class(torch):
    """EvoX's ``CMAES`` with its decomposition's ``torch.cond`` taken eagerly: torch 2.9 rejects that
    ``cond`` (``UncapturedHigherOrderOpError``: its untaken branch returns the state tensors B, D and
    C^-1/2 as they are, which ``cond`` calls aliasing), so EvoX 1.4's CMA-ES does not run on it at
    all. The rule is EvoX's own: decompose C when ``iteration % decomp_per_iter == 0``; where that
    interval is 1 (D = 100 with lambda = 17 in part b, D = 30 in part c) every generation decomposes,
    with no host round trip and under ``vmap`` too; otherwise a Python ``if`` (one sync a
    generation). Nothing else of EvoX's algorithm changes."""
    from evox.algorithms import CMAES  # noqa: PLC0415

    class EagerCMAES(CMAES):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.every = int(self.decomp_per_iter)

        def _conditional_decomposition(self, iteration, C):
            if self.every == 1 or bool(iteration % self.every == 0):
                return self._decomposition(C)
            return self._no_decomposition(C)

    return EagerCMAES


def _evox_cmaes_step(torch, D: int, I: int, lam: int, dtype):
    """``(step function advancing the I EvoX CMA-ES instances by one generation, how)``: vmapped
    where EvoX's functional API allows it, else a loop over I workflows."""
    from evox.core import Problem as EProblem  # noqa: PLC0415
    from evox.workflows import StdWorkflow  # noqa: PLC0415

    class ESphere(EProblem):
        def evaluate(self, pop):
            return (pop * pop).sum(-1)

    ECMAES = _evox_cmaes_class(torch)

    def workflow(seed):
        torch.manual_seed(seed)
        algo = ECMAES(
            mean_init=(torch.rand(D, device="cuda", dtype=dtype) * 10 - 5), sigma=3.0, pop_size=lam, device="cuda"
        )
        wf = StdWorkflow(algo, ESphere(), device="cuda")
        wf.init_step()
        return wf

    why = ""
    try:
        from evox.core import use_state, vmap  # noqa: PLC0415

        wf = workflow(0)
        stateful = use_state(wf.step)
        batched = vmap(stateful, randomness="different")
        st = torch.func.stack_module_state([workflow(i) for i in range(I)])  # (params, buffers)
        if isinstance(st, tuple):
            st = {**st[0], **st[1]}
        box = {"s": st}

        def vstep():
            out = batched(box["s"])
            box["s"] = out[0] if isinstance(out, tuple) else out

        vstep()
        torch.cuda.synchronize()
        return vstep, "vmapped (evox.core.use_state + vmap)"
    except Exception as exc:  # noqa: BLE001 - EvoX's vmap may not cover CMAES: loop instead, say why
        why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:80] if str(exc) else ''}"
    wfs = [workflow(i) for i in range(I)]

    def loop():
        for w in wfs:
            w.step()

    loop()
    torch.cuda.synchronize()
    return loop, f"one after another ({why})"


def part_b(args) -> None:
    import cupy as cp  # noqa: PLC0415
    from isles.algorithms.cmaes.cmaes import CMAES  # noqa: PLC0415
    from isles.algorithms.core.plan import CapturedRun  # noqa: PLC0415
    from isles.problems.benchmarks import Sphere  # noqa: PLC0415

    I, D = 128, 100
    lam = 4 + int(math.floor(3 * math.log(D)))
    rows = []
    dt = args.dtype[0]
    dtype = np.dtype(dt)
    alg = CMAES(dim=D, pop_size=lam)
    ctx = Context(cp, dtype, Evaluator(Sphere(D, -5.0, 5.0)), CounterRNG(cp, 0, range(I)))
    s = alg.init(ctx)
    for _ in range(3):
        s = alg.step(ctx, s)
    gens = 20

    def steps():
        st = s
        for _ in range(gens):
            st = alg.step(ctx, st)

    isles_step = _cupy_time(cp, steps) / gens
    cr = CapturedRun(alg, ctx)
    cr.run(s, 2)  # captured
    isles_graph = None
    if cr.reason is None:
        isles_graph = _cupy_time(cp, lambda: cr.run(s, gens)) / gens
    C = s["C"]
    eigh = _cupy_time(cp, lambda: cp.linalg.eigh(C))
    rows.append(("isles CMAES, step calls", dt, f"{isles_step:.3f}", ""))
    rows.append(
        (
            "isles CMAES, CUDA graph",
            dt,
            f"{isles_graph:.3f}" if isles_graph is not None else f"not captured: {cr.reason}",
            "",
        )
    )
    rows.append(
        (f"(cupy.linalg.eigh of ({I}, {D}, {D}) alone, interval {alg.eigen_interval(D)})", dt, f"{eigh:.3f}", "")
    )
    try:
        import torch  # noqa: PLC0415

        tdt = torch.float32 if dtype == np.float32 else torch.float64
        torch.set_default_dtype(tdt)
        step, how = _evox_cmaes_step(torch, D, I, lam, tdt)
        reps = 5 if how.startswith("vmapped") else 3
        ev = _torch_time(torch, step, repeats=reps)
        best = min(x for x in (isles_step, isles_graph) if x is not None)
        rows.append((f"EvoX CMAES, {how}", dt, f"{ev:.3f}", f"**{ev / best:.1f}x** (target >= 10x)"))
        Ct = torch.eye(D, device="cuda", dtype=tdt).expand(I, D, D).contiguous()
        rows.append(
            (
                f"(torch.linalg.eigh of ({I}, {D}, {D}) alone)",
                dt,
                f"{_torch_time(torch, lambda: torch.linalg.eigh(Ct)):.3f}",
                "",
            )
        )
    except Exception as exc:  # noqa: BLE001 - no EvoX, or its CMAES fails on this torch: the row says why
        rows.append(("EvoX CMAES", dt, f"not run: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}", ""))
    print(f"## b. {I} CMA-ES instances, D = {D}, lambda = {lam}, sphere\n")
    _table(["optimiser", "dtype", "ms per generation (all instances)", "EvoX / isles"], rows)


# -- part c: time-to-target on CEC 2014, D = 30 ------------------------------------------------------
def _isles_ttt(cp, name, prob, target, budget, cap, dtype):
    """``(seconds to target or None, evaluations, best error)`` of isles' ``name`` on ``prob``."""
    from isles.algorithms.cmaes.cmaes import CMAES  # noqa: PLC0415
    from isles.algorithms.core.plan import CapturedRun  # noqa: PLC0415
    from isles.algorithms.lshade.lshade import LSHADE  # noqa: PLC0415

    D = prob.dim
    if name == "L-SHADE":
        n0 = LSHADE(dim=D).params.n_init
        alg = LSHADE(dim=D, max_generations=(budget - n0) // n0)
        chunk = 20  # runtime generations (N_init evaluations each) per check: long launches of the epoch kernel
    else:
        alg = CMAES(dim=D, restarts="bipop")
        chunk = 50

    def make():
        return Context(cp, dtype, Evaluator(prob), CounterRNG(cp, 1, [0]))

    ctx = make()  # compiled and captured by a first chunk; the timed run starts afresh on the same context
    runner = CapturedRun(alg, ctx) if name == "CMA-ES" else None
    ws = alg.init(ctx)
    ws = (runner.run(ws, chunk) if runner is not None else None) or alg.run(ctx, ws, chunk)
    float(alg.best(ws).f[0, 0])
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    e0.record()
    s = alg.init(ctx)
    hit, err = False, float("inf")
    t_start = time.monotonic()
    while s["evals"] < budget:
        out = runner.run(s, chunk) if runner is not None else None
        s = out if out is not None else alg.run(ctx, s, chunk)
        err = float(alg.best(s).f[0, 0]) - prob.f_star
        if err <= target:
            hit = True
            break
        if time.monotonic() - t_start > cap:
            break
    e1.record()
    e1.synchronize()
    sec = cp.cuda.get_elapsed_time(e0, e1) / 1e3
    path = "CUDA graph" if runner is not None and runner.reason is None else alg.gpu_path(ctx)
    return (sec if hit else None), sec, int(s["evals"]), err, path


def _evox_ttt(torch, name, prob, target, budget, cap, tdt):
    """The same for EvoX's SHADE (population 100) or CMAES (default lambda, sigma = 30); the best
    error is the best of every point evaluated (a wrapper of the problem keeps it on the device)."""
    from evox.algorithms import SHADE  # noqa: PLC0415
    from evox.core import Problem as EProblem  # noqa: PLC0415
    from evox.workflows import StdWorkflow  # noqa: PLC0415

    D = prob.dim
    ECMAES = _evox_cmaes_class(torch)

    seen = {"best": None, "evals": 0}  # best-so-far and evaluations of every evaluated point

    class EP(EProblem):
        def evaluate(self, pop):
            f = prob.evaluate_with(torch, pop)
            b = f.min()
            seen["best"] = b if seen["best"] is None else torch.minimum(seen["best"], b)
            seen["evals"] += pop.shape[0]
            return f

    def make(seed):
        torch.manual_seed(seed)
        seen["best"], seen["evals"] = None, 0
        lb = torch.full((D,), -100.0, device="cuda", dtype=tdt)
        ub = torch.full((D,), 100.0, device="cuda", dtype=tdt)
        if name == "SHADE":
            algo = SHADE(pop_size=100, lb=lb, ub=ub, device="cuda")
        else:
            algo = ECMAES(mean_init=torch.rand(D, device="cuda", dtype=tdt) * 200 - 100, sigma=30.0, device="cuda")
        wf = StdWorkflow(algo, EP(), device="cuda")
        wf.init_step()
        return wf

    wf = make(0)  # warm-up
    for _ in range(3):
        wf.step()
    float(seen["best"])
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    wf = make(1)
    hit, err, t_start = False, float("inf"), time.monotonic()
    chunk = 5 if name == "SHADE" else 50
    while seen["evals"] < budget:
        for _ in range(chunk):
            wf.step()
        err = float(seen["best"]) - prob.f_star
        if err <= target:
            hit = True
            break
        if time.monotonic() - t_start > cap:
            break
    e1.record()
    e1.synchronize()
    sec = e0.elapsed_time(e1) / 1e3
    return (sec if hit else None), sec, int(seen["evals"]), err, "torch"


def part_c(args) -> None:
    import cupy as cp  # noqa: PLC0415

    D = 30
    budget = 10000 * D
    funcs = args.functions
    if args.targets:
        targets = dict(zip(funcs, args.targets, strict=False))
    else:
        t0 = time.monotonic()
        targets = sade_targets(funcs, D, args.seeds)
        print(f"(pygmo sade targets, {args.seeds} runs each: {time.monotonic() - t0:.1f} s)\n")
    rows = []
    dtype = np.float64
    for fid in funcs:
        prob = CECRebuilt(fid, D)
        diff = prob.check()
        tgt = max(targets[fid], 1e-8)
        res = {}
        for name in ("L-SHADE", "CMA-ES"):
            res[f"isles {name}"] = _isles_ttt(cp, name, prob, tgt, budget, args.cap, dtype)
        try:
            import torch  # noqa: PLC0415

            torch.set_default_dtype(torch.float64)
            for name in ("SHADE", "CMA-ES"):
                res[f"EvoX {name}"] = _evox_ttt(torch, name, prob, tgt, budget, args.cap, torch.float64)
        except ImportError as exc:
            print(f"EvoX not run: {exc}")
        for who, (ttt, sec, ev, err, path) in res.items():
            shown = f"**{ttt:.3f}**" if ttt is not None else f"not reached ({sec:.2f} s, {ev} evals)"
            rows.append((f"F{fid}", f"{targets[fid]:.3g}", f"{diff:.1e}", f"{who} ({path})", shown, f"{err:.3g}"))
        for a, b in (("isles L-SHADE", "EvoX SHADE"), ("isles CMA-ES", "EvoX CMA-ES")):
            if a in res and b in res and res[a][0] is not None:
                tb = res[b][0] if res[b][0] is not None else res[b][1]
                mark = "" if res[b][0] is not None else " (EvoX: not reached, lower bound)"
                rows.append((f"F{fid}", "", "", f"{b} / {a}", f"**{tb / res[a][0]:.1f}x**{mark}", "target >= 10x"))
    print(f"## c. time-to-target, CEC 2014, D = {D} (target: pygmo sade's median error), float64\n")
    _table(
        ["function", "target error", "rebuilt vs pygmo (rel.)", "optimiser", "seconds to target", "best error"], rows
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", nargs="+", choices=["a", "b", "c"], default=["a", "b", "c"])
    ap.add_argument(
        "--dtype", nargs="+", default=None, help="a: float32 float64 (default both); b: the first (float32)"
    )
    ap.add_argument("--eblock", type=int, nargs="+", default=None, help="a: threads per block of the epoch kernel")
    ap.add_argument("--lgens", type=int, default=256, help="a: L-SHADE generations per launch")
    ap.add_argument("--functions", type=int, nargs="+", default=[1, 8, 10], help="c: CEC 2014 functions (1, 8, 10)")
    ap.add_argument("--targets", type=float, nargs="+", default=None, help="c: target errors (else pygmo sade's)")
    ap.add_argument("--seeds", type=int, default=3, help="c: pygmo sade runs per target")
    ap.add_argument("--cap", type=float, default=8.0, help="c: seconds per run at most")
    args = ap.parse_args()
    if "a" in args.part:
        a = argparse.Namespace(**vars(args))
        a.dtype = args.dtype or ["float32", "float64"]
        part_a(a)
    if "b" in args.part:
        b = argparse.Namespace(**vars(args))
        b.dtype = args.dtype or ["float32"]
        part_b(b)
    if "c" in args.part:
        part_c(args)


if __name__ == "__main__":
    main()
