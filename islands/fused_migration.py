"""Fused migration on the GPU: emigrant selection in one kernel, and routing, replacement, the
write of every leaf and the events in another (``algorithms/core/cuda/migration.cu``), instead
of the generic array code's ~30 small CuPy calls per exchange (:mod:`isles.islands.migration`).

:func:`isles.islands.migration.emigrants_of` and :func:`~isles.islands.migration.immigrate`
route here on CuPy when the policies are the built-in ones (:class:`~isles.islands.policies.SelectBest`,
:class:`~isles.islands.policies.FairReplace`, :class:`~isles.islands.policies.ReplaceWorst`; the
exact classes, not subclasses) and every source is an island of the group (no remote island and
no plug-in immigrant); anything else, and ``ISLES_FUSED_MIGRATION=0``, runs the generic code,
which is the NumPy twin. The kernels make the same decisions on the same keys (NumPy's stable
sort order: ``(v, f, position)``, NaN last) and move every leaf as bytes, so states, emigrants
and events equal the generic path's bit for bit (``tests/test_fused_migration_gpu.py``; on the
CPU the same C text runs as one-thread blocks, ``tests/test_fused_migration.py``).

Two write modes (:func:`write_mode`): ``full``, for an algorithm whose population and replace are
:class:`~isles.algorithms.core.base.IslandAlgorithm`'s, writes the new ``(I, N)`` leaves and puts
them in the state itself (one kernel for the whole exchange); ``slots``, for an algorithm with
its own ``replace`` (PSO's ``gbest``, FEP's step sizes), writes the ``K`` slots and their
positions and calls :meth:`~isles.algorithms.core.base.IslandAlgorithm.replace_role`. An
algorithm that re-assesses its immigrants (``assess_immigrants``, the co-evolutionary DE) or has
several populations runs the generic code.

Supported layouts (:func:`layout_reason`): float32 or float64 ``f`` and ``v``, at most
:data:`MAX_LEAVES` C-contiguous leaves of any dtype, at most :data:`MAX_SLOTS` emigrants or
immigrants per island. No host synchronisation: the route's plan is a device constant
(:func:`isles.algorithms.core.backend.device_constant`), so the kernels are captured in the span
graph (:mod:`isles.islands.span_graph`).
"""

from __future__ import annotations

import ctypes
import os

import numpy as np

from isles.algorithms.core.backend import device_constant
from isles.algorithms.core.base import IslandAlgorithm
from isles.algorithms.core.cuda_lib import defines, source
from isles.algorithms.core.population import Population
from isles.islands.policies import FairReplace, ReplaceWorst

ENV = "ISLES_FUSED_MIGRATION"
"""Environment switch: ``0`` turns the fused path off (benchmarks, A/B checks)."""
MAX_LEAVES = 8
"""Leaves of one population the kernels take (genome, f, v and up to five extras)."""
MAX_SLOTS = 1024
"""Most emigrants ``k`` or immigrants ``K`` per island (shared memory: a few ints each)."""
CHUNK_BYTES = 1 << 16
"""Bytes of the rows one block of the ``full`` write copies (rows per block, :func:`chunk_rows`)."""
MAX_ROWS = 1024
"""Most rows of one block of the ``full`` write."""
THREADS = 256
"""Threads per block."""
_CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


def enabled() -> bool:
    """Whether the fused path may run (``ISLES_FUSED_MIGRATION`` is not ``0``)."""
    return os.environ.get(ENV, "1").strip() != "0"


def kernel_source(f_dtype, v_dtype) -> str:
    """The CUDA (and host emulation) source for fitness ``f_dtype`` and violation ``v_dtype``
    (float32 or float64): ``#define F_T/V_T`` + ``migration.cu`` (:mod:`isles.algorithms.core.cuda_lib`).

    Raises:
        KeyError: another dtype.
    """
    return source(defines({"F_T": _CTYPES[np.dtype(f_dtype)], "V_T": _CTYPES[np.dtype(v_dtype)]}), "migration.cu")


