"""Building problems, evaluators and algorithms from (Hydra) config dicts.

Configs name classes with ``_target_`` (``problem._target_=my_module.MyProblem``), so a user's
own problem or algorithm plugs in without editing isles. Instantiation goes through
:func:`hydra.utils.instantiate`.
"""
from __future__ import annotations

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from algorithms.core.base import IslandAlgorithm
from problems.constraints import Evaluator

PROBLEM_ATTRIBUTES = ("dim", "lower", "upper", "n_constraints", "constraint_scale", "evaluate")


def _plain(cfg) -> dict:
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True)
    return dict(cfg)


def build_problem(cfg):
    """Instantiate the problem of config ``cfg`` (a mapping with ``_target_``).

    Raises:
        ValueError: no ``_target_``, a target that cannot be imported, or an object lacking the
            problem interface (``dim``, ``lower``, ``upper``, ``n_constraints``,
            ``constraint_scale``, ``evaluate``), or bounds whose length is not ``dim``.
    """
    cfg = _plain(cfg)
    if "_target_" not in cfg:
        raise ValueError("problem._target_ is missing: name a Problem class, e.g. problems.engineering.WeldedBeam")
    try:
        problem = instantiate(cfg, _convert_="all")
    except Exception as err:  # hydra wraps the cause; surface the first line
        cause = err.__cause__ or err
        if isinstance(cause, ValueError):
            raise cause from None
        raise ValueError(f"problem._target_={cfg['_target_']!r}: cannot build it ({cause})") from None
    missing = [a for a in PROBLEM_ATTRIBUTES if not hasattr(problem, a)]
    if missing:
        raise ValueError(
            f"problem._target_={cfg['_target_']!r} lacks {missing}: subclass problems.base.Problem"
        )
    for name in ("lower", "upper"):
        if len(getattr(problem, name)) != problem.dim:
            raise ValueError(f"problem.{name} has {len(getattr(problem, name))} entries but problem.dim={problem.dim}")
    return problem


def build_evaluator(problem_cfg, constraints_cfg=None) -> Evaluator:
    """Problem plus constraint handling (``constraints.handling``, ``constraints.penalty``)."""
    c = _plain(constraints_cfg or {})
    return Evaluator(build_problem(problem_cfg), c.get("handling", "feasibility"), c.get("penalty", 1e6))


def build_algorithm(cfg) -> IslandAlgorithm:
    """Instantiate an island algorithm from its config (``_target_`` plus parameters).

    Raises:
        ValueError: a parameter out of range (named by field), or an unknown target.
    """
    cfg = _plain(cfg)
    try:
        return instantiate(cfg, _convert_="all")
    except Exception as err:
        cause = err.__cause__ or err
        if isinstance(cause, ValueError):
            raise cause from None
        raise ValueError(f"algorithm._target_={cfg.get('_target_')!r}: cannot build it ({cause})") from None
