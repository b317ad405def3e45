"""Issue 28's CPU speed target (``python benchmarks/cec_bench.py --speed``): a 1e5-evaluation run at
D = 10, pygmo's ``sade`` beside isles' L-SHADE, jSO, DE and BIPOP-CMA-ES, one process, side by side
(:func:`speed`; docs/cec2014.md, "CPU speed")."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.problems.base import Problem  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402

from benchmarks.cec_common import CEC2014, isles_algorithm, pygmo_uda  # noqa: E402


class Elliptic(Problem):
    """CEC 2014 F1's function without its rotation: the shifted high-conditioned elliptic
    ``f = sum_j 1e6^(j / (D - 1)) (x_j - o_j)^2`` (``o`` uniform in ``[-80, 80]^D``, seed 1), with a
    fused objective (``cuda_objective``: weights and shift baked in as constants), so that
    L-SHADE's host build evaluates it in C as pygmo evaluates F1 in C++ (F1's rotation adds ``D^2``
    multiply-adds per evaluation: 1e7 in a 1e5-evaluation run at D = 10, a few ms)."""

    name = "elliptic"

    def __init__(self, dim):
        super().__init__(dim, -100.0, 100.0, f_star=0.0)
        self.w = 1e6 ** (np.arange(dim) / (dim - 1))
        self.o = np.random.default_rng(1).uniform(-80.0, 80.0, dim)

    def objective(self, X):
        """``f`` of shape ``X.shape[:-1]`` (NumPy)."""
        return (self.w * (X - self.o) ** 2).sum(axis=-1)

    @property
    def cuda_objective(self) -> str:
        """The fused source (:class:`isles.problems.base.Problem` contract): one sum."""

        def table(name, values):
            body = ", ".join(repr(float(x)) for x in values)
            return (
                f"#ifdef ISLES_HOST_EMU\nstatic const double {name}[{len(values)}] = {{{body}}};\n#else\n"
                f"__device__ const double {name}[{len(values)}] = {{{body}}};\n#endif\n"
            )

        return (
            "#define OBJ_NACC 1\n#define OBJ_HAS_V 0\n#define OBJ_NEXT 0\n"
            + table("ELL_W", self.w)
            + table("ELL_O", self.o)
            + "ISLES_DEV void obj_init(T* acc) { acc[0] = (T)0; }\n"
            "ISLES_DEV void obj_merge(T* acc, const T* other) { acc[0] += other[0]; }\n"
            "ISLES_DEV void obj_term(T* acc, T x, T x_next, int j) {\n"
            "    (void)x_next; const T z = x - (T)ELL_O[j]; acc[0] += (T)ELL_W[j] * z * z;\n}\n"
            "ISLES_DEV T obj_final(const T* acc, int n) { (void)n; return acc[0]; }\n"
        )


def speed(dim: int = 10, repeats: int = 5) -> str:
    """``10000 D`` evaluations, one island, side by side in this process, the best of ``repeats``
    (one call each, no trace; the rows in turn, ``repeats`` rounds): pygmo's ``sade`` (population 50) on its CEC 2014 F1 and on its
    Rastrigin (C++), against isles' L-SHADE (and jSO) through the epoch kernel's host build
    (``algorithm.host_kernel``: the objective in C, :class:`Elliptic` and isles' ``rastrigin``) and
    through the NumPy array code (``host_kernel=False``; pygmo's F1 on the host, and the NumPy
    elliptic). The host build's one-off compilation (about 1 s, once per process) is not in its
    rows: it is done before the first repeat, and printed on its own line."""
    import pygmo as pg  # noqa: PLC0415
    from isles.algorithms.lshade.host_epoch import host_plan  # noqa: PLC0415
    from isles.problems import make_problem  # noqa: PLC0415

    budget = 10000 * dim

    def isles(name, prob, seed, host=True):
        alg, gens = isles_algorithm(name, dim, budget)
        if name in ("isles-lshade", "isles-jso"):
            alg = type(alg)(replace(alg.params, host_kernel=host))
        ctx = Context(np, np.float64, Evaluator(prob), CounterRNG(np, seed, [0]))
        t1 = time.perf_counter()
        if host and host_plan(alg, ctx) is None:
            raise RuntimeError(f"{name} on {prob.name}: no host build (no C compiler?)")
        compiled.append(time.perf_counter() - t1)
        t0, c0 = time.perf_counter(), time.process_time()
        s = alg.run(ctx, alg.init(ctx), gens)
        return time.perf_counter() - t0, time.process_time() - c0, s["evals"]

    def sade(prob, seed):
        t0, c0 = time.perf_counter(), time.process_time()
        pop = pg.population(pg.problem(prob), 50, seed=seed)
        pop = pg.algorithm(pygmo_uda("pygmo-sade", budget // 50 - 1, seed, False)).evolve(pop)
        return time.perf_counter() - t0, time.process_time() - c0, pop.problem.get_fevals()

    compiled: list = []
    rast = make_problem("rastrigin", dim=dim)
    rows = (
        ("pygmo sade (pop 50), CEC 2014 F1 (C++)", lambda s: sade(pg.cec2014(prob_id=1, dim=dim), s)),
        ("pygmo sade (pop 50), Rastrigin (C++)", lambda s: sade(pg.rastrigin(dim), s)),
        ("isles L-SHADE, host build, shifted elliptic (C)", lambda s: isles("isles-lshade", Elliptic(dim), s)),
        ("isles L-SHADE, host build, Rastrigin (C)", lambda s: isles("isles-lshade", rast, s)),
        ("isles jSO, host build, shifted elliptic (C)", lambda s: isles("isles-jso", Elliptic(dim), s)),
        (
            "isles L-SHADE, NumPy, F1 through pygmo on the host",
            lambda s: isles("isles-lshade", CEC2014(1, dim), s, False),
        ),
        ("isles L-SHADE, NumPy, elliptic (NumPy)", lambda s: isles("isles-lshade", Elliptic(dim), s, False)),
        ("isles jSO, NumPy, elliptic (NumPy)", lambda s: isles("isles-jso", Elliptic(dim), s, False)),
        ("isles DE (pop 50), NumPy, elliptic (NumPy)", lambda s: isles("isles-de", Elliptic(dim), s, False)),
        ("isles BIPOP-CMA-ES, NumPy, elliptic (NumPy)", lambda s: isles("isles-cmaes", Elliptic(dim), s, False)),
    )
    runs: dict = {label: [] for label, _ in rows}
    for seed in range(repeats):  # round robin: a change of the machine's load reaches every row alike
        for label, fn in rows:
            runs[label].append(fn(seed))
    out = "\n".join(
        f"| {k} | {min(r[0] for r in v):.3f} s | {min(r[1] for r in v):.3f} s | {v[0][2]:,} |" for k, v in runs.items()
    )
    return out + f"\n\nhost build compilations (once per process and configuration): {max(compiled):.2f} s wall at most"
