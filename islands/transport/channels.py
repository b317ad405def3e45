"""Shared-memory channels between the actors of one node: the sync span's transport where the
actors share a node and no collective communicator joins them (CPU actors; GPU actors with
``islands.transport=channel``).

Each ordered pair of groups on one node gets one channel of Ray Compiled Graph's
(``ray.experimental.channel``, ``BufferedSharedMemoryChannel`` with two buffers): the sender writes
its emigrants into the node's shared memory and the receiver reads them, with no Ray task, no
gRPC and no driver in the path. The sender creates the channel (Ray wants its writer to), the
receiver registers as its reader (:class:`ChannelLinks`, formed by the driver before the first span
and again after a restart, like the NCCL communicator).

A sync span writes to a peer exactly when the peer reads: both compute the same plan from the
topology, the seed and the epoch (:func:`isles.islands.transport.nccl.plan`), so the messages of a pair
stay in step and each carries its ``(span, epoch)`` as a check. Pairs on different nodes keep the
one-sided posts to the peer's inbox (:class:`isles.islands.transport.link.ActorTransport`).

Measured on a 2-core machine (``python benchmarks/ray_transport_bench.py``, and the CPU row of
issue 19 in ``docs/runtime.md``): a write and a read cost tens of microseconds, against about a
millisecond for an actor call.
"""

from __future__ import annotations

import contextlib
import pickle

from isles.islands.transport.link import Aborted

#: buffers per channel: the sender may write epoch e + 1 while the receiver still holds epoch e
BUFFERS = 2


class ChannelLinks:
    """One group's channels: ``out`` ``{peer index: channel it writes}``, ``inp`` ``{peer index:
    channel it reads}`` (empty until formed)."""

    def __init__(self):
        self.out: dict = {}
        self.inp: dict = {}

    def make(self, readers: dict) -> dict:
        """Create this group's outgoing channels (call it in the group's actor: the writer).

        Args:
            readers: ``{peer index: (actor handle, node id hex)}``, the peers on this node.

        Returns:
            ``{peer index: channel}`` (picklable: the driver hands each to its reader, :meth:`join`).
        """
        import ray  # noqa: PLC0415
        from ray.experimental.channel.shared_memory_channel import BufferedSharedMemoryChannel  # noqa: PLC0415

        self.close()
        me = ray.get_runtime_context().current_actor
        self.out = {
            int(g): BufferedSharedMemoryChannel(me, [(h, node)], num_shm_buffers=BUFFERS)
            for g, (h, node) in readers.items()
        }
        for ch in self.out.values():
            ch.ensure_registered_as_writer()
        return self.out

    def join(self, inbound: dict) -> None:
        """Register as the reader of the peers' channels ``{peer index: channel}`` (:meth:`make`'s)."""
        self.inp = {int(g): ch for g, ch in inbound.items()}
        for ch in self.inp.values():
            ch.ensure_registered_as_reader()

    def close(self) -> None:
        """Close every channel (a waiting read or write raises, :class:`ChannelTransport` turns
        that into :class:`Aborted`) and forget them; the driver forms new ones."""
        for ch in [*self.out.values(), *self.inp.values()]:
            with contextlib.suppress(Exception):  # (a channel of a lost peer)
                ch.close()
        self.out, self.inp = {}, {}


class ChannelTransport:
    """:class:`isles.islands.transport.link.ActorTransport`'s interface over a group's channels, with
    its posts for the peers that have no channel (another node).

    Args:
        links: the group's :class:`ChannelLinks`; posts: the group's ``ActorTransport`` (and inbox).
        timeout_s: the longest wait for a peer (``islands.restart_timeout_s``).
    """

    def __init__(self, links: ChannelLinks, posts, timeout_s: float):
        self.links, self.posts, self.timeout_s = links, posts, timeout_s

    def send(self, span: int, epoch: int, messages: dict) -> None:
        """Write ``messages`` ``{group index: {island id: Population}}`` after ``epoch`` (each
        pair's channel; posts to the others).

        Raises:
            Aborted: the channels were closed (the span was aborted) while the write waited.
            TimeoutError: the peer did not read within ``timeout_s``.
        """
        rest = {}
        for g, emigrants in messages.items():
            ch = self.links.out.get(g)
            if ch is None:
                rest[g] = emigrants
            else:
                # pickled here, by the C pickler, to bytes: Ray's cloudpickle of the Populations
                # took about a tenth of a tiny island's epoch (py-spy, 2 CPU actors: 1.40 -> 1.26 ms)
                msg = pickle.dumps((span, epoch, emigrants), protocol=pickle.HIGHEST_PROTOCOL)
                self._io(g, epoch, lambda ch=ch, msg=msg: ch.write(msg, timeout=self.timeout_s))
        if rest:
            self.posts.send(span, epoch, rest)

    def take(self, span: int, epoch: int, senders, timeout_s: float) -> dict:
        """The emigrants of every group in ``senders`` after ``epoch``, merged (as
        :meth:`isles.islands.transport.link.Inbox.take`; copies, not views of the shared memory).

        Raises:
            Aborted: the channels were closed (the span was aborted) while waiting.
            TimeoutError: a peer's emigrants did not arrive within ``timeout_s``.
            RuntimeError: a message of another span or epoch (the pair fell out of step: a bug).
        """
        out, posted = {}, []
        for s in senders:
            ch = self.links.inp.get(s)
            if ch is None:
                posted.append(s)
                continue
            got = self._io(s, epoch, lambda ch=ch: ch.read(timeout=timeout_s))
            if isinstance(got, Exception):  # the channel was closed: Ray hands the error back
                raise Aborted(f"span {span} aborted ({type(got).__name__})")
            got_span, got_epoch, emigrants = pickle.loads(got)  # fresh arrays, not views of the shared memory
            if (got_span, got_epoch) != (span, epoch):
                raise RuntimeError(
                    f"group {s}'s channel sent span {got_span} epoch {got_epoch}, expected span {span} epoch {epoch}"
                )
            out.update(emigrants)
        if posted:
            out.update(self.posts.take(span, epoch, posted, timeout_s))
        return out

    @staticmethod
    def _io(peer: int, epoch: int, call):
        """``call()``, with Ray's channel errors as :class:`Aborted` and ``TimeoutError``."""
        from ray.exceptions import RayChannelError  # noqa: PLC0415

        try:
            return call()
        except TimeoutError as err:  # RayChannelTimeoutError, GetTimeoutError
            raise TimeoutError(f"group {peer}'s channel after epoch {epoch}: {err}") from err
        except RayChannelError as err:
            raise Aborted(f"the channel with group {peer} was closed ({err})") from err
