"""The command line's overrides of a Hydra job, and what they mean for the problem and the
topology to build.

A class named on the command line starts from its own constructor defaults: Hydra merges
``problem._target_=my.Problem`` (or ``problem={_target_: my.Problem, dim: 3}``) into the problem
node that the config (an experiment's problem, e.g. ``fep_f5``: ``dim: 32``, ``lower: -5.12``)
composed, and :func:`typed_class_node` drops the keys that came with that node, keeping only the
keys typed on the command line. The same holds for ``topology`` (``topology={_target_:
my.Topology}`` over an experiment's ``ring``: not its ``bidirectional`` and ``weight``); the groups
are :data:`RETARGETED`.

The overrides are the running Hydra job's (``python run.py ...``, ``isles ...``, a sweep's job) or,
for a config composed in-process (Hydra's ``compose(..., return_hydra_config=True)``), the ones
its own ``hydra`` node records (:func:`job_overrides`). A config composed without its ``hydra``
node does not say which keys were typed: :func:`retarget` applies the rule where it is
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


#: the config groups whose class a command line may name by ``_target_`` (:func:`typed_class_node`)
RETARGETED = ("problem", "topology")


def retarget(cfg):
    """``cfg`` (a ``DictConfig`` composed with its ``hydra`` node) with its ``problem`` and
    ``topology`` nodes (:data:`RETARGETED`) as the job builds them (:func:`typed_class_node` on
    :func:`job_overrides`): a class named on the command line gets only the keys typed there, not
    those of the experiment's problem (``+experiment=fep``: ``lower: -5.12``, ``upper: 5.12``) or
    topology (``ring``: ``bidirectional``, ``weight``). Changes ``cfg`` in place and returns it."""
    overrides = job_overrides(cfg)
    for group in RETARGETED:
        node = OmegaConf.to_container(cfg[group], resolve=True) if cfg.get(group) is not None else None
        if node is None:
            continue
        kept = typed_class_node(node, overrides, group)
        if kept != node:
            with open_dict(cfg):
                cfg[group] = kept
    return cfg


def user_problem_config(problem_cfg: dict, overrides) -> dict:
    """The problem node to build, given the command line's ``overrides``:
    :func:`typed_class_node` of the ``problem`` group."""
    return typed_class_node(problem_cfg, overrides, "problem")


def typed_class_node(node: dict, overrides, group: str) -> dict:
    """The ``group`` node (``problem``, ``topology``) to build, given the command line's ``overrides``.

    When the command line names the class (``problem._target_=my.Problem``, or the whole node
    ``topology={_target_: my.Topology, weight: 0.5}``, with ``=``, ``+`` or ``++``), the other keys
    of the composed node belong to the class that the config had chosen (an experiment's
    ``fep_f5``: ``dim: 32``, ``lower: -5.12``, ``upper: 5.12``; its ``ring``: ``bidirectional``,
    ``weight``): they are dropped, and only the ``group`` keys on the command line are kept, so the
    class gets its own constructor defaults for the rest (or
    :func:`isles.islands.config.build.build_problem` names the missing field). Without a
    ``_target_`` on the command line (``problem=ackley``, ``topology=star``, an experiment's own
    node, ``problem.dim=10``), the node is returned unchanged.

    Args:
        node: the composed, resolved ``group`` node (plain dict).
        overrides: the command line's overrides (:func:`task_overrides`), Hydra syntax.
        group: the config group's name.
    """
    given, named = set(), False
    for o in OverridesParser.create().parse_overrides(list(overrides)):
        head, _, rest = o.key_or_group.partition(".")
        if head != group or o.package is not None or o.is_delete():
            continue
        if not rest:  # the whole node: group={_target_: ..., key: value} (group=NAME picks a config)
            value = o.value()
            if isinstance(value, dict):
                given |= set(value)
                named = named or "_target_" in value
            continue
        key = rest.split(".")[0]
        given.add(key)
        named = named or key == "_target_"
    if not named:
        return node
    return {k: v for k, v in node.items() if k in given}
