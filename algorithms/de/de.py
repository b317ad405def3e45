"""Differential evolution on a batch of islands, in the matrix form of seed 004.

Seed 004 (parallel DE with MKL/CUDA and the new exponential crossover, NEC), Algorithm 2: every
island's population ``X (N, D)`` is updated by whole-matrix operations,

1. base/difference indices ``r`` for all individuals at once (Algorithms 3-6),
2. the crossover *mask* ``(N, D)`` (Algorithm 7 binomial, 8 exponential, 9-10 NEC; see
   :mod:`isles.algorithms.de.crossover`),
3. the mutant rows ``V`` (eq. 1 and the other Storn & Price strategies), kept inside the box,
4. the trial population ``U = where(mask, V, X)``, evaluated in one batched call,
5. greedy one-to-one selection: ``U_i`` replaces ``X_i`` unless ``X_i`` is strictly better under
   Deb's rules (:func:`isles.problems.constraints.better`); ties go to the trial (Storn & Price 1997).
   NaN objectives are ``+inf`` (the evaluator's rule), so a NaN trial never replaces a finite
   target.

Islands are batched with the island axis first (``X (I, N, D)``), and one step does no host
synchronisation (no ``float()``, ``.get()``, ``.item()``, boolean-mask indexing or Python branches
on device values): the only host values are the generation counter and the parameters.

**Index selection** (Storn & Price: ``r_0, r_1, ...`` mutually distinct and distinct from the
target ``i``), exact and vectorised, one float64 uniform per index from
``rng.uniform(g, DRAW_INDEX, (N, k))``:

* ``c_m = floor(u_m (N - 1 - m))``, uniform in ``[0, N - 1 - m)``;
* ``r_0 = (i + 1 + c_0) mod N``: seed 004's *random offset* base-index selection (Algorithm 4)
  with one offset per individual, ``1 + c_0`` uniform in ``[1, N - 1]``; this is uniform over
  the individuals other than ``i``. (With the seed's single offset for the whole population the
  base vectors would be a rotation of the population, Algorithm 5's permutation flavour; DE/rand
  draws them independently.)
* ``r_m`` (``m >= 1``): ``c_m`` shifted past the already-excluded indices ``{i, r_0, ..,
  r_(m-1)}`` in ascending order (``r += (r >= e)`` for each excluded ``e``), which maps
  ``[0, N - 1 - m)`` one-to-one onto the indices not yet used: uniform sampling without
  replacement. Seed 004's Algorithm 6 (``r1 = r0 + ...``) does not guarantee distinctness and is
  not used.

For ``best/1`` and ``current-to-best/1`` the random indices ``r_0, r_1`` form the difference
pair. Population sizes needed: rand/1 ``N >= 4``, rand/2 ``N >= 6``, best/1 and
current-to-best/1 ``N >= 3`` (the target plus the distinct random individuals).

**Bound handling** (the default is ``"reflect"``): a mutant coordinate outside ``[lower, upper]``
is folded back into the box by mirror reflection at the faces, repeated as often as needed
(period ``2 (upper - lower)``). Reflection keeps every trial in the closed box, puts no
probability mass on the box faces (``"clip"`` piles escaped coordinates onto the faces, a bias
towards boundary optima in seed 004's wide boxes, Griewank ``[-400, 400]``), keeps a coordinate
that escaped by a little close to where it escaped (``"reinit"`` throws it anywhere), and needs
no random numbers, so it costs nothing extra in the fused GPU kernel. ``"clip"`` and ``"reinit"``
(uniform re-draw in the box, ``rng.uniform(g, DRAW_BOUND, (N, D))``) are available.

On CuPy, :meth:`DE.step` and :meth:`DE.run` use the fused CUDA kernels of
:mod:`isles.algorithms.de.cuda` when the configuration allows (rand/1 with bin or nec on a problem that
carries its fused objective, ``Problem.cuda_objective``), with the same random numbers and arithmetic; otherwise, and
on NumPy, the generic array code below runs. ``DE.graph_safe`` stays ``False``: the island
runtime then calls :meth:`DE.run`, whose fused path replays its own CUDA graph of 64
generations (faster than replaying one captured ``step`` per generation). For a problem written
as array code (no ``cuda_objective``) on CuPy, the trial population (rand/1, bin or nec) and the
greedy selection are fused kernels (:class:`isles.algorithms.de.cuda_variation.DEVariation`) around the
problem's own array code, and ``run`` replays that generation as one captured CUDA graph with the
target tracked after every generation (:mod:`isles.algorithms.core.plan`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
from isles.algorithms.core.backend import array_module
from isles.algorithms.core.base import Context, FusedAlgorithm, State, check_bool, check_range
from isles.algorithms.core.host_build import check_host_kernel
from isles.algorithms.de.crossover import CROSSOVERS, crossover_mask
from isles.problems.constraints import argbest, better

log = logging.getLogger(__name__)

#: number of random indices (besides the target) each strategy needs
N_RANDOM = {"rand/1": 3, "best/1": 2, "current-to-best/1": 2, "rand/2": 5}
STRATEGIES = tuple(N_RANDOM)
BOUND_HANDLINGS = ("clip", "reflect", "reinit")

# draw ids of the counter RNG (crossover.DRAW_START = 2 and crossover.DRAW_CROSS = 3)
DRAW_INIT = 0
DRAW_INDEX = 1
DRAW_BOUND = 4


@dataclass(frozen=True)
class DEParams:
    """Parameters of :class:`DE` (validated on construction).

    Attributes:
        pop_size: individuals per island ``N``; at least ``1 +`` the strategy's random indices
            (rand/1: 4, rand/2: 6, best/1: 3, current-to-best/1: 3).
        F: differential weight, in ``(0, 2]`` (Storn & Price 1997).
        CR: crossover rate, in ``[0, 1]``.
        strategy: ``rand/1`` (seed 004 eq. 1), ``best/1``, ``current-to-best/1`` or ``rand/2``.
        crossover: ``bin`` (Alg. 7), ``exp`` (Alg. 8) or ``nec`` (Alg. 9-10, eq. 9).
        bound_handling: ``reflect`` (default, module docstring says why), ``clip`` or ``reinit``.
        fused: use the fused CUDA kernels (:mod:`isles.algorithms.de.cuda`) where supported on CuPy;
            ``False`` forces the generic array code.
        epoch: let the fused plan run a whole epoch in one launch (:mod:`isles.algorithms.de.epoch`,
            one thread block per island) where the island fits one block and that is faster;
            ``False`` keeps one launch per generation. The results are the same.
        host_kernel: on NumPy, run generations in the epoch kernel's host build
            (:class:`isles.algorithms.de.host_epoch.HostEpochDE`; rand/1 with bin or nec and a
            problem with a ``cuda_objective``): ``"auto"`` (default), ``True`` or ``False``
            (:mod:`isles.algorithms.core.host_build`). The same populations as the NumPy array
            code, fitness to the objective's summation order.

    Defaults ``F = 0.5, CR = 0.9`` are Storn & Price's usual starting point; seed 004's Table II
    uses (0.5, 0.2) for Ackley, (0.25, 0.45) for Griewank and (0.65, 0.95) for Rosenbrock.

    Raises:
        ValueError: one line naming the field (``algorithm.<field>``) and the allowed values.
    """

    pop_size: int = 100
    F: float = 0.5
    CR: float = 0.9
    strategy: str = "rand/1"
    crossover: str = "bin"
    bound_handling: str = "reflect"
    fused: bool = True
    epoch: bool = True
    host_kernel: bool | str = "auto"

    def __post_init__(self):
        check_host_kernel(self.host_kernel)
        if not isinstance(self.strategy, str) or self.strategy not in STRATEGIES:
            raise ValueError(f"algorithm.strategy={self.strategy!r}: allowed values are {'|'.join(STRATEGIES)}")
        if not isinstance(self.crossover, str) or self.crossover not in CROSSOVERS:
            raise ValueError(f"algorithm.crossover={self.crossover!r}: allowed values are {'|'.join(CROSSOVERS)}")
        if not isinstance(self.bound_handling, str) or self.bound_handling not in BOUND_HANDLINGS:
            raise ValueError(
                f"algorithm.bound_handling={self.bound_handling!r}: allowed values are {'|'.join(BOUND_HANDLINGS)}"
            )
        fused, epoch = check_bool("algorithm.fused", self.fused), check_bool("algorithm.epoch", self.epoch)
        F = check_range("algorithm.F", self.F, 0, 2, lo_open=True)
        CR = check_range("algorithm.CR", self.CR, 0, 1)
        need = N_RANDOM[self.strategy] + 1
        try:
            n = check_range("algorithm.pop_size", self.pop_size, need, integer=True)
        except ValueError as e:
            raise ValueError(
                f"{e} (strategy {self.strategy} needs the target and {need - 1} other distinct individuals)"
            ) from None
        object.__setattr__(self, "F", F)
        object.__setattr__(self, "CR", CR)
        object.__setattr__(self, "pop_size", n)
        object.__setattr__(self, "fused", fused)
        object.__setattr__(self, "epoch", epoch)


def sample_indices(rng, generation: int, n: int, k: int):
    """Random indices ``r (I, N, k)``: per individual ``i``, ``k`` distinct indices, all ``!= i``.

    Exact uniform sampling without replacement, vectorised and without host synchronisation
    (module docstring: ``r_0`` by seed 004's random-offset selection, Algorithm 4, with one offset
    per individual; ``r_1..`` by shifting a uniform integer past the excluded indices). Uses
    ``rng.uniform(generation, DRAW_INDEX, (N, k), float64)``; the fused CUDA kernel draws the same.

    Args:
        rng: :class:`isles.algorithms.core.random.CounterRNG` with ``I`` streams.
        generation: host int.
        n: population size ``N``.
        k: number of indices, ``1 <= k <= N - 1``.

    Returns:
        int64 array ``(I, N, k)``.

    Raises:
        ValueError: ``k`` outside ``[1, N - 1]``.
    """
    if not 1 <= k <= n - 1:
        raise ValueError(f"sample_indices: k={k} distinct indices need 1 <= k <= N - 1 = {n - 1}")
    xp = rng.xp
    u = rng.uniform(generation, DRAW_INDEX, (n, k), np.float64)  # (I, N, k)
    high = xp.arange(n - 1, n - 1 - k, -1, dtype=np.int64)  # N-1, N-2, ..., N-k (on device)
    c = (u * high.astype(np.float64)).astype(np.int64)
    c = xp.minimum(c, high - 1)
    i = xp.broadcast_to(xp.arange(n, dtype=np.int64), c.shape[:-1])
    r0 = (i + 1 + c[..., 0]) % n
    out = [r0]
    excl = [xp.minimum(i, r0), xp.maximum(i, r0)]  # excluded indices, ascending
    for m in range(1, k):
        r = c[..., m]
        for e in excl:
            r = r + (r >= e)
        out.append(r)
        if m + 1 < k:  # insert r: one bubble pass keeps the list ascending (no sort kernel)
            excl.append(r)
            for e in range(len(excl) - 2, -1, -1):
                a, b = excl[e], excl[e + 1]
                excl[e], excl[e + 1] = xp.minimum(a, b), xp.maximum(a, b)
    return xp.stack(out, axis=-1)


def mutant_vectors(X, r, strategy: str, F: float, best=None):
    """Mutant population ``V (I, N, D)`` (Storn & Price 1997; seed 004 eq. 1 for rand/1).

    * ``rand/1``: ``x_r0 + F (x_r1 - x_r2)``
    * ``rand/2``: ``x_r0 + F (x_r1 - x_r2) + F (x_r3 - x_r4)``
    * ``best/1``: ``x_best + F (x_r0 - x_r1)``
    * ``current-to-best/1``: ``x_i + F (x_best - x_i) + F (x_r0 - x_r1)``

    Args:
        X: population ``(I, N, D)``.
        r: indices ``(I, N, k)`` from :func:`sample_indices`.
        strategy: one of :data:`STRATEGIES`.
        F: differential weight (a host float, so float32 stays float32).
        best: ``(I,)`` index of each island's best (needed by the best strategies).

    Raises:
        ValueError: unknown ``strategy``, or ``best`` missing where needed.
    """
    xp = array_module(X)
    rows = xp.arange(X.shape[0])[:, None]

    def x(m):
        return X[rows, r[..., m]]

    if strategy == "rand/1":
        return x(0) + F * (x(1) - x(2))
    if strategy == "rand/2":
        return x(0) + F * (x(1) - x(2)) + F * (x(3) - x(4))
    if strategy not in ("best/1", "current-to-best/1"):
        raise ValueError(f"algorithm.strategy={strategy!r}: allowed values are {'|'.join(STRATEGIES)}")
    if best is None:
        raise ValueError(f"mutant_vectors: strategy {strategy} needs the best index of each island")
    xb = X[xp.arange(X.shape[0]), best][:, None, :]
    if strategy == "best/1":
        return xb + F * (x(0) - x(1))
    return X + F * (xb - X) + F * (x(0) - x(1))


def _reflected(xp, V, lower, upper):
    """:func:`apply_bounds`' ``reflect`` of every coordinate of ``V`` (``lower``, ``upper`` broadcast to it)."""
    w = upper - lower
    w2 = w + w
    with np.errstate(invalid="ignore", divide="ignore"):
        y = xp.fmod(V - lower, w2)
    y = xp.where(y < 0, y + w2, y)
    y = xp.where(y > w, w2 - y, y)
    z = lower + y
    z = xp.where(z < lower, lower, xp.where(z > upper, upper, z))
    return xp.where(w2 > 0, z, lower)


