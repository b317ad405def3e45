"""The transport of emigrants between island groups: "send these individuals to these groups,
receive mine".

Each group owns an :class:`Inbox`. A sender posts, one-sided, the emigrants a peer needs
(:meth:`ActorTransport.send`: a fire-and-forget Ray actor call of the peer's ``post``, which its
second thread runs while its loop evolves); the receiver takes them from its own inbox
(:meth:`Inbox.take`, blocking in sync mode; :meth:`Inbox.poll` does not block). Within a group,
emigrants move by device copies (:meth:`isles.islands.group.IslandGroup._migrate`), never
through a transport. Messages are keyed by ``(span, epoch, sending group)``: a span is one run of
epochs that the driver starts (:meth:`IslandGroup.run_span`); messages of an aborted span are
dropped. With the loop's plug-in replicated in every group, a message also carries the sender's
islands' bests, keyed ``(BEST, island id)`` (:mod:`isles.islands.replica`).

Between actors of one node, :class:`isles.islands.channels.ChannelTransport` has the same
interface over shared-memory channels; between GPUs, :func:`isles.islands.exchange.exchange`
moves the emigrants over NCCL, device to device.
"""
from __future__ import annotations

import threading
import time


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
                    raise TimeoutError(f"emigrants of group(s) {missing} after epoch {epoch} did not arrive "
                                       f"within {timeout_s:g} s")
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
            self.peers[g].post.remote(span, epoch, self.index, emigrants)
