"""A budget in evaluations (``stop.max_evaluations``) as a generation limit, computed before the run.

An **evaluation** is one evaluation of the problem's objective and constraints at one point x
(one row of the population handed to ``Problem.evaluate``), in every family; the run's
``evaluations`` sums them over all islands and the loop's plug-ins.
A min-max problem's pair payoffs ``L(x, y)`` are counted apart (``payoff_evaluations``).

Every family in isles evaluates a fixed number of points per island and generation
(:meth:`isles.algorithms.core.base.IslandAlgorithm.evaluations_per_generation`) after a fixed
number at initialisation (:meth:`~isles.algorithms.core.base.IslandAlgorithm.initial_evaluations`),
so the run's count after ``g`` generations is::

    n_islands * (init + g * per_generation) + g * plugin_per_generation

(in a mixed run, ``groups``, the sums over the groups of each family's counts times its islands,
:meth:`isles.islands.mixed.Mixed.counts`: one pool of evaluations that every group's generations
spend together), and the first generation at which it reaches the budget is known before the run starts. The
runtime then simply runs that many generations (``generations`` is its upper bound), which makes
the budget exact on every path alike: in process, on several Ray actors (sync and async), in the
GPU epoch kernels and in captured span graphs. The one exception is an algorithm that
re-evaluates its immigrants (:meth:`~isles.algorithms.core.base.IslandAlgorithm.assess_immigrants`)
on a connected topology: those evaluations, at the migrations, are counted but left out of the
formula, so the run may pass the budget by them (docs/budgets.md).
"""

from __future__ import annotations

from isles.islands.config.build import build_algorithm, build_plugins
from isles.islands.config.schema import check_keys, validated
from isles.islands.mixed import layout_of
from omegaconf import OmegaConf, open_dict


def evaluation_counts(algorithm, plugins=()) -> tuple[int, int, int]:
    """``(init, per_generation, plugin_per_generation)``: evaluations per island at
    initialisation and per generation, and the loop plug-in's per generation (0 without one).

    Raises:
        ValueError: ``stop.max_evaluations`` with an algorithm or plug-in that does not declare
            its evaluations per generation (one line).
    """
    try:
        init = int(algorithm.initial_evaluations())
        per = int(algorithm.evaluations_per_generation())
        plugin = sum(int(p.evaluations_per_generation()) for p in plugins)
    except (NotImplementedError, AttributeError) as err:
        raise _refused(err) from None
    return init, per, plugin


def run_counts(algorithm, n_islands: int, plugins=()) -> tuple[int, int]:
    """``(at init, per generation)``: the run's evaluations of ``n_islands`` islands of ``algorithm`` (each
    family's count times its islands in a mixed run, :meth:`isles.islands.mixed.Mixed.counts`) and the
    plug-ins'.

    Raises:
        ValueError: as :func:`evaluation_counts`.
    """
    try:
        at_init, per = layout_of(algorithm).counts(n_islands)
        return at_init, per + sum(int(p.evaluations_per_generation()) for p in plugins)
    except (NotImplementedError, AttributeError) as err:
        raise _refused(err) from None


def _refused(err) -> ValueError:
    return ValueError(
        f"stop.max_evaluations: {err}; allowed value here is null (set a generation budget with generations=...)"
    )


def evaluations_after(generations: int, n_islands: int, counts: tuple[int, int, int]) -> int:
    """The run's evaluations after ``generations`` generations of ``n_islands`` islands with
    ``counts`` (:func:`evaluation_counts`)."""
    init, per, plugin = counts
    return n_islands * (init + generations * per) + generations * plugin


def budget_generations(cfg: dict, plugins=()) -> int:
    """The generations a checked config (:func:`isles.islands.config.schema.validated`) runs: the first
    generation at which the cumulative evaluations reach ``stop.max_evaluations``, at most
    ``generations`` and at least 1 (a budget below the initial evaluations runs one generation);
    ``generations`` itself when ``stop.max_evaluations`` is null.

    Args:
        cfg: the run config (``algorithm`` as its config, ``islands.n``, ``generations``, ``stop``).
        plugins: the loop's plug-in factories (the config's ``plugins`` objects).

    Raises:
        ValueError: as :func:`evaluation_counts`.
    """
    budget = cfg["stop"].get("max_evaluations")
    generations = int(cfg["generations"])
    if budget is None:
        return generations
    at_init, per_generation = run_counts(build_algorithm(cfg["algorithm"]), int(cfg["islands"]["n"]), plugins)
    left = int(budget) - at_init
    needed = max(1, -(-left // per_generation)) if per_generation > 0 else generations
    return min(generations, needed)


def with_budget(cfg, plain: dict | None = None, plugins=()):
    """The composed config ``cfg`` (an OmegaConf ``DictConfig``, before resolution) with
    ``generations`` set to :func:`budget_generations` where ``stop.max_evaluations`` is set, so
    that what interpolates ``${generations}`` follows the budget (an algorithm's schedule over
    ``max_iterations`` then spans the run that the budget buys) and MLflow
    records the generations that run; ``cfg`` itself otherwise.

    Args:
        cfg: the composed config.
        plain: ``cfg`` resolved and checked (:func:`~isles.islands.config.schema.validated`: the job's
            one check, :func:`isles.app.job.prepare`), with ``plugins`` built from its ``plugins``
            list; ``None``: resolved, checked and built here.

    Raises:
        ValueError: a key the schema does not know or a bad value (as
            :func:`isles.islands.config.schema.check_keys` and :func:`~isles.islands.config.schema.validated`,
            where ``plain`` is ``None``), and as :func:`budget_generations`.
    """
    if OmegaConf.select(cfg, "stop.max_evaluations") is None:
        return cfg
    if plain is None:
        plain = OmegaConf.to_container(cfg, resolve=True)
        check_keys(plain)
        plain = validated(plain)
        plugins = build_plugins(plain["plugins"])
    generations = budget_generations(plain, plugins)
    if generations == plain["generations"]:
        return cfg
    out = cfg.copy()
    with open_dict(out):
        out.generations = generations
    return out
