"""The executor of the control plane: where the island groups run and how the driver calls them.

The groups are Ray actors (one per GPU, or per CPU worker), each in its bundle of the placement
group reserved for the run (:mod:`isles.islands.placement`), or in-process groups
(``use_ray=False``), each called in a thread of its own (:class:`Local`), so that several in-process
groups run their spans at once, as actors do. :meth:`Executor._call` calls a method of either;
:meth:`Executor._gather` collects the results as they finish.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from isles.islands.group import IslandGroup
from isles.islands.placement import actor_options, cluster_nodes, local_resources, plan, plan_nodes, reserve
from isles.islands.plugin import plugin_stream
from isles.islands.records import GroupSpec

RELEASE_WAIT_S = 5.0
"""How long :meth:`Executor._release` waits for Ray to remove the placement group, in seconds."""


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
    """The placement, start, release and calls of the island groups (a mix-in of
    :class:`isles.islands.coordinator.Coordinator`: it uses its ``cfg``, ``n``, ``seed``,
    ``n_migrants``, ``target``, ``use_ray``, ``max_restarts`` and ``_restart_failed``)."""

    def _spec(self, island_ids, device) -> GroupSpec:
        """The :class:`isles.islands.records.GroupSpec` of the group of ``island_ids`` on ``device``."""
        c, isl = self.cfg, self.cfg["islands"]
        return GroupSpec(problem=c["problem"], constraints=c["constraints"], algorithm=c["algorithm"],
                         island_ids=tuple(island_ids), seed=self.seed, device=device, dtype=c["dtype"],
                         n_migrants=self.n_migrants, replacement=isl["replacement"], selection=isl["selection"],
                         target=self.target, cuda_graph=c["cuda_graph"], span_graph=isl["span_graph"],
                         plugins=tuple(self.plugins), plugin_stream=plugin_stream(self.n))

    def _placement(self):
        """The actors to start on Ray's nodes (:func:`isles.islands.placement.plan_nodes`), or
        in-process on this machine (one device: a local GPU when CuPy sees one)."""
        isl = self.cfg["islands"]
        if self.use_ray:
            return plan_nodes(self.n, self.cfg["device"], isl, cluster_nodes())
        device = self.cfg["device"]
        resources = {"CPU": 1, "GPU": min(1, local_resources(device=device)["GPU"])}  # one device: this one
        return plan(self.n, device, isl["n_actors"], resources)

    def _start_groups(self, p):
        """One island group per block of ``p.groups``: Ray actors, each in its bundle of the
        placement group reserved for them (:func:`isles.islands.placement.reserve`), or in-process
        stand-ins."""
        if not self.use_ray:
            return [Local(IslandGroup(self._spec(ids, p.device))) for ids in p.groups]
        import ray  # noqa: PLC0415

        actor = ray.remote(IslandGroup)
        self._reserved = reserve(p)
        # sync spans (IslandGroup.run_span): a second thread takes the peers' emigrants while the
        # first runs epochs (with or without a plug-in); otherwise one thread, so that calls run in the
        # order they were made (the async loop queues a state_dict call before a group's next epoch)
        threads = 2 if self.mode == "sync" else 1
        return [actor.options(**actor_options(p, self._reserved, i, self.max_restarts), max_concurrency=threads)
                .remote(self._spec(ids, p.device)) for i, ids in enumerate(p.groups)]

    def _release(self, wait_s: float = RELEASE_WAIT_S) -> None:
        """Give the placement group back to Ray (after the actors are killed), waiting at most
        ``wait_s`` seconds: Ray's call waits for the GCS, which a signal to every process of a
        job (Slurm's ``scancel``) may have stopped; the driver then goes on to its checkpoint
        instead of waiting until Ray ends the process (60 s, exit 1)."""
        if self._reserved is not None:
            from ray.util.placement_group import remove_placement_group  # noqa: PLC0415

            release = threading.Thread(target=remove_placement_group, args=(self._reserved,),
                                       name="isles-release", daemon=True)
            release.start()
            release.join(wait_s)
            self._reserved = None

    def _gather(self, calls: list, deadline: float | None = None, on_error=None) -> dict:
        """``{i: result}`` of the calls ``[ObjectRef, ...]``, collected with ``ray.wait`` as they finish.

        Raises:
            RestartFailed: ``deadline`` (``time.monotonic()`` seconds) passed with calls unfinished
                (their actors were not restarted in time).

        ``on_error()`` runs when a call fails, before the other calls are waited for (e.g. to
        abort a span that they would otherwise wait in for the failed one).
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
                raise self._restart_failed(sorted(refs[r] for r in pending))
            try:
                out[refs[done[0]]] = ray.get(done[0])
            except Exception:
                if on_error is not None:
                    on_error()
                # the other groups' results (or errors) are read and dropped, so that Ray does
                # not print each failed task again as an unhandled error
                for ref in pending:
                    try:
                        ray.get(ref, timeout=5)
                    except Exception:  # noqa: BLE001, S110
                        pass
                raise
        return out

    @staticmethod
    def _gather_local(futures: list, on_error=None) -> dict:
        """``{i: result}`` of in-process calls (futures); ``on_error()`` runs at the first error,
        before the other calls are waited for."""
        out = {}
        for i, fut in enumerate(futures):
            try:
                out[i] = fut.result()
            except Exception:
                if on_error is not None:
                    on_error()
                for other in futures[i + 1:]:
                    try:
                        other.result(timeout=30)
                    except Exception:  # noqa: BLE001, S110
                        pass
                raise
        return out

    def _call(self, group, method: str, *args):
        """Call ``group.method(*args)``: a Ray object ref, or an in-process future (in the group's
        thread, :class:`Local`)."""
        if self.use_ray:
            return getattr(group, method).remote(*args)
        if isinstance(group, Local):
            return group.call(method, *args)
        done = Future()  # another in-process stand-in: called here
        done.set_result(getattr(group, method)(*args))
        return done