def apply_bounds(kind: str, V, lower, upper, rng=None, generation: int = 0):
    """Bring coordinates of ``V (I, N, D)`` that lie outside ``[lower, upper]`` back into the box.

    * ``clip``: onto the nearest face.
    * ``reflect`` (default of :class:`DEParams`): mirror at the faces, repeatedly:
      ``y = fmod(v - lower, 2w)`` (``w = upper - lower``; ``+2w`` if negative), ``y = 2w - y``
      if ``y > w``, then ``lower + y`` (clipped against rounding); ``lower`` if ``w = 0``.
    * ``reinit``: ``lower + u (upper - lower)`` with ``u`` from
      ``rng.uniform(generation, DRAW_BOUND, (N, D), V.dtype)``.

    Coordinates inside the box are returned unchanged (bit for bit); NaN stays NaN.

    Args:
        kind: one of :data:`BOUND_HANDLINGS`.
        V: ``(I, N, D)``; lower, upper: ``(D,)`` in ``V``'s dtype and module.
        rng, generation: needed by ``reinit``.

    Raises:
        ValueError: unknown ``kind`` or ``reinit`` without ``rng``.
    """
    xp = array_module(V)
    below, above = lower > V, upper < V
    if kind == "clip":
        return xp.where(below, lower, xp.where(above, upper, V))
    out = below | above
    if kind == "reflect":
        if xp is np:  # the same operations on the coordinates outside the box only (a few full-array passes, not 12)
            idx = np.nonzero(out)
            res = V.copy()
            if idx[0].size:
                res[idx] = _reflected(
                    xp, V[idx], np.broadcast_to(lower, V.shape)[idx], np.broadcast_to(upper, V.shape)[idx]
                )
            return res
        return xp.where(out, _reflected(xp, V, lower, upper), V)
    if kind == "reinit":
        if rng is None:
            raise ValueError("apply_bounds: bound_handling=reinit needs the RNG")
        u = rng.uniform(generation, DRAW_BOUND, V.shape[1:], V.dtype)
        return xp.where(out, lower + u * (upper - lower), V)
    raise ValueError(f"algorithm.bound_handling={kind!r}: allowed values are {'|'.join(BOUND_HANDLINGS)}")


