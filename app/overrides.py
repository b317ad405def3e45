"""The command line's overrides of a Hydra job, and what they mean for the problem to build.

A class named on the command line starts from its own constructor defaults: Hydra merges
``problem._target_=my.Problem`` into the problem node that the config (an experiment's problem,
e.g. ``fep_f5``: ``dim: 32``, ``lower: -5.12``) composed, and :func:`user_problem_config` drops the
keys that came with that node, keeping only the ``problem.*`` keys typed on the command line.

The overrides are the running Hydra job's (``python run.py ...``, ``isles ...``, a sweep's job) or,
for a config composed in-process (Hydra's ``compose(..., return_hydra_config=True)``), the ones
its own ``hydra`` node records (:func:`job_overrides`). A config composed without its ``hydra``
node does not say which keys were typed: :func:`retarget_problem` applies the rule where it is
composed (``tests/helpers.make_cfg`` does), before the node is dropped.
"""

from __future__ import annotations

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf, open_dict


def task_overrides() -> list[str]:
    """The command line's overrides of the running Hydra job (``hydra.overrides.task``), or ``[]``
    outside a Hydra job (a config composed in-process)."""
    try:
        from hydra.core.hydra_config import HydraConfig  # noqa: PLC0415

        return list(HydraConfig.get().overrides.task)
    except Exception:  # not started through Hydra
        return []


def job_overrides(cfg=None) -> list[str]:
    """The command line's overrides of the job that composed ``cfg``: those recorded in ``cfg``'s
    own ``hydra`` node (``hydra.overrides.task``: a config composed in-process with
    ``return_hydra_config=True``, or a sweep's job), else the running Hydra job's
    (:func:`task_overrides`; ``[]`` outside one).

    Args:
        cfg: the composed config (a ``DictConfig`` or plain dict), or ``None``.
    """
    try:
        return list(cfg["hydra"]["overrides"]["task"])
    except (KeyError, TypeError, AttributeError):  # no hydra node (a Hydra job's task config, or no cfg)
        return task_overrides()


def retarget_problem(cfg):
    """``cfg`` (a ``DictConfig`` composed with its ``hydra`` node) with its ``problem`` node as
    the job builds it (:func:`user_problem_config` on :func:`job_overrides`): a class named on
    the command line gets only the ``problem.*`` keys typed there, not those of the experiment's
    problem (``+experiment=fep``: ``lower: -5.12``, ``upper: 5.12``). Changes ``cfg`` in place
    and returns it."""
    node = OmegaConf.to_container(cfg.problem, resolve=True) if cfg.get("problem") is not None else None
    if node is None:
        return cfg
    kept = user_problem_config(node, job_overrides(cfg))
    if kept != node:
        with open_dict(cfg):
            cfg.problem = kept
    return cfg


def user_problem_config(problem_cfg: dict, overrides) -> dict:
    """The problem node to build, given the command line's ``overrides``.

    When the command line names the class (``problem._target_=my.Problem``, with ``=``, ``+`` or
    ``++``), the other keys of the composed node belong to the problem that the config had chosen
    (an experiment's ``fep_f5``: ``dim: 32``, ``lower: -5.12``, ``upper: 5.12``): they are dropped,
    and only the ``problem.*`` keys on the command line are kept, so the class gets its own
    constructor defaults for the rest (or :func:`isles.islands.config.build.build_problem` names the
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