def write_mode(algorithm) -> str | None:
    """How immigrants reach ``algorithm``'s state: ``"full"`` (its population and replace are
    the base class's: the kernel's new leaves go into the state), ``"slots"`` (its own replace:
    the kernel's slots go through ``replace_role``), ``None`` (it re-assesses immigrants or has
    several populations: the generic code)."""
    cls, base = type(algorithm), IslandAlgorithm
    if cls.assess_immigrants is not base.assess_immigrants or cls.populations is not base.populations:
        return None
    if all(getattr(cls, m) is getattr(base, m) for m in ("population", "replace", "replace_role")):
        return "full"
    return "slots"


def policy_kind(policy) -> int | None:
    """``1`` for :class:`ReplaceWorst`, ``0`` for :class:`FairReplace` (the kernel's ``worst``
    flag), ``None`` for any other policy (a user's, or a subclass: the generic code)."""
    return {ReplaceWorst: 1, FairReplace: 0}.get(type(policy))


def layout_reason(pop: Population, slots: int) -> str | None:
    """Why the kernels cannot take ``pop`` with ``slots`` emigrants or immigrants per island
    (``None``: they can): ``f``/``v`` not float32/float64, more than :data:`MAX_LEAVES` leaves, a
    leaf not C-contiguous or not ``(I, N, ...)``, ``slots`` outside ``1..MAX_SLOTS``."""
    if np.dtype(pop.f.dtype) not in _CTYPES or np.dtype(pop.v.dtype) not in _CTYPES:
        return f"f {pop.f.dtype} / v {pop.v.dtype}: float32 or float64 only"
    leaves = pop.leaves()
    if len(leaves) > MAX_LEAVES:
        return f"{len(leaves)} leaves (at most {MAX_LEAVES})"
    for name, a in leaves.items():
        if a.shape[:2] != pop.shape or not a.flags.c_contiguous:
            return f"leaf {name} {a.shape} is not a C-contiguous (I, N, ...) array"
    if not 1 <= slots <= MAX_SLOTS:
        return f"{slots} migrants per island (1..{MAX_SLOTS})"
    return None


def _ptr(a) -> int:
    return int(a.data.ptr) if hasattr(a.data, "ptr") else int(a.ctypes.data)


def _row_bytes(a) -> int:
    return int(a.dtype.itemsize * int(np.prod(a.shape[2:], dtype=np.int64)))


def copy_unit(row_bytes: int, pointers) -> int:
    """The widest copy unit (8, 4, 2 or 1 bytes) that divides ``row_bytes`` and every pointer."""
    for u in (8, 4, 2):
        if row_bytes % u == 0 and all(p % u == 0 for p in pointers):
            return u
    return 1


def leaf_table(triples) -> list[tuple[int, int, int, int, int]]:
    """``[(res, pool, out, row bytes, unit)]`` of ``triples`` ``[(res, pool or None, out)]``
    (arrays; a leaf's row is one individual's bytes of the residents' leaf)."""
    table = []
    for res, pool, out in triples:
        ptrs = [_ptr(res), 0 if pool is None else _ptr(pool), _ptr(out)]
        rb = _row_bytes(res)
        table.append((*ptrs, rb, copy_unit(rb, ptrs)))
    return table


