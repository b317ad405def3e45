"""Emigrants from device to device: the exchange of a sync span's epoch between island groups over a
collective communicator (NCCL between GPUs), instead of the inboxes of :mod:`isles.islands.transport.link`.

In a sync span every group computes the same migration plan (:func:`isles.islands.migration.planner.migration_edges`),
so each knows what it sends to each peer and what it receives from each, in the same order: the
exchange is two-sided, one send and one receive per pair of groups that share an edge, all in one
NCCL group call (no deadlock whatever the topology). A message is the emigrants of the sender's
source islands for that peer, in increasing island id, packed into one byte buffer on the device
(:func:`pack`); the receiver unpacks it with the layout of its own emigrants (:func:`unpack`: every
group runs the same algorithm, so the individuals have the same leaves, shapes and dtypes). The
emigrants never leave the GPU and never pass through the driver or Ray's object store.

The communicator is formed by the driver before the first span (:meth:`NcclComm.unique_id` in one
group, :meth:`NcclComm` in every group at once) and again after a lost actor restarts; a span
aborted by the driver aborts the communicator (a peer that died leaves its partner's receive
waiting on the GPU). Packing, the plan and the exchange are array-module agnostic: CI runs them on
NumPy with an in-process communicator (``tests/test_exchange.py``); the NCCL path runs on 2 GPUs
(``tests/test_exchange_gpu.py``).
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
from isles.algorithms.core.population import Population, PopulationRoles, by_role

#: bytes each leaf's slice of a message is aligned to (any dtype may be viewed there)
ALIGN = 16


def layout(template) -> list:
    """``[(role, leaf name, shape, dtype)]`` of one island's emigrants ``template`` (a
    :class:`Population` or :class:`PopulationRoles` of shape ``(1, k)``), in a fixed order."""
    out = []
    for role, pop in sorted(by_role(template).items(), key=lambda rp: str(rp[0])):
        for name, a in sorted(pop.leaves().items()):
            out.append((role, name, tuple(a.shape), np.dtype(a.dtype)))
    return out


def island_bytes(lay: list) -> int:
    """Bytes of one island's emigrants in a message (each leaf padded to :data:`ALIGN`)."""
    return sum(-(-int(np.prod(shape)) * dt.itemsize // ALIGN) * ALIGN for _, _, shape, dt in lay)


def pack(xp, pops: list, lay: list):
    """One ``uint8`` buffer ``(len(pops) * island_bytes,)`` holding the islands' emigrants ``pops``
    (each as ``template`` of :func:`layout`), island after island, leaf after leaf.

    Raises:
        ValueError: a population's leaves differ from the layout."""
    per = island_bytes(lay)
    buf = xp.zeros((len(pops) * per,), dtype=np.uint8)
    for n, p in enumerate(pops):
        off = n * per
        roles = by_role(p)
        for role, name, shape, dt in lay:
            a = roles[role].leaves()[name]
            if tuple(a.shape) != shape or np.dtype(a.dtype) != dt:
                leaf = name if role is None else f"{role}.{name}"
                raise ValueError(
                    f"emigrants of another shape: {leaf} is {tuple(a.shape)} {a.dtype}, the layout says {shape} {dt}"
                )
            nb = int(np.prod(shape)) * dt.itemsize
            buf[off : off + nb] = xp.ascontiguousarray(a).reshape(-1).view(np.uint8)
            off += -(-nb // ALIGN) * ALIGN
    return buf


def unpack(buf, lay: list, count: int) -> list:
    """The ``count`` islands' emigrants of a :func:`pack` buffer, as fresh arrays (Population,
    or PopulationRoles when the layout has roles)."""
    per = island_bytes(lay)
    out = []
    for n in range(count):
        off = n * per
        roles: dict = {}
        for role, name, shape, dt in lay:
            nb = int(np.prod(shape)) * dt.itemsize
            roles.setdefault(role, {})[name] = buf[off : off + nb].copy().view(dt).reshape(shape)
            off += -(-nb // ALIGN) * ALIGN
        pops = {r: Population.from_leaves(leaves) for r, leaves in roles.items()}
        out.append(pops[None] if list(pops) == [None] else PopulationRoles(pops))
    return out


def plan(edges, mine: dict, where: dict) -> tuple[dict, dict]:
    """Who sends what to whom in one epoch: ``(sends, receives)``, each ``{peer group: [source
    island ids, increasing]}``: the sources of this group (``mine``: ``{island id: position}``)
    with a destination in the peer, and the peer's sources with a destination here (``where``:
    ``{island id: group}``). Every group computes the same edges, so one's sends to a peer are the
    peer's receives from it, in the same order."""
    sends: dict = {}
    receives: dict = {}
    for src, dst in edges:
        if src in mine and dst not in mine:
            sends.setdefault(where[dst], set()).add(src)
        elif dst in mine and src not in mine:
            receives.setdefault(where[src], set()).add(src)
    return ({g: sorted(s) for g, s in sorted(sends.items())}, {g: sorted(s) for g, s in sorted(receives.items())})


def exchange(comm, xp, emigrants, mine: dict, sends: dict, receives: dict, lay: list) -> dict:
    """One epoch's exchange: send each peer its emigrants, receive each peer's, in one group call.

    Args:
        comm: the communicator (:class:`NcclComm`, or the tests' in-process one): ``send(buf,
            peer)``, ``recv(buf, peer)``, ``group()`` (a context manager around the calls).
        emigrants: this group's emigrants ``(I, k)`` (device arrays); ``mine``: ``{island id:
            position}``; ``sends``, ``receives``: :func:`plan`; ``lay``: :func:`layout` of one
            island's emigrants.

    Returns:
        ``{source island id: Population (1, k)}`` of the peers' islands (device arrays).
    """
    per = island_bytes(lay)
    out_bufs = {g: pack(xp, [emigrants.island(mine[s]) for s in srcs], lay) for g, srcs in sends.items()}
    in_bufs = {g: xp.empty((len(srcs) * per,), dtype=np.uint8) for g, srcs in receives.items()}
    with comm.group():
        for g, buf in out_bufs.items():
            comm.send(buf, g)
        for g, buf in in_bufs.items():
            comm.recv(buf, g)
    got = {}
    for g, srcs in receives.items():
        got.update(zip(srcs, unpack(in_bufs[g], lay, len(srcs)), strict=False))
    return got


class NcclComm:
    """A communicator of the island groups' GPUs over NCCL (CuPy's ``cupy.cuda.nccl``), one rank
    per group, on the current device and stream.

    Args:
        uid: :meth:`unique_id` of one group, given to all; n: groups; rank: this group's index.

    Raises:
        RuntimeError: CuPy has no NCCL (:meth:`available` says why).
    """

    def __init__(self, uid, n: int, rank: int):
        from cupy.cuda import nccl  # noqa: PLC0415

        self._nccl = nccl
        self.comm = nccl.NcclCommunicator(int(n), uid, int(rank))
        self.rank = int(rank)

    @staticmethod
    def available() -> str | None:
        """``None`` where CuPy's NCCL can be used, else why not (one line)."""
        try:
            from cupy.cuda import nccl  # noqa: PLC0415

            nccl.get_version()
        except Exception as exc:  # noqa: BLE001  (ImportError, a missing libnccl)
            return f"CuPy's NCCL is not available ({type(exc).__name__}: {exc})"
        return None

    @staticmethod
    def unique_id():
        """A new NCCL unique id (the one group that makes it sends it to all)."""
        from cupy.cuda import nccl  # noqa: PLC0415

        return nccl.get_unique_id()

    @contextmanager
    def group(self):
        """The calls inside as one NCCL group (``ncclGroupStart``/``ncclGroupEnd``)."""
        self._nccl.groupStart()
        try:
            yield
        finally:
            self._nccl.groupEnd()

    def _stream(self):
        import cupy  # noqa: PLC0415

        return cupy.cuda.get_current_stream().ptr

    def send(self, buf, peer: int) -> None:
        """Send ``buf`` (``uint8``, device) to rank ``peer`` on the current stream."""
        self.comm.send(buf.data.ptr, buf.size, self._nccl.NCCL_UINT8, int(peer), self._stream())

    def recv(self, buf, peer: int) -> None:
        """Receive rank ``peer``'s message into ``buf`` (``uint8``, device) on the current stream."""
        self.comm.recv(buf.data.ptr, buf.size, self._nccl.NCCL_UINT8, int(peer), self._stream())

    def abort(self) -> None:
        """Abort the communicator (a peer was lost): pending operations end."""
        self.comm.abort()
