"""The SM-resident epoch kernel of L-SHADE and jSO: whole L-SHADE generations of every island in
one launch (``algorithms/core/cuda/lshade_epoch.cu``).

On CuPy the array code of :mod:`isles.algorithms.lshade.lshade` issues dozens of small kernels per
L-SHADE generation (draws, sorts, gathers, the memory update, the archive) and synchronises with
nothing, but each launch costs microseconds, far more than the arithmetic of an island of
``N = 100``, ``D = 50``. Here one thread block per island keeps its population (current and trial
rows), ``f, v``, the memories and the archive's bookkeeping in shared memory and runs ``k``
L-SHADE generations between block barriers; the archive's rows stay in global memory (L2), read
through a logical -> physical row map, so a generation copies only the parents that enter it.

**Same generations as the NumPy twin.** The kernel runs :meth:`LSHADE._start_generation` and
:meth:`LSHADE._end_generation` step for step (the CUDA file's comment lists them): the same
counter-based draws (draw ids of :mod:`isles.algorithms.lshade.draws` at L-SHADE generation
``lgen``), the same separately rounded operations in the same order (no FMA contraction), the same
stable rankings (counted, not sorted: each row's place among ``(v, f, index)``), the Lehmer sums in
NumPy's pairwise order, and the archive's stable sort of its random keys (each candidate's place
counted). So, from the same state and the same objective values, every decision (slots, pbest,
r1, r2, j_rand, crossover, selection, the archive's members and order, ``k``, LPSR) and every value
is the twin's bit for bit, where two things agree that the kernel does not control:

* the math library: ``tan``, ``atan`` (F), ``log1p``, ``cos`` (CR) are CUDA's on the GPU, the C
  library's in the host build and NumPy's in the twin; they may differ in the last bit (as FEP's
  Cauchy variates, :mod:`isles.algorithms.ep.cuda`);
* the objective: the kernel folds the problem's ``cuda_objective`` in ``EVL`` virtual lanes (lane
  ``m`` takes coordinates ``m, m + EVL, ...``, merged by an xor butterfly), the same order on the
  host build and on the GPU, but not NumPy's pairwise sum of ``objective``. An objective exact in
  any order (a maximum, tests/test_lshade_epoch.py) gives the twin's values bit for bit.

The host build (:class:`HostEpochLSHADE`, the same text as C with ``-DISLES_HOST_EMU``, one thread
per island) runs the kernel's arithmetic and fold on the CPU: the CI's check of the kernel and the
CPU path of NumPy runs (below; :mod:`isles.algorithms.lshade.host_epoch`); the GPU kernel equals it bit for bit up to the math library
(tests/test_lshade_gpu.py). Where one thread does the work, it places the archive's members and
ranks the population by sorting (stable: the same places the block's counts give, in
``O(m log m)``, not ``O(m^2)``), computes F's Cauchy CDF at 0 once per memory slot, and writes the
kernel's separately rounded operations as plain C (FLT_EVAL_METHOD 0, no contraction: the same
roundings); all under ``#ifdef ISLES_HOST_EMU``, the GPU's text unchanged.

**Runtime generations.** The island runtime's generation is ``E`` evaluations
(:meth:`LSHADE.step`), which does not end on L-SHADE generations. :func:`run` finishes a pending
L-SHADE generation with the array code, runs the whole generations that fit the remaining
evaluations in one launch (their sizes are host arithmetic, eq. 10), and starts the last partial
one with the array code again: the state after ``n`` runtime generations is :meth:`LSHADE.run`'s.

**Who uses it.** On NumPy, :meth:`LSHADE.run` runs the host build (:func:`isles.algorithms.lshade.host_epoch.host_plan`) with
``algorithm.host_kernel=auto`` (default) or ``true`` where it applies (below, and a C compiler):
about 25x the NumPy array code's speed at D = 10 (docs/cec2014.md, "CPU speed"); for a problem
without a ``cuda_objective`` (a user's array code) with the problem's own objective called back
(``EXT_OBJ``, :mod:`isles.algorithms.lshade.host_epoch`), about 7x (docs/cpu_speed.md).
:meth:`LSHADE.run` on CuPy with ``algorithm.epoch=true`` (default), where
:func:`unsupported_reason` gives no reason: a real problem with a usable ``cuda_objective``,
float32/float64,
and the island's population fitting one block's shared memory (two populations: float64
``N_init D`` up to about 13,000 on an H100; beyond, the trial rows go to a global scratch, L2-resident,
and one population up to about 25,000 fits). Otherwise the array code runs.
"""

