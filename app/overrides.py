"""The command line's overrides of a Hydra job, and what they mean for the problem to build.

A class named on the command line starts from its own constructor defaults: Hydra merges
``problem._target_=my.Problem`` into the problem node that the config (an experiment's problem,
e.g. ``fep_f5``: ``dim: 32``, ``lower: -5.12``) composed, and :func:`user_problem_config` drops the
keys that came with that node, keeping only the ``problem.*`` keys typed on the command line.
"""
from __future__ import annotations

from hydra.core.override_parser.overrides_parser import OverridesParser


def task_overrides() -> list[str]:
    """The command line's overrides of the running Hydra job (``hydra.overrides.task``), or ``[]``
    outside a Hydra job (a config composed in-process)."""
    try:
        from hydra.core.hydra_config import HydraConfig  # noqa: PLC0415

        return list(HydraConfig.get().overrides.task)
    except Exception:  # not started through Hydra
        return []


def user_problem_config(problem_cfg: dict, overrides) -> dict:
    """The problem node to build, given the command line's ``overrides``.

    When the command line names the class (``problem._target_=my.Problem``, with ``=``, ``+`` or
    ``++``), the other keys of the composed node belong to the problem that the config had chosen
    (an experiment's ``fep_f5``: ``dim: 32``, ``lower: -5.12``, ``upper: 5.12``): they are dropped,
    and only the ``problem.*`` keys on the command line are kept, so the class gets its own
    constructor defaults for the rest (or :func:`isles.islands.build.build_problem` names the
    missing field). Without ``problem._target_`` on the command line (``problem=ackley``, an experiment's own problem,
    ``problem.dim=10``), the node is returned unchanged.

    Args:
        problem_cfg: the composed, resolved ``problem`` node (plain dict).
        overrides: the command line's overrides (:func:`task_overrides`), Hydra syntax.
    """
    given, retarget = set(), False
    for o in OverridesParser.create().parse_overrides(list(overrides)):
        head, _, rest = o.key_or_group.partition(".")
        if head != "problem" or not rest or o.package is not None:
            continue
        key = rest.split(".")[0]
        given.add(key)
        retarget = retarget or (key == "_target_" and not o.is_delete())
    if not retarget:
        return problem_cfg
    return {k: v for k, v in problem_cfg.items() if k in given}
