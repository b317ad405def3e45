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


def kernels(cp, source: str, names) -> dict:
    """``{name: kernel}`` of the compiled module of ``source`` (:func:`module`)."""
    mod = module(cp, source)
    return {n: mod.get_function(n) for n in names}


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
        return _host_ints(state) == _host_ints(st.state)

    def _capture(self, state: dict) -> bool:
        alg, ctx = self.algorithm, self.ctx
        try:
            self.stepper = GraphStepper(lambda s: alg.track_target(ctx, alg.step(ctx, s)), state,
                                        [ctx.rng], check=True)
        except Exception as exc:  # noqa: BLE001 - any failure: run uncaptured, say why once
            self.stepper = None
            ctx.rng.ctr[...] = 0
            self.reason = _first_line(exc)
            warnings.warn(
                f"problem {ctx.evaluator.problem.name}: {alg.name} runs its generations uncaptured "
                f"(one launch per array operation; not a CUDA graph): {self.reason}",
                RuntimeWarning, stacklevel=4)
            return False
        log.info("%s on %s: array-code generations captured as a CUDA graph", alg.name,
                 ctx.evaluator.problem.name)
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
    the context; built at the first call). ``None`` on NumPy, or where the capture failed."""
    if ctx.xp is np:
        return None
    hit = cache.get(id(ctx))
    if hit is None or hit.ctx is not ctx:
        hit = cache[id(ctx)] = CapturedRun(algorithm, ctx)
    return hit.run(state, n_generations)
