"""Recovery: snapshots of a running archipelago, restarts of lost actors from them, and the
compatibility of a checkpoint with the config it is resumed under.

A snapshot is every group's state (host arrays) with the loop's variables (:data:`LOOP_KEYS`),
the seed, the grouping and the resumable config (:func:`resumable_config`); states are per
island, so any grouping resumes it (:func:`isles.islands.control.checkpoint.regroup`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import fields

from isles.islands.config.schema import typed
from isles.islands.control.checkpoint import generations_done
from isles.islands.control.placement import local_resources, plan_nodes, split, where
from isles.islands.records import LoopState
from isles.islands.results import RecordLog, migration_log

log = logging.getLogger("isles.islands.coordinator")


class RestartFailed(RuntimeError):
    """Lost island groups whose actors Ray did not restart within ``islands.restart_timeout_s``
    (e.g. a lost node whose bundles no other node has room for). The coordinator's
    :attr:`Coordinator.last_snapshot` still holds the run's last snapshot, for a checkpoint."""


#: the loop variables that a snapshot holds (:class:`isles.islands.records.LoopState`'s fields, kept by the schedules)
LOOP_KEYS = tuple(f.name for f in fields(LoopState))

#: config sections that may change between a run and its resume (where and how it runs, not what)
RESUME_FREE = ("checkpoint", "ray", "logger", "progress", "quiet", "device", "hydra", "cuda_graph", "callbacks")
RESUME_FREE_KEYS = (
    "islands.n_actors",
    "islands.n_nodes",
    "islands.placement",
    "islands.snapshot_every",
    "islands.max_restarts",
    "islands.restart_timeout_s",
    "generations",
    "stop.max_evaluations",
)
#: fields added after checkpoints were first written, each with the value that a checkpoint saved
#: without it ran as (its run's behaviour then): such a checkpoint resumes where the field is set so
ADDED_SINCE = {"islands.async_budget": "island"}


def loop_copy(src) -> LoopState:
    """The loop variables of ``src`` (a :class:`LoopState` or a snapshot), its logs copied (bounded:
    :class:`isles.islands.results.RecordLog`)."""
    get = src.get if isinstance(src, dict) else lambda k: getattr(src, k)
    out = LoopState(**{k: get(k) for k in LOOP_KEYS})
    out.history, out.migrations = RecordLog.of(out.history), migration_log(out.migrations)
    return out


def resumable_config(cfg: dict) -> dict:
    """The flattened config that a resume must repeat: everything but where and how the run
    runs (:data:`RESUME_FREE`, :data:`RESUME_FREE_KEYS`; ``islands.async_budget`` in sync mode);
    ``generations`` and ``stop.max_evaluations`` may grow."""
    flat = {}

    def walk(d, prefix):
        for k, v in d.items():
            key = f"{prefix}{k}"
            if not prefix and k in RESUME_FREE or key in RESUME_FREE_KEYS:
                continue
            if isinstance(v, dict):
                walk(v, key + ".")
            elif not hasattr(v, "__dict__"):  # instantiated objects (topology) are compared by their config
                flat[key] = v

    walk(cfg, "")
    if flat.get("islands.mode") == "sync":  # the async budget pool is not used by sync runs
        flat.pop("islands.async_budget", None)
    return flat


def config_fields(flat: dict) -> dict:
    """A :func:`resumable_config` as the fields a user types: a mixed run's ``groups`` (a list of
    ``{name, islands, algorithm, key}``, :func:`isles.islands.config.schema.with_groups`) as
    ``groups.<key>.islands`` and ``groups.<key>.algorithm.<field>``, without what they imply
    (``algorithm.groups``, the mixed algorithm's copy of them, and ``islands.n``, their sum); any
    other config as it is."""
    groups = flat.get("groups")
    if not isinstance(groups, list):
        return flat
    out = {k: v for k, v in flat.items() if k not in ("groups", "algorithm.groups", "islands.n")}

    def walk(value, key):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{key}.{k}")
        else:
            out[key] = value

    for j, g in enumerate(groups):
        g = g if isinstance(g, dict) else {"algorithm": g}
        walk({k: v for k, v in g.items() if k not in ("name", "key")}, f"groups.{g.get('key', j)}")
    return out


