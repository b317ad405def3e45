"""CEC 2014 functions rebuilt from pygmo's ``cec2014`` (the oracle; no CEC data in this repository) as
array code for NumPy, CuPy and torch, so that GPU optimisers of both libraries evaluate them on the
device (``benchmarks/gpu28_bench.py`` part c), and pygmo ``sade``'s median final errors (the
time-to-target targets).

F1 (rotated high-conditioned elliptic) is a quadratic form ``(x - o)^T Q (x - o) + 100``: ``Q`` and
``o`` follow exactly from ``D (D + 3) / 2 + 1`` probes. F8 (shifted Rastrigin) and F10 (shifted
Schwefel, CEC 2014's modified form) are separable: the shift is found coordinate by coordinate (a
grid, then golden section on the 1-D profile). :meth:`CECRebuilt.check` compares a rebuilt function
with pygmo on random points (this machine: relative differences 2e-10, 1.3e-8, 2.5e-8 at D = 30).
"""

from __future__ import annotations

import math

import numpy as np
from isles.problems.base import Problem


class CECRebuilt(Problem):
    """CEC 2014 function ``fid`` in dimension ``dim`` rebuilt from pygmo's ``cec2014`` (module
    docstring) as array code for any array module (NumPy, CuPy, torch): F1 (quadratic form), F8
    (shifted Rastrigin), F10 (shifted Schwefel, CEC 2014's modified form).

    Raises:
        ValueError: a ``fid`` other than 1, 8, 10.
        ImportError: without pygmo.
    """

    name = "cec2014_rebuilt"
    KINDS = {1: "quadratic", 8: "rastrigin", 10: "schwefel"}

    def __init__(self, fid: int, dim: int = 30):
        import pygmo as pg  # noqa: PLC0415

        if fid not in self.KINDS:
            raise ValueError(f"--functions {fid}: allowed values are 1, 8, 10")
        super().__init__(int(dim), -100.0, 100.0, f_star=100.0 * fid)
        self.fid, self.kind = int(fid), self.KINDS[fid]
        self.name = f"cec2014_f{fid}"
        prob = pg.problem(pg.cec2014(prob_id=fid, dim=dim))
        bfe = pg.bfe(pg.thread_bfe())

        def f(X):
            X = np.atleast_2d(np.asarray(X, dtype=np.float64))
            return np.asarray(bfe(prob, X.ravel())).reshape(-1)

        self._oracle = f
        D = self.dim
        if self.kind == "quadratic":
            h = 10.0
            f0 = f(np.zeros(D))[0]
            E = np.eye(D) * h
            fp, fm = f(E), f(-E)
            Q = np.diag((fp + fm - 2 * f0) / (2 * h * h))
            iu = np.triu_indices(D, 1)
            P = E[iu[0]] + E[iu[1]]
            fq = f(P)
            Q[iu] = (fq - fp[iu[0]] - fp[iu[1]] + f0) / (2 * h * h)
            Q[(iu[1], iu[0])] = Q[iu]
            b = (fm - fp) / (4 * h)  # Q o
            self.Q, self.o = Q, np.linalg.solve(Q, b)
        else:
            o = np.zeros(D)
            grid = np.linspace(-100, 100, 20001)
            base = np.zeros(D)
            for i in range(D):
                X = np.tile(base, (grid.size, 1))
                X[:, i] = grid
                t = grid[int(np.argmin(f(X)))]
                lo, hi = t - 0.02, t + 0.02
                g = (math.sqrt(5) - 1) / 2
                for _ in range(80):  # golden section on the 1-D profile
                    a, c = hi - g * (hi - lo), lo + g * (hi - lo)
                    Xa, Xc = base.copy(), base.copy()
                    Xa[i], Xc[i] = a, c
                    fa, fc = f(np.stack([Xa, Xc]))
                    if fa < fc:
                        hi = c
                    else:
                        lo = a
                o[i] = (lo + hi) / 2
            self.o = o
        self._cache = {}

    def _consts(self, xp, dtype):
        key = (xp.__name__ if hasattr(xp, "__name__") else str(xp), str(dtype))
        hit = self._cache.get(key)
        if hit is None:
            mk = (
                (lambda a: xp.asarray(a, dtype=dtype))
                if xp.__name__ != "torch"
                else (lambda a: xp.as_tensor(a, dtype=dtype, device="cuda"))
            )
            hit = self._cache[key] = {"o": mk(self.o), **({"Q": mk(self.Q)} if self.kind == "quadratic" else {})}
        return hit

    def evaluate_with(self, xp, X):
        """``f (...)`` of ``X (..., D)`` with array module ``xp`` (``numpy``, ``cupy`` or ``torch``)."""
        c = self._consts(xp, X.dtype)
        Y = X - c["o"]
        if self.kind == "quadratic":
            return (xp.matmul(Y, c["Q"]) * Y).sum(-1) + 100.0
        if self.kind == "rastrigin":
            Z = Y * (5.12 / 100.0)
            return (Z * Z - 10.0 * xp.cos(2.0 * math.pi * Z) + 10.0).sum(-1) + 800.0
        Z = Y * 10.0 + 4.209687462275036e2
        n = self.dim
        big, small = Z > 500, Z < -500
        zb = 500.0 - xp.fmod(Z, 500.0)
        zs = -500.0 + xp.fmod(xp.abs(Z), 500.0)
        zsr = 500.0 - xp.fmod(xp.abs(Z), 500.0)
        mid = -Z * xp.sin(xp.sqrt(xp.abs(Z)))
        tb = (Z - 500.0) / 100.0
        ts = (Z + 500.0) / 100.0
        term = xp.where(big, -zb * xp.sin(xp.sqrt(xp.abs(zb))) + tb * tb / n, mid)
        term = xp.where(small, -zs * xp.sin(xp.sqrt(xp.abs(zsr))) + ts * ts / n, term)
        return term.sum(-1) + 4.189828872724338e2 * n + 1000.0

    def objective(self, X):
        """isles' objective: :meth:`evaluate_with` on ``X``'s module (NumPy or CuPy)."""
        import array_api_compat  # noqa: PLC0415

        xp = array_api_compat.array_namespace(X)
        xp = __import__("cupy") if "cupy" in xp.__name__ else np
        return self.evaluate_with(xp, X)

    @property
    def cuda_objective(self) -> str | None:
        """The fused objective (:class:`isles.problems.base.Problem`'s contract) of the separable
        F8 and F10, the shift baked in, so that L-SHADE's epoch kernel evaluates them in its
        generation; ``None`` for F1 (a quadratic form is not a fold over coordinates)."""
        if self.kind == "quadratic":
            return None
        shift = ", ".join(repr(float(v)) for v in self.o)
        head = (
            "#define OBJ_NACC 1\n#define OBJ_HAS_V 0\n#define OBJ_NEXT 0\n"
            "#ifdef ISLES_HOST_EMU\n#define CEC_CONST static const\n#else\n#define CEC_CONST __device__ const\n#endif\n"
            f"CEC_CONST double cec_o[{self.dim}] = {{{shift}}};\n"
            "ISLES_DEV void obj_init(T* acc) { acc[0] = (T)0; }\n"
            "ISLES_DEV void obj_merge(T* acc, const T* o) { acc[0] += o[0]; }\n"
        )
        if self.kind == "rastrigin":
            return head + (
                "ISLES_DEV void obj_term(T* acc, T x, T x_next, int j) {\n"
                "    (void)x_next;\n"
                "    const T z = (x - (T)cec_o[j]) * (T)0.0512;\n"
                "    acc[0] += z * z - (T)10 * t_cos((T)6.283185307179586 * z) + (T)10;\n"
                "}\n"
                "ISLES_DEV T obj_final(const T* acc, int n) { (void)n; return acc[0] + (T)800; }\n"
            )
        return head + (
            "ISLES_DEV void obj_term(T* acc, T x, T x_next, int j) {\n"
            "    (void)x_next;\n"
            "    const T z = (x - (T)cec_o[j]) * (T)10 + (T)420.9687462275036;\n"
            f"    const T n = (T){self.dim};\n"
            "    if (z > (T)500) {\n"
            "        const T a = (T)500 - t_fmod(z, (T)500), t = (z - (T)500) / (T)100;\n"
            "        acc[0] += -a * t_sin(t_sqrt(t_abs(a))) + t * t / n;\n"
            "    } else if (z < (T)-500) {\n"
            "        const T a = (T)-500 + t_fmod(t_abs(z), (T)500), b = (T)500 - t_fmod(t_abs(z), (T)500);\n"
            "        const T t = (z + (T)500) / (T)100;\n"
            "        acc[0] += -a * t_sin(t_sqrt(t_abs(b))) + t * t / n;\n"
            "    } else {\n"
            "        acc[0] += -z * t_sin(t_sqrt(t_abs(z)));\n"
            "    }\n"
            "}\n"
            "ISLES_DEV T obj_final(const T* acc, int n) {\n"
            "    return acc[0] + (T)418.9828872724338 * (T)n + (T)1000;\n"
            "}\n"
        )

    def check(self, n: int = 200, seed: int = 0) -> float:
        """Max relative difference to pygmo on ``n`` random points of the box (and near ``o``)."""
        rng = np.random.default_rng(seed)
        X = np.concatenate([rng.uniform(-100, 100, (n, self.dim)), self.o + rng.normal(0, 1e-3, (n, self.dim))])
        ref = self._oracle(X)
        got = self.evaluate_with(np, X)
        return float(np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1.0)))


def sade_targets(functions, dim: int, seeds: int) -> dict:
    """pygmo ``sade``'s median final error (population 50, 10000 D evaluations) per function."""
    import pygmo as pg  # noqa: PLC0415

    out = {}
    for fid in functions:
        errs = []
        for seed in range(seeds):
            prob = pg.problem(pg.cec2014(prob_id=fid, dim=dim))
            uda = pg.sade(gen=10000 * dim // 50 - 1, variant=2, variant_adptv=1, ftol=0, xtol=0, seed=seed)
            pop = pg.algorithm(uda).evolve(pg.population(prob, 50, seed=seed))
            e = float(pop.champion_f[0]) - 100.0 * fid
            errs.append(0.0 if e < 1e-8 else e)
        out[fid] = float(np.median(errs))
    return out
