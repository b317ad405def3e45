"""Building problems, evaluators and algorithms from (Hydra) config dicts.

Configs name classes with ``_target_`` (``problem._target_=my_module.MyProblem``), so a user's
own problem or algorithm plugs in without editing isles. Instantiation goes through
:func:`hydra.utils.instantiate`. The island groups build their algorithm and evaluator here, in
their actors; the job (:mod:`isles.app.job`) builds them once more before Ray starts, so that a
bad value fails early.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import math

import numpy as np
from hydra.utils import get_object, instantiate
from isles.algorithms.core.base import IslandAlgorithm
from isles.islands.config.schema import ConstraintsConfig, with_defaults
from isles.problems.base import check_n_eq, probe_evaluation
from isles.problems.constraints import Evaluator
from isles.problems.minmax import AugmentedLagrangian, check_payoff_shape
from omegaconf import DictConfig, ListConfig, OmegaConf

from isles import MOVED, MOVED_MODULES, moved_message, moved_module_message

PROBLEM_ATTRIBUTES = ("dim", "lower", "upper", "n_constraints", "constraint_scale", "evaluate")


def _plain(cfg) -> dict:
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True)
    return dict(cfg)


def _check_arguments(target: str, kwargs: dict) -> None:
    """Name a missing or unknown constructor argument of ``target`` as the field the user types.

    Raises:
        ValueError: ``problem.dim is missing: my.Problem requires it (add ++problem.dim=VALUE)``,
            or ``problem.dim=3: my.Problem takes no parameter 'dim' (its parameters: ...)``.
    """
    try:
        signature = inspect.signature(get_object(target))
    except Exception:  # not importable (build_problem reports it) or no signature: nothing to name
        return
    params = signature.parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        named = {}
    else:
        named = {k: v for k, v in kwargs.items() if k not in params}
    for key, value in named.items():
        allowed = ", ".join(params) or "none"
        raise ValueError(f"problem.{key}={value}: {target} takes no parameter {key!r} (its parameters: {allowed})")
    for name, p in params.items():
        if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and name not in kwargs:
            raise ValueError(f"problem.{name} is missing: {target} requires it (add ++problem.{name}=VALUE)")


def _integer_parameters(target: str) -> set:
    """The constructor parameters of ``target`` that take integers: annotated ``int`` (or
    ``Optional[int]``), or with an ``int`` default (not a bool); empty when ``target`` cannot be
    imported or has no signature."""
    try:
        params = inspect.signature(get_object(target)).parameters
    except Exception:  # noqa: BLE001  (not importable: build_problem reports it)
        return set()
    out = set()
    for name, p in params.items():
        ann = p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", "")
        ann = ann.replace(" ", "")
        default_int = isinstance(p.default, int) and not isinstance(p.default, bool)
        if ann in ("int", "int|None", "Optional[int]", "None|int") or default_int:
            out.add(name)
    return out


def _check_integers(target: str, kwargs: dict) -> None:
    """Refuse a value that is not an integer for an integer parameter of ``target``
    (:func:`_integer_parameters`), e.g. ``problem.seed=2.5`` that the constructor would truncate.
    An integral float (``4.0``) and ``None`` pass; the class checks the range itself.

    Raises:
        ValueError: ``problem.seed=2.5: allowed values are integers`` (``integers >= 1`` for
            ``dim`` and ``y_dim``, the numbers of variables of the problem interface).
    """
    for name in sorted(_integer_parameters(target) & set(kwargs)):
        value = kwargs[name]
        if value is None:
            continue
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = ok and math.isfinite(float(value)) and float(value).is_integer()
        if not ok:
            at_least = " >= 1" if name in ("dim", "y_dim") else ""
            raise ValueError(f"problem.{name}={value!r}: allowed values are integers{at_least}")


def cannot_build(group: str, target, err: BaseException) -> str:
    """One line for a ``_target_`` that Hydra could not instantiate: the innermost error of the
    chain (Hydra's own message says "Are you sure that module ... is installed?" whatever the cause).

    * an old top-level import (``from problems.base import Problem``) in the user's module names
      the new one (:func:`isles.moved_message`);
    * the target's own module not found: where Python looks for it (the launch directory, or
      ``PYTHONPATH``);
    * anything else: the error's type and first line.
    """
    inner = err
    while inner.__cause__ is not None:
        inner = inner.__cause__
    head = f"{group}._target_={target!r}"
    top = str(target or "").split(".")[0]
    missing = getattr(inner, "name", None) if isinstance(inner, ImportError) else None
    if missing is not None and missing.split(".")[0] in MOVED:
        return f"{head}: cannot import it: {moved_message(missing.split('.')[0])}"
    if missing in MOVED_MODULES:  # e.g. isles.islands.tracking, now isles.app.tracking
        return f"{head}: cannot import it: {moved_module_message(missing)}"
    if isinstance(inner, ModuleNotFoundError) and missing == target and "." in missing:
        module, name = missing.rsplit(".", 1)
        return f"{head}: the module {module!r} has no {name!r}"
    if isinstance(inner, ModuleNotFoundError) and missing == top:
        return (
            f"{head}: no module named {top!r}: run isles from the folder that holds {top}.py (or its "
            f"package folder), or add that folder to PYTHONPATH"
        )
    text = str(inner).strip().splitlines()
    return f"{head}: cannot build it ({type(inner).__name__}: {text[0] if text else ''})"


def build_problem(cfg, constraints_cfg=None):
    """Instantiate the problem of config ``cfg`` (a mapping with ``_target_``), with the
    tolerance of its equality constraints ``eq_tol`` set from ``constraints_cfg``
    (``constraints.eq_tol``; the schema's default where ``None``).

    Raises:
        ValueError: no ``_target_``, a target that cannot be imported, a constructor argument
            that is missing or that the class does not take (named as ``problem.<name>``), or an
            object lacking the problem interface (``dim``, ``lower``, ``upper``, ``n_constraints``,
            ``constraint_scale``, ``evaluate``), bounds whose length is not ``dim`` or that are not
            finite, or an ``n_eq`` outside ``[0, n_constraints]``.
    """
    cfg = _plain(cfg)
    if "_target_" not in cfg:
        raise ValueError(
            "problem._target_ is missing: name a Problem class, e.g. isles.problems.engineering.WeldedBeam"
        )
    kwargs = {k: v for k, v in cfg.items() if k != "_target_"}
    _check_arguments(cfg["_target_"], kwargs)
    try:
        problem = instantiate(cfg, _convert_="all")
    except Exception as err:  # hydra wraps the cause; surface the first line
        cause = err.__cause__ or err
        if isinstance(cause, ValueError):  # the class's own check of its values
            raise cause from None
        _check_integers(cfg["_target_"], kwargs)  # e.g. np.zeros(2.5) raised TypeError: name the field
        raise ValueError(cannot_build("problem", cfg["_target_"], err)) from None
    _check_integers(cfg["_target_"], kwargs)  # a value the class took and truncated (int(2.5) == 2)
    missing = [a for a in PROBLEM_ATTRIBUTES if not hasattr(problem, a)]
    if missing:
        raise ValueError(f"problem._target_={cfg['_target_']!r} lacks {missing}: subclass isles.problems.base.Problem")
    for name in ("lower", "upper"):
        if len(getattr(problem, name)) != problem.dim:
            raise ValueError(f"problem.{name} has {len(getattr(problem, name))} entries but problem.dim={problem.dim}")
        if not np.all(np.isfinite(np.asarray(getattr(problem, name), dtype=np.float64))):  # a class that set it itself
            raise ValueError(
                f"problem.{name}={np.asarray(getattr(problem, name)).tolist()}: allowed values are "
                "finite numbers (one number, or one per variable)"
            )
    check_n_eq(problem)
    problem.eq_tol = float(with_defaults(_plain(constraints_cfg or {}), ConstraintsConfig)["eq_tol"])
    return problem


def build_evaluator(problem_cfg, constraints_cfg=None) -> Evaluator:
    """Problem plus constraint handling (``constraints.handling``, ``constraints.penalty``).

    With ``constraints.handling=augmented_lagrangian`` a constrained problem is turned into the
    min-max problem of its augmented Lagrangian (:class:`isles.problems.minmax.AugmentedLagrangian`
    with ``constraints.r`` and ``constraints.multiplier_bound``); a problem that already is a
    min-max problem is used as it is.

    Raises:
        ValueError: bad values, named by field (``constraints.r``, ``constraints.multiplier_bound``, ...).
    """
    c = with_defaults(_plain(constraints_cfg or {}), ConstraintsConfig)
    handling = c["handling"]
    problem = build_problem(problem_cfg, constraints_cfg)
    if handling == "augmented_lagrangian" and not is_minmax(problem):
        problem = AugmentedLagrangian(problem, c["r"], c["multiplier_bound"])
    return Evaluator(problem, handling, c["penalty"])


def is_minmax(problem) -> bool:
    """Whether ``problem`` is a min-max problem (has ``payoff`` and a y box)."""
    return hasattr(problem, "payoff") and hasattr(problem, "y_dim")


def check_pairing(algorithm, problem, constraints_cfg=None) -> None:
    """Check that algorithm, problem and constraint handling fit together (before Ray starts).

    An algorithm that solves min-max problems declares ``minmax = True``.

    Raises:
        ValueError: a problem the algorithm's parameters do not suit
            (:meth:`isles.algorithms.core.base.IslandAlgorithm.check_problem`, e.g.
            an encoding that needs another box than the problem's); results of the wrong
            shape or dtype on a probe (:func:`isles.problems.base.probe_evaluation`);
            ``constraints.handling=augmented_lagrangian`` with an algorithm that is not
            a min-max algorithm; a min-max algorithm with a problem that is neither a min-max
            problem nor turned into one; a min-max problem with an algorithm that cannot solve it.
    """
    c = with_defaults(_plain(constraints_cfg or {}), ConstraintsConfig)
    handling = c["handling"]
    solves_minmax = bool(getattr(algorithm, "minmax", False))
    name = type(algorithm).__module__ + "." + type(algorithm).__name__
    if handling == "augmented_lagrangian" and not solves_minmax:
        raise ValueError(
            f"constraints.handling=augmented_lagrangian: needs a min-max algorithm (minmax = True); "
            f"algorithm {name} allows feasibility|penalty"
        )
    if solves_minmax and handling != "augmented_lagrangian" and not is_minmax(problem):
        raise ValueError(
            f"constraints.handling={handling}: algorithm {name} solves min-max problems; for the constrained "
            f"problem {getattr(problem, 'name', problem)!r} the allowed value is augmented_lagrangian"
        )
    if is_minmax(problem) and not solves_minmax:
        raise ValueError(
            f"problem {getattr(problem, 'name', problem)!r} is a min-max problem: algorithm {name} cannot solve it; "
            "use a min-max algorithm (minmax = True)"
        )
    algorithm.check_problem(problem)  # e.g. an encoding against the problem's box
    if not is_minmax(problem):  # the first evaluation's shape check, on a probe: stops before Ray
        probe_evaluation(problem)
    if handling == "augmented_lagrangian" and not is_minmax(problem):
        problem = AugmentedLagrangian(problem, c["r"], c["multiplier_bound"])  # validates
    if is_minmax(problem):  # the first evaluation, here on a probe: a wrong payoff shape stops before Ray
        X = ((problem.lower + problem.upper) / 2.0)[None, None, :].repeat(2, axis=1)
        Y = ((problem.y_lower + problem.y_upper) / 2.0)[None, None, :].repeat(3, axis=1)
        check_payoff_shape(problem, X, Y, problem.payoff(X, Y))


def build_algorithm(cfg) -> IslandAlgorithm:
    """Instantiate an island algorithm from its config (``_target_`` plus parameters).

    Raises:
        ValueError: a parameter out of range (named by field), a parameter the class does not take
            (:func:`check_algorithm_keys`), or an unknown target.
    """
    cfg = _plain(cfg)
    check_algorithm_keys(cfg)
    try:
        return instantiate(cfg, _convert_="all")
    except Exception as err:
        cause = err.__cause__ or err
        if isinstance(cause, ValueError):
            raise cause from None
        raise ValueError(cannot_build("algorithm", cfg.get("_target_"), err)) from None


def algorithm_keys(cls) -> list[str] | None:
    """The parameters an algorithm class takes as config keys: its ``Params`` dataclass's fields
    when its constructor takes ``**kwargs`` (:class:`isles.algorithms.core.base.IslandAlgorithm`),
    else its constructor's named parameters; ``None`` when that cannot be told (any keyword taken)."""
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        p_cls = getattr(cls, "Params", None)
        return [f.name for f in dataclasses.fields(p_cls)] if dataclasses.is_dataclass(p_cls) else None
    return [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def check_algorithm_keys(cfg: dict) -> None:
    """Refuse a key of the algorithm node ``cfg`` that its class does not take
    (:func:`algorithm_keys`; ``_target_`` and Hydra's ``_..._`` keys aside), before it is built.

    Raises:
        ValueError: one line naming the key as typed, the family's keys and the built-in families
            that take it, e.g. ``algorithm.host_kernel=auto: cmaes takes no parameter 'host_kernel'
            (its parameters: pop_size, sigma0, ...); host_kernel is a parameter of algorithm=...`` (the families that take it).
    """
    from isles.algorithms.options import ALGORITHMS  # noqa: PLC0415

    try:
        cls = get_object(cfg.get("_target_"))
    except Exception:  # noqa: BLE001  (not importable: build_algorithm names it)
        return
    allowed = algorithm_keys(cls)
    unknown = [k for k in cfg if not (k.startswith("_") and k.endswith("_"))] if allowed is not None else []
    for key in (k for k in unknown if k not in allowed):
        family = next((n for n, c in ALGORITHMS.items() if c is cls), cls.__name__)
        takers = [n for n, c in ALGORITHMS.items() if key in (algorithm_keys(c) or [])]
        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        where = f"a parameter of algorithm={'|'.join(takers)}" if takers else "a parameter of no built-in algorithm"
        raise ValueError(
            f"algorithm.{key}={cfg[key]}: {family} takes no parameter {key!r}{hint} "
            f"(its parameters: {', '.join(allowed) or 'none'}); {key} is {where}"
        )


def build_plugins(nodes) -> list:
    """Instantiate the loop's plug-in factories from the config's ``plugins`` list
    (:mod:`isles.islands.plugin`).

    Raises:
        ValueError: one line naming ``plugins.<j>``: a parameter out of range, an unknown target, or
            an object without ``make(xp, dtype, evaluator, seed, stream)``.
    """
    out = []
    nodes = OmegaConf.to_container(nodes, resolve=True) if isinstance(nodes, ListConfig) else list(nodes or [])
    for j, node in enumerate(nodes):
        target = node.get("_target_") if isinstance(node, dict) else None
        try:
            factory = instantiate(node, _convert_="all")
        except Exception as err:
            cause = err.__cause__ or err
            if isinstance(cause, ValueError):
                raise cause from None
            raise ValueError(cannot_build(f"plugins.{j}", target, err)) from None
        if not callable(getattr(factory, "make", None)):
            raise ValueError(
                f"plugins.{j}._target_={target!r}: not a plug-in (allowed values are classes with "
                "make(xp, dtype, evaluator, seed, stream), islands/plugin.py)"
            )
        out.append(factory)
    return out