def _override(value) -> str:
    """``value`` as a command-line override spells it (``true``, ``null``, ``0.5``, ``ring``)."""
    if isinstance(value, bool) or value is None:  # before ints: True == 1
        return {True: "true", False: "false", None: "null"}[value]
    return repr(value) if isinstance(value, float) else str(value)


def config_diff(saved: dict, now: dict, path: str) -> str | None:
    """One line naming the fields in which the config ``now`` differs from the ``saved`` one (both
    :func:`resumable_config`, compared as :func:`config_fields`), with both values and the overrides
    that give the saved ones back; ``None`` where they agree. A group of a mixed run on one side
    only is one field, ``groups.<key>``, with its islands and algorithm."""
    saved, now = config_fields(saved), config_fields(now)
    unset = "<unset>"
    diff = sorted(k for k in set(saved) | set(now) if saved.get(k, unset) != now.get(k, unset))
    if not diff:
        return None
    shown, seen = [], set()
    for k in diff:
        group = ".".join(k.split(".")[:2]) if k.startswith("groups.") else None
        side = [c for c in (saved, now) if not any(f.startswith(group + ".") for f in c)] if group else []
        if side:  # the whole group on one side only
            if group in seen:
                continue
            seen.add(group)
            have = now if side[0] is saved else saved
            cls = str(have.get(f"{group}.algorithm._target_", "?")).rsplit(".", 1)[-1]
            n = have.get(f"{group}.islands", "?")
            text = f"{n} island{'' if n == 1 else 's'} of {cls}"
            shown.append((group, unset if have is now else text, text if have is now else unset))
        else:
            shown.append((k, repr(saved.get(k, unset)) if k in saved else unset, repr(now[k]) if k in now else unset))
    back = [
        f"{k}={_override(saved[k])}" for k, _, _ in shown[:6] if k in saved and not isinstance(saved[k], (list, dict))
    ]
    more = f"; {len(shown) - 6} more" if len(shown) > 6 else ""
    return (
        f"checkpoint.resume={path!r}: the config differs from the saved run "
        f"({'; '.join(f'{k}: saved {a}, now {b}' for k, a, b in shown[:6])}{more}); resume with the saved values"
        f"{' (' + ' '.join(back) + ')' if back else ''}, or start a new run"
    )


def check_resumable(data: dict, cfg: dict, path: str) -> None:
    """Refuse to resume a checkpoint under a different config (:func:`config_diff`), a sync run's
    checkpoint saved inside an epoch (by an isles before the final checkpoint of a run whose last
    epoch is cut short was its last whole epoch's, :meth:`isles.islands.control.sync_loop.Schedule.checkpoint_due`),
    an async checkpoint on another grouping (:func:`check_async_grouping`), or with fewer
    ``generations`` than the checkpoint's run has done (its result would be printed as this run's).

    Raises:
        ValueError: one line naming the fields that differ, with both values; the epoch the
            checkpoint is inside; ``islands.n_actors`` and the saved grouping; or ``generations``
            and the checkpoint's generation.
    """
    saved, now = data.get("config", {}), resumable_config(cfg)
    saved = {**{k: v for k, v in ADDED_SINCE.items() if k in now}, **saved}
    differs = config_diff(saved, now, path)
    if differs:
        raise ValueError(differs)
    c = typed(cfg)
    done, interval = generations_done(data), int(c.islands.migration_interval)
    if data.get("mode") != "async" and done % interval:
        raise ValueError(
            f"checkpoint.resume={path!r}: saved at generation {done}, inside epoch {data['epoch']} "
            f"(islands.migration_interval={interval}), by an earlier isles; a resume from there would not be "
            "the uninterrupted run: resume an earlier checkpoint of the run, or start a new run"
        )
    check_async_grouping(data, cfg, path)
    if int(c.generations) < done:
        budget = c.stop.max_evaluations
        field = (
            f"generations={c.generations}"
            if budget is None
            else f"stop.max_evaluations={budget} (a budget of {c.generations} generations)"
        )
        raise ValueError(
            f"{field}: the checkpoint (checkpoint.resume={path!r}) is at generation {done}; allowed "
            f"values are {'>= ' if budget is None else 'budgets of >= '}{done}"
            f"{'' if budget is None else ' generations'}"
        )


