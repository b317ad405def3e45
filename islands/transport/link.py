"""The transport of emigrants between island groups: "send these individuals to these groups,
receive mine".

Each group owns an :class:`Inbox`. A sender posts, one-sided, the emigrants a peer needs
(:meth:`ActorTransport.send`: a fire-and-forget Ray actor call of the peer's ``post``, which its
second thread runs while its loop evolves); the receiver takes them from its own inbox
(:meth:`Inbox.take`, blocking in sync mode; :meth:`Inbox.poll` does not block). Within a group,
emigrants move by device copies (:func:`isles.islands.migration.moves.immigrate`), never
through a transport. Messages are keyed by ``(span, epoch, sending group)``: a span is one run of
epochs that the driver starts (:meth:`IslandGroup.run_span`); messages of an aborted span are
dropped. With plug-ins, a message also carries the sender's islands' bests, keyed ``(BEST, island id)``.

The epoch body (:func:`isles.islands.epoch.run_epoch`) sees one of three links, all with the same
``take``/``send``/``gather``: :class:`Alone` (no peers), :class:`Posts` (inboxes, or channels), and
:class:`Collective` (the groups' communicator, device to device; capturable in a CUDA graph).
The async loop's groups use :class:`Arrivals`: posts that never wait, and whatever has arrived.

Between actors of one node, :class:`isles.islands.transport.channels.ChannelTransport` has the same
interface over shared-memory channels; between GPUs, :func:`isles.islands.transport.nccl.exchange`
moves the emigrants over NCCL, device to device.
"""

from __future__ import annotations

import threading
import time

from isles.algorithms.core.population import Population
from isles.islands.transport.nccl import exchange, layout
from isles.islands.transport.nccl import plan as exchange_plan

#: the tag of an island's best in an inbox message: key ``(BEST, island id)``
BEST = "best"


class Aborted(RuntimeError):
    """The span was aborted (:meth:`Inbox.abort`, a peer was lost); the driver restores a snapshot."""


class Inbox:
    """Emigrants posted to one group by its peers, keyed by ``(span, epoch, sending group)``
    (thread-safe: posts arrive on the actor's second thread)."""

    def __init__(self):
        self._cond = threading.Condition()
        self._box: dict = {}
        self._aborted = -1  # spans up to this one are aborted

    def post(self, span: int, epoch: int, sender: int, emigrants: dict) -> None:
        """Deliver ``emigrants`` (``{island id: Population (1, k)}``) of group ``sender`` after
        ``epoch`` in ``span``."""
        with self._cond:
            if span > self._aborted:
                self._box[(span, epoch, sender)] = emigrants
                self._cond.notify_all()

    def take(self, span: int, epoch: int, senders, timeout_s: float) -> dict:
        """The emigrants of every group in ``senders`` after ``epoch``, merged into one
        ``{island id: Population}``, waiting for them.

        Raises:
            Aborted: the span was aborted while waiting.
            TimeoutError: not all arrived within ``timeout_s`` seconds.
        """
        keys = [(span, epoch, s) for s in senders]
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not all(k in self._box for k in keys):
                if span <= self._aborted:
                    raise Aborted(f"span {span} aborted")
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = [k[2] for k in keys if k not in self._box]
                    raise TimeoutError(
                        f"emigrants of group(s) {missing} after epoch {epoch} did not arrive within {timeout_s:g} s"
                    )
                self._cond.wait(left)
            out = {}
            for k in keys:
                out.update(self._box.pop(k))
            return out

    def poll(self, span: int, epoch: int, senders) -> dict:
        """What has arrived of :meth:`take`'s messages, without waiting (removed from the inbox)."""
        with self._cond:
            out = {}
            for s in senders:
                out.update(self._box.pop((span, epoch, s), {}))
            return out

    def drain(self, span: int) -> list:
        """Every message of ``span`` that has arrived, oldest epoch first (removed from the inbox;
        never waits): the async loop's immigrants (:class:`Arrivals`)."""
        with self._cond:
            keys = sorted(k for k in self._box if k[0] == span)
            return [self._box.pop(k) for k in keys]

    def start(self, span: int) -> None:
        """Begin ``span``: messages of earlier spans are dropped (kept: those already posted for it)."""
        with self._cond:
            self._box = {k: v for k, v in self._box.items() if k[0] >= span}

    def abort(self, span: int) -> None:
        """Abort every span up to ``span``: a waiting :meth:`take` raises :class:`Aborted`."""
        with self._cond:
            self._aborted = max(self._aborted, int(span))
            self._box = {k: v for k, v in self._box.items() if k[0] > self._aborted}
            self._cond.notify_all()


