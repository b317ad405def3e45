"""The transports of a sync run: how emigrants travel between island groups, one object each.

A :class:`Transport` is formed once by the driver (:meth:`Transport.form`, again after a restart) and
makes each span's link in every group (:meth:`Transport.link`, :mod:`isles.islands.transport.link`).
Three exist: :data:`POSTS` (one-sided posts to the peers' inboxes through Ray; in-process groups post
directly), :data:`CHANNELS` (shared-memory channels between the actors of one node, posts between
nodes: :mod:`isles.islands.transport.channels`) and :data:`NCCL` (the groups' communicator, GPU to GPU:
:mod:`isles.islands.transport.nccl`). :func:`form` picks one by ``islands.transport``
(:data:`TRIES`); the driver hands it to the groups in :attr:`isles.islands.records.Route.transport`.
"""

from __future__ import annotations

import logging
from typing import Protocol, runtime_checkable

from isles.islands.transport.channels import ChannelTransport
from isles.islands.transport.link import ActorTransport, Alone, Collective, Posts

log = logging.getLogger("isles.islands.coordinator")


@runtime_checkable
class Transport(Protocol):
    """How emigrants travel between the groups of a sync span.

    Attributes:
        name: its ``islands.transport`` value.
        collective: the span's exchange is one device-to-device group call, with no host in the path
            (a span of several groups over it can be captured in a CUDA graph, :mod:`isles.islands.span_graph`).
    """

    name: str
    collective: bool

    def form(self, ex, groups) -> bool:
        """Form the groups' links (the driver, before the first span and after a restart).

        Args:
            ex: the run's :class:`isles.islands.control.executor.Executor`; groups: its group handles.

        Returns:
            ``False`` where this transport cannot join these groups (nothing formed)."""

    def link(self, group, route, span: int):
        """The link of ``group`` (an :class:`isles.islands.group.IslandGroup`) to its peers for ``span``
        (``route``: the span's :class:`isles.islands.records.Route`): ``take``/``send``/``gather``."""


class PostsTransport:
    """One-sided posts to the peers' inboxes (:class:`isles.islands.transport.link.ActorTransport`):
    nothing to form."""

    name, collective = "ray", False

    def form(self, ex, groups) -> bool:
        """Nothing to form: ``True``."""
        return True

    def link(self, group, route, span: int):
        """:class:`isles.islands.transport.link.Posts` over the group's inbox and the peers' handles."""
        return Posts(route, span, ActorTransport(route.peers, route.index, group.inbox), group.xp)


class ChannelsTransport:
    """Shared-memory channels between every two groups on one node, posts between nodes
    (:class:`isles.islands.transport.channels.ChannelTransport`)."""

    name, collective = "channel", False

    def form(self, ex, groups) -> bool:
        """Each group creates the channels it writes (:meth:`IslandGroup.channels_make`), then each
        reads its own (:meth:`IslandGroup.channels_join`). ``False`` where no two groups share a node
        (by ``ex.infos``' ``node_id``)."""
        nodes = [info.get("node_id") for info in ex.infos]  # where each runs now
        readers = [
            {j: (groups[j], nodes[j]) for j in range(len(groups)) if j != i and nodes[j] == nodes[i]}
            for i in range(len(groups))
        ]
        if None in nodes or not any(readers):
            return False
        made = ex.gather([ex.call(g, "channels_make", readers[i]) for i, g in enumerate(groups)])
        ex.gather(
            [
                ex.call(g, "channels_join", {i: made[i][j] for i in range(len(groups)) if j in made[i]})
                for j, g in enumerate(groups)
            ]
        )
        log.info(
            "emigrants between the %d actors through shared-memory channels (%d pairs on one node)",
            len(groups),
            sum(map(len, readers)),
        )
        return True

    def link(self, group, route, span: int):
        """:class:`isles.islands.transport.link.Posts` over the group's channels (posts to the peers without one)."""
        posts = ActorTransport(route.peers, route.index, group.inbox)
        return Posts(route, span, ChannelTransport(group._channels, posts, route.timeout_s), group.xp)


class NcclTransport:
    """The groups' NCCL communicator, GPU to GPU (:class:`isles.islands.transport.nccl.NcclComm`)."""

    name, collective = "nccl", True

    def form(self, ex, groups) -> bool:
        """Every group joins one communicator (:meth:`IslandGroup.nccl_join`). ``False`` where a group
        cannot (NumPy, or CuPy without NCCL: :meth:`IslandGroup.nccl_unique_id` gives ``None``)."""
        uid = ex.gather([ex.call(groups[0], "nccl_unique_id")])[0]
        if uid is None:
            return False
        ex.gather([ex.call(g, "nccl_join", uid, len(groups), i) for i, g in enumerate(groups)])
        log.info("emigrants between the %d actors' GPUs over NCCL", len(groups))
        return True

    def link(self, group, route, span: int):
        """:class:`isles.islands.transport.link.Collective` over the group's communicator."""
        return Collective(route, group._nccl, group.xp)


POSTS, CHANNELS, NCCL = PostsTransport(), ChannelsTransport(), NcclTransport()

#: what each ``islands.transport`` value tries, in order, before :data:`POSTS` (actors only: in-process
#: groups share this process's GPU, and NCCL takes one rank per GPU)
TRIES = {"auto": (NCCL, CHANNELS), "nccl": (NCCL,), "channel": (CHANNELS,), "ray": ()}


def form(ex, groups, wanted: str) -> Transport:
    """Form the groups' links by ``islands.transport`` (``wanted``): the first of :data:`TRIES` that
    forms, else :data:`POSTS`.

    Args:
        ex: the run's :class:`isles.islands.control.executor.Executor` (``use_ray``, ``call``, ``gather``,
            ``infos``); groups: its group handles.

    Raises:
        ValueError: ``islands.transport=nccl`` and a group cannot use NCCL."""
    if ex.use_ray:
        for transport in TRIES[wanted]:
            if transport.form(ex, groups):
                return transport
        if wanted == NCCL.name:
            raise ValueError(
                "islands.transport=nccl: the island groups cannot use NCCL (device=cpu, or CuPy "
                "without NCCL); allowed values here are auto|ray|channel"
            )
    return POSTS


def span_link(group, route, span: int):
    """The link of ``group`` for ``span`` (:meth:`isles.islands.group.IslandGroup.run_span`):
    :class:`isles.islands.transport.link.Alone` without peers, else ``route.transport``'s."""
    if len(route.groups) == 1:
        return Alone(group.island_ids)
    return route.transport.link(group, route, span)
