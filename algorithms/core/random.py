"""Counter-based random numbers, identical on NumPy and CuPy.

Every random number in isles is a pure function of ``(seed, stream, generation, draw, index)``:

* ``seed``       the run's seed (config ``seed``);
* ``stream``     the island (or swarm) id, global over the whole archipelago;
* ``generation`` the generation (iteration) counter of that island;
* ``draw``       which draw inside the generation (each call site uses its own constant id);
* ``index``      the element's flat position inside the island's block.

The hash is SplitMix64's finaliser (Steele, Lea & Flood, "Fast splittable pseudorandom number
generators", OOPSLA 2014) applied to a Weyl sequence, i.e. a counter-based generator in the sense
of Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC 2011). Because nothing is
carried from one call to the next, a run is reproducible from its config and a checkpoint, does not
depend on how islands are spread over actors or GPUs, and the NumPy and CuPy paths draw bit-identical
numbers (the CuPy path is one fused elementwise kernel per draw).
"""

from __future__ import annotations

import math

import numpy as np
from isles.algorithms.core.cuda_lib import source
from isles.algorithms.core.plan import elementwise

GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_MASK = (1 << 64) - 1
MAX_DRAWS = 1 << 15  # draw ids per generation; normal() uses draw and draw + MAX_DRAWS


def mix64_int(z: int) -> int:
    """SplitMix64 finaliser on a Python int (host side), result in [0, 2**64)."""
    z &= _MASK
    z = ((z ^ (z >> 30)) * _M1) & _MASK
    z = ((z ^ (z >> 27)) * _M2) & _MASK
    return z ^ (z >> 31)


def _mix64_np(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_M1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_M2)
    return z ^ (z >> np.uint64(31))


#: the CuPy elementwise kernels of the generator: (input params, output params, body)
_ELEMENTWISE = {
    "uniform": (
        "raw uint64 keys, raw uint64 ctr, uint64 gd, int64 m",
        "T u",
        r"""
            const u64 s = isles_mix64(gd + (ctr[0] << 16));
            const u64 z = draw_bits(keys[i / m], s, (u64)(i % m));
            if (sizeof(T) == 4) { u = (T)unif24(z); }
            else { u = (T)unif53(z); }
            """,
    ),
    "bits": (
        "raw uint64 keys, raw uint64 ctr, uint64 gd, int64 m",
        "uint64 z",
        r"""
            const u64 s = isles_mix64(gd + (ctr[0] << 16));
            z = draw_bits(keys[i / m], s, (u64)(i % m));
            """,
    ),
    "bits_at": (
        "raw uint64 keys, raw uint64 ctr, uint64 gd, int64 idx, int64 st",
        "uint64 z",
        r"""
            const u64 s = isles_mix64(gd + (ctr[0] << 16));
            z = draw_bits(keys[st], s, (u64)idx);
            """,
    ),
}


def _cupy_kernel(cp, name: str):
    """The elementwise kernel ``isles_counter_<name>`` of :data:`_ELEMENTWISE` (``rng.cuh``)."""
    return elementwise(cp, *_ELEMENTWISE[name], f"isles_counter_{name}", source("rng.cuh"))


