"""The loop's plug-in replicated in every actor of the SPMD loop (:meth:`IslandGroup.run_span`).

With a plug-in (e.g. a master population) and several actors, every group hosts an identical
replica of it (:meth:`IslandGroup.attach`: the same factory, seed, stream and state). After each
epoch's evolution every group all-gathers the islands' bests (each group's ``algorithm.best``, a
Population ``(I_g, 1)``), assembles them in global island-id order, and runs the plug-in's epoch
on them: every replica sees the inputs of the in-process run (:meth:`IslandGroup.run_epochs`) in
the same order and draws the same counter-based random numbers, so the replicas stay equal to each
other and to the in-process plug-in, bit for bit. The driver is not in the per-epoch path.

The bests travel like emigrants: over the groups' collective communicator
(:func:`isles.islands.exchange.exchange`, a plan in which each group sends all its islands' bests
to every peer), or in the same inbox message as the next epoch's emigrants
(:mod:`isles.islands.transport`), keyed ``(BEST, island id)`` beside the emigrants' island ids.
"""
from __future__ import annotations

from isles.algorithms.core.population import Population
from isles.islands.exchange import exchange, layout
from isles.islands.planner import group_plan
from isles.islands.plugin import with_broadcast

#: the tag of an island's best in an inbox message: key ``(BEST, island id)``
BEST = "best"


class Replica:
    """One group's replica of the loop's plug-in during a span.

    Args:
        group: the :class:`isles.islands.group.IslandGroup`, its plug-in attached
            (:meth:`IslandGroup.attach`).
        route: :meth:`IslandGroup.run_span`'s route (``groups``, ``index``, ``timeout_s``, and
            ``send_master``: every island receives the plug-in's best, ``islands.master_sends_best``).
        span: the span's id; transport: the group's transport (:meth:`IslandGroup._transport`: posts or channels);
        nccl: the groups' communicator (:class:`isles.islands.exchange.NcclComm`) or ``None``
            (bests through the inboxes).
    """

    def __init__(self, group, route: dict, span: int, transport, nccl):
        self.group, self.span, self.transport, self.nccl = group, span, transport, nccl
        self.timeout_s = route["timeout_s"]
        self.send_master = bool(route.get("send_master"))
        self.mine = {gid: p for p, gid in enumerate(group.island_ids)}
        peers = [g for g in range(len(route["groups"])) if g != route["index"]]
        self.sends = {g: sorted(self.mine) for g in peers}  # all my islands' bests to every peer
        self.receives = {g: sorted(route["groups"][g]) for g in peers}  # and every peer's
        self.order = sorted(gid for ids in route["groups"] for gid in ids)
        self.lay = None  # the layout of one island's best (the exchange's), fixed for the run
        self.got = {}  # the emigrants that came with the last bests (inbox path)

    def plan(self, edges, got: dict) -> tuple:
        """:func:`isles.islands.planner.group_plan` of the group with the plug-in's best
        (``(inbound, remote)``, as the in-process loop's)."""
        master = self.group.plugin.broadcast() if self.send_master else None
        return group_plan(edges, self.group.island_ids, got, master, self.send_master)

    def fill(self, remote: dict) -> dict:
        """``remote`` with an entry ``MASTER_ID: None`` (the driver's plan of a span's first epoch)
        set to the plug-in's best, Population ``(1, 1)``."""
        return with_broadcast(remote, self.group.plugin)

    def after_epoch(self, best: Population, k: int, epoch: int, posts: dict | None) -> None:
        """All-gather the islands' bests after ``epoch`` and run the plug-in's epoch on them.

        Args:
            best: this group's bests, Population ``(I_g, 1)`` (device arrays); k: the epoch's
                generations; epoch: the epoch's number in the run (messages are keyed by it).
            posts: ``{peer group: {island id: Population (1, k)}}``, the emigrants this group
                posts after the epoch (inbox path; sent in the same message as the bests), or ``None``.

        Raises:
            isles.islands.transport.Aborted: the span was aborted while waiting for a peer.
            TimeoutError: a peer's bests did not arrive within ``route["timeout_s"]``.
        """
        group, xp = self.group, self.group.xp
        if self.nccl is not None:  # device to device, one group call
            self.lay = self.lay or layout(best.island(0))
            got = exchange(self.nccl, xp, best, self.mine, self.sends, self.receives, self.lay)
        else:
            host = best.to_host()
            mine = {(BEST, gid): host.island(p) for gid, p in self.mine.items()}
            self.transport.send(self.span, epoch, {g: {**mine, **(posts or {}).get(g, {})} for g in self.receives})
            took = self.transport.take(self.span, epoch, sorted(self.receives), self.timeout_s)
            got = {key[1]: pop.to_device(xp) for key, pop in took.items() if isinstance(key, tuple)}
            self.got = {key: pop for key, pop in took.items() if not isinstance(key, tuple)}
        bests = Population.concat([best.island(self.mine[g]) if g in self.mine else got[g] for g in self.order], axis=0)
        group.plugin.after_epoch(group.algorithm.phenotype(bests.genome[:, 0]), bests.f[:, 0], bests.v[:, 0], k)
