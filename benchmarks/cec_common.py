"""What the CEC 2014 harness's modules share (:mod:`benchmarks.cec_bench`, :mod:`benchmarks.cec_report`,
:mod:`benchmarks.cec_speed`): the optimisers' names, the error rule, pygmo's functions as an isles
user problem (:class:`CEC2014`), isles' and pygmo's optimisers set up for a budget. Each of them
imports this module, none of them another (:mod:`benchmarks.cec_bench` runs the other two)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from isles.algorithms.cmaes.cmaes import CMAES  # noqa: E402
from isles.algorithms.de.de import DE  # noqa: E402
from isles.algorithms.lshade.jso import JSO  # noqa: E402
from isles.algorithms.lshade.lshade import LSHADE  # noqa: E402
from isles.problems.base import Problem  # noqa: E402

#: errors below this count as 0 (CEC 2014)
ZERO = 1e-8
ISLES = ("isles-lshade", "isles-jso", "isles-cmaes", "isles-de")
PYGMO = ("pygmo-sade", "pygmo-de1220", "pygmo-cmaes")
EVOX = ("evox-shade", "evox-cmaes")
OPTIMISERS = ISLES + PYGMO + EVOX


class CEC2014(Problem):
    """CEC 2014 function ``fid`` (1-30) in dimension ``dim`` (2, 10, 20, 30, 50 or 100), evaluated by
    pygmo on the host (``pygmo.cec2014``), as an isles user problem: box ``[-100, 100]^D``,
    ``f_star = 100 fid``. CuPy input (``--device gpu``) is copied to the host and the values back.

    Args:
        fid: the function number ``1..30``.
        dim: ``D``; pygmo ships the data for 2, 10, 20, 30, 50, 100 (the hybrid and composition
            functions F17-F30 not for 2).

    Raises:
        ImportError: without pygmo (``pip install -e ".[bench]"``).
        ValueError: a ``fid`` or ``dim`` pygmo does not have (pygmo's message).
    """

    name = "cec2014"

    def __init__(self, fid: int = 1, dim: int = 10):
        import pygmo  # noqa: PLC0415

        super().__init__(int(dim), -100.0, 100.0, f_star=100.0 * int(fid))
        self.fid = int(fid)
        self.name = f"cec2014_f{self.fid}"
        self._udp = pygmo.problem(pygmo.cec2014(prob_id=self.fid, dim=int(dim)))

    def __getstate__(self):
        d = dict(self.__dict__)
        d.pop("_udp")
        return d

    def __setstate__(self, d):
        import pygmo  # noqa: PLC0415

        self.__dict__.update(d)
        self._udp = pygmo.problem(pygmo.cec2014(prob_id=self.fid, dim=self.dim))

    def objective(self, X):
        """``f (...)`` of ``X (..., D)`` (one pygmo call per row, on the host)."""
        if hasattr(X, "get"):  # CuPy: to the host and back
            import cupy  # noqa: PLC0415

            return cupy.asarray(self.objective(X.get()))
        X = np.asarray(X, dtype=np.float64)
        rows = X.reshape(-1, self.dim)
        fit = self._udp.fitness
        return np.array([fit(r)[0] for r in rows], dtype=np.float64).reshape(X.shape[:-1])


def error(f: float, fid: int) -> float:
    """CEC 2014's error ``f - 100 fid``, 0 below :data:`ZERO`."""
    e = float(f) - 100.0 * fid
    return 0.0 if e < ZERO else e


def isles_algorithm(name: str, dim: int, budget: int):
    """``(algorithm, generations)``: isles' ``name`` set up to spend at most ``budget`` evaluations
    on one island (exactly ``budget`` where the family's parameters allow it, see the code)."""
    if name in ("isles-lshade", "isles-jso"):
        cls = LSHADE if name == "isles-lshade" else JSO
        n0 = cls(dim=dim).params.n_init
        if "max_evaluations" in {f for f in cls.Params.__dataclass_fields__}:
            gens = -(-(budget - n0) // n0)
            return cls(dim=dim, max_generations=gens, max_evaluations=budget), gens
        # before the exact budget: a divisor E of budget - N_init large enough (E does not change
        # the search, only the runtime's bookkeeping), else E = N_init and a run short by < N_init
        e = max(k for k in range(1, n0 + 1) if (budget - n0) % k == 0)
        e = e if 4 * e >= n0 else n0
        return cls(dim=dim, max_generations=(budget - n0) // e, evals_per_generation=e), (budget - n0) // e
    if name == "isles-cmaes":
        alg = CMAES(dim=dim, restarts="bipop")
        lam = alg.evaluations_per_generation()
        if "max_evaluations" in CMAES.Params.__dataclass_fields__:
            return CMAES(dim=dim, restarts="bipop", max_evaluations=budget), -(-(budget - 1) // lam)
        return alg, (budget - 1) // lam
    if name == "isles-de":
        return DE(pop_size=50, F=0.5, CR=0.9), (budget - 50) // 50
    raise ValueError(f"optimiser {name!r}: allowed values are {'|'.join(ISLES)}")


def pygmo_uda(name: str, gen: int, seed: int, memory: bool):
    """pygmo's algorithm ``name`` (``pygmo-sade``, ``pygmo-de1220``, ``pygmo-cmaes``) for ``gen``
    generations, with ``ftol = xtol = 0`` so that it never stops before them."""
    import pygmo as pg  # noqa: PLC0415

    if name == "pygmo-sade":
        return pg.sade(gen=gen, variant=2, variant_adptv=1, ftol=0, xtol=0, memory=memory, seed=seed)
    if name == "pygmo-de1220":
        return pg.de1220(gen=gen, ftol=0, xtol=0, memory=memory, seed=seed)
    return pg.cmaes(gen=gen, sigma0=0.3, ftol=0, xtol=0, memory=memory, force_bounds=True, seed=seed)