def bits_to_uniform(z, dtype=np.float64):
    """CounterRNG's float conversion of raw hashes ``z`` (uint64, any shape, NumPy or CuPy):
    float64 ``(z >> 11) * 2**-53`` (53 bits) or float32 ``(z >> 40) * 2**-24`` (24 bits), in
    [0, 1), exactly what :meth:`CounterRNG.uniform` returns for the same hashes."""
    if np.dtype(dtype) == np.float32:
        return (z >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


class CounterRNG:
    """Counter-based generator for a batch of ``I`` streams (islands) on NumPy or CuPy.

    Args:
        xp: ``numpy`` or ``cupy``.
        seed: the run's seed (any int; reduced mod 2**64).
        streams: ``I`` global stream ids, one per island of the batch.

    Every method returns an array of shape ``(I, *shape)``; block ``i`` depends only on
    ``(seed, streams[i], generation, draw)``.

    On CuPy the generation actually used is ``generation + ctr[0]``, where ``ctr`` is a device
    counter that stays 0 except under CUDA-graph replay (:mod:`isles.algorithms.core.graph`): a captured
    generation bakes its host-side ``generation`` into the graph, and each replay increments
    ``ctr`` on the device, so replay ``r`` draws the numbers of generation ``g0 + r``.
    """

    def __init__(self, xp, seed: int, streams):
        self.xp = xp
        self.seed = int(seed)
        self.streams = [int(s) for s in streams]
        base = mix64_int(self.seed)
        keys = [mix64_int(base ^ ((s + 1) * GOLDEN & _MASK)) for s in self.streams]
        self.keys = xp.asarray(np.array(keys, dtype=np.uint64))
        self.ctr = xp.zeros(1, dtype=np.uint64)

    @property
    def n_streams(self) -> int:
        """Number of streams ``I``."""
        return len(self.streams)

    def uniform(self, generation: int, draw: int, shape, dtype=np.float64):
        """Uniform numbers in [0, 1), shape ``(I, *shape)``, float32 (24-bit) or float64 (53-bit).

        Raises:
            ValueError: ``draw`` outside ``[0, MAX_DRAWS)``.
        """
        if not 0 <= draw < 2 * MAX_DRAWS:
            raise ValueError(f"draw={draw}: allowed range is [0, {2 * MAX_DRAWS})")
        shape = tuple(int(n) for n in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        m = max(1, math.prod(shape))
        gd = ((int(generation) << 16) + int(draw)) & _MASK
        dtype = np.dtype(dtype)
        out_shape = (self.n_streams, *shape)
        if self.xp is np:
            idx = np.arange(m, dtype=np.uint64) * np.uint64(GOLDEN)
            s = mix64_int(gd + (int(self.ctr[0]) << 16))
            z = _mix64_np((self.keys[:, None] ^ np.uint64(s)) + idx[None, :])
            if dtype == np.float32:
                u = (z >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
            else:
                u = (z >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
            return u.reshape(out_shape)
        out = self.xp.empty(out_shape, dtype=dtype)
        _cupy_kernel(self.xp, "uniform")(self.keys, self.ctr, np.uint64(gd), np.int64(m), out)
        return out

    def normal(self, generation: int, draw: int, shape, dtype=np.float64):
        """Standard normal numbers (Box-Muller on two uniform draws), shape ``(I, *shape)``."""
        xp = self.xp
        u1 = self.uniform(generation, draw, shape, dtype)
        u2 = self.uniform(generation, draw + MAX_DRAWS, shape, dtype)
        return xp.sqrt(-2.0 * xp.log1p(-u1)) * xp.cos((2.0 * math.pi) * u2)

    def integers(self, generation: int, draw: int, shape, high: int):
        """Integers uniform in ``[0, high)``, int64, shape ``(I, *shape)`` (53-bit resolution)."""
        u = self.uniform(generation, draw, shape, np.float64)
        k = (u * high).astype(np.int64)
        return self.xp.minimum(k, high - 1)

    # -- raw hashes (GA bit strings, sparse draws) -------------------------------------------------
    def _gd(self, generation: int, draw: int) -> int:
        if not 0 <= draw < 2 * MAX_DRAWS:
            raise ValueError(f"draw={draw}: allowed range is [0, {2 * MAX_DRAWS})")
        return ((int(generation) << 16) + int(draw)) & _MASK

    def bits(self, generation: int, draw: int, shape):
        """The raw 64-bit hashes behind :meth:`uniform`: uint64 ``(I, *shape)``.

        Element ``e`` (flat position inside island ``i``'s block) is
        ``mix64((key_i ^ mix64(gd + (ctr << 16))) + e * GOLDEN)`` with ``gd = (generation << 16) +
        draw``, i.e. CUDA's ``draw_bits(key, isles_mix64(gd + (ctr << 16)), e)``
        (``rng.cuh`` of the CUDA library, :mod:`isles.algorithms.core.cuda_lib`); ``uniform(...)`` is
        :func:`bits_to_uniform` of these. Used for random bit strings (32 bits per hash).

        Raises:
            ValueError: ``draw`` outside ``[0, 2 * MAX_DRAWS)``.
        """
        gd = self._gd(generation, draw)
        shape = tuple(int(n) for n in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        m = max(1, math.prod(shape))
        out_shape = (self.n_streams, *shape)
        if self.xp is np:
            idx = np.arange(m, dtype=np.uint64) * np.uint64(GOLDEN)
            s = mix64_int(gd + (int(self.ctr[0]) << 16))
            return _mix64_np((self.keys[:, None] ^ np.uint64(s)) + idx[None, :]).reshape(out_shape)
        out = self.xp.empty(out_shape, dtype=np.uint64)
        _cupy_kernel(self.xp, "bits")(self.keys, self.ctr, np.uint64(gd), np.int64(m), out)
        return out

    def bits_at(self, generation: int, draw: int, index, streams=None):
        """Raw hashes at arbitrary element indices: uint64 of ``index``'s (broadcast) shape.

        Element ``index[k]`` of the stream at batch position ``streams[k]`` of draw
        ``(generation, draw)``: the same number as ``bits(generation, draw, shape)`` holds at flat
        position ``index[k]`` of that island's block (any ``shape`` with enough elements). Lets a
        caller draw only the elements it needs (e.g. the GA's geometric mutation gaps).

        Args:
            index: int64 array (NumPy or CuPy, this generator's module), ``>= 0``.
            streams: int array of batch positions in ``[0, I)`` broadcastable with ``index``; ``None``:
                ``index`` has shape ``(I, ...)`` (or broadcasts to it) and row ``i`` uses stream ``i``.

        Raises:
            ValueError: ``draw`` outside ``[0, 2 * MAX_DRAWS)``.
        """
        xp = self.xp
        gd = self._gd(generation, draw)
        index = xp.asarray(index, dtype=np.int64)
        if streams is None:
            nd = max(index.ndim, 1)
            streams = xp.arange(self.n_streams, dtype=np.int64).reshape((-1,) + (1,) * (nd - 1))
        streams = xp.asarray(streams, dtype=np.int64)
        index, streams = xp.broadcast_arrays(index, streams)
        if xp is np:
            s = mix64_int(gd + (int(self.ctr[0]) << 16))
            k = self.keys[streams] ^ np.uint64(s)
            return _mix64_np(k + index.astype(np.uint64) * np.uint64(GOLDEN))
        out = xp.empty(index.shape, dtype=np.uint64)
        _cupy_kernel(xp, "bits_at")(self.keys, self.ctr, np.uint64(gd), index, streams, out)
        return out

    def uniform_at(self, generation: int, draw: int, index, streams=None, dtype=np.float64):
        """:meth:`uniform`'s numbers at arbitrary indices (:meth:`bits_at` then
        :func:`bits_to_uniform`): ``uniform(g, d, shape, dtype)`` at flat position ``index[k]``."""
        return bits_to_uniform(self.bits_at(generation, draw, index, streams), dtype)
