"""The fused migration kernels (``algorithms/core/cuda/migration.cu``) over a :class:`Population`:
emigrant selection (:func:`select_best`, the ``k`` best of each island and every leaf of them in
one kernel) and replacement (:func:`replace`: routing from the emigrant pool, the immigrants
ranked against the worst residents, acceptance, the write of every leaf and the events, in one
kernel). The array code they replace, and the choice of when to use them, is
:mod:`isles.islands.migration.moves` (with :mod:`isles.islands.migration.fused`); that code is their twin.

The kernels rank by NumPy's stable sort order (``(v, f, position)``, NaN last), as
:func:`isles.islands.migration.policies.rank_order`, and move every leaf as bytes (any dtype), so their
results equal the array code's bit for bit. On CuPy they launch on the current stream without
host synchronisation (a captured CUDA graph takes them); on NumPy arrays the same C text runs
compiled for the CPU with one thread per block (``-DISLES_HOST_EMU``, the CPU tests' twin).

Supported (:func:`layout_reason`): float32 or float64 ``f`` and ``v``, at most
:data:`MAX_LEAVES` C-contiguous leaves of any dtype, at most :data:`MAX_SLOTS` emigrants or
immigrants per island.
"""

from __future__ import annotations

import ctypes

import numpy as np
from isles.algorithms.core.backend import device_constant
from isles.algorithms.core.cuda_lib import defines, source
from isles.algorithms.core.population import Population

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


def kernel_source(f_dtype, v_dtype) -> str:
    """The CUDA (and host emulation) source for fitness ``f_dtype`` and violation ``v_dtype``
    (float32 or float64): ``#define F_T/V_T`` + ``migration.cu`` (:mod:`isles.algorithms.core.cuda_lib`).

    Raises:
        KeyError: another dtype.
    """
    return source(defines({"F_T": _CTYPES[np.dtype(f_dtype)], "V_T": _CTYPES[np.dtype(v_dtype)]}), "migration.cu")


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
        cols = list(zip(*table, strict=False)) if table else [()] * 5
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


# -- the two kernels -------------------------------------------------------------------------
def select_best(pop: Population, k: int) -> Population | None:
    """The ``k`` best of each island, best first, every leaf (:class:`SelectBest` then
    :meth:`Population.take`) in one kernel: a Population ``(I, k)``, or ``None`` where the layout
    is not supported (:func:`layout_reason`). On NumPy arrays the host emulation runs (tests).
    The caller checks ``k`` once, when it builds its selection (:func:`isles.islands.migration.policies.check_migrants`)."""
    if layout_reason(pop, k) is not None:
        return None
    xp = pop.xp
    leaves = pop.leaves()
    I, N = pop.shape
    outs = {name: xp.empty((I, k) + tuple(a.shape[2:]), dtype=a.dtype) for name, a in leaves.items()}
    table = leaf_table([(a, None, outs[name]) for name, a in leaves.items()])
    _launcher(xp, pop.f.dtype, pop.v.dtype).emigrate(I, table, N, int(k))
    return Population.from_leaves(outs)


def replace(residents: Population, pool: Population, rows, valid, worst: bool, slots: bool):
    """Immigrants from ``pool`` into ``residents`` in one kernel, as
    :func:`isles.islands.migration.policies.worst_first` pairs them and :class:`~isles.islands.migration.policies.FairReplace`
    (``worst`` False: a better immigrant, Deb's rules) or :class:`~isles.islands.migration.policies.ReplaceWorst`
    (``worst`` True: every real one) accepts them.

    Args:
        residents: the islands' population ``(I, N)``.
        pool: the emigrant pool, the residents' leaves, dtypes and trailing shapes; its
            individuals in C order are the pool rows (the group's emigrants ``(I, k)``: row
            ``r`` = island ``r // k``, emigrant ``r % k``).
        rows, valid: the route's plan ``(I, K)``, ``K <= N`` (host arrays,
            :func:`isles.islands.migration.moves.route`; uploaded once as device constants).
        worst: replace_worst, else fair_replace.
        slots: write the ``K`` slots (``new (I, K)`` and their positions ``idx``), else the
            whole new population (``new (I, N)``, ``idx`` None).

    Returns:
        ``(new, idx, order, accepted, f_new)`` (``order``, ``accepted``, ``f_new``: ``(I, K)``, as
        :meth:`isles.islands.migration.policies.Replacement.replace` returns them), or ``None`` where the
        layout is not supported or the pool's leaves differ from the residents'.
    """
    I, N = residents.shape
    K = int(rows.shape[1])
    if layout_reason(residents, K) is not None or K > N:
        return None
    res_leaves, pool_leaves = residents.leaves(), pool.leaves()
    if list(res_leaves) != list(pool_leaves) or layout_reason(pool, int(pool.shape[1])) is not None:
        return None
    for name, a in res_leaves.items():
        b = pool_leaves[name]
        if b.dtype != a.dtype or b.shape[2:] != a.shape[2:] or b.shape[0] * b.shape[1] <= int(rows.max(initial=0)):
            return None
    xp = residents.xp
    shape = (I, K) if slots else (I, N)
    outs = {name: xp.empty(shape + tuple(a.shape[2:]), dtype=a.dtype) for name, a in res_leaves.items()}
    order = xp.empty((I, K), dtype=np.int64)
    accepted = xp.empty((I, K), dtype=np.bool_)
    f_new = xp.empty((I, K), dtype=residents.f.dtype)
    idx = xp.empty((I, K), dtype=np.int64) if slots else None
    table = leaf_table([(a, pool_leaves[name], outs[name]) for name, a in res_leaves.items()])
    R = N if slots else chunk_rows(N, sum(t[3] for t in table))
    rows_d = device_constant(xp, np.asarray(rows, np.int64))
    valid_d = device_constant(xp, np.asarray(valid, np.bool_))
    _launcher(xp, residents.f.dtype, residents.v.dtype).immigrate(
        I, -(-N // R), table, N, K, R, rows_d, valid_d, int(worst), int(not slots), order, accepted, f_new, idx
    )
    return Population.from_leaves(outs), idx, order, accepted, f_new
