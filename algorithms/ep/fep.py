"""Fast evolutionary programming (FEP), classical EP (CEP) and improved FEP (IFEP), batched over
islands, with a q-tournament selection that uses a histogram of win counts instead of a sort.

Sources: X. Yao, Y. Liu and G. Lin, "Evolutionary programming made faster", IEEE Trans. Evol.
Comput. 3(2), 1999 (section II: CEP, eqs. 1-2; section III: FEP, eq. 4; section VI: IFEP);
seed 003 (Wong, Wong & Fok, EP on consumer graphics hardware, section 4: the algorithm's steps 1-6
and the median search over win counts of section 4.3.2).

**Seed 003 erratum.** Seed 003 step 3 prints the offspring as ``x'_i(j) = x_i(j) + eta_i(j)
R(0, 1)`` with ``R(0, 1)`` a *normal* variate: that is classical EP (CEP), not the FEP its title and
reference [6] describe. isles implements FEP with a standard Cauchy variate (Yao et al. eq. 4);
``mutation=gaussian`` gives the seed's printed variant (CEP).

**One generation** of every island (``I`` islands of ``mu`` parents ``(x_i, eta_i)`` in ``n``
dimensions), no host synchronisation, generation counter ``g``:

1. *offspring* (Yao et al. eqs. 1-2 and 4), one per parent ``i``:
   ``x'_i(j) = x_i(j) + eta_i(j) delta_ij`` with ``delta_ij`` a standard Cauchy variate (FEP) or a
   standard normal one (CEP), using the parent's **old** ``eta``;
   ``eta'_i(j) = eta_i(j) exp(tau' N_i + tau N_ij)``, ``tau = 1/sqrt(2 sqrt(n))``,
   ``tau' = 1/sqrt(2 n)``, ``N_i`` one normal per individual, ``N_ij`` one per coordinate;
   optionally ``eta' = max(eta', eta_min)`` (Liang, Yao & Newton, "Adapting self-adaptive
   parameters in evolutionary algorithms", Applied Intelligence 15, 2001: their fix, not part of
   Yao et al. 1999; off by default, as the issue asks). Measured (docs/fep.md): without the bound the step sizes collapse
   within a few hundred generations and runs stall far from Yao et al.'s published means (sphere
   n = 30, 1500 generations: FEP 22 against their 5.7e-4); with ``eta_min = 1e-3`` ours come within
   3 standard errors of them on the sphere (5.3e-4, CEP 1.7e-4 against 2.2e-4; docs/fep.md lists
   where they do not agree);
   ``eta'`` is kept finite (at most the dtype's largest number). IFEP (section VI): each parent
   makes one Cauchy and one Gaussian offspring (same ``eta'``), both are evaluated and the
   better one under Deb's rules (ties to the Cauchy one) competes; ``2 mu`` evaluations per
   generation instead of ``mu``.
2. *bounds*: a coordinate outside ``[lower, upper]`` is brought back by the documented
   ``bound_handling`` (:func:`isles.algorithms.de.de.apply_bounds`: ``reflect`` by default, ``clip``,
   ``reinit``). Cauchy steps are unbounded; a step that overflows to ``+-inf`` is first clipped
   to the dtype's largest finite number, so no offspring coordinate is ever NaN.
3. *tournament* (seed 003 step 5; Yao et al. step 5): the ``2 mu`` individuals of the union
   (parents at positions ``[0, mu)``, offspring at ``[mu, 2 mu)``) each meet ``q`` opponents drawn
   uniformly, with replacement, from the *other* ``2 mu - 1``; an individual scores a win when it
   is not worse than the opponent (Deb's rules, :func:`isles.problems.constraints.better`; without
   constraints: ``f <= f_opponent``). Wins ``w_k`` are in ``0..q``.
4. *selection without sorting* (seed 003 section 4.3.2): a histogram of ``q + 1`` bins; the
   threshold ``t`` is the largest win count with ``#{w >= t} >= mu``. All ``#{w > t} < mu``
   individuals above it survive, and ``need = mu - #{w > t}`` of the ``m = #{w == t}`` tied ones:
   the tied individuals are numbered ``r = 0..m-1`` in union order (a prefix count) and those with
   ``(r - s) mod m < need`` survive, ``s`` a uniform offset in ``[0, m)`` from the counter RNG. Each
   tied individual therefore survives with probability exactly ``need / m`` (a random cyclic
   window; ``tests/test_fep.py`` checks uniformity with a chi-square test). Survivors keep their
   union order (a second prefix count gives their slot). Cost: ``O(mu q)``, no sort.

**Random numbers** (:class:`isles.algorithms.core.random.CounterRNG`, generation ``g``; per island,
``i`` the parent slot, ``j`` the coordinate, ``k`` the union position, ``t`` the opponent number;
``normal`` is Box-Muller on ``draw`` and ``draw + MAX_DRAWS`` at the same index, as
:meth:`CounterRNG.normal`; ``u`` a uniform in ``[0, 1)`` of the float dtype unless said):

============== ==== ========================= ===============================================
draw           id   index                     use
============== ==== ========================= ===============================================
DRAW_INIT      0    ``i n + j`` (g = 0)       initial ``x``, uniform in the box
DRAW_CAUCHY    1    ``i n + j``               ``delta = tan(pi (u - 1/2))``
DRAW_ETA_IND   2    ``i``                     ``N_i`` (normal)
DRAW_ETA       3    ``i n + j``               ``N_ij`` (normal)
DRAW_BOUND     4    ``i n + j``; IFEP's       ``reinit``: ``lower + u (upper - lower)``
                    Gaussian: ``(mu + i) n + j``  (:data:`isles.algorithms.de.de.DRAW_BOUND`)
DRAW_GAUSS     5    ``i n + j``               Gaussian ``delta`` (normal)
DRAW_OPP       6    ``k q + t``               float64 ``u``; ``c = min(floor(u (2 mu - 1)), 2 mu - 2)``,
                                              opponent ``c + (c >= k)``
DRAW_TIE       7    ``0``                     float64 ``u``; ``s = min(floor(u m), m - 1)``
============== ==== ========================= ===============================================

The fused CUDA path (:mod:`isles.algorithms.ep.cuda`) draws the same numbers at the same indices and
applies the same rules, so it selects the same individuals (up to the rounding of the objective,
see there). On CuPy, :meth:`FEP.step`/:meth:`FEP.run` use it when the problem has a
``cuda_objective``; otherwise the array code below runs on NumPy or CuPy. On CuPy the
tournament and selection of that array code run as the fused kernels
(:class:`isles.algorithms.ep.cuda.FEPSelection`, same survivors) and ``run`` replays the
generation as one captured CUDA graph (:mod:`isles.algorithms.core.plan`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
from isles.algorithms.core.base import Context, FusedAlgorithm, State, check_bool, check_range
from isles.algorithms.core.host_build import check_host_kernel
from isles.algorithms.core.population import Population
from isles.algorithms.de.de import BOUND_HANDLINGS, DRAW_BOUND, apply_bounds
from isles.problems.constraints import better

log = logging.getLogger(__name__)

MUTATIONS = ("cauchy", "gaussian", "improved")

DRAW_INIT = 0
DRAW_CAUCHY = 1
DRAW_ETA_IND = 2
DRAW_ETA = 3
assert DRAW_BOUND == 4  # shared with DE's apply_bounds (reinit)
DRAW_GAUSS = 5
DRAW_OPP = 6
DRAW_TIE = 7


@dataclass(frozen=True)
class FEPParams:
    """Parameters of :class:`FEP` (validated on construction).

    Attributes:
        pop_size: parents per island ``mu >= 2`` (seed 003: 400, 800, 3200, 6400; Yao et al.: 100).
        q: tournament size, opponents per individual, ``1 <= q < 2 mu`` (both papers: 10).
        mutation: ``cauchy`` (FEP, Yao et al. eq. 4), ``gaussian`` (CEP, eq. 1; what seed 003
            prints, see the module docstring's erratum) or ``improved`` (IFEP, section VI).
        eta_init: initial step size ``eta`` of every coordinate, ``> 0`` (Yao et al.: 3.0).
        eta_min: lower bound on ``eta`` after each update (Liang, Yao & Newton 2001), ``>= 0``;
            0 (default) = off.
        bound_handling: ``reflect`` (default), ``clip`` or ``reinit``
            (:func:`isles.algorithms.de.de.apply_bounds`).
        fused: use the fused CUDA generation (:mod:`isles.algorithms.ep.cuda`) where possible on CuPy.
        epoch: let the fused plan run a call's generations in one launch of the SM-resident epoch
            kernel (:mod:`isles.algorithms.ep.epoch`) where the timing at plan build finds it
            faster (same results); ``False`` keeps the per-generation kernels.
        host_kernel: on NumPy, run generations in the epoch kernel's host build (:class:`isles.algorithms.ep.cuda_host.HostFEP`; a
            problem with a ``cuda_objective``): ``"auto"`` (default), ``True`` or ``False``
            (:mod:`isles.algorithms.core.host_build`).

    Raises:
        ValueError: one line naming the field (``algorithm.<field>``) and the allowed values.
    """

    pop_size: int = 100
    q: int = 10
    mutation: str = "cauchy"
    eta_init: float = 3.0
    eta_min: float = 0.0
    bound_handling: str = "reflect"
    fused: bool = True
    epoch: bool = True
    host_kernel: bool | str = "auto"

    def __post_init__(self):
        check_host_kernel(self.host_kernel)
        n = check_range("algorithm.pop_size", self.pop_size, 2, integer=True)
        q = self.q
        ok = isinstance(q, (int, np.integer)) and not isinstance(q, bool) and 1 <= int(q) < 2 * n
        if not ok:
            raise ValueError(f"algorithm.q={q!r}: allowed values are integers >= 1 and < 2*pop_size = {2 * n}")
        if not isinstance(self.mutation, str) or self.mutation not in MUTATIONS:
            raise ValueError(f"algorithm.mutation={self.mutation!r}: allowed values are {'|'.join(MUTATIONS)}")
        if not isinstance(self.bound_handling, str) or self.bound_handling not in BOUND_HANDLINGS:
            raise ValueError(
                f"algorithm.bound_handling={self.bound_handling!r}: allowed values are {'|'.join(BOUND_HANDLINGS)}"
            )
        e0 = check_range("algorithm.eta_init", self.eta_init, 0, lo_open=True)
        emin = check_range("algorithm.eta_min", self.eta_min, 0)
        fused, epoch = check_bool("algorithm.fused", self.fused), check_bool("algorithm.epoch", self.epoch)
        for k, val in (
            ("pop_size", n),
            ("q", int(q)),
            ("eta_init", e0),
            ("eta_min", emin),
            ("fused", fused),
            ("epoch", epoch),
        ):
            object.__setattr__(self, k, val)


def learning_rates(n: int) -> tuple[float, float]:
    """``(tau, tau')`` of Yao et al. 1999 section II: ``(1/sqrt(2 sqrt(n)), 1/sqrt(2 n))``."""
    return 1.0 / math.sqrt(2.0 * math.sqrt(n)), 1.0 / math.sqrt(2.0 * n)


# ---- operators (array code, NumPy or CuPy) ------------------------------------------------------


def cauchy(rng, generation: int, draw: int, shape, dtype):
    """Standard Cauchy variates ``tan(pi (u - 1/2))``, shape ``(I, *shape)`` (inverse CDF of one
    uniform; finite: ``|delta| < 2e16`` in float64)."""
    u = rng.uniform(generation, draw, shape, dtype)
    return rng.xp.tan(math.pi * (u - 0.5))


def mutate(ctx: Context, generation: int, X, eta, params: FEPParams):
    """Offspring of parents ``X, eta (I, mu, n)`` (module docstring, steps 1-2).

    Returns:
        ``(Xo, eta_o)``: ``(I, mu, n)`` for ``cauchy``/``gaussian``; for ``improved`` ``Xo`` is
        ``(I, 2 mu, n)`` (the Cauchy offspring, then the Gaussian ones) and ``eta_o`` ``(I, mu, n)``
        (shared by both). Every coordinate is inside the box (never NaN).
    """
    xp, rng = ctx.xp, ctx.rng
    mu, n = X.shape[1], X.shape[2]
    dt = X.dtype
    tau, taup = learning_rates(n)
    Ni = rng.normal(generation, DRAW_ETA_IND, (mu,), dt)
    Nij = rng.normal(generation, DRAW_ETA, (mu, n), dt)
    with np.errstate(over="ignore"):
        eta_o = eta * xp.exp(taup * Ni[..., None] + tau * Nij)
    if params.eta_min > 0:
        eta_o = xp.maximum(eta_o, dt.type(params.eta_min))
    big = np.finfo(dt).max
    eta_o = xp.minimum(eta_o, big)
    steps = []
    if params.mutation in ("cauchy", "improved"):
        steps.append(cauchy(rng, generation, DRAW_CAUCHY, (mu, n), dt))
    if params.mutation in ("gaussian", "improved"):
        steps.append(rng.normal(generation, DRAW_GAUSS, (mu, n), dt))
    with np.errstate(over="ignore"):
        V = xp.concatenate([X + eta * d for d in steps], axis=1) if len(steps) > 1 else X + eta * steps[0]
    V = xp.clip(V, -big, big)  # +-inf (an overflowing step) -> the largest finite number
    V = apply_bounds(params.bound_handling, V, ctx.lower, ctx.upper, rng, generation)
    return V, eta_o


def opponents(rng, generation: int, n_union: int, q: int):
    """Opponents ``(I, 2 mu, q)`` int64 of every union individual ``k``: uniform over the other
    ``2 mu - 1`` (``DRAW_OPP``, module docstring)."""
    xp = rng.xp
    u = rng.uniform(generation, DRAW_OPP, (n_union, q), np.float64)
    c = xp.minimum((u * (n_union - 1)).astype(np.int64), n_union - 2)
    k = xp.arange(n_union, dtype=np.int64)[:, None]
    return c + (c >= k)


def tournament_wins(rng, generation: int, f, v, q: int):
    """Win counts ``(I, 2 mu)`` int32: against how many of its ``q`` opponents (:func:`opponents`)
    each individual of the union ``f, v (I, 2 mu)`` is not worse under Deb's rules."""
    xp = rng.xp
    opp = opponents(rng, generation, f.shape[1], q)
    I = f.shape[0]
    fo = xp.take_along_axis(f, opp.reshape(I, -1), axis=1).reshape(opp.shape)
    vo = xp.take_along_axis(v, opp.reshape(I, -1), axis=1).reshape(opp.shape)
    lose = better(fo, vo, f[..., None], v[..., None])
    return (q - lose.sum(axis=-1)).astype(np.int32)


def select_survivors(rng, generation: int, wins, mu: int, q: int):
    """Survivors by win counts without sorting (module docstring, step 4).

    Args:
        wins: ``(I, 2 mu)`` int in ``0..q``.

    Returns:
        ``src (I, mu)`` int64: the union positions of the survivors, in union order.
    """
    xp = rng.xp
    I, M2 = wins.shape
    w = wins.astype(np.int64)
    hist = (w[..., None] == xp.arange(q + 1, dtype=np.int64)).sum(axis=1)  # (I, q + 1)
    ge = xp.cumsum(hist[:, ::-1], axis=1)[:, ::-1]  # ge[t] = #{w >= t}, non-increasing
    t = (ge >= mu).sum(axis=1) - 1  # largest t with #{w >= t} >= mu
    ge_pad = xp.concatenate([ge, xp.zeros((I, 1), dtype=ge.dtype)], axis=1)
    above = xp.take_along_axis(ge_pad, (t + 1)[:, None], axis=1)[:, 0]
    m = xp.take_along_axis(hist, t[:, None], axis=1)[:, 0]
    need = mu - above
    u = rng.uniform(generation, DRAW_TIE, (1,), np.float64)[:, 0]
    s = xp.minimum((u * m).astype(np.int64), m - 1)
    tie = w == t[:, None]
    r = xp.cumsum(tie, axis=1) - tie
    sel = (w > t[:, None]) | (tie & (((r - s[:, None]) % m[:, None]) < need[:, None]))
    slot = xp.cumsum(sel, axis=1) - sel
    dump = xp.where(sel, slot, mu)
    out = xp.zeros((I, mu + 1), dtype=np.int64)
    out[xp.arange(I)[:, None], dump] = xp.arange(M2, dtype=np.int64)[None, :]
    # positions written to the dump column are discarded; a kept slot gets exactly one writer
    return out[:, :mu]


class FEP(FusedAlgorithm):
    """FEP / CEP / IFEP with q-tournament selection over parents and offspring on ``I`` islands
    in lockstep (module docstring: one generation exactly, draws and layouts).

    State (dict): ``X, eta (I, mu, n)`` in ``ctx.dtype``, ``f, v (I, mu)``, ``generation`` (host
    int), ``evals`` (host int, evaluations per island: ``mu`` at init, ``mu`` per generation,
    ``2 mu`` for IFEP), ``nan_evals`` (0-d device int64). The step sizes are an extra
    (``EXTRAS``), so they migrate with their individual; an immigrant without step sizes (e.g.
    from a master swarm, filled with zeros by :meth:`Population.conform`) gets ``eta_init``.
    """

    FUSED_MODULE = "isles.algorithms.ep.cuda"
    HOST_MODULE = "isles.algorithms.ep.cuda_host"  # the host build, NumPy runs' CPU path (algorithm.host_kernel)

    name = "fep"
    Params = FEPParams
    EXTRAS = {"eta": "eta"}
    graph_safe = False  # the fused path replays its own CUDA graph in run()

    def population_size(self) -> int:
        """``mu = pop_size``."""
        return self.params.pop_size

    def evaluations_per_generation(self) -> int:
        """:meth:`evals_per_generation` (the interface's name)."""
        return self.evals_per_generation()

    def evals_per_generation(self) -> int:
        """Objective evaluations per island and generation: ``mu`` (``2 mu`` for IFEP)."""
        p = self.params
        return p.pop_size * (2 if p.mutation == "improved" else 1)

    def init(self, ctx: Context) -> State:
        """Uniform population in the box (``DRAW_INIT``), ``eta = eta_init``, evaluated."""
        xp, mu = ctx.xp, self.params.pop_size
        X = ctx.uniform_in_box(0, DRAW_INIT, mu)
        f, v, n_nan = ctx.evaluator(X)
        eta = xp.full(X.shape, self.params.eta_init, dtype=X.dtype)
        return {
            "X": X,
            "eta": eta,
            "f": f,
            "v": v,
            "generation": 0,
            "evals": mu,
            "nan_evals": xp.asarray(n_nan, dtype=np.int64),
        }

    def offspring(self, ctx: Context, state: State):
        """Evaluated offspring of generation ``state["generation"]`` (array code).

        Returns:
            ``(Xo, eta_o, fo, vo, n_nan)``, ``(I, mu, ...)``: for IFEP the better of each parent's
            Cauchy and Gaussian offspring (ties to the Cauchy one).
        """
        xp, p = ctx.xp, self.params
        g = state["generation"]
        X, eta = state["X"], state["eta"]
        mu = X.shape[1]
        Xo, eta_o = mutate(ctx, g, X, eta, p)
        fo, vo, n_nan = ctx.evaluator(Xo)
        if p.mutation == "improved":
            gauss = better(fo[:, mu:], vo[:, mu:], fo[:, :mu], vo[:, :mu])
            Xo = xp.where(gauss[..., None], Xo[:, mu:], Xo[:, :mu])
            fo = xp.where(gauss, fo[:, mu:], fo[:, :mu])
            vo = xp.where(gauss, vo[:, mu:], vo[:, :mu])
        return Xo, eta_o, fo, vo, n_nan

    def step(self, ctx: Context, state: State) -> State:
        """One generation of every island (module docstring); no host synchronisation.

        On CuPy with a problem that has ``cuda_objective`` this is the fused generation
        (:class:`isles.algorithms.ep.cuda.FusedFEP`), built and self-checked at the first call.
        """
        host = self.host_plan(ctx) if ctx.xp is np else None
        if host is not None:  # NumPy: the host build, as run's (algorithm.host_kernel)
            return host(state, 1)
        plan = self.fused_plan(ctx)
        if plan is not None:
            return plan.step(state)
        xp, p = ctx.xp, self.params
        g = state["generation"]
        Xo, eta_o, fo, vo, n_nan = self.offspring(ctx, state)
        fu = xp.concatenate([state["f"], fo], axis=1)
        vu = xp.concatenate([state["v"], vo], axis=1)
        fused_sel = self.module_plan(ctx, "make_selection")
        if fused_sel is not None:  # CuPy: the same survivors in two kernels (isles.algorithms.ep.cuda)
            src = fused_sel.survivors(fu, vu, g)
        else:
            wins = tournament_wins(ctx.rng, g, fu, vu, p.q)
            src = select_survivors(ctx.rng, g, wins, p.pop_size, p.q)
        union = Population(
            xp.concatenate([state["X"], Xo], axis=1), fu, vu, {"eta": xp.concatenate([state["eta"], eta_o], axis=1)}
        )
        new = union.take(src)
        s = dict(state)
        s["X"], s["f"], s["v"], s["eta"] = new.genome, new.f, new.v, new.extras["eta"]
        s["generation"] = g + 1
        s["evals"] = state["evals"] + self.evals_per_generation()
        s["nan_evals"] = state["nan_evals"] + n_nan
        return s

    def adopt(self, ctx: Context, state: State, immigrants: Population, valid):
        """FEP's arrival rule in a mixed archipelago (:meth:`IslandAlgorithm.adopt`): the immigrant's
        ``x``, ``f`` and ``v`` as they are, its step sizes ``eta = eta_init`` (those of a new individual,
        :meth:`init`), whatever the family it comes from."""
        imm = immigrants.conform(self.population(state))
        eta = ctx.xp.full(imm.genome.shape, self.params.eta_init, dtype=imm.extras["eta"].dtype)
        return state, Population(imm.genome, imm.f, imm.v, {"eta": eta})

    def replace(self, ctx: Context, state: State, idx, immigrants: Population) -> State:
        """Immigrants in (:meth:`IslandAlgorithm.replace`), their ``eta`` kept; a step size
        ``<= 0`` (an immigrant that carried none) becomes ``eta_init``."""
        xp = ctx.xp
        eta = immigrants.extras.get("eta")
        if eta is not None:
            eta = xp.where(eta > 0, eta, xp.asarray(self.params.eta_init, dtype=eta.dtype))
            immigrants = Population(immigrants.genome, immigrants.f, immigrants.v, {**immigrants.extras, "eta": eta})
        return super().replace(ctx, state, idx, immigrants)
