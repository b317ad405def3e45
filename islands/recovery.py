"""Recovery: snapshots of a running archipelago, restarts of lost actors from them, and the
compatibility of a checkpoint with the config it is resumed under.

A snapshot is every group's state (host arrays) with the loop's variables (:data:`LOOP_KEYS`),
the seed, the grouping and the resumable config (:func:`resumable_config`); states are per
island, so any grouping resumes it (:func:`isles.islands.checkpoint.regroup`).
"""
from __future__ import annotations

import logging
import time
from dataclasses import fields

from isles.islands.checkpoint import generations_done
from isles.islands.placement import where
from isles.islands.records import LoopState
from isles.islands.results import RecordLog, migration_log

log = logging.getLogger("isles.islands.coordinator")


class RestartFailed(RuntimeError):
    """Lost island groups whose actors Ray did not restart within ``islands.restart_timeout_s``
    (e.g. a lost node whose bundles no other node has room for). The coordinator's
    :attr:`Coordinator.last_snapshot` still holds the run's last snapshot, for a checkpoint."""


#: the loop variables of :meth:`Coordinator._run_sync` that a snapshot holds (:class:`LoopState`'s fields)
LOOP_KEYS = tuple(f.name for f in fields(LoopState))

#: config sections that may change between a run and its resume (where and how it runs, not what)
RESUME_FREE = ("checkpoint", "ray", "logger", "progress", "quiet", "device", "hydra", "cuda_graph")
RESUME_FREE_KEYS = ("islands.n_actors", "islands.n_nodes", "islands.placement", "islands.snapshot_every",
                    "islands.max_restarts", "islands.restart_timeout_s", "generations", "stop.max_evaluations")


def loop_copy(src) -> LoopState:
    """The loop variables of ``src`` (a :class:`LoopState` or a snapshot), its logs copied (bounded:
    :class:`isles.islands.results.RecordLog`)."""
    get = src.get if isinstance(src, dict) else lambda k: getattr(src, k)
    out = LoopState(**{k: get(k) for k in LOOP_KEYS})
    out.history, out.migrations = RecordLog.of(out.history), migration_log(out.migrations)
    return out


def resumable_config(cfg: dict) -> dict:
    """The flattened config that a resume must repeat: everything but where and how the run
    runs (:data:`RESUME_FREE`, :data:`RESUME_FREE_KEYS`); ``generations`` and ``stop.max_evaluations`` may grow."""
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
    return flat


def check_resumable(data: dict, cfg: dict, path: str) -> None:
    """Refuse to resume a checkpoint under a different config, or with fewer ``generations``
    than the checkpoint's run has done (its result would be printed as this run's).

    Raises:
        ValueError: one line naming the fields that differ, with both values; or naming
            ``generations`` and the checkpoint's generation.
    """
    saved, now = data.get("config", {}), resumable_config(cfg)
    diff = sorted(k for k in set(saved) | set(now) if saved.get(k, "<unset>") != now.get(k, "<unset>"))
    if diff:
        shown = "; ".join(f"{k}: saved {saved.get(k, '<unset>')!r}, now {now.get(k, '<unset>')!r}" for k in diff[:6])
        raise ValueError(f"checkpoint.resume={path!r}: the config differs from the saved run ({shown}); "
                         "resume with the saved values, or start a new run")
    done = generations_done(data)
    if int(cfg["generations"]) < done:
        budget = (cfg.get("stop") or {}).get("max_evaluations")
        field = f"generations={cfg['generations']}" if budget is None else \
            f"stop.max_evaluations={budget} (a budget of {cfg['generations']} generations)"
        raise ValueError(f"{field}: the checkpoint (checkpoint.resume={path!r}) is at generation {done}; allowed "
                         f"values are {'>= ' if budget is None else 'budgets of >= '}{done}"
                         f"{'' if budget is None else ' generations'}")


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
    """The snapshot and restart methods of :class:`isles.islands.coordinator.Coordinator` (a
    mix-in: it uses the coordinator's ``cfg``, ``seed``, ``callbacks``, ``group_infos``,
    ``last_snapshot``, ``restart_timeout_s`` and its executor's ``_gather``/``_call``)."""

    def _relocated(self, infos: list) -> None:
        """After a restart: keep where each group runs now (:attr:`group_infos`), log each group
        that was restarted (another process, maybe another node), and hand the callbacks'
        ``on_restart`` the restarted groups (``{"groups": {group index: info}}``)."""
        moved = {}
        for i, (old, new) in enumerate(zip(self.group_infos, infos)):
            if (new["node_id"], new["pid"]) != (old["node_id"], old["pid"]):
                ids = new["island_ids"]
                log.warning("island group %d (islands %d..%d) restarted on %s", i, ids[0], ids[-1], where(new))
                moved[i] = new
        self.group_infos = list(infos)
        for cb in self.callbacks if moved else ():
            if hasattr(cb, "on_restart"):
                cb.on_restart({"groups": moved})

    def _snapshot(self, groups, placement, loop: LoopState, carried: list | None = None) -> dict:
        """Everything needed to continue from the end of ``loop.epoch``: every group's state (host
        arrays), the plug-ins' states (group 0's replicas), the loop's variables, the seed, the
        grouping and the config (what :func:`check_resumable` compares). Histories are copied
        (records are never changed after they are made). ``carried``: every group's
        :class:`isles.islands.records.GroupSnapshot` that came with a span's summaries
        (:meth:`IslandGroup.run_span`), else they are asked for."""
        if carried is not None:
            states, loop.plugins = [c.state for c in carried], carried[0].plugins
        else:
            loop.plugins = self._gather([self._call(groups[0], "plugin_states")])[0]
            got = self._gather([self._call(g, "state_dict") for g in groups])
            states = [got[i] for i in range(len(groups))]
        return {"seed": self.seed, "groups": placement.groups, "states": states,
                "config": resumable_config(self.cfg), **vars(loop_copy(loop))}

    def _load_groups(self, groups, states: list, plugins: list | None = None) -> None:
        """Set every group's state (host arrays from a snapshot) and its plug-ins' (``plugins``),
        waiting for restarting actors up to ``islands.restart_timeout_s`` seconds.

        Raises:
            RestartFailed: a group's actor did not come back in time."""
        deadline = time.monotonic() + self.restart_timeout_s
        calls = lambda: [self._call(g, "load_state_dict", st, plugins) for g, st in zip(groups, states)]  # noqa: E731
        while_restarting(lambda: self._gather(calls(), deadline), self.restart_timeout_s)

    def _restart_failed(self, group_ids: list) -> "RestartFailed":
        """The error of island groups ``group_ids`` not restarted within ``islands.restart_timeout_s``."""
        placement = self.cfg["islands"]["placement"]
        epoch = self.last_snapshot["epoch"] if self.last_snapshot else 0
        return RestartFailed(
            f"islands.restart_timeout_s={self.restart_timeout_s:g}: island group(s) {', '.join(map(str, group_ids))} "
            f"lost and not restarted within {self.restart_timeout_s:g} s (no Ray node has room for their bundles "
            f"under islands.placement={placement}); the run stops at its last snapshot, epoch {epoch}")
