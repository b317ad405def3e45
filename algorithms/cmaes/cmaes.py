"""CMA-ES (Hansen's tutorial, arXiv:1604.00772, 2016) with IPOP/BIPOP restarts, many instances batched.

``I`` independent CMA-ES instances (one per island) evolve in lockstep as one batch, the island
axis first: means ``m (I, D)``, step sizes ``sigma (I,)``, covariances ``C (I, D, D)``, and their
eigendecompositions ``C = B diag(d^2) B^T`` from the array library's ``eigh`` (NumPy/LAPACK or
CuPy/cuSOLVER: no linear algebra of our own). A generation does no host synchronisation.

**Generations and blocks (static shapes, exact budgets).** Restarts change an island's population
size ``lambda`` (IPOP doubles it), per island and from device values; isles' budgets need a
fixed number of evaluations per island and generation (:mod:`isles.islands.control.budget`). So an isles
*generation* samples and evaluates one **block** of ``lambda_start`` points per island, and a
CMA-ES *iteration* with ``lambda = k lambda_start`` spans ``k`` generations: its blocks are all
drawn from the same distribution ``N(m, sigma^2 C)`` (the distribution only changes when an
iteration completes), collected in buffers of the largest size a run reaches,
``lambda_cap = lambda_start 2^max_doublings``, and the update (eqs. 41-47) is applied at the
generation that completes the iteration. Every evaluation is a real sample (none is wasted on
padding), ``evaluations_per_generation() = lambda_start`` exactly, and the arrays never change
shape. Under ``stop.max_evaluations`` (``algorithm.max_evaluations``, shared by ``n_islands``) the
generation that would pass an island's share evaluates only the samples left (:meth:`CMAES.last_block`):
the budget is exact. The cost: on CuPy the update's arithmetic runs on ``lambda_cap`` rows at every generation
(masked where no iteration completes), ``O(lambda_cap D^2)`` per island (NumPy, where a host
branch costs nothing, skips a generation that completes no iteration and ranks only up to the
largest current ``lambda``); memory ``O(lambda_cap D + D^2)`` per island. A restart past ``max_doublings`` keeps ``lambda_cap``. BIPOP's small populations are
rounded down to a multiple of ``lambda_start``.

**One iteration** (tutorial, "Algorithm summary", p. 29-31): ``z_k ~ N(0, I)``, ``y_k = B D z_k``
(eq. 38-39), ``x_k = m + sigma y_k`` (eq. 40); ranking under Deb's feasibility rules
(lexicographic ``(v, f)``: :func:`isles.problems.constraints.better`) instead of ``f`` alone;
``<y>_w = sum_{i<=mu} w_i y_{i:lambda}`` (eq. 41), ``m += c_m sigma <y>_w`` with ``c_m = 1``
(eq. 42); ``p_sigma`` (eq. 43), ``sigma`` (eq. 44; the exponent capped at 1 as in pycma, which
only matters when ``||p_sigma||`` explodes), ``h_sigma`` (p. 28), ``p_c`` (eq. 45), ``w°``
(eq. 46) and the active rank-one + rank-mu update of ``C`` (eq. 47) with the negative weights of
:mod:`isles.algorithms.cmaes.strategy`. The eigendecomposition is refreshed every
``max(1, floor(1 / (10 n (c_1 + c_mu))))`` generations (the tutorial's lazy update, p. 37;
``eigen_interval`` overrides it); between refreshes ``B`` and ``d`` (and ``C^{-1/2} = B D^{-1}
B^T`` in eq. 43) are those of the last refresh.

**Bounds** (:func:`isles.algorithms.de.de.apply_bounds`, ``reflect`` by default; the tutorial's
appendix B.3, "repair and penalise"): a sample outside the box is evaluated at its repaired point
``x'`` (what the population, the best and the emigrants hold), ranked with its normalised distance
outside the box ``sum_i max(0, l_i - x_i, x_i - u_i) / (u_i - l_i)`` added to its violation
(Deb's rules then put it behind every sample inside the box with the same violation, nearer ones
first), and the update uses its own, unrepaired step. (Updating with the repaired step instead,
clipped as an injected one, made the covariance collapse along the gradient near a corner
optimum: ``tests/test_cmaes.py``.)

**Migration** (:meth:`CMAES.population`, :meth:`CMAES.replace`). The individuals migration sees are
``1 + lambda_start`` rows per island: row 0 the island's best so far, rows ``1..`` the latest
block (the last generation's samples); emigrants are thus the best of the latest generation and
the best so far. An immigrant that lands (the replacement policy decides, e.g. ``fair_replace``)
updates the best so far and is **injected** (Hansen 2011): the next generation's block evaluates
it in place of one of its samples, its step ``y = (x - m) / sigma`` clipped to the Mahalanobis
norm ``||C^{-1/2} y|| <= c_y = sqrt(n) + 2n / (n + 2)`` (Hansen 2011, "Injecting external
solutions into CMA-ES", arXiv:1110.4181, eqs. (3)-(4)), so that it steers the mean,
the evolution paths and the covariance only as much as a good sample of the current distribution
may, however far away it lies (the point itself is evaluated as it came; only its step is
clipped). At most ``max(1, lambda_start // 2)`` immigrants (the best) are
injected per migration; they cost no extra evaluation (a block has ``lambda_start`` rows either
way), so the budget stays exact.

**Restarts** (:mod:`isles.algorithms.cmaes.restarts`): IPOP (Auger & Hansen 2005) and BIPOP
(Hansen 2009), per island, when one of the termination criteria fires.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from isles.algorithms.cmaes import restarts
from isles.algorithms.cmaes.draws import DRAW_INIT_MEAN, DRAW_Z
from isles.algorithms.cmaes.params import RESTARTS, CMAESParams  # noqa: F401  (RESTARTS: re-exported)
from isles.algorithms.cmaes.strategy import box_scale_of, clip_bound, expected_norm, strategy_parameters
from isles.algorithms.core.base import Context, IslandAlgorithm, State
from isles.algorithms.core.population import Population
from isles.algorithms.de.de import apply_bounds
from isles.problems.constraints import argbest, better


def rank_order(f, v, xp):
    """Indices ``(I, N)`` sorting each row best first under Deb's rules (lexicographic ``(v, f)``,
    stable: ties keep their index order)."""
    by_f = xp.argsort(f, axis=-1, kind="stable")
    v_sorted = xp.take_along_axis(v, by_f, axis=-1)
    by_v = xp.argsort(v_sorted, axis=-1, kind="stable")
    return xp.take_along_axis(by_f, by_v, axis=-1)


def clip_steps(xp, y, B, d, c_y):
    """Hansen 2011's clipping (arXiv:1110.4181, eq. (3)): ``y (I, k, D)`` scaled by
    ``min(1, c_y / ||C^{-1/2} y||)`` with ``C^{-1/2} y = B D^{-1} B^T y`` (``B (I, D, D)``,
    ``d (I, D)``). Returns ``(y, z)`` with ``z = D^{-1} B^T y`` (the step in the eigenbasis,
    ``||z|| = ||C^{-1/2} y||``)."""
    z = xp.matmul(y, B) / d[:, None, :]
    norm = xp.sqrt((z * z).sum(axis=-1, keepdims=True))
    with np.errstate(divide="ignore", invalid="ignore"):
        a = xp.where(norm > c_y, c_y / norm, 1.0).astype(y.dtype)
    return y * a, z * a


def under_capture(xp) -> bool:
    """Whether ``xp``'s current stream is capturing a CUDA graph (``False`` on NumPy; ``True``
    where this CuPy cannot say, the safe answer for :meth:`CMAES.eigen_due`). A host query, no
    device synchronisation."""
    if xp is np:
        return False
    try:
        return bool(xp.cuda.get_current_stream().is_capturing())
    except AttributeError:  # a CuPy without Stream.is_capturing
        return True


def canonical_signs(xp, B):
    """Eigenvectors ``B (I, D, D)`` (columns) with their signs fixed: each column's entry of largest
    magnitude made positive. ``eigh`` returns each eigenvector up to its sign, and LAPACK (NumPy)
    and cuSOLVER (CuPy) may choose differently; ``y = B D z`` would then differ between the two
    for the same ``z``."""
    top = xp.argmax(xp.abs(B), axis=1)[:, None, :]  # (I, 1, D): the row of each column's largest entry
    sign = xp.where(xp.take_along_axis(B, top, axis=1) < 0, -1.0, 1.0).astype(B.dtype)
    return B * sign


class CMAES(IslandAlgorithm):
    """``I`` CMA-ES instances with IPOP/BIPOP restarts, one per island, in lockstep (module docstring).

    State (dict), island axis first: ``X (I, P, D)``, ``f, v (I, P)`` the individuals migration
    sees (``P = 1 + lambda_start``: the best so far, then the latest block); ``mean (I, D)``,
    ``sigma (I,)``, ``C, B (I, D, D)``, ``d (I, D)`` (square roots of C's eigenvalues),
    ``p_sigma, p_c (I, D)``; the iteration buffers ``Y (I, lambda_cap, D)`` (steps),
    ``z2 (I, lambda_cap)`` (``||C^{-1/2} y||^2``), ``fb, vb (I, lambda_cap)``; per island int64
    ``lam`` (current ``lambda``), ``blk`` (blocks of the iteration done), ``it`` (iterations since
    the last restart), ``runs`` (restarts so far), ``n_large`` (IPOP doublings), ``regime`` (BIPOP:
    0 large, 1 small), ``evals_large, evals_small`` (BIPOP's budgets); ``sigma_start (I,)`` (the
    run's ``sigma_0``), ``hist (I, H)`` (best value of the last ``H`` iterations); the pending
    injections ``inj_x (I, J, D)``, ``inj_on (I, J)``; host ints ``generation``, ``evals``, and
    ``nan_evals`` (0-d). Generation ``g`` draws at counter ``g``.
    """

    name = "cmaes"
    Params = CMAESParams

    # -- sizes ------------------------------------------------------------------------------------
    @property
    def lam0(self) -> int:
        """``lambda_start``, the block evaluated per generation."""
        return self.params.lam_start

    @property
    def n_inject(self) -> int:
        """``J = max(1, lambda_start // 2)``: immigrants injected per migration at most."""
        return max(1, self.lam0 // 2)

    def population_size(self) -> int:
        """``1 + lambda_start``: the best so far and the latest block."""
        return 1 + self.lam0

    def shares_budget(self) -> bool:
        """Whether ``algorithm.max_evaluations`` is set: each island stops at its share
        (:meth:`isles.algorithms.core.base.IslandAlgorithm.shares_budget`)."""
        return self.params.max_evaluations is not None

    def initial_evaluations(self) -> int:
        """1: the initial mean is evaluated (the first best so far)."""
        return 1

    def evaluations_per_generation(self) -> int:
        """``lambda_start``: one block per generation, whatever the island's current ``lambda``."""
        return self.lam0

    def check_problem(self, problem) -> None:
        """``algorithm.dim`` must be the problem's dimension.

        Raises:
            ValueError: one line naming ``algorithm.dim`` and the value that fits.
        """
        if self.params.dim is not None and int(problem.dim) != self.params.dim:
            raise ValueError(
                f"algorithm.dim={self.params.dim}: allowed value is the problem's dimension {int(problem.dim)} "
                f"(the config's default is ${{problem.dim}})"
            )

    @functools.lru_cache(maxsize=8)  # noqa: B019  (a few dimensions per algorithm object)
    def eigen_interval(self, n: int) -> int:
        """Generations between eigendecompositions in dimension ``n`` (``eigen_interval``, or the
        tutorial's lazy rule ``max(1, floor(1 / (10 n (c_1 + c_mu))))`` at ``lambda_start``)."""
        if self.params.eigen_interval is not None:
            return int(self.params.eigen_interval)
        sp = strategy_parameters(np, n, np.array([self.lam0]), self.lam0)
        return max(1, int(math.floor(1.0 / (10.0 * n * float(sp["c1"][0] + sp["c_mu"][0])))))

    def eigen_due(self, ctx: Context, g: int):
        """Whether generation ``g`` ends with an eigendecomposition (every :meth:`eigen_interval`
        generations): ``True``/``False`` from the host counter; while the current CuPy stream is
        being captured as a CUDA graph (``islands.span_graph``), whose replays run later
        generations than the one captured, a 0-d device bool from the replay-aware counter
        (:meth:`isles.algorithms.core.base.Context.generation_counter`): the decomposition then
        runs every generation and is applied where due, so that replays equal the plain epochs."""
        e = self.eigen_interval(ctx.dim)
        if e == 1:
            return True
        if not under_capture(ctx.xp):
            return (g + 1) % e == 0
        return (ctx.generation_counter(g) + 1) % e == 0

    def history_length(self, n: int) -> int:
        """``H = 10 + ceil(30 n / lambda_start)``: TolFun's longest window in dimension ``n``."""
        return 10 + int(math.ceil(30.0 * n / self.lam0))

    def metrics(self, state: State) -> dict:
        """The adapted parameters per island, ``(I,)`` arrays on the state's device, which the runtime
        records every epoch in ``history.csv`` and MLflow (the mean over the islands as ``sigma``,
        ..., and ``island_XX_sigma``, ...): ``sigma``, ``pop_size`` (the current ``lambda``),
        ``restarts`` (restarts so far), ``regime`` (BIPOP: 0 large, 1 small) and ``condition`` (of
        ``C``, ``(max d / min d)^2`` at the last eigendecomposition). No host synchronisation."""
        d = state["d"]
        return {
            "sigma": state["sigma"],
            "pop_size": state["lam"],
            "restarts": state["runs"],
            "regime": state["regime"],
            "condition": (d.max(axis=1) / d.min(axis=1)) ** 2,
        }

    def adapted_parameters(self, state: State) -> dict:
        """:meth:`metrics` as host arrays (synchronises: a host copy)."""
        return {k: v.get() if hasattr(v, "get") else v for k, v in self.metrics(state).items()}

    # -- the distribution at a (re)start ------------------------------------------------------------
    def box_scale(self, ctx: Context):
        """``(s (D,), sigma_0)``: ``s = w / rms(w)`` with ``w = upper - lower`` (1 where the box is
        flat or unbounded), and ``sigma_0 = sigma0 rms(w)`` (:class:`CMAESParams`)."""
        return box_scale_of(ctx.xp, ctx.lower, ctx.upper, self.params.sigma0)

    def init(self, ctx: Context) -> State:
        """The first mean uniform in the box (evaluated: 1 evaluation per island), ``sigma_0``,
        ``C_0 = diag(s^2)`` (:meth:`box_scale`), ``p_sigma = p_c = 0``, ``lambda = lambda_start``."""
        xp, dt, n, I = ctx.xp, ctx.dtype, ctx.dim, ctx.n_islands
        lam0, cap, J, H = self.lam0, self.params.lam_cap, self.n_inject, self.history_length(n)
        m = ctx.uniform_in_box(0, DRAW_INIT_MEAN, 1)  # (I, 1, D)
        f0, v0, n_nan = ctx.evaluator(m)
        s, sigma0 = self.box_scale(ctx)
        eye = xp.broadcast_to(xp.eye(n, dtype=dt), (I, n, n))
        inf = xp.full((I, lam0), xp.inf, dtype=dt)
        zi = xp.zeros(I, dtype=np.int64)
        return {
            "X": xp.concatenate([m, xp.broadcast_to(m, (I, lam0, n))], axis=1),
            "f": xp.concatenate([f0, inf], axis=1),
            "v": xp.concatenate([v0, inf], axis=1),
            "mean": m[:, 0].copy(),
            "sigma": xp.zeros(I, dtype=dt) + sigma0,  # sigma0 is a 0-d array (CuPy: no fill from it)
            "sigma_start": xp.zeros(I, dtype=dt) + sigma0,
            "C": eye * (s * s)[None, None, :],
            "B": eye.copy(),
            "d": xp.broadcast_to(s, (I, n)).copy(),
            "p_sigma": xp.zeros((I, n), dtype=dt),
            "p_c": xp.zeros((I, n), dtype=dt),
            "Y": xp.zeros((I, cap, n), dtype=dt),
            "z2": xp.zeros((I, cap), dtype=dt),
            "fb": xp.full((I, cap), xp.inf, dtype=dt),
            "vb": xp.full((I, cap), xp.inf, dtype=dt),
            "lam": xp.full(I, lam0, dtype=np.int64),
            "blk": zi.copy(),
            "it": zi.copy(),
            "runs": zi.copy(),
            "n_large": zi.copy(),
            "regime": zi.copy(),
            "evals_large": zi.copy(),
            "evals_small": zi.copy(),
            "hist": xp.full((I, H), xp.nan, dtype=dt),
            "inj_x": xp.zeros((I, J, n), dtype=dt),
            "inj_on": xp.zeros((I, J), dtype=bool),
            "generation": 0,
            "evals": 1,
            "nan_evals": xp.asarray(n_nan, dtype=np.int64),
        }

    # -- one generation -------------------------------------------------------------------------
    def sample_block(self, ctx: Context, state: State):
        """The block of generation ``g``: ``(x' (I, lambda_start, D)`` the points evaluated, ``y``
        their steps, ``z2 = ||C^{-1/2} y||^2``, ``out (I, lambda_start)`` the distance outside the
        box)``. Samples ``x = m + sigma B D z`` (eqs. 38-40, ``z`` from ``rng.normal(g, DRAW_Z,
        (lambda_start, D))``); pending immigrants replace the first rows, with Hansen 2011's
        clipped step (:func:`clip_steps`); ``x' `` is ``x`` repaired into the box (``apply_bounds``),
        while the step stays the sample's (the tutorial's B.3: repair for the evaluation, rank
        with the distance ``out = sum_i max(0, l_i - x_i, x_i - u_i) / (u_i - l_i)`` added to the
        violation, update with the unrepaired step)."""
        xp, dt, g = ctx.xp, ctx.dtype, state["generation"]
        m, sigma, B, d = state["mean"], state["sigma"], state["B"], state["d"]
        J = self.n_inject
        z = ctx.rng.normal(g, DRAW_Z, (self.lam0, ctx.dim), dt)
        y = xp.matmul(z * d[:, None, :], xp.swapaxes(B, 1, 2))
        on = state["inj_on"][..., None]
        inject = xp is not np or bool(on.any())  # NumPy: no pending injection, nothing to splice
        if inject:
            yi, zi = clip_steps(xp, (state["inj_x"] - m[:, None, :]) / sigma[:, None, None], B, d, clip_bound(ctx.dim))
            y = xp.concatenate([xp.where(on, yi, y[:, :J]), y[:, J:]], axis=1)
            z = xp.concatenate([xp.where(on, zi, z[:, :J]), z[:, J:]], axis=1)
        x = m[:, None, :] + sigma[:, None, None] * y
        if inject:  # an injected point is evaluated as it came (the clipped step only enters the update)
            x = xp.concatenate([xp.where(on, state["inj_x"], x[:, :J]), x[:, J:]], axis=1)
        xb = apply_bounds(self.params.bound_handling, x, ctx.lower, ctx.upper, ctx.rng, g)
        w = ctx.upper - ctx.lower
        with np.errstate(divide="ignore", invalid="ignore"):
            gap = xp.maximum(xp.maximum(ctx.lower - x, x - ctx.upper), 0.0) / xp.where(w > 0, w, 1.0)
        return xb, y, (z * z).sum(axis=-1), gap.sum(axis=-1)

    def step(self, ctx: Context, state: State) -> State:
        """One generation of every island: a block sampled and evaluated; where it completes an
        iteration, the CMA update (:meth:`update`) and the restart rules
        (:func:`isles.algorithms.cmaes.restarts.restart`); the eigendecomposition when due. Where
        fewer than ``lambda_start`` evaluations are left of the island's budget, :meth:`last_block`
        instead. No host synchronisation.

        Raises:
            RuntimeError: under a CUDA-graph capture, where the budget ends inside a block (the
                capture's replays would evaluate whole blocks; the runtime then runs plain epochs).
        """
        xp, g, lam0 = ctx.xp, state["generation"], self.lam0
        if self.params.budget is not None:
            if under_capture(xp) and (self.params.budget - 1) % lam0:
                raise RuntimeError(
                    "cmaes: a run whose budget ends inside a block has a shorter last generation, which a "
                    "replayed capture would not have"
                )
            left = self.evaluations_left(state["evals"])
            if left < lam0:
                return self.last_block(ctx, state, left)
        I = ctx.n_islands
        xb, y, z2, out = self.sample_block(ctx, state)
        f, v, n_nan = ctx.evaluator(xb)
        s = dict(state)
        ii = xp.arange(I)[:, None]
        rows = state["blk"][:, None] * lam0 + xp.arange(lam0)[None, :]
        for key, val in (("Y", y), ("z2", z2), ("fb", f), ("vb", v + out)):
            buf = state[key].copy()
            buf[ii, rows] = val
            s[key] = buf
        # best so far and the latest block (what migration sees)
        b = argbest(f, v, axis=1)
        r = ii[:, 0]
        bx, bf, bv = xb[r, b], f[r, b], v[r, b]
        keep = ~better(bf, bv, state["f"][:, 0], state["v"][:, 0])
        s["X"] = xp.concatenate([xp.where(keep[:, None], state["X"][:, 0], bx)[:, None], xb], axis=1)
        s["f"] = xp.concatenate([xp.where(keep, state["f"][:, 0], bf)[:, None], f], axis=1)
        s["v"] = xp.concatenate([xp.where(keep, state["v"][:, 0], bv)[:, None], v], axis=1)
        s["inj_on"] = xp.zeros_like(state["inj_on"])
        s["blk"] = state["blk"] + 1
        done = s["blk"] * lam0 >= state["lam"]
        # NumPy: a generation that completes no iteration skips the masked update (it would change
        # nothing); CuPy runs it masked, without looking at the device
        if xp is not np or done.any():
            before = s
            s, f_range = self.update(ctx, s, done)
            s = restarts.restart(self, ctx, s, done, f_range, before)
        due = self.eigen_due(ctx, g)
        if due is not False:
            C = s["C"]
            evals, B = xp.linalg.eigh((C + xp.swapaxes(C, 1, 2)) * 0.5)
            B, d = canonical_signs(xp, B), xp.sqrt(xp.maximum(evals, xp.finfo(C.dtype).tiny))
            if due is not True:  # a device predicate (a captured generation): apply where due
                B, d = xp.where(due, B, s["B"]), xp.where(due, d, s["d"])
            s["B"], s["d"] = B, d
        s["generation"] = g + 1
        s["evals"] = state["evals"] + lam0
        s["nan_evals"] = state["nan_evals"] + n_nan
        return s

    def evaluations_left(self, evals: int) -> int:
        """Samples the next generation evaluates after ``evals`` per island: ``lambda_start``, or
        what is left of the island's budget (:attr:`CMAESParams.budget`; 0 once it is spent)."""
        b = self.params.budget
        return self.lam0 if b is None else max(0, min(self.lam0, b - int(evals)))

    def last_block(self, ctx: Context, state: State, left: int) -> State:
        """The generation that ends an island's budget inside a block: only the block's first
        ``left`` samples (``0 <= left < lambda_start``) are evaluated; they update the best so far and
        the migration view's first rows (the others keep the previous block's points). The
        distribution, the iteration's buffers and the pending injections stay as they are: an
        iteration is updated from whole blocks only, so a state resumed with a larger budget goes
        on as if the partial block had not been drawn. Returns a new state; no host synchronisation."""
        s = dict(state)
        if left > 0:
            xp, I = ctx.xp, ctx.n_islands
            xb = self.sample_block(ctx, state)[0][:, :left]
            f, v, n_nan = ctx.evaluator(xb)
            r = xp.arange(I)
            b = argbest(f, v, axis=1)
            keep = ~better(f[r, b], v[r, b], state["f"][:, 0], state["v"][:, 0])
            s["X"] = xp.concatenate(
                [xp.where(keep[:, None], state["X"][:, 0], xb[r, b])[:, None], xb, state["X"][:, 1 + left :]], axis=1
            )
            for key, a in (("f", f), ("v", v)):
                head = xp.where(keep, state[key][:, 0], a[r, b])[:, None]
                s[key] = xp.concatenate([head, a, state[key][:, 1 + left :]], axis=1)
            s["nan_evals"] = state["nan_evals"] + n_nan
        s["generation"] = state["generation"] + 1
        s["evals"] = state["evals"] + left
        return s

    def update(self, ctx: Context, s: State, done) -> State:
        """The CMA update of the islands where ``done (I,)`` (an iteration's blocks are all in the
        buffers), eqs. (41)-(47) of the tutorial (module docstring); the others keep their state.
        Also TolFun's history (best value of the iteration). No host synchronisation: on CuPy all
        ``lambda_cap`` rows are ranked (masked); NumPy ranks only the rows up to the largest
        current ``lambda`` (a host value there, free), the rows past it having zero weight.

        Returns:
            ``(state, f_range (I,))``: the new state and the range of the iteration's objective
            values (TolFun, :func:`isles.algorithms.cmaes.restarts.restart`).
        """
        xp, n, dt = ctx.xp, ctx.dim, ctx.dtype
        I, cap = s["fb"].shape
        lam = s["lam"]
        if xp is np:
            cap = int(lam.max())
        active = xp.arange(cap)[None, :] < lam[:, None]
        fr = xp.where(active, s["fb"][:, :cap], xp.inf)
        vr = xp.where(active, s["vb"][:, :cap], xp.inf)
        order = rank_order(fr, vr, xp)
        ii = xp.arange(I)[:, None]
        Ys, z2 = s["Y"][ii, order], s["z2"][ii, order]
        sp = strategy_parameters(xp, n, lam, cap, dt)
        w, mu_eff = sp["w"], sp["mu_eff"]
        cs, ds, cc, c1, cmu = sp["c_sigma"], sp["d_sigma"], sp["c_c"], sp["c1"], sp["c_mu"]
        m, sigma, B, d = s["mean"], s["sigma"], s["B"], s["d"]
        yw = xp.matmul(xp.maximum(w, 0.0)[:, None, :], Ys)[:, 0]  # eq. (41)
        m_new = m + sigma[:, None] * yw  # eq. (42), c_m = 1
        cinv_yw = xp.matmul(B, (xp.matmul(yw[:, None, :], B)[:, 0] / d)[:, :, None])[:, :, 0]  # B D^-1 B^T <y>_w
        ps = (1.0 - cs)[:, None] * s["p_sigma"] + xp.sqrt(cs * (2.0 - cs) * mu_eff)[:, None] * cinv_yw  # eq. (43)
        it1 = (s["it"] + 1).astype(dt)
        chi = expected_norm(n)
        ps_norm = xp.sqrt((ps * ps).sum(axis=1))
        hs = (ps_norm / xp.sqrt(1.0 - (1.0 - cs) ** (2.0 * it1)) < (1.4 + 2.0 / (n + 1.0)) * chi).astype(dt)
        pc = (1.0 - cc)[:, None] * s["p_c"] + (hs * xp.sqrt(cc * (2.0 - cc) * mu_eff))[:, None] * yw  # eq. (45)
        with np.errstate(divide="ignore", invalid="ignore"):
            w_o = xp.where(w >= 0, w, w * n / xp.where(z2 > 0, z2, 1.0))  # eq. (46)
        delta_h = (1.0 - hs) * cc * (2.0 - cc)
        C = s["C"]
        rank_mu = xp.matmul(xp.swapaxes(Ys * w_o[:, :, None], 1, 2), Ys)  # sum_i w°_i y_i y_i^T
        C_new = (
            (1.0 + c1 * delta_h - c1 - cmu * sp["sum_w"])[:, None, None] * C
            + c1[:, None, None] * pc[:, :, None] * pc[:, None, :]
            + cmu[:, None, None] * rank_mu
        )  # eq. (47)
        sigma_new = sigma * xp.exp(xp.minimum((cs / ds) * (ps_norm / chi - 1.0), 1.0))  # eq. (44)
        hist = xp.concatenate([s["hist"][:, 1:], xp.take_along_axis(fr, order[:, :1], axis=1)], axis=1)
        out = dict(s)
        dm = done[:, None]
        out["mean"] = xp.where(dm, m_new, m)
        out["p_sigma"] = xp.where(dm, ps, s["p_sigma"])
        out["p_c"] = xp.where(dm, pc, s["p_c"])
        out["C"] = xp.where(done[:, None, None], C_new, C)
        out["sigma"] = xp.where(done, sigma_new, sigma)
        out["hist"] = xp.where(dm, hist, s["hist"])
        out["it"] = xp.where(done, s["it"] + 1, s["it"])
        out["blk"] = xp.where(done, 0, s["blk"])
        # the range of the iteration's values, for TolFun (restarts.py)
        return out, xp.where(active, s["fb"][:, :cap], -xp.inf).max(axis=1) - fr.min(axis=1)

    # -- migration ------------------------------------------------------------------------------
    def replace(self, ctx: Context, state: State, idx, immigrants: Population) -> State:
        """Immigrants ``(I, k)`` written at ``idx`` of the migration view (:meth:`population`), and
        injected (Hansen 2011) into the next block: the best ``min(k, J)`` immigrants that differ
        from the resident they replace (a policy that rejects an immigrant writes the resident
        back) become the pending injections; row 0 (the best so far) is refreshed. No host
        synchronisation."""
        xp = ctx.xp
        old = self.population(state)
        new = old.put(idx, immigrants)
        I = idx.shape[0]
        r = xp.arange(I)
        s = dict(state)
        # the best so far: of the old one (even if a policy wrote over row 0) and the new rows
        for key, a, b in (("X", old.genome, new.genome), ("f", old.f, new.f), ("v", old.v, new.v)):
            s[key] = xp.concatenate([a[:, :1], b], axis=1)
        best = argbest(s["f"], s["v"], axis=1)
        for key in ("X", "f", "v"):
            s[key] = xp.concatenate([s[key][r, best][:, None], s[key][:, 2:]], axis=1)
        imm = immigrants.conform(old)
        changed = (imm.genome != old.take(idx).genome).any(axis=-1)
        order = rank_order(xp.where(changed, imm.f, xp.inf), xp.where(changed, imm.v, xp.inf), xp)
        J = self.n_inject
        take = order[:, :J]
        x_in = imm.genome[r[:, None], take]
        on = xp.take_along_axis(changed, take, axis=1)
        if take.shape[1] < J:  # fewer immigrants than injection slots
            pad = J - take.shape[1]
            x_in = xp.concatenate([x_in, xp.zeros((I, pad, x_in.shape[2]), dtype=x_in.dtype)], axis=1)
            on = xp.concatenate([on, xp.zeros((I, pad), dtype=bool)], axis=1)
        s["inj_x"], s["inj_on"] = x_in.astype(state["inj_x"].dtype), on
        return s