class ActorTransport:
    """Sends emigrants to peer groups through their Ray actor handles (one-sided posts), and
    takes this group's from its inbox.

    Args:
        peers: ``[actor handle]`` of every group, by group index (this group's own entry unused).
        index: this group's index; inbox: this group's :class:`Inbox`.
    """

    def __init__(self, peers: list, index: int, inbox: Inbox):
        self.peers = peers
        self.index = index
        self.inbox = inbox

    def take(self, span: int, epoch: int, senders, timeout_s: float) -> dict:
        """This group's immigrants from ``senders`` after ``epoch`` (:meth:`Inbox.take`)."""
        return self.inbox.take(span, epoch, senders, timeout_s)

    def send(self, span: int, epoch: int, messages: dict) -> None:
        """Post ``messages`` ``{group index: {island id: Population}}`` after ``epoch``, without
        waiting (fire and forget: Ray runs the calls in order per sender; a post to a lost peer
        fails there, and the driver restores a snapshot)."""
        for g, emigrants in messages.items():
            post = self.peers[g].post
            getattr(post, "remote", post)(span, epoch, self.index, emigrants)  # a Ray actor, or in this process


class Alone:
    """The link of a group without peers: every source is its own.

    Args:
        ids: the group's island ids."""

    def __init__(self, ids):
        self.ids = list(ids)

    def take(self, epoch: int, sent, edges) -> dict:
        """No remote emigrants: ``{}`` (``sent``: the group's emigrants' getter, unused)."""
        return {}

    def send(self, epoch: int, sent, edges, best) -> None:
        """Nothing to send."""

    def gather(self, epoch: int, best):
        """Every island's best is this group's ``best`` (Population ``(I, 1)``)."""
        return best


class _Peers:
    """What :class:`Posts` and :class:`Collective` share: the route's island ids and the exchange plan
    of each epoch's edges (:func:`isles.islands.transport.nccl.plan`, cached while the edges are the same)."""

    def __init__(self, route):
        self.mine = {gid: p for p, gid in enumerate(route.groups[route.index])}
        self.where = {gid: g for g, ids in enumerate(route.groups) for gid in ids}
        self.peers = [g for g in range(len(route.groups)) if g != route.index]
        self.order = sorted(self.where)  # every island, in id order (gather)
        self.timeout_s = route.timeout_s
        self._edges, self._plan = None, None

    def plan(self, edges) -> tuple:
        """``(sends, receives)`` of ``edges``."""
        if edges is not self._edges:
            self._edges, self._plan = edges, exchange_plan(edges, self.mine, self.where)
        return self._plan

    def assemble(self, best, got: dict):
        """Every island's best in id order: this group's ``best`` and the peers' ``got`` ``{id: (1, 1)}``."""
        return Population.concat([best.island(self.mine[g]) if g in self.mine else got[g] for g in self.order], axis=0)


class Posts(_Peers):
    """The link over posts to the peers' inboxes (or their channels, :mod:`isles.islands.transport.channels`):
    emigrants as host arrays, one message per peer and epoch (with the bests where plug-ins need them).

    Args:
        route: the span's :class:`isles.islands.records.Route`; span: its id;
        transport: :class:`ActorTransport` or :class:`isles.islands.transport.channels.ChannelTransport`; xp: the group's.
    """

    def __init__(self, route, span: int, transport, xp):
        super().__init__(route)
        self.span, self.transport, self.xp = span, transport, xp
        self.got = None  # the emigrants that came with the bests (gather), taken by the next take

    def take(self, epoch: int, sent, edges) -> dict:
        """The peers' emigrants after ``epoch`` (waiting for them; ``sent``, the getter, unused)."""
        if self.got is not None:
            got, self.got = self.got, None
            return got
        return self.transport.take(self.span, epoch, sorted(self.plan(edges)[1]), self.timeout_s)

    def send(self, epoch: int, sent, edges, best) -> None:
        """Post ``sent`` (the emigrants, or ``None`` after a span's last epoch) to the peers that the
        next epoch's ``edges`` need them in, with every island's ``best`` to every peer (or ``None``)."""
        msgs = {}
        if sent is not None:
            host = sent.to_host()
            msgs = {g: {src: host.island(self.mine[src]) for src in srcs} for g, srcs in self.plan(edges)[0].items()}
        if best is not None:
            host = best.to_host()
            mine = {(BEST, gid): host.island(p) for gid, p in self.mine.items()}
            msgs = {g: {**mine, **msgs.get(g, {})} for g in self.peers}
        if msgs:
            self.transport.send(self.span, epoch, msgs)

    def gather(self, epoch: int, best):
        """Every island's best after ``epoch``, Population ``(n, 1)``: the peers' messages (their
        emigrants kept for the next :meth:`take`)."""
        took = self.transport.take(self.span, epoch, self.peers, self.timeout_s)
        got = {key[1]: pop.to_device(self.xp) for key, pop in took.items() if isinstance(key, tuple)}
        self.got = {key: pop for key, pop in took.items() if not isinstance(key, tuple)}
        return self.assemble(best, got)


