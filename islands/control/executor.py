"""The executor of the control plane: where the island groups run and how the driver calls them.

The groups are Ray actors (one per GPU, or per CPU worker), each in its bundle of the placement
group reserved for the run (:mod:`isles.islands.control.placement`), or in-process groups
(``use_ray=False``), each called in a thread of its own (:class:`Local`), so that several in-process
groups run their spans at once, as actors do. :meth:`Executor.call` calls a method of either;
:meth:`Executor.gather` collects the results as they finish. It also forms the groups' links
(NCCL, shared-memory channels) and aborts a span in every group when one is lost.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from isles.islands.control.placement import actor_options, cluster_nodes, local_resources, plan, plan_nodes, reserve
from isles.islands.group import IslandGroup
from isles.islands.plugin import plugin_stream
from isles.islands.records import GroupSpec
from isles.islands.transport.kinds import form as form_transport

log = logging.getLogger("isles.islands.coordinator")

RELEASE_WAIT_S = 5.0
"""How long :meth:`Executor.release` waits for Ray to remove the placement group, in seconds."""


class Local:
    """An in-process group called like an actor (``use_ray=False``): :meth:`call` runs a method in
    the group's own thread (a span waits for its peers' posts, which the peers' threads make) and
    returns a future; attributes are the group's (its peers post into its inbox directly)."""

    def __init__(self, group: IslandGroup):
        self._group = group
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"isles-group-{group.island_ids[0]}")

    def call(self, name: str, *args):
        """``group.name(*args)`` in the group's thread: a future."""
        return self._thread.submit(getattr(self._group, name), *args)

    def close(self) -> None:
        """End the group's thread (after the run)."""
        self._thread.shutdown(wait=False)

    def __getattr__(self, name):
        return getattr(self._group, name)


