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

import re
import shlex
import sys

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType, ValueType
from omegaconf import OmegaConf, open_dict

#: the command line as the user typed it (``sys.argv``), kept by :func:`preprocess_argv` before the
#: rewritten overrides replace it for Hydra; ``None`` until then
typed_argv: list[str] | None = None


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


#: keys of an algorithm's node: ``algorithm.X``, ``groups.NAME.algorithm.X`` (a mixed run's group)
_ALGORITHM_KEY = re.compile(r"(groups\.[^.]+\.)?algorithm\.[^.]+")


def preprocess(args: list[str]) -> list[str]:
    """The command line's overrides ``args`` as Hydra gets them (the others unchanged, in order):

    * ``groups=[...]`` (a list of groups, docs/mixed_islands.md; or ``+groups=[...]``, ``++groups=[...]``
      where ``~groups`` did not come first) becomes ``groups=null groups=[...]``:
      over an experiment's mapping (``+experiment=mixed_islands``) Hydra cannot merge a list into a
      mapping (its 5-line ``Cannot merge DictConfig with ListConfig``); set to ``null`` first, the list
      replaces it, and a bad list (``groups=[]``) gets isles' one line
      (:func:`isles.islands.config.schema.with_groups`);
    * ``algorithm.X=V`` and ``groups.NAME.algorithm.X=V`` (one value, not a sweep) become
      ``++...``: an algorithm's node is open (its class checks its keys), so a key the chosen
      family does not take reaches :func:`isles.islands.config.build.build_algorithm`, which names
      the family's keys and the families that take it in one line, instead of Hydra's 6-line
      ``Key 'X' is not in struct`` (whose ``+algorithm.X`` hint only moves the error). For a key
      the node has, ``++`` sets it as ``=`` does. Not with another sweeper than isles'
      (``hparams_search=...``: Optuna's fixed parameters are matched to its search space by key).

    Flags and what Hydra's grammar does not parse are left as they are (Hydra says what is wrong).
    """
    parser, out = OverridesParser.create(), []
    # another sweeper (Optuna: hparams_search=...) matches a fixed parameter to its search space by the
    # key as typed (algorithm.F, not ++algorithm.F): its algorithm keys are left as typed
    other_sweeper = any(a.lstrip("+").startswith(("hparams_search=", "hydra/sweeper=")) for a in args)
    for arg in args:
        try:
            (o,) = [] if arg.startswith("-") or "=" not in arg else parser.parse_overrides([arg])
        except Exception:  # noqa: BLE001  (Hydra's own message, later)
            o = None
        plain = o is not None and o.type == OverrideType.CHANGE and o.package is None
        listed = o is not None and o.key_or_group == "groups" and isinstance(o.value(), list) and o.package is None
        if listed and (plain or "~groups" not in out) and o.value_type == ValueType.ELEMENT:  # =, + and ++ alike
            out += ["groups=null", "groups=" + arg.split("=", 1)[1]]
        elif (
            plain
            and not other_sweeper
            and o.value_type == ValueType.ELEMENT
            and _ALGORITHM_KEY.fullmatch(o.key_or_group)
        ):
            out.append(f"++{arg}")
        else:
            out.append(arg)
    return out


def preprocess_argv() -> None:
    """Replace ``sys.argv``'s overrides by :func:`preprocess`'s (what Hydra parses), keeping the
    command line as typed in :data:`typed_argv` (what a run records and prints as its command)."""
    global typed_argv  # noqa: PLW0603
    typed_argv = list(sys.argv)
    sys.argv[1:] = preprocess(sys.argv[1:])


def check_mixed_overrides(plain: dict, overrides) -> None:
    """Refuse, in a mixed run (``plain["groups"]``: the groups of
    :func:`isles.islands.config.schema.with_groups`), an override that the groups replace: the
    islands are the groups' (``islands.n`` is their sum) and so are the algorithms
    (``algorithm=NAME``, ``algorithm.X=V``, ``algorithm._target_=...``).

    Args:
        plain: the checked config (its ``groups`` a list of ``{name, islands, algorithm, key}``, or ``None``).
        overrides: the command line's overrides (:func:`job_overrides`).

    Raises:
        ValueError: one line naming the override as typed and what to change instead, e.g.
            ``islands.n=3 does not apply to a mixed run: its islands are the groups' (groups.de.islands=4,
            ...); change those``.
    """
    groups = plain.get("groups")
    if not groups:
        return
    for o in OverridesParser.create().parse_overrides(list(overrides)):
        key, typed = o.key_or_group, o.input_line.lstrip("+")
        if o.package is not None or o.is_delete():
            continue
        if key == "islands.n":
            sizes = ", ".join(f"groups.{g['key']}.islands={g['islands']}" for g in groups)
            raise ValueError(
                f"{typed} does not apply to a mixed run: its islands are the groups' ({sizes}); change those"
            )
        if key == "algorithm" or key.startswith("algorithm."):
            algs = ", ".join(f"groups.{g['key']}.algorithm={_family(g['algorithm'])}" for g in groups)
            raise ValueError(
                f"{typed} does not apply to a mixed run: its islands run the groups' algorithms ({algs}); change "
                "those (groups.NAME.algorithm.X=V), or add a group: +algorithm@groups.NAME.algorithm=ALGORITHM "
                "+groups.NAME.islands=N"
            )


def _family(node) -> str:
    """A group's algorithm as the user names it: the built-in's option (``de``), else the class's name."""
    from isles.algorithms.options import ALGORITHMS  # noqa: PLC0415

    target = node.get("_target_", "") if isinstance(node, dict) else f"{type(node).__module__}.{type(node).__name__}"
    names = [n for n, cls in ALGORITHMS.items() if f"{cls.__module__}.{cls.__qualname__}" == target]
    return names[0] if names else target.rsplit(".", 1)[-1]


def launch_command(argv: list[str] | None = None) -> tuple[str, list[str], list[str]]:
    """``(name, head, args)``: what launched the run, the start of the command line that launches it
    again as the user typed it (``("isles", ["python", "-m", "isles"])``, ``("isles", ["isles"])``
    for the console script, ``("run.py", ["python", "/path/run.py"])`` for a script, by the path
    typed; else the program's path) and the arguments typed after it.

    Args:
        argv: the command line; default the one typed (:data:`typed_argv`), else ``sys.argv``.
    """
    argv = list((typed_argv or sys.argv) if argv is None else argv) or [""]
    path = argv[0].replace("\\", "/")
    script = path.rsplit("/", 1)[-1]
    if path.endswith("isles/__main__.py"):
        return "isles", ["python", "-m", "isles"], argv[1:]
    if script in ("isles", "isles.exe"):
        return "isles", ["isles"], argv[1:]
    if script.endswith(".py"):
        return script, ["python", shlex.quote(argv[0])], argv[1:]
    return script or "python", [shlex.quote(argv[0]) if argv[0] else "python"], argv[1:]