def check_async_grouping(data: dict, cfg: dict, path: str, groups: list | None = None) -> None:
    """Refuse an async checkpoint (``data``) on another grouping of the islands than it was saved
    with (an async run's groups run different generations: their states do not regroup).

    Before Ray starts (``groups`` ``None``): the grouping that ``islands.n_actors`` asks for, or
    without it the one this machine gets (:func:`isles.islands.control.placement.plan_nodes`, as
    :func:`~isles.islands.control.placement.needs_ray` plans it); on a cluster (``ray.address``)
    without ``islands.n_actors`` the grouping is known once Ray is up, and the coordinator calls
    this again with the ``groups`` it placed.

    Raises:
        ValueError: one line naming ``islands.n_actors``, the saved number of groups and the one now.
    """
    if data.get("mode") != "async":
        return
    c, saved = typed(cfg), [list(g) for g in data["groups"]]
    isl = c.islands
    if groups is None:
        if isl.n_actors is not None:
            groups = split(int(isl.n), min(int(isl.n_actors), int(isl.n)))
        elif c.ray.address:
            return
        else:
            here = {"node_id": "local", "ip": "127.0.0.1", **local_resources(c.ray.num_cpus, c.device)}
            groups = plan_nodes(int(isl.n), c.device, vars(isl), [here]).groups
    if saved != [list(g) for g in groups]:
        raise ValueError(
            f"checkpoint.resume={path!r}: an async run resumes with the grouping it was saved with: "
            f"islands.n_actors={len(saved)} (now {len(groups)}); allowed value here is islands.n_actors={len(saved)}"
        )