class Collective(_Peers):
    """The link over the groups' communicator (NCCL between GPUs, :func:`isles.islands.transport.nccl.exchange`):
    emigrants and bests device to device, sent and received in one group call; nothing to post.

    Args:
        route: the span's :class:`isles.islands.records.Route`; comm: the communicator; xp: the group's.
    """

    def __init__(self, route, comm, xp):
        super().__init__(route)
        self.comm, self.xp = comm, xp
        self.lay = self.best_lay = None  # one island's leaves (fixed for the run)
        self.all_sends = {g: sorted(self.mine) for g in self.peers}
        self.all_receives = {g: sorted(route.groups[g]) for g in self.peers}

    def take(self, epoch: int, sent, edges) -> dict:
        """Exchange ``sent()`` (this group's emigrants) with the peers by ``edges``; the peers' emigrants
        (device arrays)."""
        sends, receives = self.plan(edges)
        sent = sent()
        self.lay = self.lay or layout(sent.island(0))
        return exchange(self.comm, self.xp, sent, self.mine, sends, receives, self.lay)

    def send(self, epoch: int, sent, edges, best) -> None:
        """Nothing: :meth:`take` and :meth:`gather` exchange both ways."""

    def gather(self, epoch: int, best):
        """Every island's best (all-gathered in one group call), Population ``(n, 1)``."""
        self.best_lay = self.best_lay or layout(best.island(0))
        got = exchange(self.comm, self.xp, best, self.mine, self.all_sends, self.all_receives, self.best_lay)
        return self.assemble(best, got)


#: the span id of every async post (:class:`Arrivals`): an async run has one span per group, restarts included
ASYNC_SPAN = 0


class Arrivals(_Peers):
    """The async link (``islands.mode=async``, :mod:`isles.islands.control.async_loop`): emigrants are
    posted to the destination group's inbox without waiting, and a group immigrates whatever has
    arrived since its last epoch (pagmo's archipelago), the latest of each ``(source, destination)``.

    Args:
        route: the group's :class:`isles.islands.records.Route`; transport: its :class:`ActorTransport`.
    """

    def __init__(self, route, transport):
        super().__init__(route)
        self.transport = transport

    def arrived(self) -> tuple:
        """What the peers posted to this group since the last call, never waiting: ``(edges, emigrants)``,
        the ``(source, destination)`` pairs in id order and ``{source id: Population (1, k)}`` (host
        arrays; a source's latest emigrants where several of its epochs came)."""
        edges, emigrants = set(), {}
        for msg in self.transport.inbox.drain(ASYNC_SPAN):  # oldest first: the latest stays
            for (src, dst), pop in msg.items():
                edges.add((src, dst))
                emigrants[src] = pop
        return sorted(edges), emigrants

    def take(self, epoch: int, sent, edges) -> dict:
        """Unused: the async loop hands the epoch body a :class:`isles.islands.records.Plan` of :meth:`arrived`."""
        return {}

    def send(self, epoch: int, sent, edges, best) -> None:
        """Post ``sent``'s emigrants to the groups of the destinations of ``edges`` (one message per peer,
        keyed ``(source, destination)``), fire and forget; ``best`` is unused (no plug-ins in async mode)."""
        msgs, host = {}, None
        for src, dst in edges or ():
            if src in self.mine and dst not in self.mine:
                host = sent.to_host() if host is None else host
                msgs.setdefault(self.where[dst], {})[(src, dst)] = host.island(self.mine[src])
        if msgs:
            self.transport.send(ASYNC_SPAN, epoch, msgs)

    def gather(self, epoch: int, best):
        """Not offered: plug-ins need ``islands.mode=sync`` (the schema refuses them in async mode)."""
        raise NotImplementedError("plug-ins need islands.mode=sync")