def chunk_rows(n: int, row_bytes: int) -> int:
    """Rows of one island that one block of the ``full`` write copies: about :data:`CHUNK_BYTES`
    of every leaf together, at least 1, at most :data:`MAX_ROWS` and ``n``."""
    return max(1, min(n, MAX_ROWS, CHUNK_BYTES // max(1, row_bytes)))


# -- launchers ---------------------------------------------------------------------------------
class _Device:
    """Launches on CuPy's current stream (captured by the span graph)."""

    def __init__(self, f_dtype, v_dtype):
        import cupy  # noqa: PLC0415

        from isles.algorithms.core.plan import function  # noqa: PLC0415

        src = kernel_source(f_dtype, v_dtype)
        self.emigrate_k = function(cupy, src, "isles_emigrate")
        self.immigrate_k = function(cupy, src, "isles_immigrate")

    @staticmethod
    def _leaf_args(table) -> list:
        args = []
        for l in range(MAX_LEAVES):
            res, pool, out, rb, un = table[l] if l < len(table) else (0, 0, 0, 0, 1)
            args += [np.uint64(res), np.uint64(pool), np.uint64(out), np.int64(rb), np.int32(un)]
        return args

    def emigrate(self, I, table, N, k):
        args = (*self._leaf_args(table), np.int32(len(table)), np.int32(N), np.int32(k))
        self.emigrate_k((I,), (THREADS,), args, shared_mem=4 * k)

    def immigrate(self, I, n_chunks, table, N, K, R, rows, valid, worst, full, order, acc, fnew, idx):
        args = (
            *self._leaf_args(table),
            np.int32(len(table)),
            np.int32(N),
            np.int32(K),
            np.int32(R),
            rows,
            valid,
            np.int32(worst),
            np.int32(full),
            order,
            acc,
            fnew,
            np.uint64(0 if idx is None else _ptr(idx)),
        )
        self.immigrate_k((n_chunks, I), (THREADS,), args, shared_mem=4 * (3 * K + (R if full else 0)))


class _Host:
    """The same C text compiled for the CPU (``-DISLES_HOST_EMU``: one thread per block), on
    NumPy arrays: the twin the CPU tests run."""

    def __init__(self, f_dtype, v_dtype):
        from isles.problems.cuda_check import compile_c  # noqa: PLC0415

        self.lib = compile_c("#define ISLES_HOST_EMU 1\n" + kernel_source(f_dtype, v_dtype), ("-std=gnu11",))

    @staticmethod
    def _cols(table):
        cols = list(zip(*table)) if table else [()] * 5
        return (
            np.array(cols[0], np.uint64),
            np.array(cols[1], np.uint64),
            np.array(cols[2], np.uint64),
            np.array(cols[3], np.int64),
            np.array(cols[4], np.int32),
        )

    def emigrate(self, I, table, N, k):
        res, _, out, rb, un = self._cols(table)
        p, i = ctypes.c_void_p, ctypes.c_int
        rc = self.lib.isles_emigrate_host(
            i(I),
            p(res.ctypes.data),
            p(out.ctypes.data),
            p(rb.ctypes.data),
            p(un.ctypes.data),
            i(len(table)),
            i(N),
            i(k),
        )
        if rc:
            raise RuntimeError("isles_emigrate_host failed")

    def immigrate(self, I, n_chunks, table, N, K, R, rows, valid, worst, full, order, acc, fnew, idx):
        res, pool, out, rb, un = self._cols(table)
        rows, valid = np.ascontiguousarray(rows, np.int64), np.ascontiguousarray(valid, np.bool_)
        p, i = ctypes.c_void_p, ctypes.c_int
        rc = self.lib.isles_immigrate_host(
            i(I),
            i(n_chunks),
            *(p(a.ctypes.data) for a in (res, pool, out, rb, un)),
            i(len(table)),
            i(N),
            i(K),
            i(R),
            p(rows.ctypes.data),
            p(valid.ctypes.data),
            i(worst),
            i(full),
            p(order.ctypes.data),
            p(acc.ctypes.data),
            p(fnew.ctypes.data),
            p(None if idx is None else idx.ctypes.data),
        )
        if rc:
            raise RuntimeError("isles_immigrate_host failed")


_LAUNCHERS: dict = {}


def _launcher(xp, f_dtype, v_dtype):
    host = xp is np
    key = (host, None if host else xp.cuda.Device().id, np.dtype(f_dtype).str, np.dtype(v_dtype).str)
    lau = _LAUNCHERS.get(key)
    if lau is None:
        lau = _LAUNCHERS[key] = (_Host if host else _Device)(f_dtype, v_dtype)
    return lau


# -- the two entry points ----------------------------------------------------------------------
def select_best(pop: Population, k: int) -> Population | None:
    """The ``k`` best of each island, best first, every leaf (:class:`SelectBest` then
    :meth:`Population.take`) in one kernel: a Population ``(I, k)``, or ``None`` where the layout
    is not supported (:func:`layout_reason`). On NumPy arrays the host emulation runs (tests).
    The caller checks ``k`` (:func:`isles.islands.policies.check_n_migrants`)."""
    if layout_reason(pop, k) is not None:
        return None
    xp = pop.xp
    leaves = pop.leaves()
    I, N = pop.shape
    outs = {name: xp.empty((I, k) + tuple(a.shape[2:]), dtype=a.dtype) for name, a in leaves.items()}
    table = leaf_table([(a, None, outs[name]) for name, a in leaves.items()])
    _launcher(xp, pop.f.dtype, pop.v.dtype).emigrate(I, table, N, int(k))
    return Population.from_leaves(outs)


def immigrate_role(algorithm, ctx, state: dict, role, residents: Population, pool: Population, rows, valid, policy):
    """Immigrants of the group's own emigrants into ``role``'s islands, replaced by ``policy``
    (:class:`FairReplace` or :class:`ReplaceWorst`), in one kernel (module docstring).

    Args:
        algorithm, ctx, state: the group's algorithm, context and state.
        role: the population role (``None``: the only one); residents: its population ``(I, N)``.
        pool: the group's emigrants ``(I, k)``, pool row ``r`` = island ``r // k``, emigrant ``r % k``.
        rows, valid: the route's plan ``(I, K)`` (host arrays, :func:`isles.islands.migration.route`).
        policy: the replacement policy object.

    Returns:
        ``(state, order, accepted, f_new)`` as :func:`isles.islands.migration.immigrate`'s event
        (device arrays ``(I, K)``), or ``None`` where the fused path does not apply (another
        policy, an algorithm without a write mode, an unsupported layout, or a pool whose leaves
        differ from the residents'): the caller runs the generic code.
    """
    worst, mode = policy_kind(policy), write_mode(algorithm)
    I, N = residents.shape
    K = int(rows.shape[1])
    if worst is None or mode is None or layout_reason(residents, K) is not None or K > N:
        return None
    res_leaves, pool_leaves = residents.leaves(), pool.leaves()
    if list(res_leaves) != list(pool_leaves) or layout_reason(pool, int(pool.shape[1])) is not None:
        return None
    for name, a in res_leaves.items():
        b = pool_leaves[name]
        if b.dtype != a.dtype or b.shape[2:] != a.shape[2:] or b.shape[0] * b.shape[1] <= int(rows.max(initial=0)):
            return None
    xp, full = residents.xp, mode == "full"
    shape = (I, N) if full else (I, K)
    outs = {name: xp.empty(shape + tuple(a.shape[2:]), dtype=a.dtype) for name, a in res_leaves.items()}
    order = xp.empty((I, K), dtype=np.int64)
    accepted = xp.empty((I, K), dtype=np.bool_)
    f_new = xp.empty((I, K), dtype=residents.f.dtype)
    idx = None if full else xp.empty((I, K), dtype=np.int64)
    table = leaf_table([(a, pool_leaves[name], outs[name]) for name, a in res_leaves.items()])
    if full:
        R = chunk_rows(N, sum(t[3] for t in table))
        n_chunks = -(-N // R)
    else:
        R, n_chunks = N, 1
    _launcher(xp, residents.f.dtype, residents.v.dtype).immigrate(
        I,
        n_chunks,
        table,
        N,
        K,
        R,
        device_constant(xp, np.asarray(rows, np.int64)),
        device_constant(xp, np.asarray(valid, np.bool_)),
        worst,
        int(full),
        order,
        accepted,
        f_new,
        idx,
    )
    new = Population.from_leaves(outs)
    if full:
        s, F = dict(state), algorithm.FIELDS
        s[F["genome"]], s[F["f"]], s[F["v"]] = new.genome, new.f, new.v
        for name, key in algorithm.EXTRAS.items():
            s[key] = new.extras[name]
    else:
        s = algorithm.replace_role(ctx, state, role, idx, new)
    return s, order, accepted, f_new
