"""The typed schema of the run config (Hydra structured configs), checked as the config composes.

``conf/config.yaml`` starts its defaults list with ``isles_schema`` (registered here in Hydra's
ConfigStore), so the composed config is typed and closed:

* a key that the schema does not know is an error naming it, whether typed plainly
  (``generation=10``: Hydra says the key is not in the config) or appended (``+generation=10``:
  ``Key 'generation' not in 'IslesConfig'``), instead of a silently ignored value;
* a value of the wrong type is an error naming the field (``islands.n=abc``, ``seed=1.5``);
* a key appended with ``+`` that the schema does not know (``+generation=10``,
  ``+islands.size=4``; Hydra accepts these) is caught by :func:`check_keys`, with the closest
  known key as a suggestion; so is one typed plainly (``generation=10``), by
  :func:`check_override_keys` before Hydra composes (Hydra would only hint ``+generation``).

Groups whose keys depend on the chosen class (``algorithm``, ``problem``, ``topology``,
``plugins``) are open here: their ``_target_`` class validates its own parameters when it is built
(:mod:`isles.islands.config.build`), before Ray starts.

This module is the one place of the defaults (the dataclasses below, :func:`with_defaults`; an
algorithm's come from its ``Params`` dataclass and a topology's from its constructor,
:func:`class_node`; ``conf/`` only chooses and overrides) and of the typed fields' ranges and
allowed values (:func:`check_values`). The job (:func:`isles.app.job.validate`) checks a run's
config once, before Ray starts, through :func:`validated`, adding only what depends on the machine
(a GPU, a Ray address, psutil); the runtime trusts the :class:`Validated` config it gets, and
checks a hand-made dict itself.
Every error is one line naming the field as the user types it and the allowed values.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, get_type_hints

from hydra.core.config_store import ConfigStore
from isles.algorithms.core.backend import DEVICES, dtype_of
from isles.algorithms.core.base import check_range
from isles.algorithms.options import ALGORITHMS
from isles.islands.config.choices import ASYNC_BUDGETS, MODES, SPAN_GRAPHS, STRATEGIES, TRANSPORTS
from isles.islands.migration.policies import replacement_policy, selection_policy
from isles.islands.migration.topology import TOPOLOGIES
from isles.problems.constraints import check_handling
from omegaconf import MISSING


@dataclass
class StopConfig:
    """Stop rules beside the generation budget: an island reaches the target when its best is
    feasible with ``f <= f_target + tol``; the run ends when every island has. ``max_evaluations``:
    the run ends at the first generation at which its evaluations of the objective and
    constraints (all islands and the plug-ins) reach it (:mod:`isles.islands.control.budget`)."""

    f_target: float | None = None  # null: run all generations; a number: the target above
    tol: float = 0.0
    # Any, not int: a budget typed 1e6 is an integer too, and 2.5 or abc get check_values' one line;
    # null: generations only (docs/budgets.md)
    max_evaluations: Any = None


@dataclass
class ConstraintsConfig:
    """Constraint handling (:class:`isles.problems.constraints.Evaluator`)."""

    # feasibility (Deb's rules) | penalty (static penalty f + penalty * violation)
    # | augmented_lagrangian (min-max algorithms only)
    handling: str = "feasibility"
    penalty: float = 1.0e6
    r: float = 1.0e7  # augmented_lagrangian: penalty factor r > 0 (seed 000 Table 1)
    multiplier_bound: float = 1.0e4  # augmented_lagrangian: multipliers mu in [0, multiplier_bound] (> 0)
    eq_tol: float = 1.0e-4  # an equality constraint h = 0 (a problem's n_eq) holds where |h| <= eq_tol (>= 0)


@dataclass
class CheckpointConfig:
    """Checkpoints every ``every`` epochs to ``path``; ``resume`` continues a saved run."""

    every: int = 0  # save a checkpoint every N epochs (0: never); sync mode
    path: str | None = None  # null: checkpoint.pkl in the job's Hydra output directory
    resume: str | None = None  # path of a checkpoint to continue from (same seed and islands)


@dataclass
class RayConfig:
    """Where Ray runs: a local Ray (``address`` null) or a cluster."""

    address: str | None = None  # null: start a local Ray; "auto" or "ray://host:10001": join a cluster
    num_cpus: int | None = None  # local Ray only: CPUs to offer (null = all)
    include_dashboard: bool = False
    dashboard_host: str = "127.0.0.1"  # local Ray's dashboard: this machine only; 0.0.0.0 opts in to every interface


@dataclass
class IslandsConfig:
    """The archipelago (``islands.*``); each field's default is written here only."""

    n: int = 8  # islands in the archipelago (>= 1)
    # null: a local run chooses (islands/control/autoplace.py), a cluster one actor per GPU; N: N GPUs or CPU actors
    n_actors: int | None = None
    n_nodes: int | None = None  # null: every node of the Ray cluster; N: the N nodes with the most GPUs (or CPUs)
    # spread (over as many nodes as possible) | strict_spread (one actor per node) | pack (fewest nodes)
    placement: str = "spread"
    # generations per epoch; the islands meet (and a plug-in runs) once per epoch
    migration_interval: int = 10
    n_migrants: int = 1  # emigrants per island per migration (chosen by islands.selection)
    # Any, not str: a built-in's name or {_target_: a class, ...} (islands/migration/policies.py, check_values):
    # fair_replace | replace_worst | {_target_: my_module.MyReplace}
    replacement: Any = "fair_replace"
    selection: Any = "select_best"  # select_best | {_target_: my_module.MySelect}
    mode: str = "sync"  # sync (all islands meet) | async (no actor waits: migrants from what has arrived)
    # async: shared (the actors draw epochs from one pool of the run's island-generations) | island (each its own)
    async_budget: str = "shared"
    # epochs between in-memory snapshots (sync mode); a lost actor restarts from the last one (0: off)
    snapshot_every: int = 10
    max_restarts: int = 3  # how often a lost island-group actor is restarted before the run fails
    # seconds a lost actor may take to come back (no node with room: the run stops, checkpointed)
    restart_timeout_s: float = 120.0
    # sync runs over several actors: auto (NCCL between GPUs where CuPy has it, else shared-memory
    # channels between actors of one node, inboxes between nodes) | ray (inboxes) | nccl | channel
    transport: str = "auto"
    # GPU: a batch's like epochs replay one captured epoch (islands/span_graph.py): auto (in-process,
    # falls back where capture fails) | always (also GPU actors over NCCL) | never
    span_graph: str = "auto"


