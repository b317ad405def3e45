"""The plan base of the fused families (DE, FEP, GA): compiled CUDA modules, and generations of
array code captured as one CUDA graph where no fully fused plan applies.

A family has up to three ways to run a generation on CuPy, best first:

1. its **fully fused plan** (``algorithms/<family>/cuda.py``, ``FusedAlgorithm.fused_plan``): the
   problem's ``cuda_objective`` compiled into the family's kernels;
2. **captured array code** (:class:`CapturedRun`): the family's ``step`` (its own fused variation
   kernels where it has them, e.g. DE's trial population, then the problem's ``objective`` and
   ``constraints`` as array code through ``ctx.evaluator``, then selection) followed by
   ``track_target``, captured once as a CUDA graph by
   :class:`isles.algorithms.core.graph.GraphStepper` and replayed: one launch per generation
   instead of one per array operation, and the target tracked after every generation;
3. the same ``step`` issued call by call: where the capture fails.

**Capture safety.** A generation can be captured when it does no host synchronisation (``float``,
``.get()``, ``.item()``, ``if`` on a device value, boolean-mask indexing or ``nonzero``, whose
result shape depends on the data), and when its Python code has no effect that a replay would
have to repeat (counters, lists, host-side random generators, ``cupy.random``: the graph
replays the kernels of the one captured call, Python does not run again). CuPy refuses a host
synchronisation during capture; the capture is then abandoned and the run goes on uncaptured
with one ``RuntimeWarning`` naming the problem, the method and the reason. A replay that differs
from the same generation run directly is caught the same way (``GraphStepper(check=True)``).
A problem can opt out with ``capture_safe = False`` (e.g. an objective that calls a simulator
on the host).
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
from isles.algorithms.core.cuda_lib import source
from isles.algorithms.core.epoch_layout import EpochPaths
from isles.algorithms.core.graph import GraphStepper

log = logging.getLogger(__name__)

_MODULES: dict = {}


def module(cp, source: str, options: tuple = ()):
    """The compiled ``cupy.RawModule`` of ``source`` on the current device (compiled once per
    device, source and options; a loaded module belongs to one device).

    Raises:
        cupy.cuda.compiler.CompileException: the source does not compile.
    """
    key = (cp.cuda.Device().id, source, tuple(options))
    mod = _MODULES.get(key)
    if mod is None:
        mod = cp.RawModule(code=source, options=tuple(options))
        _MODULES[key] = mod
    return mod


def elementwise(cp, in_params: str, out_params: str, body: str, name: str, preamble: str = ""):
    """The ``cupy.ElementwiseKernel`` of this signature, body, name and preamble (built once per
    process; CuPy compiles it once per device and dtypes at its first call)."""
    key = ("elementwise", in_params, out_params, body, name, preamble)
    k = _MODULES.get(key)
    if k is None:
        k = _MODULES[key] = cp.ElementwiseKernel(in_params, out_params, body, name, preamble=preamble)
    return k


def function(cp, src: str, name: str, options: tuple = ()):
    """Kernel ``name`` of :func:`module` ``(cp, src, options)`` (looked up once per device, source,
    options and name: a launcher that asks at every launch pays no driver call)."""
    key = (cp.cuda.Device().id, src, tuple(options), name)
    fn = _MODULES.get(key)
    if fn is None:
        fn = _MODULES[key] = module(cp, src, options).get_function(name)
    return fn


def require_supported(what: str, reason: str | None):
    """CuPy, for a plan whose support check gave ``reason`` (``None``: supported).

    Raises:
        ValueError: ``"<what> unavailable: <reason>"``.
    """
    if reason is not None:
        raise ValueError(f"{what} unavailable: {reason}")
    import cupy  # noqa: PLC0415

    return cupy


def verified_plan(family: str, fallback: str, reason: str | None, build, rtol: dict, describe):
    """The fused plan of a family, self-checked, or ``None`` (the family's ``make_plan``).

    ``reason`` not ``None`` (:func:`unsupported_reason` of the family): ``None`` with an INFO
    line. Else ``plan = build()`` (compiles, cached by source) and ``plan.verify()`` (the largest
    relative error of the kernel's objective against the problem's, one host synchronisation):
    above ``rtol[plan.dtype]``, ``None`` with a ``RuntimeWarning`` ("fused <family> disabled: ...
    using the <fallback> path"), else the plan, logged with ``describe(plan)``; a plan with an
    epoch kernel (:class:`~isles.algorithms.core.epoch_layout.EpochPaths`) has then timed both of
    its paths and kept the faster (``plan.choose()``).
    """
    if reason is not None:
        log.info("%s: %s path (%s)", family, fallback, reason)
        return None
    plan = build()
    err = plan.verify()
    tol = rtol[plan.dtype]
    if not err <= tol:
        name = getattr(plan.problem, "name", type(plan.problem).__name__)
        warnings.warn(
            f"fused {family} disabled: the cuda_objective of {name} differs from the problem's objective by "
            f"{err:.3g} (relative, tolerance {tol:g}); using the {fallback} path",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    log.info("%s: fused CUDA path (%s)", family, describe(plan))
    if isinstance(plan, EpochPaths):  # an epoch kernel beside the per-generation kernels: keep the faster
        plan.choose()
    return plan


def kernels(cp, src: str, names) -> dict:
    """``{name: kernel}`` of the compiled module of ``src`` (:func:`module`)."""
    mod = module(cp, src)
    return {n: mod.get_function(n) for n in names}


def counter_kernels(cp) -> tuple:
    """``(set, add)``: the kernels ``isles_set_i64(p, v)`` (``*p = v``) and ``isles_add_i64(p, v)``
    (``*p += v``) of ``counter.cu``, which set and advance the device generation counter of every
    family's captured CUDA graph (one module per device, :func:`module`)."""
    mod = module(cp, source("counter.cu"))
    return mod.get_function("isles_set_i64"), mod.get_function("isles_add_i64")


class TargetTracker:
    """Exact per-generation target tracking inside a fused plan's CUDA graph: one tiny kernel
    after each generation records ``hit_generation`` as
    :meth:`isles.algorithms.core.base.IslandAlgorithm.track_target` does (no host sync).

    Args:
        cp: CuPy; ctx: the plan's context (``ctx.target`` not ``None``); dtype: the plan's dtype.

    Attributes:
        hit: ``(I,)`` int64 device array, -1 = not yet (fixed: a captured graph writes it).
    """

    def __init__(self, cp, ctx, dtype):
        self.cp, self.dtype = cp, np.dtype(dtype)
        src = source(f"#define IS_F32 {int(self.dtype == np.float32)}\n", "track.cu")
        self._k = module(cp, src).get_function("isles_track_hit")
        self.target = self.dtype.type(ctx.target)
        self._ctr = ctx.rng.ctr
        self.hit = cp.full((ctx.n_islands,), -1, dtype=np.int64)
        self._no_idx = cp.zeros((1,), dtype=np.int32)

    def load(self, state: dict) -> None:
        """Start from ``state["hit_generation"]`` (or -1 everywhere without it)."""
        hg = state.get("hit_generation")
        if hg is None:
            self.hit.fill(-1)
        else:
            self.cp.copyto(self.hit, self.cp.asarray(hg, dtype=np.int64))

    def launch(self, f, v, n: int, stride: int, gen_dev, gen_off: int, idx=None) -> None:
        """Track the generation whose draws used ``gen_off + gen_dev + ctr``: rows ``(I, stride)``
        of ``f, v`` (the first ``n`` of each, or the positions ``idx (I, n)`` int32)."""
        use = idx is not None
        self._k(
            (self.hit.shape[0],),
            (128,),
            (
                f,
                v,
                idx if use else self._no_idx,
                np.int32(use),
                np.int32(n),
                np.int32(stride),
                self.hit,
                self.target,
                gen_dev,
                np.int64(gen_off),
                self._ctr,
            ),
        )


def _host_ints(state: dict) -> dict:
    return {k: v for k, v in state.items() if not hasattr(v, "shape")}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


class CapturedRun:
    """Generations of ``algorithm.step`` + ``algorithm.track_target`` on ``ctx`` replayed as one
    captured CUDA graph (module docstring), or ``None`` from :meth:`run` where that is not possible.

    Args:
        algorithm: an island algorithm whose ``step`` does no host synchronisation.
        ctx: a CuPy :class:`isles.algorithms.core.base.Context`.

    Attributes:
        reason: why the generations run uncaptured (after a failed capture), else ``None``.
    """

    def __init__(self, algorithm, ctx):
        self.algorithm, self.ctx = algorithm, ctx
        self.stepper: GraphStepper | None = None
        problem = ctx.evaluator.problem
        self.reason = None if getattr(problem, "capture_safe", True) else "the problem sets capture_safe = False"

    def _fits(self, state: dict) -> bool:
        """Whether the captured graph serves ``state``: same arrays (names, shapes, dtypes) and
        the host counters where the replays left them."""
        st = self.stepper
        if st is None:
            return False
        bufs = st.buffers
        arrays = {k: v for k, v in state.items() if hasattr(v, "shape")}
        if set(arrays) != set(bufs):
            return False
        if any(a.shape != bufs[k].shape or a.dtype != bufs[k].dtype for k, a in arrays.items()):
            return False
        return self._align(state)

    def _align(self, state: dict) -> bool:
        """Point the replays at ``state``'s generation: a state stepped outside the graph since
        (``step`` calls, same increments) is served by the same graph with the replay offset
        ``(generation - captured generation) / per-replay increment``; ``False`` if the host
        counters do not fit any offset (capture again)."""
        st = self.stepper
        want = _host_ints(state)
        d = st.delta.get("generation", 0)
        if d > 0 and isinstance(state.get("generation"), (int, np.integer)):
            r, rem = divmod(int(state["generation"]) - int(st.host0["generation"]), d)
            if rem == 0 and r >= 0:
                saved, st.replays = st.replays, r
                if _host_ints(st.state) == want:
                    return True
                st.replays = saved
        return _host_ints(st.state) == want

    def _capture(self, state: dict) -> bool:
        alg, ctx = self.algorithm, self.ctx
        try:
            self.stepper = GraphStepper(lambda s: alg.track_target(ctx, alg.step(ctx, s)), state, [ctx.rng], check=True)
        except Exception as exc:  # noqa: BLE001 - any failure: run uncaptured, say why once
            self.stepper = None
            ctx.rng.ctr[...] = 0
            self.reason = _first_line(exc)
            warnings.warn(
                f"problem {ctx.evaluator.problem.name}: {alg.name} runs its generations uncaptured "
                f"(one launch per array operation; not a CUDA graph): {self.reason}",
                RuntimeWarning,
                stacklevel=4,
            )
            return False
        log.info("%s on %s: array-code generations captured as a CUDA graph", alg.name, ctx.evaluator.problem.name)
        return True

    def run(self, state: dict, n_generations: int) -> dict | None:
        """``n_generations`` replays from ``state`` (captured at the first call, and again when the
        state no longer fits the graph); ``None`` when the generations cannot be captured (the
        caller runs them uncaptured). No host synchronisation after the capture.

        Returns:
            A new state of fresh arrays (the graph's buffers stay private), with ``hit_generation``
            when ``ctx.target`` is set.
        """
        if self.reason is not None:
            return None
        alg, ctx = self.algorithm, self.ctx
        if ctx.target is not None and "hit_generation" not in state:
            state = alg.track_target(ctx, state)
        if not self._fits(state):
            if not self._capture(state):
                return None
        else:
            self.stepper.load(state)
        self.stepper.run(int(n_generations))
        out = self.stepper.state
        return {k: (v.copy() if hasattr(v, "shape") else v) for k, v in out.items()}


def captured_run(algorithm, ctx, state: dict, n_generations: int, cache: dict) -> dict | None:
    """:meth:`CapturedRun.run` of the :class:`CapturedRun` for ``ctx`` kept in ``cache`` (keyed by
    the context; built at the first call). ``None`` on NumPy, with ``ctx.cuda_graph`` off (config
    ``cuda_graph=false``), or where the capture failed."""
    if ctx.xp is np or not getattr(ctx, "cuda_graph", True):
        return None
    hit = cache.get(id(ctx))
    if hit is None or hit.ctx is not ctx:
        hit = cache[id(ctx)] = CapturedRun(algorithm, ctx)
    return hit.run(state, n_generations)