from __future__ import annotations

import logging
import weakref

import numpy as np
from isles.algorithms.core.cuda_lib import defines as c_defines
from isles.algorithms.core.cuda_lib import draw_ids, source
from isles.algorithms.core.epoch_layout import SMEM_OPTIN
from isles.algorithms.lshade.draws import DRAW_ARCHIVE, DRAW_CROSS, DRAW_INDIVIDUAL

log = logging.getLogger(__name__)

#: ``hit_eval``'s "not reached" (the kernel's ``LS_NO_HIT``)
NO_HIT = 1 << 62

DRAWS = draw_ids(DRAW_INDIVIDUAL=DRAW_INDIVIDUAL, DRAW_CROSS=DRAW_CROSS, DRAW_ARCHIVE=DRAW_ARCHIVE)


def virtual_lanes(dim: int) -> int:
    """``EVL``, the objective's virtual lanes per row: the largest power of two ``<= 32`` with at
    least 6 coordinates per lane (1 for ``D < 12``). It fixes the fold order, so it depends on
    ``D`` only (host build = GPU); on the GPU each lane is a thread (``ETPI = EVL``)."""
    e = 1
    while e < 32 and 2 * e * 6 <= dim:
        e *= 2
    return e


def smem_bytes(dtype, dim: int, cap: int, acap: int, H: int, xn_global: bool = False) -> int:
    """Dynamic shared memory of one block (the carving of ``lshade_epoch.cu``): the archive keys
    (float64, ``N_init + |A|max``), two populations ``(N_init, D)`` (one with ``xn_global``: the
    trial rows in global memory) and seven ``N_init`` vectors in ``dtype``, the memories, and int
    bookkeeping."""
    it = np.dtype(dtype).itemsize
    pops = 1 if xn_global else 2
    return 8 * (cap + acap) + it * (pops * cap * dim + 7 * cap + 2 * H + 5) + 4 * (10 * cap + 3 * acap + 4)


def trials_in_global(dtype, dim: int, cap: int, acap: int, H: int, optin: int = SMEM_OPTIN) -> bool | None:
    """Where the trial rows live: ``False`` (shared memory: both populations fit ``optin`` bytes),
    ``True`` (global memory: only the current population fits), ``None`` (neither fits)."""
    if smem_bytes(dtype, dim, cap, acap, H) <= optin:
        return False
    if smem_bytes(dtype, dim, cap, acap, H, True) <= optin:
        return True
    return None


def _objective(ctx):
    """``(source, reason, penalty)`` of the context's problem (DE's rule, :mod:`isles.algorithms.de.cuda_source`)."""
    from isles.algorithms.de.cuda_source import _objective_of  # noqa: PLC0415

    src, reason, macros = _objective_of(ctx)
    ev = ctx.evaluator
    penalty = float(ev.penalty) if getattr(ev, "handling", "feasibility") == "penalty" else None
    if macros is None or not macros["OBJ_HAS_V"]:
        penalty = None
    return src, reason, penalty