def select(xp, state: State, U, fu, vu, n_nan) -> State:
    """Greedy one-to-one selection (seed 004 Algorithm 2 lines 11-14) under Deb's rules.

    ``U_i`` replaces ``X_i`` unless ``X_i`` is strictly better (:func:`isles.problems.constraints.better`
    on ``(f, v)``): a trial that is not worse wins, as in Storn & Price's DE.

    Args:
        state: the DE state (``X (I, N, D)``, ``f, v (I, N)``, counters).
        U: trial population ``(I, N, D)``; fu, vu: its ``(f, v)`` ``(I, N)``; n_nan: 0-d count of
            NaN evaluations.

    Returns:
        A new state (generation + 1, evals + N, nan_evals + n_nan).
    """
    X, f, v = state["X"], state["f"], state["v"]
    acc = ~better(f, v, fu, vu)
    s = dict(state)
    s["X"] = xp.where(acc[..., None], U, X)
    s["f"] = xp.where(acc, fu, f)
    s["v"] = xp.where(acc, vu, v)
    s["generation"] = state["generation"] + 1
    s["evals"] = state["evals"] + X.shape[1]
    s["nan_evals"] = state["nan_evals"] + n_nan
    return s


class DE(FusedAlgorithm):
    """Differential evolution DE/<strategy>/1|2/<bin|exp|nec> on ``I`` islands in lockstep.

    Seed 004 Algorithm 2 (matrix form) with Storn & Price's strategies, the crossovers of
    :mod:`isles.algorithms.de.crossover` and greedy selection under Deb's rules (module docstring).

    State (dict): ``X (I, N, D)``, ``f, v (I, N)``, ``generation`` (host int), ``evals`` (host int,
    objective evaluations per island), ``nan_evals`` (0-d device int64, NaN evaluations of the
    batch). Generation ``g`` draws its random numbers at counter ``g``; initialisation uses
    ``(0, DRAW_INIT)``.
    """

    FUSED_MODULE = "isles.algorithms.de.cuda"
    HOST_MODULE = "isles.algorithms.de.host_epoch"  # the host build, NumPy runs' CPU path (algorithm.host_kernel)

    name = "de"
    Params = DEParams

    def evaluations_per_generation(self) -> int:
        """``N``: every trial vector is evaluated once (:func:`select`)."""
        return int(self.params.pop_size)

    def population_size(self) -> int:
        """``N = pop_size``."""
        return self.params.pop_size

    def init(self, ctx: Context) -> State:
        """Uniform population in the box, evaluated (``N`` evaluations per island)."""
        xp, n = ctx.xp, self.params.pop_size
        X = ctx.uniform_in_box(0, DRAW_INIT, n)
        f, v, n_nan = ctx.evaluator(X)
        return {
            "X": X,
            "f": f,
            "v": v,
            "generation": 0,
            "evals": n,
            "nan_evals": xp.asarray(n_nan, dtype=xp.int64),
        }

    def trial(self, ctx: Context, state: State):
        """Trial population ``U (I, N, D)`` of generation ``state["generation"]`` (generic path).

        Indices (:func:`sample_indices`), mutants (:func:`mutant_vectors`), bounds
        (:func:`apply_bounds`) and mask (:func:`isles.algorithms.de.crossover.crossover_mask`):
        ``U = where(mask, bounded V, X)``. No host synchronisation. On CuPy, for rand/1 with
        bin or nec, one kernel builds the same ``U`` bit for bit
        (:class:`isles.algorithms.de.cuda_variation.DEVariation`), whatever the problem.
        """
        p, xp, g = self.params, ctx.xp, state["generation"]
        X = state["X"]
        variation = self.module_plan(ctx, "make_variation")
        if variation is not None:  # CuPy: the same U from one kernel (isles.algorithms.de.cuda)
            return variation.trial(X, g)
        n, dim = X.shape[1], X.shape[2]
        r = sample_indices(ctx.rng, g, n, N_RANDOM[p.strategy])
        best = None
        if p.strategy in ("best/1", "current-to-best/1"):
            best = argbest(state["f"], state["v"], axis=1)
        V = mutant_vectors(X, r, p.strategy, p.F, best)
        V = apply_bounds(p.bound_handling, V, ctx.lower, ctx.upper, ctx.rng, g)
        mask = crossover_mask(p.crossover, ctx.rng, g, n, dim, p.CR, X.dtype)
        return xp.where(mask, V, X)

    def step(self, ctx: Context, state: State) -> State:
        """One generation of every island (trial, evaluation, selection); no host sync.

        On CuPy with a supported configuration this is one fused kernel launch
        (:class:`isles.algorithms.de.cuda.FusedDE`); the plan is built (compiled and self-checked
        against the problem, a one-off synchronisation) at the first call.
        """
        host = self.host_plan(ctx) if ctx.xp is np else None
        if host is not None:  # NumPy: the host build, as run's (algorithm.host_kernel)
            return host(state, 1)
        plan = self.fused_plan(ctx)
        if plan is not None:
            return plan.step(state)
        U = self.trial(ctx, state)
        fu, vu, n_nan = ctx.evaluator(U)
        variation = self.module_plan(ctx, "make_variation")
        if variation is not None:  # CuPy: the same selection in two kernels (isles.algorithms.de.cuda)
            return variation.select(state, U, fu, vu, n_nan)
        return select(ctx.xp, state, U, fu, vu, n_nan)