@dataclass
class LoggerConfig:
    """MLflow tracking (``logger.*``; ``logger=none`` turns it off; app/tracking.py)."""

    enabled: bool = True
    # null: MLFLOW_TRACKING_URI if set, else MLflow's default sqlite:///mlflow.db in the launch
    # directory; http://HOST:PORT: a tracking server (`mlflow server`), checked before the run starts
    # (one line naming this field if it does not answer)
    tracking_uri: str | None = None
    experiment_name: str = "isles"
    run_name: str | None = None  # null: what ran, EXPERIMENT-PROBLEM-sSEED (a sweep's job: "NUM: its overrides")
    # true: a tracking server that does not answer is replaced by the local store
    # sqlite:///<launch dir>/mlflow.db, with one line saying so
    fallback_local: bool = False
    # true: MLflow's system metrics (system/cpu_utilization_percentage, memory, system/gpu_N_* through
    # NVML: pip install nvidia-ml-py) of the launching machine
    system_metrics: bool = False
    # seconds between samples (null: MLflow's, 10 s or MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL)
    system_metrics_interval: float | None = None
    # false: the run prints its result and exits while its tracking process finishes the MLflow record
    # (journaled in the output folder; `isles sync` waits for it); true: the run waits for the record
    wait: bool = False


@dataclass
class IslesConfig:
    """The root config; each field's default is written here only (``conf/config.yaml`` chooses the
    groups, an experiment overrides values)."""

    algorithm: Any = MISSING
    # null: every island runs `algorithm`; a list of {algorithm: NAME or node, islands: N, name: ...}, or a
    # mapping name -> such a group: islands of several algorithms in one run (with_groups; docs/mixed_islands.md)
    groups: Any = None
    problem: Any = MISSING
    topology: Any = MISSING
    plugins: list[Any] = field(default_factory=list)
    callbacks: Any = None  # name -> {_target_: ...}: the run's callbacks, in order (conf/callbacks/, app/callbacks.py)
    islands: IslandsConfig = field(default_factory=IslandsConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    seed: int = 0  # every random number derives from (seed, island, generation)
    device: str = "auto"  # auto | cpu | gpu   (auto: CuPy where an actor sees a GPU)
    dtype: str = "float64"  # float64 | float32
    generations: int = 1000  # generations (iterations) per island
    cuda_graph: bool = True  # GPU: replay one captured generation as a CUDA graph (algorithms/core/graph.py)
    stop: StopConfig = field(default_factory=StopConfig)  # stop rule besides the generation budget
    constraints: ConstraintsConfig = field(default_factory=ConstraintsConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    progress: bool = True  # progress bar and end-of-run summary on stdout
    quiet: bool = False  # true: print nothing at the end (progress=false still prints one result line)


def check_keys(cfg: dict, schema=IslesConfig, prefix: str = "") -> None:
    """Refuse keys of the plain config ``cfg`` that ``schema`` (a dataclass, recursively) does
    not declare; ``hydra`` at the top is Hydra's own.

    Raises:
        ValueError: one line naming the key as the user typed it, the closest known key and the
            allowed keys, e.g. ``+generation=10: unknown key 'generation' (did you mean
            'generations'?); allowed keys here: ...``.
    """
    hints = get_type_hints(schema)
    known = [f.name for f in fields(schema)]
    for key, value in cfg.items():
        if key == "hydra" and not prefix:
            continue
        if key not in hints:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean '{prefix}{close[0]}'?)" if close else ""
            raise ValueError(
                f"{prefix}{key}: unknown key{hint}; allowed keys here: {', '.join(prefix + k for k in known)}"
            )
        sub = hints[key]
        if is_dataclass(sub) and isinstance(value, dict):
            check_keys(value, sub, f"{prefix}{key}.")


def check_override_keys(args: list, groups=(), schema=IslesConfig) -> None:
    """Refuse a plain override (``key=value``, as typed on the command line) of a key that
    ``schema`` does not know, before Hydra composes: ``generation=10`` gets the same
    did-you-mean line as ``+generation=10`` (:func:`check_keys`). Config groups (``groups``:
    ``problem=spring``, ``experiment=...``), ``hydra.*`` keys, flags and appended (``+``), forced
    (``++``) or deleted (``~``) keys are left to Hydra and :func:`check_keys`; an argument that
    Hydra's override grammar does not parse is left to Hydra's own message.

    Args:
        args: the command line's arguments (``sys.argv[1:]``).
        groups: the names of the config groups (the folders of the config directory).

    Raises:
        ValueError: one line naming the key as typed, the closest known key and the allowed keys.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: PLC0415
    from hydra.core.override_parser.types import OverrideType  # noqa: PLC0415

    parser = OverridesParser.create()
    for arg in args:
        if arg.startswith("-") or "=" not in arg:
            continue
        try:
            (override,) = parser.parse_overrides([arg])
        except Exception:  # noqa: BLE001, S112  (Hydra says what is wrong with it)
            continue
        key = override.key_or_group
        if (
            override.type != OverrideType.CHANGE
            or override.package is not None
            or "/" in key
            or key.split(".")[0] == "hydra"
            or key in groups
        ):  # a group's choice, not a key
            continue
        nested: dict = {}
        node = nested
        for part in key.split(".")[:-1]:
            node = node.setdefault(part, {})
        node[key.split(".")[-1]] = None
        check_keys(nested, schema)


def with_defaults(cfg: dict, schema=IslesConfig) -> dict:
    """``cfg`` (a plain dict) with every key of ``schema``'s sections that it lacks set to the
    schema's default, recursively: the one place where the runtime's defaults live (a config
    composed by Hydra has them already; a dict made by hand gets them here). Open sections
    (``algorithm``, ``problem``, ...) and values present are left as they are.

    Returns:
        a new dict (``cfg`` is not changed).
    """
    out = dict(cfg)
    hints = get_type_hints(schema)
    for f in fields(schema):
        sub = hints[f.name]
        if is_dataclass(sub):
            value = out.get(f.name)
            out[f.name] = with_defaults(value if isinstance(value, dict) else {}, sub)
        elif f.name not in out and f.default is not MISSING and f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.name not in out and f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def check_values(cfg) -> None:
    """Check the ranges and allowed values of the typed fields of ``cfg``, a plain dict with the
    schema's defaults (:func:`with_defaults`). Only the config is read: what depends on the
    machine or the cluster (a visible GPU, a Ray address that answers, the cluster's nodes) and
    on the built objects (the population size, the topology's island ids) is checked where they
    are known.

    Raises:
        ValueError: one line naming the field as the user types it and the allowed values:
            ``generations`` < 1, ``seed`` < 0, ``device`` or ``dtype`` unknown;
            ``constraints.handling`` unknown, ``constraints.penalty``, ``.r`` or
            ``.multiplier_bound`` not a finite number > 0 (also where the handling leaves them
            unused); ``constraints.eq_tol`` not a finite number >= 0; ``islands.n``, ``.n_actors``, ``.n_nodes``, ``.migration_interval``,
            ``.n_migrants`` < 1, ``islands.replacement``, ``.selection`` (a name or a
            ``_target_`` that cannot be built), ``.mode``, ``.async_budget`` or ``.placement`` unknown, a
            ``plugins`` with ``islands.mode=async``, ``islands.n_nodes`` > 1 on a local Ray
            (``ray.address`` null), ``islands.n_actors`` > ``islands.n_nodes`` under
            ``strict_spread``, ``islands.snapshot_every`` or ``.max_restarts`` < 0,
            ``islands.restart_timeout_s`` <= 0, ``islands.transport=nccl`` with ``device=cpu``;
            ``checkpoint.every`` < 0, or > 0 without
            ``checkpoint.path``; ``stop.tol`` < 0, ``stop.f_target`` not a number,
            ``stop.max_evaluations`` not null nor an integer >= 1;
            ``logger.system_metrics_interval`` <= 0.
    """
    cfg = typed(cfg) if isinstance(cfg, dict) else cfg
    check_range("generations", cfg.generations, 1, integer=True)
    check_range("seed", cfg.seed, 0, integer=True)
    if cfg.device not in DEVICES:
        raise ValueError(f"device={cfg.device!r}: allowed values are {'|'.join(DEVICES)}")
    dtype_of(cfg.dtype)
    c = cfg.constraints
    for name in ("penalty", "r", "multiplier_bound"):  # finite and > 0, also where the handling leaves them unused
        if getattr(c, name) is not None:
            check_range(f"constraints.{name}", getattr(c, name), 0, lo_open=True)
    check_handling(c.handling, c.penalty)
    check_range("constraints.eq_tol", c.eq_tol, 0)
    _check_islands(cfg.islands, cfg.plugins, cfg.ray.address)
    if cfg.islands.transport == "nccl" and cfg.device == "cpu":
        raise ValueError(
            "islands.transport=nccl: NCCL joins GPUs and device=cpu; allowed values here are auto|ray|channel"
        )
    ck = cfg.checkpoint
    check_range("checkpoint.every", ck.every, 0, integer=True)
    if ck.every and not ck.path:
        raise ValueError("checkpoint.path: give a file path for checkpoint.every > 0")
    stop = cfg.stop
    check_range("stop.tol", 0.0 if stop.tol is None else stop.tol, 0)
    if stop.f_target is not None:
        check_range("stop.f_target", stop.f_target)
    if stop.max_evaluations is not None:
        check_range("stop.max_evaluations", stop.max_evaluations, 1, integer=True)
    if cfg.logger.system_metrics_interval is not None:
        check_range("logger.system_metrics_interval", cfg.logger.system_metrics_interval, 0, lo_open=True)


def _check_islands(isl: IslandsConfig, plugins, address) -> None:
    """The ``islands`` fields of :func:`check_values` (``plugins``: the config's ``plugins`` list;
    ``address``: ``ray.address``)."""
    check_range("islands.n", isl.n, 1, integer=True)
    if isl.n_actors is not None:
        check_range("islands.n_actors", isl.n_actors, 1, integer=True)
    check_range("islands.migration_interval", isl.migration_interval, 1, integer=True)
    check_range("islands.n_migrants", isl.n_migrants, 1, integer=True)
    replacement_policy(isl.replacement)  # built once here, before Ray: a bad one is one line
    selection_policy(isl.selection)
    if isl.mode not in MODES:
        raise ValueError(f"islands.mode={isl.mode!r}: allowed values are {'|'.join(MODES)}")
    if isl.async_budget not in ASYNC_BUDGETS:
        raise ValueError(f"islands.async_budget={isl.async_budget!r}: allowed values are {'|'.join(ASYNC_BUDGETS)}")
    check_plugins(plugins, isl.mode)
    strategy, n_nodes, n_actors = isl.placement, isl.n_nodes, isl.n_actors
    if strategy not in STRATEGIES:
        raise ValueError(f"islands.placement={strategy!r}: allowed values are {'|'.join(STRATEGIES)}")
    if n_nodes is not None:
        check_range("islands.n_nodes", n_nodes, 1, integer=True)
        if not address and n_nodes > 1:
            raise ValueError(
                f"islands.n_nodes={n_nodes}: a local Ray has one node; allowed values here are null or 1 "
                "(give ray.address of a cluster to use more)"
            )
        if strategy == "strict_spread" and n_actors is not None and n_actors > n_nodes:
            raise ValueError(
                f"islands.n_actors={n_actors}: islands.placement=strict_spread puts one actor per node; "
                f"allowed values are 1..{n_nodes} (islands.n_nodes)"
            )
    check_range("islands.snapshot_every", isl.snapshot_every, 0, integer=True)
    check_range("islands.max_restarts", isl.max_restarts, 0, integer=True)
    check_range("islands.restart_timeout_s", isl.restart_timeout_s, 0, lo_open=True)
    if isl.transport not in TRANSPORTS:
        raise ValueError(f"islands.transport={isl.transport!r}: allowed values are {'|'.join(TRANSPORTS)}")
    if isl.span_graph not in SPAN_GRAPHS:
        raise ValueError(f"islands.span_graph={isl.span_graph!r}: allowed values are {'|'.join(SPAN_GRAPHS)}")


def check_plugins(plugins, mode: str) -> None:
    """The loop's plug-ins (the config's ``plugins`` nodes, or the objects) run in the sync loop only.

    Raises:
        ValueError: ``plugins`` is not a list, or not empty while ``mode`` (``islands.mode``) is not ``sync``.
    """
    if not isinstance(plugins, (list, tuple)):
        raise ValueError(f"plugins={plugins!r}: allowed values are a list of {{_target_: ...}} nodes")
    if plugins and mode != "sync":
        raise ValueError(f"islands.mode={mode}: plugins (the loop's plug-ins) need islands.mode=sync")


class Validated(dict):
    """A run config that :func:`validated` made: a plain dict with the schema's defaults and its
    typed fields checked. The runtime trusts it: :func:`validated` given one checks nothing again, so a
    run's config is checked once, by the job before Ray starts (:func:`isles.app.job.validate`), not by
    the driver's :class:`~isles.islands.coordinator.Coordinator` nor an island group: Ray pickles it with its class.

    A copy made with ``type(cfg)({**cfg, ...})`` stays trusted; only values the runtime derives from
    checked ones (the actor's device, ``islands.n_actors=1``) may be put in it that way.
    """


def validated(cfg: dict) -> Validated:
    """``cfg`` (a plain dict) with the schema's defaults (:func:`with_defaults`), its typed fields
    checked (:func:`check_values`): what the runtime reads. A :class:`Validated` config is not
    checked again: a shallow copy of it is returned (the caller may set its top-level keys).

    Raises:
        ValueError: as :func:`check_values`.
    """
    if isinstance(cfg, Validated):
        return Validated(cfg)
    out = Validated(with_groups(with_defaults(cfg)))
    check_values(out)
    return out


def typed(cfg: dict) -> IslesConfig:
    """The checked config ``cfg`` (:func:`validated`) as the schema's dataclasses, what the runtime reads
    (``config.islands.mode``): keys a section does not declare left out, the open nodes as they are."""
    hints, out = get_type_hints(IslesConfig), {f.name: cfg[f.name] for f in fields(IslesConfig) if f.name in cfg}
    for name, value in out.items():
        if is_dataclass(cls := hints[name]):
            out[name] = cls(**{f.name: value[f.name] for f in fields(cls) if f.name in (value or {})})
    return IslesConfig(**out)


def with_groups(cfg: dict) -> dict:
    """``cfg`` with its ``groups`` (``None``: ``cfg`` itself) as a list of ``{name, islands, algorithm, key}`` (a
    built-in's name: its :func:`class_node`; the name: the mapping's key, the option's or the class's, made unique;
    ``key``: as typed), ``islands.n`` their sum and ``algorithm`` the node of :class:`isles.islands.mixed.Mixed`.

    Raises:
        ValueError: one line naming the field (``groups``, ``groups.<j>``, ``.islands``, ``.algorithm``):
            not a list or mapping, empty, an unknown key, islands not an integer >= 1, an unknown algorithm.
    """
    groups, out, names = cfg.get("groups"), [], set()
    if groups is None:
        return cfg
    if not isinstance(groups, (dict, list, tuple)) or not groups:
        raise ValueError(f"groups={groups!r}: allowed values are a list or a mapping of one or more groups")
    for j, (key, g) in enumerate(groups.items() if isinstance(groups, dict) else enumerate(groups)):
        field, name = f"groups.{key}", key if isinstance(groups, dict) else None
        if not isinstance(g, dict) or set(g) - {"algorithm", "islands", "name", "key"}:
            raise ValueError(f"{field}={g!r}: allowed values are {{algorithm: NAME or {{_target_: ...}}, islands: N}}")
        islands, node = check_range(f"{field}.islands", g.get("islands"), 1, integer=True), g.get("algorithm")
        if isinstance(node, str) and node in ALGORITHMS:
            name, node = name or node, class_node(ALGORITHMS[node])
        elif not isinstance(node, dict) or not node.get("_target_"):
            raise ValueError(f"{field}.algorithm={node!r}: allowed values are {'|'.join(ALGORITHMS)}|{{_target_: ...}}")
        name = str(g.get("name") or name or node["_target_"].rsplit(".", 1)[-1].lower())
        names.add(name := name if name not in names else f"{name}{j}")
        out.append({"name": name, "islands": islands, "algorithm": node, "key": g.get("key", str(key))})
    run = {"dim": (cfg.get("problem") or {}).get("dim"), "budget": cfg.get("stop", {}).get("max_evaluations")}
    mixed, n = {"_target_": "isles.islands.mixed.Mixed", "groups": out, **run}, sum(g["islands"] for g in out)
    return {**cfg, "groups": out, "islands": {**cfg["islands"], "n": n}, "algorithm": {**mixed, "_recursive_": False}}


def class_node(cls) -> dict:
    """The config node of the class ``cls`` (an island algorithm, a topology): its ``_target_`` (the
    class's import path) and every field of its ``Params`` dataclass with the field's default, or,
    for a class without one, every constructor parameter that has a default: the one place where
    those defaults are written. ``conf/GROUP/NAME.yaml`` extends it (``/schema/GROUP/NAME@_here_``)
    with only what differs (``max_iterations: ${generations}``, ``bidirectional: false``).

    The node is untyped, as a YAML file's: its values are checked by the class (``cls.Params``)
    when it is built (:func:`isles.islands.config.build.build_algorithm`), with one-line errors naming
    the field (``algorithm.<field>``, ``topology.<field>``).
    """
    node = {"_target_": f"{cls.__module__}.{cls.__qualname__}"}
    params = getattr(cls, "Params", None)
    if dataclasses.is_dataclass(params):
        for f in fields(params):
            node[f.name] = f.default_factory() if f.default is dataclasses.MISSING else f.default
        return node
    for name, p in inspect.signature(cls).parameters.items():
        if p.default is not p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            node[name] = list(p.default) if isinstance(p.default, tuple) else p.default
    return node


#: the root's fields that the schema leaves open (their ``_target_`` class checks them when built)
OPEN_FIELDS = tuple(f.name for f in fields(IslesConfig) if get_type_hints(IslesConfig)[f.name] is Any)


def with_generations(cfg: Validated, resolved: dict) -> Validated:
    """The checked ``cfg`` after a budget in evaluations set its generations
    (:func:`isles.islands.control.budget.with_budget`): ``generations`` and the open nodes
    (:data:`OPEN_FIELDS`: ``algorithm``, ``problem``, ...) taken from ``resolved``, the same
    composed config resolved with the budget's generations, so that what interpolates
    ``${generations}`` (an algorithm's ``max_iterations``) follows it; the typed sections stay as
    checked. Not checked again: the budget's generations lie in ``1..cfg["generations"]``
    (:func:`isles.islands.control.budget.budget_generations`), and the open nodes' classes check them when
    they are built."""
    out = Validated(cfg)
    out["generations"] = resolved["generations"]
    for name in OPEN_FIELDS:
        out[name] = resolved.get(name)
    return Validated(with_groups(out)) if out.get("groups") is not None else out


def register() -> None:
    """Store :class:`IslesConfig` in Hydra's ConfigStore as ``isles_schema``, and the
    :func:`class_node` of each built-in algorithm (:data:`isles.algorithms.options.ALGORITHMS`)
    and topology (:data:`isles.islands.migration.topology.TOPOLOGIES`) as ``schema/GROUP/NAME`` (idempotent)."""
    store = ConfigStore.instance()
    store.store(name="isles_schema", node=IslesConfig)
    for group, options in (("algorithm", ALGORITHMS), ("topology", TOPOLOGIES)):
        for name, cls in options.items():
            store.store(group=f"schema/{group}", name=name, node=class_node(cls))


register()