def unsupported_reason(alg, ctx, device: bool = True, optin: int = SMEM_OPTIN, external: bool = False) -> str | None:
    """Why the epoch kernel cannot run ``alg`` on ``ctx``, or ``None``.

    Args:
        alg: an :class:`isles.algorithms.lshade.lshade.LSHADE` (or jSO).
        ctx: the :class:`isles.algorithms.core.base.Context`.
        device: ``False``: do not ask whether ``ctx`` is on CuPy (the host build).
        optin: shared memory one block may have (bytes).
        external: the host build with the problem's own objective (``EXT_OBJ``,
            :mod:`isles.algorithms.lshade.host_epoch`): a ``cuda_objective`` is not needed.
    """
    if device and getattr(ctx.xp, "__name__", "") != "cupy":
        return "the array module is not CuPy"
    if not getattr(alg.params, "epoch", True):
        return "epoch=False"
    dtype = np.dtype(ctx.dtype)
    if dtype not in (np.float32, np.float64):
        return f"dtype {dtype} (epoch kernel: float32|float64)"
    if external:
        if getattr(ctx.evaluator.problem, "genome", "real") != "real":
            return "a bit problem"
    else:
        _, reason, _ = _objective(ctx)
        if reason is not None:
            return reason
    p = alg.params
    if trials_in_global(dtype, ctx.dim, p.n_init, p.archive_capacity, p.H, optin) is None:
        need = smem_bytes(dtype, ctx.dim, p.n_init, p.archive_capacity, p.H, True)
        return f"N_init x D = {p.n_init} x {ctx.dim}: {need} bytes of shared memory, a block may have {optin}"
    return None


#: the objective part of an ``EXT_OBJ`` host build: no fused terms (P2 calls the problem's own
#: objective); the fold's merge is compiled, never called
EXTERNAL_OBJECTIVE = r"""#define OBJ_NACC 1
#define OBJ_HAS_V 0
#define OBJ_NEXT 0
ISLES_DEV void obj_merge(T* acc, const T* o) { (void)acc; (void)o; }
"""


def kernel_source(alg, ctx, eblock: int, etpi: int, xn_global: bool = False, external: bool = False) -> str:
    """The kernel's source: configuration defines, draw ids, ``objective.cuh``, the problem's
    ``cuda_objective`` and ``lshade_epoch.cu``; ``xn_global``: the trial rows in global memory;
    ``external``: the host build's ``EXT_OBJ`` (the problem's own objective through a callback,
    :mod:`isles.algorithms.lshade.host_epoch`; the trial rows in global memory)."""
    p = alg.params
    if external:
        src, penalty, xn_global = EXTERNAL_OBJECTIVE, None, True
    else:
        src, _, penalty = _objective(ctx)
    d = {
        "IS_F32": int(np.dtype(ctx.dtype) == np.float32),
        "DIM": int(ctx.dim),
        "CAP": p.n_init,
        "ACAP": p.archive_capacity,
        "HMEM": p.H,
        "NMIN": p.N_min,
        "IS_JSO": int(alg.name == "jso"),  # jSO's rules (isles.algorithms.lshade.jso), by name: no import cycle
        "EVL": virtual_lanes(ctx.dim),
        "EBLOCK": int(eblock),
        "ETPI": int(etpi),
        "XN_GLOBAL": int(bool(xn_global)),
    }
    if external:
        d["EXT_OBJ"] = 1
    if penalty is not None:
        d["PENALTY"] = repr(penalty)
    return source(
        c_defines(d) + DRAWS, "objective.cuh", "// ---- the problem's fused objective ----\n" + src, "lshade_epoch.cu"
    )