class Executor:
    """The placement, start, calls, links and release of a run's island groups.

    Args:
        cfg: the checked run config, typed (:func:`isles.islands.config.schema.typed`).
        plugins: the loop's plug-in factories (every group builds its replicas).
        target: the stop rule's target, or ``None``; use_ray: Ray actors, or in-process groups.
        restart_failed: ``(group indices) -> Exception``, raised when a deadline passes in :meth:`gather`.

    Attributes:
        infos: each group's ``info`` (:meth:`IslandGroup.info`): where it runs now.
        link: the groups' :class:`isles.islands.transport.kinds.Transport`, or ``None`` (not formed).
    """

    def __init__(self, cfg, plugins: list, target, use_ray: bool, restart_failed):
        self.cfg, self.plugins, self.target, self.use_ray = cfg, list(plugins), target, use_ray
        self.n, self.seed = int(cfg.islands.n), int(cfg.seed)
        self.restart_failed = restart_failed
        self.infos, self.link, self._reserved = [], None, None

    def spec(self, island_ids, device) -> GroupSpec:
        """The :class:`isles.islands.records.GroupSpec` of the group of ``island_ids`` on ``device``."""
        c, isl = self.cfg, self.cfg.islands
        return GroupSpec(
            problem=c.problem,
            constraints=dict(vars(c.constraints)),
            algorithm=c.algorithm,
            island_ids=tuple(island_ids),
            seed=self.seed,
            device=device,
            dtype=c.dtype,
            n_migrants=int(isl.n_migrants),
            replacement=isl.replacement,
            selection=isl.selection,
            target=self.target,
            cuda_graph=c.cuda_graph,
            span_graph=isl.span_graph,
            plugins=tuple(self.plugins),
            plugin_stream=plugin_stream(self.n),
        )

    def placement(self):
        """The actors to start on Ray's nodes (:func:`isles.islands.control.placement.plan_nodes`), or
        in-process on this machine (one device: a local GPU when CuPy sees one)."""
        isl, device = self.cfg.islands, self.cfg.device
        if self.use_ray:
            return plan_nodes(self.n, device, vars(isl), cluster_nodes())
        resources = {"CPU": 1, "GPU": min(1, local_resources(device=device)["GPU"])}  # one device: this one
        return plan(self.n, device, isl.n_actors, resources)

    def start(self, p) -> list:
        """One island group per block of ``p.groups``: Ray actors, each in its bundle of the
        placement group reserved for them (:func:`isles.islands.control.placement.reserve`), or in-process."""
        if not self.use_ray:
            return [Local(IslandGroup(self.spec(ids, p.device))) for ids in p.groups]
        import ray  # noqa: PLC0415

        self._reserved = reserve(p)
        # a second thread takes the peers' posts while the first runs epochs (sync spans, async loops)
        restarts = int(self.cfg.islands.max_restarts)
        return [
            ray.remote(IslandGroup)
            .options(**actor_options(p, self._reserved, i, restarts), max_concurrency=2)
            .remote(self.spec(ids, p.device))
            for i, ids in enumerate(p.groups)
        ]

    def stop(self, groups: list, wait_s: float = RELEASE_WAIT_S) -> None:
        """Kill the actors and give the placement group back to Ray, waiting at most ``wait_s`` seconds:
        Ray's call waits for the GCS, which a signal to every process of a job (Slurm's ``scancel``)
        may have stopped; the driver then goes on to its checkpoint instead of waiting until Ray ends
        the process (60 s, exit 1). In-process groups end their threads."""
        if not self.use_ray:
            for g in groups:
                g.close()
            return
        import ray  # noqa: PLC0415

        for g in groups:
            ray.kill(g)
        if self._reserved is not None:
            from ray.util.placement_group import remove_placement_group  # noqa: PLC0415

            release = threading.Thread(
                target=remove_placement_group, args=(self._reserved,), name="isles-release", daemon=True
            )
            release.start()
            release.join(wait_s)
            self._reserved = None

    def call(self, group, method: str, *args):
        """Call ``group.method(*args)``: a Ray object ref, or an in-process future (in the group's
        thread, :class:`Local`)."""
        if self.use_ray:
            return getattr(group, method).remote(*args)
        if isinstance(group, Local):
            return group.call(method, *args)
        done = Future()  # another in-process stand-in: called here
        done.set_result(getattr(group, method)(*args))
        return done

    def gather(self, calls: list, deadline: float | None = None, on_error=None) -> dict:
        """``{i: result}`` of ``calls`` (Ray object refs, or futures), collected as they finish.
        ``on_error()`` runs when a call fails, before the other calls are waited for (e.g. to abort a
        span that they would otherwise wait in for the failed one).

        Raises:
            Exception: the call's error; ``restart_failed(...)``: ``deadline`` (``time.monotonic()``
                seconds) passed with calls unfinished (their actors were not restarted in time).
        """
        if not self.use_ray:
            return self._gather_local(calls, on_error)
        import ray  # noqa: PLC0415

        refs = {ref: i for i, ref in enumerate(calls)}
        out, pending = {}, list(refs)
        while pending:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            done, pending = ray.wait(pending, num_returns=1, timeout=timeout)
            if not done:
                raise self.restart_failed(sorted(refs[r] for r in pending))
            try:
                out[refs[done[0]]] = ray.get(done[0])
            except Exception:
                if on_error is not None:
                    on_error()
                # the other groups' results (or errors) are read and dropped, so that Ray does
                # not print each failed task again as an unhandled error
                for ref in pending:
                    with contextlib.suppress(Exception):
                        ray.get(ref, timeout=5)
                raise
        return out

    @staticmethod
    def _gather_local(futures: list, on_error=None) -> dict:
        out = {}
        for i, fut in enumerate(futures):
            try:
                out[i] = fut.result()
            except Exception:
                if on_error is not None:
                    on_error()
                for other in futures[i + 1 :]:
                    with contextlib.suppress(Exception):
                        other.result(timeout=30)
                raise
        return out

    def abort(self, groups, span: int) -> None:
        """Abort ``span`` in every group that is still there (a peer was lost)."""
        if not self.use_ray:
            for g in groups:
                g.abort(span)
            return
        import ray  # noqa: PLC0415

        for ref in [g.abort.remote(span) for g in groups]:
            with contextlib.suppress(Exception):  # (the lost group)
                ray.get(ref, timeout=5)

    def form_links(self, groups):
        """Form the groups' links for the sync spans (:attr:`link`) by ``islands.transport``
        (:func:`isles.islands.transport.kinds.form`): NCCL, shared-memory channels, or posts only.

        Raises:
            ValueError: ``islands.transport=nccl`` and a group cannot use NCCL."""
        self.link = form_transport(self, groups, self.cfg.islands.transport)
        return self.link
