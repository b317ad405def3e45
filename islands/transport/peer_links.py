"""An island group's links to its peer groups, for the sync span (:meth:`IslandGroup.run_span`):
its inbox of posted emigrants, the groups' NCCL communicator, its shared-memory channels; the
driver forms them (:mod:`isles.islands.control.sync_loop`) and aborts them when a
peer is lost."""

from __future__ import annotations

import numpy as np
from isles.islands.transport.channels import ChannelLinks
from isles.islands.transport.link import Inbox
from isles.islands.transport.nccl import NcclComm


class PeerLinks:
    """The peer links of :class:`isles.islands.group.IslandGroup` (a base class of it: the methods
    are the actor's, called by the driver)."""

    def _init_links(self) -> None:
        self.inbox = Inbox()  # emigrants posted by peer groups (run_span)
        self._nccl = None  # the groups' NCCL communicator (nccl_join), emigrants GPU to GPU in run_span
        self._channels = ChannelLinks()  # shared-memory channels with the peers on this node (channels_make)

    def nccl_unique_id(self):
        """A new NCCL unique id for :meth:`nccl_join`, or ``None`` where this group cannot use NCCL
        (NumPy, or CuPy without NCCL: :meth:`isles.islands.transport.nccl.NcclComm.available`)."""
        if self.xp is np or NcclComm.available() is not None:
            return None
        return NcclComm.unique_id()

    def nccl_join(self, uid, n: int, index: int) -> None:
        """Join the groups' NCCL communicator as rank ``index`` of ``n`` (every group at once: it
        returns when all have joined). Replaces an earlier communicator."""
        self.nccl_leave()
        self._nccl = NcclComm(uid, n, index)

    def nccl_leave(self) -> None:
        """Abort and drop the NCCL communicator (a peer was lost, or a new one is formed)."""
        comm, self._nccl = self._nccl, None
        if comm is not None:
            comm.abort()

    def channels_make(self, readers: dict) -> dict:
        """This group's channels to the peers on its node (:meth:`ChannelLinks.make`):
        ``{peer index: (actor handle, node id)}`` -> ``{peer index: channel}``."""
        return self._channels.make(readers)

    def channels_join(self, inbound: dict) -> None:
        """Read the peers' channels ``{peer index: channel}`` (:meth:`ChannelLinks.join`)."""
        self._channels.join(inbound)

    def post(self, span: int, epoch: int, sender: int, emigrants: dict) -> None:
        """A peer's emigrants for this group (:meth:`isles.islands.transport.link.Inbox.post`)."""
        self.inbox.post(span, epoch, sender, emigrants)

    def abort(self, span: int) -> None:
        """Abort :meth:`run_span` up to ``span`` (a peer was lost): a waiting span raises, and a
        receive from the lost peer over NCCL or a channel ends (the communicator and the channels
        are closed; the driver forms them again)."""
        self.inbox.abort(span)
        self.nccl_leave()
        self._channels.close()