def _generations(params, n: int, nfe: int, budget: int, k_max: int) -> tuple[int, int, int]:
    """Whole L-SHADE generations from population ``n`` after ``nfe`` evaluations, at most ``k_max``
    and at most ``budget`` evaluations: ``(k, evaluations used, population after them)``. Eq. 10 as
    :func:`isles.algorithms.lshade.params.population_at` computes it, with its three parameters read
    once (a run at D = 10 has about 1,100 generations: the properties' cost showed in its profile)."""
    n0, nmin, m = params.n_init, params.N_min, params.max_nfe
    a, b, m2 = 2 * n0 * m + m, 2 * (n0 - nmin), 2 * m
    n, nfe = int(n), int(nfe)
    k = used = 0
    while k < k_max and used + n <= budget:
        used += n
        n = min(n, max(nmin, (a - b * (nfe + used)) // m2))
        k += 1
    return k, used, n


def whole_generations(params, n: int, nfe: int, budget: int) -> tuple[int, int, int]:
    """The whole L-SHADE generations that fit ``budget`` evaluations per island from population
    ``n`` after ``nfe`` evaluations: ``(k, evaluations used, population after them)`` (eq. 10,
    :func:`isles.algorithms.lshade.params.population_at`)."""
    return _generations(params, n, nfe, budget, 1 << 62)


def schedule(params, n: int, nfe: int, k: int) -> tuple[int, int]:
    """``(evaluations, population after them)`` of ``k`` L-SHADE generations from population ``n``
    after ``nfe`` evaluations per island (eq. 10)."""
    _, used, n = _generations(params, n, nfe, 1 << 62, int(k))
    return used, n


class _Epoch:
    """What the GPU launcher and the host build share: the state's arrays in and out."""

    def __init__(self, alg, ctx, xn_global: bool = False):
        self.alg, self.ctx, self.xp = alg, ctx, ctx.xp
        p = alg.params
        self.dtype, self.D = np.dtype(ctx.dtype), int(ctx.dim)
        self.cap, self.acap, self.H = p.n_init, p.archive_capacity, p.H
        self.xn_global = bool(xn_global)
        self.smem = smem_bytes(self.dtype, self.D, self.cap, self.acap, self.H, self.xn_global)

    def run(self, state: dict, k: int, nfe0: int, hit_eval=None) -> dict:
        """``k`` whole L-SHADE generations of every island from ``state`` (between L-SHADE
        generations: ``cursor == 0``), ``nfe0`` evaluations per island so far, in one launch; no
        host synchronisation. Returns a new state; the runtime counters ``generation``/``evals``
        are the caller's (:func:`run`).

        Args:
            hit_eval: with ``ctx.target``, an int64 array ``(I,)`` lowered in place to the first
                evaluation count (1-based, per island) of a feasible trial with ``f <= target``.

        Raises:
            ValueError: ``state`` has a pending generation, or arrays of another configuration's
                shapes (``N_init``, ``D``, the archive, ``H``).
        """
        if state["cursor"] != 0:
            raise ValueError("lshade epoch kernel: the state has a pending L-SHADE generation (cursor != 0)")
        want = {"X": (self.cap, self.D), "A": (self.acap, self.D), "M_F": (self.H,), "M_CR": (self.H,)}
        for key, shape in want.items():
            if tuple(state[key].shape[1:]) != shape:
                raise ValueError(
                    f"lshade epoch kernel: state[{key!r}] has shape {state[key].shape}, the kernel's is (I, *{shape})"
                )
        xp, dt = self.xp, self.dtype
        c = xp.ascontiguousarray
        ins = [c(xp.asarray(state[key], dtype=dt)) for key in ("X", "f", "v", "A")]
        ins.append(c(xp.asarray(state["a_n"], dtype=np.int64)))
        ins += [c(xp.asarray(state[key], dtype=dt)) for key in ("M_F", "M_CR")]
        ins.append(c(xp.asarray(state["k"], dtype=np.int64)))
        outs = [xp.empty_like(a) for a in ins]
        work = [xp.empty_like(ins[3]), xp.empty_like(ins[0]) if self.xn_global else xp.empty(1, dtype=dt)]
        nan = xp.zeros(1, dtype=np.uint64)
        n0 = int(state["n_active"])
        _, n_end = schedule(self.alg.params, n0, nfe0, k)
        tgt = self.ctx.target if hit_eval is not None else None
        hit = hit_eval if hit_eval is not None else xp.zeros(1, dtype=np.int64)
        self._launch(ins, outs, work, nan, int(state["lgen"]), n0, int(nfe0), int(k), hit, tgt)
        s = dict(state)
        for key, a in zip(("X", "f", "v", "A", "a_n", "M_F", "M_CR", "k"), outs, strict=False):
            s[key] = a
        s["lgen"] = state["lgen"] + int(k)
        s["n_active"] = n_end
        s["nan_evals"] = state["nan_evals"] + nan[0].astype(np.int64)
        return s

    def _scalars(self, lgen0, n0, nfe0, k):
        p = self.alg.params
        return lgen0, n0, nfe0, k, int(p.max_nfe), float(p.p), float(p.r_arc)


def default_block(cap: int, etpi: int) -> int:
    """``EBLOCK``: a thread group of ``ETPI`` per row for every row of ``N_init`` in one pass,
    rounded up to whole warps, at most 1024 threads."""
    return int(min(1024, max(32, -(-cap * etpi // 32) * 32)))


class EpochLSHADE(_Epoch):
    """Launcher of ``lshade_epoch`` (one block per island) on CuPy.

    Args:
        alg, ctx: as :class:`HostEpochLSHADE`, ``ctx`` on CuPy.
        eblock: threads per block (a multiple of 32); default :func:`default_block`.
        xn_global: the trial rows in global memory; default :func:`trials_in_global` (only where
            two populations do not fit).

    Raises:
        ValueError: :func:`unsupported_reason` gives a reason on this device.
    """

    gpu_path = "epoch kernel"

    def __init__(self, alg, ctx, eblock: int | None = None, xn_global: bool | None = None):
        from isles.algorithms.core.epoch_layout import device_limits  # noqa: PLC0415
        from isles.algorithms.core.plan import module  # noqa: PLC0415

        cp = ctx.xp
        _, _, optin = device_limits(cp)
        why = unsupported_reason(alg, ctx, optin=optin)
        if why is not None:
            raise ValueError(f"lshade epoch kernel: {why}")
        p = alg.params
        if xn_global is None:
            xn_global = trials_in_global(ctx.dtype, ctx.dim, p.n_init, p.archive_capacity, p.H, optin)
        super().__init__(alg, ctx, xn_global)
        self.etpi = virtual_lanes(self.D)
        self.block = int(eblock) if eblock is not None else default_block(self.cap, self.etpi)
        if self.block % 32 or not 32 <= self.block <= 1024:
            raise ValueError(
                f"lshade epoch kernel: eblock={self.block}: allowed values are multiples of 32 in [32, 1024]"
            )
        src = kernel_source(alg, ctx, self.block, self.etpi, self.xn_global)
        self.kernel = module(cp, src).get_function("lshade_epoch")
        self.kernel.max_dynamic_shared_size_bytes = self.smem

    def _launch(self, ins, outs, work, nan, lgen0, n0, nfe0, k, hit, target):
        ctx = self.ctx
        lgen0, n0, nfe0, k, max_nfe, p, r_arc = self._scalars(lgen0, n0, nfe0, k)
        self.kernel(
            (ins[0].shape[0],),
            (self.block,),
            (
                *ins,
                *outs,
                *work,
                ctx.rng.keys,
                ctx.lower,
                ctx.upper,
                ctx.rng.ctr,
                np.int64(lgen0),
                np.int32(n0),
                np.int64(nfe0),
                np.int32(k),
                np.int64(max_nfe),
                np.float64(p),
                np.float64(r_arc),
                nan,
                hit,
                self.dtype.type(0 if target is None else target),
                np.int32(target is not None),
            ),
            shared_mem=self.smem,
        )


_PLANS: dict = {}


def plan(alg, ctx):
    """The :class:`EpochLSHADE` of ``(alg, ctx)``, built once (``None`` where
    :func:`unsupported_reason` says why, logged at INFO level)."""
    key = (id(alg), id(ctx))
    hit = _PLANS.get(key)
    if hit is not None and hit[0]() is alg and hit[1]() is ctx:
        return hit[2]
    why = unsupported_reason(alg, ctx)
    built = None
    if why is None:
        built = EpochLSHADE(alg, ctx)
    else:
        log.info("lshade: array code on the GPU (%s)", why)
    _PLANS[key] = (weakref.ref(alg), weakref.ref(ctx), built)
    return built


def run(alg, ctx, state: dict, n_generations: int, kernel=None) -> dict | None:
    """``n_generations`` runtime generations (``E`` evaluations each, :meth:`LSHADE.step`) with
    the whole L-SHADE generations in one launch of the epoch kernel (module docstring), and with
    ``ctx.target`` the ``hit_generation`` that tracking after every step records (the best of an
    island reaches the target at the step that first evaluates a feasible point ``<= target``: the
    population never loses its best within a run); ``None``
    where the kernel does not apply (the caller runs the array code), or while the current CuPy
    stream is being captured (a launch's work depends on host counters).

    Args:
        kernel: the launcher (default :func:`plan`'s; NumPy runs pass a
            :class:`isles.algorithms.lshade.host_epoch.HostEpochLSHADE`).
    """
    if ctx.xp is not np and ctx.xp.cuda.get_current_stream().is_capturing():
        return None  # the step refuses a capture (LSHADE.step): the caller's array code raises
    kernel = plan(alg, ctx) if kernel is None else kernel
    if kernel is None:
        return None
    xp, E = ctx.xp, alg.params.E
    s, todo, evals = dict(state), int(n_generations) * E, int(state["evals"])
    if alg.params.budget is not None:  # the exact budget: what LSHADE.step's evaluations_left would spend
        todo = min(todo, max(0, alg.params.budget - evals))
    spent = todo
    first = None  # with a target: the first evaluation count of a feasible trial <= target
    if ctx.target is not None and todo > 0:
        b = alg.best(state)
        hit0 = (b.v[:, 0] <= 0) & (b.f[:, 0] <= ctx.target)
        first = xp.full((ctx.n_islands,), NO_HIT, dtype=np.int64)
    while todo > 0:
        if s["cursor"] == 0:
            k, used, _ = whole_generations(alg.params, s["n_active"], evals, todo)
            if k > 0:
                s = kernel.run(s, k, evals, first)
                todo, evals = todo - used, evals + used
                continue
            s = alg._start_generation(ctx, s, evals)
        c, n = s["cursor"], s["n_active"]
        m = min(todo, n - c)
        fu, vu, n_nan = ctx.evaluator(s["U"][:, c : c + m])
        if first is not None:
            ok = (vu <= 0) & (fu <= ctx.target)
            at = evals + 1 + xp.argmax(ok, axis=1).astype(np.int64)
            first = xp.minimum(first, xp.where(ok.any(axis=1), at, NO_HIT))
        s["fu"] = xp.concatenate([s["fu"], fu], axis=1)
        s["vu"] = xp.concatenate([s["vu"], vu], axis=1)
        s["nan_evals"] = s["nan_evals"] + n_nan
        s["cursor"], todo, evals = c + m, todo - m, evals + m
        if s["cursor"] == n:
            s = alg._end_generation(ctx, s, evals)
    s["generation"] = state["generation"] + int(n_generations)
    s["evals"] = state["evals"] + spent
    if first is not None:  # IslandAlgorithm.run's per-step tracking: the step whose evaluations hit
        step = xp.where(hit0, 1, (first - int(state["evals"]) + E - 1) // E)
        hg = state.get("hit_generation")
        if hg is None:
            hg = xp.full((ctx.n_islands,), -1, dtype=np.int64)
        found = hit0 | (first < NO_HIT)
        s["hit_generation"] = xp.where((hg < 0) & found, ctx.generation_counter(state["generation"]) + step, hg)
    return s
