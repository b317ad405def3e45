"""The island-algorithm interface shared by every algorithm in isles.

An algorithm is a small class over an array module ``xp`` (NumPy or CuPy, same code, same
semantics), in the style of evosax / EvoX:

* its parameters are a frozen dataclass validated on construction (:func:`check_range`);
* its state is a plain ``dict`` of arrays (plus host ints), so that checkpoints are generic;
* it evolves a *batch* of ``I`` islands at once, every array carrying the island axis first
  (``X`` of shape ``(I, N, D)``), so that all islands of one GPU share the same kernel launches;
* ``init`` and ``step`` do no host synchronisation: no ``float()``, ``.get()`` or branching on
  device values, so many generations queue on the GPU without round trips.

Migration is generic over any population algorithm through :meth:`IslandAlgorithm.population`
(the individuals that can emigrate, a :class:`isles.algorithms.core.population.Population`: genome of any
dtype, fitness, violation and named extras) and :meth:`IslandAlgorithm.replace` (immigrants in).
Most algorithms only declare which state keys hold those leaves (``FIELDS`` and ``EXTRAS``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from isles.algorithms.core.population import Population
from isles.algorithms.core.random import CounterRNG
from isles.problems.constraints import Evaluator, argbest

State = dict  # name -> array (device) or host int


def check_range(
    field: str,
    value,
    lo: float | None = None,
    hi: float | None = None,
    *,
    integer: bool = False,
    lo_open: bool = False,
    hi_open: bool = False,
):
    """Validate one config value; raise a one-line ``ValueError`` naming the field and the range.

    Args:
        field: dotted config path, e.g. ``"algorithm.n_particles"``.
        value: the value.
        lo, hi: inclusive bounds (exclusive with ``lo_open``/``hi_open``); ``None`` = unbounded.
        integer: the value must be an integer.

    Raises:
        ValueError: ``"algorithm.n_particles=0: allowed values are integers >= 1"``.
    """
    kind = "integers" if integer else "numbers"
    parts = []
    if lo is not None:
        parts.append(f"{'>' if lo_open else '>='} {lo}")
    if hi is not None:
        parts.append(f"{'<' if hi_open else '<='} {hi}")
    allowed = f"allowed values are {kind} {' and '.join(parts)}".rstrip()
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if ok and integer and not float(value).is_integer():
        ok = False
    if ok and not np.isfinite(float(value)):
        ok = False
    if ok and lo is not None:
        ok = value > lo if lo_open else value >= lo
    if ok and hi is not None:
        ok = value < hi if hi_open else value <= hi
    if not ok:
        raise ValueError(f"{field}={value!r}: {allowed}")
    return int(value) if integer else float(value)


def check_bool(field: str, value) -> bool:
    """``value`` of the switch ``field`` (e.g. ``algorithm.fused``) as a ``bool``.

    Raises:
        ValueError: ``value`` is not a bool (a YAML ``yes`` string, 1, None), one line naming the
            field and the allowed values ``true|false``.
    """
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{field}={value!r}: allowed values are true|false")
    return bool(value)


def params_dict(params) -> dict:
    """The fields of a parameter dataclass as a plain dict (for logging)."""
    return {f.name: getattr(params, f.name) for f in fields(params)}


@dataclass
class Context:
    """What a batch of islands needs to run on one device.

    Attributes:
        xp: ``numpy`` or ``cupy``.
        dtype: float dtype of positions and fitness (``float64`` by default).
        evaluator: the problem with its constraint handling (:class:`isles.problems.constraints.Evaluator`).
        rng: counter-based generator with one stream per island of this batch.
        lower, upper: device arrays ``(D,)`` of the box bounds in ``dtype``.
        target: stop rule ``stop.f_target + stop.tol``, or ``None``: an island *reaches the
            target* when its best individual is feasible with ``f <= target``; the generation at
            which it first does is recorded in ``state["hit_generation"]`` (:meth:`IslandAlgorithm.track_target`).
        cuda_graph: on CuPy, capture array-code generations as a CUDA graph
            (:class:`isles.algorithms.core.plan.CapturedRun`; config ``cuda_graph``); ``False``
            issues them call by call (fully fused plans are unaffected).
    """

    xp: Any
    dtype: Any
    evaluator: Evaluator
    rng: CounterRNG
    target: float | None = None
    cuda_graph: bool = True

    def __post_init__(self):
        p = self.evaluator.problem
        self.lower = self.xp.asarray(p.lower, dtype=self.dtype)
        self.upper = self.xp.asarray(p.upper, dtype=self.dtype)

    @property
    def dim(self) -> int:
        """Problem dimension ``D``."""
        return self.evaluator.problem.dim

    @property
    def n_islands(self) -> int:
        """Number of islands ``I`` in this batch."""
        return self.rng.n_streams

    def generation_value(self, generation: int):
        """The generation counter for array expressions (e.g. an inertia schedule).

        NumPy: the host int. CuPy: a 0-d device array ``generation + rng.ctr`` in ``dtype``, so
        that a generation captured in a CUDA graph (:mod:`isles.algorithms.core.graph`) sees the right
        counter at every replay.
        """
        if self.xp is np:
            return generation
        return (self.rng.ctr[0] + np.uint64(generation)).astype(self.dtype)

    def generation_counter(self, generation: int):
        """The generation counter as int64 for array expressions: the host int on NumPy, a 0-d
        device array ``generation + rng.ctr`` on CuPy (right under CUDA-graph replay)."""
        if self.xp is np:
            return np.int64(generation)
        return (self.rng.ctr[0] + np.uint64(generation)).astype(np.int64)

    def uniform_in_box(self, generation: int, draw: int, n: int):
        """``(I, n, D)`` points uniform in the box (initialisation)."""
        u = self.rng.uniform(generation, draw, (n, self.dim), self.dtype)
        return self.lower + u * (self.upper - self.lower)


class IslandAlgorithm:
    """Base class of island algorithms: a batch of ``I`` islands evolved in lockstep.

    Subclasses set ``name`` and ``Params``, and implement :meth:`init`, :meth:`step` and
    :meth:`population_size`. ``state["generation"]`` (host int) counts generations,
    ``state["evals"]`` (host int) counts objective evaluations per island, and
    ``state["nan_evals"]`` (0-d device int) counts NaN evaluations of the whole batch.

    State layout, which checkpoints rely on to regroup islands over a different number of
    actors (:func:`isles.islands.control.checkpoint.regroup`): each field declares its island axis
    (:meth:`island_axes`). By default every array of one or more dimensions has the island axis
    first; 0-d arrays are totals of the batch; host ints are the same for every island. A family
    whose state differs says so in ``ISLAND_AXES`` (or overrides :meth:`island_axes`).

    The individuals migration sees are the state arrays named by ``FIELDS`` (``genome``, ``f``,
    ``v``) and ``EXTRAS`` (extra name -> state key, each ``(I, N, ...)``); :meth:`population`
    and :meth:`replace` work from these names, so an algorithm only overrides them to do more
    (PSO recomputes its global best after a replacement).
    """

    name = "algorithm"
    Params: type = object
    graph_safe = False  # True: step() can be captured as a CUDA graph (algorithms/core/graph.py)
    minmax = False  # True: the family solves min-max problems (two populations, isles.problems.minmax)
    evaluates_arrivals = False  # True: adopt() evaluates its arrivals (a mixed archipelago counts them)
    FIELDS: dict = {"genome": "X", "f": "f", "v": "v"}
    EXTRAS: dict = {}
    #: state fields whose island axis is not the default of :meth:`island_axes`: ``{key: axis}``,
    #: ``None`` for a field without one (e.g. ``{"T": 1}`` for a ``(D, I)`` field)
    ISLAND_AXES: dict = {}

    def __init__(self, params=None, **kwargs):
        self.params = params if params is not None else self.Params(**kwargs)

    def population_size(self) -> int:
        """Individuals per island ``N`` (what migration may select from)."""
        raise NotImplementedError

    def population_sizes(self) -> dict:
        """Individuals per island of each migration role (:meth:`populations`' keys), known before
        any state exists: ``{None: population_size()}`` for one population. Migration checks
        ``islands.n_migrants`` against each once (:func:`isles.islands.migration.policies.check_migrants`)."""
        return {None: int(self.population_size())}

    def initial_evaluations(self) -> int:
        """Evaluations of the objective and constraints per island by :meth:`init` (host int;
        what ``state["evals"]`` starts at). Default: :meth:`population_size`."""
        return int(self.population_size())

    def evaluations_per_generation(self) -> int:
        """Evaluations of the objective and constraints per island and generation (host int;
        what :meth:`step` adds to ``state["evals"]``). A family whose count is deterministic
        declares it, so that ``stop.max_evaluations`` becomes a generation limit before the run
        (:mod:`isles.islands.control.budget`).

        Raises:
            NotImplementedError: the algorithm does not declare it (a user's algorithm may).
        """
        raise NotImplementedError(f"{type(self).__name__} does not declare evaluations_per_generation()")

    def shares_budget(self) -> bool:
        """Whether this family divides the run's evaluation budget among its islands itself
        (L-SHADE, jSO and CMA-ES with ``algorithm.max_evaluations`` set: each island stops at its
        share). An async run's shared pool of generations (:mod:`isles.islands.control.pool`) would
        give an island generations past its share, so such a run keeps each island's. Default: no."""
        return False

    def check_problem(self, problem) -> None:
        """Refuse a problem this algorithm's parameters do not suit, before any island starts
        (:func:`isles.islands.config.build.check_pairing`). Default: every problem suits.

        Raises:
            ValueError: one line naming the parameter (``algorithm.<field>``) and the values that fit.
        """

    def init(self, ctx: Context) -> State:
        """Initial state of ``ctx.n_islands`` islands (evaluated)."""
        raise NotImplementedError

    def step(self, ctx: Context, state: State) -> State:
        """One generation of every island; no host synchronisation."""
        raise NotImplementedError

    def island_axes(self, state: State) -> dict:
        """The island axis of each field of ``state`` (host or device arrays): ``{key: axis}``, or
        ``None`` for a field without one, whose value is then either a total of the batch (a 0-d
        array, e.g. ``nan_evals``) or the same on every island (e.g. ``generation``, ``evals``).

        Default: axis 0 for every array of one or more dimensions, ``None`` for 0-d arrays and
        host values; :attr:`ISLAND_AXES` overrides it field by field. Checkpoints regroup states
        by it (:func:`isles.islands.control.checkpoint.regroup`).
        """
        axes = {k: 0 if getattr(v, "ndim", 0) >= 1 else None for k, v in state.items()}
        axes.update({k: a for k, a in self.ISLAND_AXES.items() if k in state})
        return axes

    def population(self, state: State) -> Population:
        """The individuals that migration sees, ``(I, N)``, extras included."""
        F = self.FIELDS
        return Population(
            state[F["genome"]], state[F["f"]], state[F["v"]], {name: state[key] for name, key in self.EXTRAS.items()}
        )

    def replace(self, ctx: Context, state: State, idx, immigrants: Population) -> State:
        """Write ``immigrants (I, k)`` (same leaves as :meth:`population`, see
        :meth:`Population.conform`) at positions ``idx (I, k)``, distinct within each island.
        Returns a new state; the old arrays are not modified."""
        new = self.population(state).put(idx, immigrants)
        s = dict(state)
        F = self.FIELDS
        s[F["genome"]], s[F["f"]], s[F["v"]] = new.genome, new.f, new.v
        for name, key in self.EXTRAS.items():
            s[key] = new.extras[name]
        return s

    def populations(self, state: State) -> dict:
        """The populations that migrate, by role: ``{None: population(state)}`` for an algorithm
        with one population. An algorithm with several (the co-evolutionary DE: ``x`` and ``y``)
        returns one :class:`Population` per role; migration moves individuals only between
        populations of the same role (:mod:`isles.islands.group`)."""
        return {None: self.population(state)}

    def replace_role(self, ctx: Context, state: State, role, idx, immigrants: Population) -> State:
        """:meth:`replace` for the population of ``role`` (``None``: the only one)."""
        return self.replace(ctx, state, idx, immigrants)

    def assess_immigrants(self, ctx: Context, state: State, role, immigrants: Population):
        """Hook before immigrants ``(I, k)`` of ``role`` compete with the residents.

        Default: fitness travels with the individual, nothing to do. An algorithm whose fitness
        is relative to something on the island (the co-evolutionary DE: to the opponents)
        re-evaluates them here and may refresh its residents. No host synchronisation.

        Returns:
            ``(state, immigrants)``.
        """
        return state, immigrants

    def adopt(self, ctx: Context, state: State, immigrants: Population, valid):
        """This family's arrival rule in a mixed archipelago (``groups``, docs/mixed_islands.md):
        individuals of any family, as they travel (``genome`` = the phenotype ``x (I, K, D)`` in
        ``ctx.dtype``, ``f``, ``v``, no extras), made individuals of this family, with every leaf of
        :meth:`population` (its extras initialised by the family's rule). ``valid (I, K)`` (host
        bool) marks the real immigrants (the rest is padding).

        Default (a family whose genome is ``x`` and whose extras, if any, start at zero, e.g. DE,
        CMA-ES, L-SHADE): ``x``, ``f``, ``v`` as they are, extras zero
        (:meth:`Population.conform`). No host synchronisation.

        Returns:
            ``(state, immigrants)``: the state (a family that evaluates its arrivals counts them in
            it) and the immigrants ``(I, K)`` with this family's leaves.
        """
        return state, immigrants.conform(self.population(state))

    def best(self, state: State) -> Population:
        """Best individual of each island under Deb's rules, a Population of shape ``(I, 1)``."""
        pop = self.population(state)
        return pop.take(argbest(pop.f, pop.v, axis=1)[:, None])

    def metrics(self, state: State) -> dict:
        """The algorithm's own per-island metrics after an epoch, ``{name: (I,) device array}`` (e.g.
        an adapted step size), which the runtime records in ``history.csv`` and MLflow as ``name``
        (the mean over the islands) and ``island_XX_name`` (:class:`isles.islands.results.EpochRecord`).
        Default: none. No host synchronisation (the runtime copies them to the host with the
        epoch's other values)."""
        return {}

    def phenotype(self, genome):
        """The problem's input for ``genome (..., *G)``: ``X (..., D)``; identity for real genomes
        (the GA decodes its bits, :mod:`isles.algorithms.core.encodings`)."""
        return genome

    def track_target(self, ctx: Context, state: State) -> State:
        """Record ``state["hit_generation"] (I,)`` (int64, -1 = not yet): the first generation at
        which each island's best is feasible with ``f <= ctx.target``. No-op without a target.
        No host synchronisation (graph-safe)."""
        if ctx.target is None:
            return state
        xp = ctx.xp
        b = self.best(state)
        hit = (b.v[:, 0] <= 0) & (b.f[:, 0] <= ctx.target)
        hg = state.get("hit_generation")
        if hg is None:
            hg = xp.full((ctx.n_islands,), -1, dtype=np.int64)
        s = dict(state)
        s["hit_generation"] = xp.where((hg < 0) & hit, ctx.generation_counter(state["generation"]), hg)
        return s

    def gpu_path(self, ctx: Context) -> str:
        """Which path runs a generation on ``ctx``, in words (the run summary and the MLflow tag
        ``gpu_path``): ``"numpy"`` or ``"host kernel"`` (:meth:`host_plan`); on CuPy ``"graph"`` (``graph_safe``: one captured generation
        replayed by the island runtime) or ``"array code"`` (call by call). Families with their
        own kernels say more."""
        if ctx.xp is np:
            return "numpy" if self.host_plan(ctx) is None else "host kernel"
        return "graph" if self.graph_safe else "array code"

    #: the module of the family's host build (its ``host_run(alg, ctx)``), imported lazily by
    #: :meth:`host_plan`; ``""``: none
    HOST_MODULE: str = ""

    def host_plan(self, ctx: Context):
        """On NumPy, the family's compiled CPU path where ``algorithm.host_kernel`` allows it
        (``HOST_MODULE.host_run(self, ctx)``, :func:`isles.algorithms.core.host_build.host_plan`):
        ``(state, n) -> state``, ``n`` generations with the target tracked as :meth:`run`'s; else
        ``None`` (the array code; always on CuPy, and for a subclass that defines its own
        ``step`` or ``run``: its generation is not the host build's)."""
        if not self.HOST_MODULE or ctx.xp is not np:
            return None
        for cls in type(self).__mro__:  # a subclass with its own step or run keeps them (no host build)
            if "HOST_MODULE" in cls.__dict__:
                break
            if "step" in cls.__dict__ or "run" in cls.__dict__:
                return None
        import importlib  # noqa: PLC0415

        return importlib.import_module(self.HOST_MODULE).host_run(self, ctx)

    def run(self, ctx: Context, state: State, n_generations: int) -> State:
        """``n_generations`` steps back to back on the device (no host round trips), tracking the
        target after each (:meth:`track_target`); on NumPy the family's host build instead where
        it applies (:meth:`host_plan`)."""
        if ctx.xp is np:
            host = self.host_plan(ctx)
            if host is not None:
                return host(state, int(n_generations))
        for _ in range(int(n_generations)):
            state = self.track_target(ctx, self.step(ctx, state))
        return state


class FusedAlgorithm(IslandAlgorithm):
    """An island algorithm with a fused CUDA path (DE, GA, EP): one compiled plan per context,
    built by ``make_plan(self, ctx)`` of the module named by ``FUSED_MODULE`` (imported lazily,
    so NumPy runs never import CuPy), cached, and never pickled (Ray ships the algorithm to its
    actors; each builds its own plan on its own device).

    Subclasses set ``FUSED_MODULE`` and have a ``fused`` parameter (``False``: always the array
    path).
    """

    FUSED_MODULE: str = ""

    def __init__(self, params=None, **kwargs):
        super().__init__(params, **kwargs)
        self._plans: dict = {}
        self._captures: dict = {}  # id(ctx) -> CapturedRun (algorithms/core/plan.py)

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_plans"] = {}  # compiled CUDA plans do not travel (pickling for Ray actors)
        d["_captures"] = {}  # nor captured CUDA graphs
        return d

    def run(self, ctx: Context, state: State, n_generations: int) -> State:
        """``n_generations`` generations on the device, the target tracked after each.

        On CuPy: the fully fused plan (:meth:`fused_plan`) where it applies; else the array-code
        ``step`` (with the family's fused variation kernels where it has them) captured once as a
        CUDA graph and replayed (:class:`isles.algorithms.core.plan.CapturedRun`); else, and on
        NumPy, :meth:`IslandAlgorithm.run` (the host build or ``step`` call by call). No host synchronisation
        (apart from the one-off build and capture)."""
        n = int(n_generations)
        plan = self.fused_plan(ctx)
        if plan is not None:
            return plan.run(state, n)
        if n > 0 and ctx.xp is not np:
            from isles.algorithms.core.plan import captured_run  # noqa: PLC0415  (no CuPy on NumPy runs)

            if "_captures" not in self.__dict__:
                self._captures = {}
            out = captured_run(self, ctx, state, n, self._captures)
            if out is not None:
                return out
        return super().run(ctx, state, n)

    def gpu_path(self, ctx: Context) -> str:
        """``"numpy"`` or ``"host kernel"`` (:meth:`host_plan`), ``"fused kernel"`` (:meth:`fused_plan` applies; a plan may say more in its
        ``gpu_path``, e.g. DE's ``"epoch kernel"``) or ``"captured array code"`` (the generation of
        array code captured as one CUDA graph, :meth:`run`)."""
        if ctx.xp is np:
            return "numpy" if self.host_plan(ctx) is None else "host kernel"
        plan = self.fused_plan(ctx)
        return getattr(plan, "gpu_path", "fused kernel") if plan is not None else "captured array code"

    def fused_plan(self, ctx: Context):
        """The fused CUDA plan for ``ctx``, or ``None`` (NumPy, ``fused=False``, or a
        configuration the module does not fuse: its ``unsupported_reason`` says why, logged at
        INFO level). Cached per context."""
        return self.module_plan(ctx, "make_plan")

    def module_plan(self, ctx: Context, maker: str):
        """``FUSED_MODULE.<maker>(self, ctx)`` (e.g. ``make_plan``; DE's ``make_variation``), built
        once per context and cached; ``None`` on NumPy or with ``fused=False``."""
        if ctx.xp is np or not self.params.fused:
            return None
        key = (maker, id(ctx))
        hit = self._plans.get(key)
        if hit is not None and hit[0] is ctx:
            return hit[1]
        import importlib  # noqa: PLC0415

        plan = getattr(importlib.import_module(self.FUSED_MODULE), maker)(self, ctx)
        self._plans[key] = (ctx, plan)
        return plan