def while_restarting(call, timeout_s: float = 120.0):
    """``call()``, retried while Ray reports the actor as restarting (unavailable), for up to
    ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except Exception as err:
            from ray.exceptions import ActorUnavailableError  # noqa: PLC0415

            if not isinstance(err, ActorUnavailableError) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def actor_died(err: BaseException) -> bool:
    """Whether ``err`` says an island-group actor was lost (Ray's actor errors)."""
    try:
        from ray.exceptions import ActorUnavailableError, RayActorError  # noqa: PLC0415
    except ImportError:
        return False
    return isinstance(err, (RayActorError, ActorUnavailableError))


class Recovery:
    """Snapshots of a running archipelago and restarts of lost actors from them.

    Args:
        cfg: the checked run config, typed (:func:`isles.islands.config.schema.typed`); saved_config:
            its :func:`resumable_config`, what a snapshot holds; executor: the run's :class:`isles.islands.control.executor.Executor`;
        monitors: its :class:`isles.islands.control.callbacks.Monitors` (``on_restart``).

    Attributes:
        last_snapshot: the latest snapshot (what an interrupt's checkpoint saves), or ``None``.
        restarts: restarts so far (at most ``islands.max_restarts``).
    """

    def __init__(self, cfg, saved_config: dict, executor, monitors):
        self.cfg, self.saved_config, self.executor, self.monitors = cfg, saved_config, executor, monitors
        self.max_restarts = int(cfg.islands.max_restarts)
        self.timeout_s = float(cfg.islands.restart_timeout_s)
        self.last_snapshot, self.restarts = None, 0

    def snapshot(self, groups, placement, loop, carried: list | None = None) -> dict:
        """Everything needed to continue from the end of ``loop.epoch`` (a :class:`LoopState`): every
        group's state (host arrays), the plug-ins' states (group 0's replicas), the loop's variables,
        the seed, the grouping and the config (what :func:`check_resumable` compares). ``carried``:
        every group's :class:`isles.islands.records.GroupSnapshot` that came with a span's summaries
        (:meth:`IslandGroup.run_span`), else they are asked for. Kept as :attr:`last_snapshot`."""
        ex = self.executor
        if carried is not None:
            states, loop.plugins = [c.state for c in carried], carried[0].plugins
        else:
            loop.plugins = ex.gather([ex.call(groups[0], "plugin_states")])[0]
            got = ex.gather([ex.call(g, "state_dict") for g in groups])
            states = [got[i] for i in range(len(groups))]
        self.last_snapshot = self.of(placement, states, **vars(loop_copy(loop)))
        return self.last_snapshot

    def of(self, placement, states: list, **loop) -> dict:
        """A snapshot of ``states`` (one per group of ``placement``) and the loop's variables ``loop``."""
        return {
            "seed": int(self.cfg.seed),
            "groups": placement.groups,
            "states": states,
            "config": self.saved_config,
            **loop,
        }

    def load(self, groups, states: list, plugins: list | None = None) -> None:
        """Set every group's state (host arrays from a snapshot) and its plug-ins' (``plugins``),
        waiting for restarting actors up to ``islands.restart_timeout_s`` seconds.

        Raises:
            RestartFailed: a group's actor did not come back in time."""
        ex, deadline = self.executor, time.monotonic() + self.timeout_s
        calls = lambda: [ex.call(g, "load_state_dict", st, plugins) for g, st in zip(groups, states, strict=False)]  # noqa: E731
        while_restarting(lambda: ex.gather(calls(), deadline), self.timeout_s)

    def recover(self, err: BaseException, snapshot) -> None:
        """Count a restart after ``err``, or raise ``err`` where it cannot be recovered: no ``snapshot``,
        not a lost actor (:func:`actor_died`), or ``islands.max_restarts`` spent."""
        if snapshot is None or not actor_died(err) or self.restarts >= self.max_restarts:
            raise err
        self.restarts += 1

    def restore(self, groups: list, which: list, states: list, plugins: list | None = None) -> None:
        """After :meth:`recover`: load ``states`` into the groups ``which`` (indices into ``groups``)
        and, on Ray, note where they run now (:meth:`relocated`)."""
        self.load([groups[i] for i in which], states, plugins)
        ex = self.executor
        if ex.use_ray:
            infos = ex.gather([ex.call(groups[i], "info") for i in which])
            new = list(ex.infos)
            for j, i in enumerate(which):
                new[i] = infos[j]
            self.relocated(new)

    def relocated(self, infos: list) -> None:
        """Keep where each group runs now (the executor's ``infos``), log each group that was restarted
        (another process, maybe another node), and hand the monitors' ``on_restart`` the restarted groups."""
        moved = {}
        for i, (old, new) in enumerate(zip(self.executor.infos, infos, strict=False)):
            if (new["node_id"], new["pid"]) != (old["node_id"], old["pid"]):
                ids = new["island_ids"]
                log.warning("island group %d (islands %d..%d) restarted on %s", i, ids[0], ids[-1], where(new))
                moved[i] = new
        self.executor.infos = list(infos)
        self.monitors.restarted(moved)

    def restart_failed(self, group_ids: list) -> RestartFailed:
        """The error of island groups ``group_ids`` not restarted within ``islands.restart_timeout_s``."""
        placement = self.cfg.islands.placement
        epoch = self.last_snapshot["epoch"] if self.last_snapshot else 0
        return RestartFailed(
            f"islands.restart_timeout_s={self.timeout_s:g}: island group(s) {', '.join(map(str, group_ids))} "
            f"lost and not restarted within {self.timeout_s:g} s (no Ray node has room for their bundles "
            f"under islands.placement={placement}); the run stops at its last snapshot, epoch {epoch}"
        )
