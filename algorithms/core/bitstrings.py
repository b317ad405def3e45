"""Packed bit strings, the GA's genomes (:mod:`isles.algorithms.core.encodings` maps them to a
problem's input).

**Packing.** A genome of ``L`` bits is stored as ``W = ceil(L / 32)`` ``uint32`` words: bit ``b``
of the genome is bit ``b & 31`` of word ``b >> 5`` (least significant bit first). The padding
bits of the last word (``L`` not a multiple of 32) are always 0: every operator of the GA keeps
them 0 and no code reads them (:func:`pack_bits`, :func:`unpack_bits`, :func:`valid_mask`).
A population is ``(..., W)`` ``uint32`` (``(I, N, W)`` for ``I`` islands of ``N`` individuals).

Also: the fields of a packed row as unsigned integers (:func:`extract_fields`) and the reflected
Gray code (:func:`gray_to_binary`, :func:`binary_to_gray`)."""

from __future__ import annotations

import numpy as np
from isles.algorithms.core.backend import array_module, device_constant
from isles.algorithms.core.plan import elementwise


def n_words(n_bits: int) -> int:
    """Words ``W = ceil(L / 32)`` of a genome of ``L`` bits."""
    return (int(n_bits) + 31) // 32


def valid_mask(n_bits: int, xp=np):
    """``(W,)`` uint32: the genome bits of each word (all ones except the last word's padding)."""
    W = n_words(n_bits)
    m = np.full(W, 0xFFFFFFFF, dtype=np.uint32)
    r = int(n_bits) & 31
    if r:
        m[-1] = np.uint32((1 << r) - 1)
    return device_constant(xp, m)


def pack_bits(bits):
    """Pack bits ``(..., L)`` (any integer or bool dtype, 0/1; only the lowest bit counts) into
    words ``(..., W)`` uint32, bit ``b`` at word ``b >> 5``, bit ``b & 31``; padding bits 0.

    NumPy or CuPy (the input's module).
    """
    xp = array_module(bits)
    bits = xp.asarray(bits)
    L = bits.shape[-1]
    W = n_words(L)
    b = bits.astype(np.uint32) & np.uint32(1)
    pad = W * 32 - L
    if pad:
        b = xp.concatenate([b, xp.zeros(b.shape[:-1] + (pad,), dtype=np.uint32)], axis=-1)
    b = b.reshape(b.shape[:-1] + (W, 32))
    return (b << xp.arange(32, dtype=np.uint32)).sum(axis=-1, dtype=np.uint32)


def unpack_bits(words, n_bits: int):
    """Unpack words ``(..., W)`` uint32 into bits ``(..., L)`` uint8 0/1 (inverse of
    :func:`pack_bits`; padding bits dropped).

    Raises:
        ValueError: ``W != ceil(n_bits / 32)``.
    """
    xp = array_module(words)
    W = n_words(n_bits)
    if words.shape[-1] != W:
        raise ValueError(f"unpack_bits: {words.shape[-1]} words do not hold {n_bits} bits (need {W})")
    if xp is not np:  # one kernel writing the uint8 bits (no (..., W, 32) uint32 temporary)
        w = xp.ascontiguousarray(words, dtype=np.uint32)
        out = xp.empty(w.shape[:-1] + (int(n_bits),), dtype=np.uint8)
        _unpack_kernel(xp)(w, np.int64(n_bits), np.int64(W), out)
        return out
    w = xp.asarray(words, dtype=np.uint32)
    b = (w[..., None] >> xp.arange(32, dtype=np.uint32)) & np.uint32(1)
    return b.astype(np.uint8).reshape(w.shape[:-1] + (W * 32,))[..., : int(n_bits)]


def _unpack_kernel(cp):
    """CuPy elementwise kernel of :func:`unpack_bits`: bit ``j`` of row ``r`` is bit ``j & 31`` of
    word ``j >> 5`` (built once per process, :func:`isles.algorithms.core.plan.elementwise`)."""
    return elementwise(
        cp,
        "raw uint32 w, int64 L, int64 W",
        "uint8 b",
        "const long long r = i / L, j = i - r * L; b = (unsigned char)((w[r * W + (j >> 5)] >> (j & 31)) & 1u);",
        "isles_unpack_bits",
    )


def extract_fields(words, starts, width: int):
    """Unsigned integers of ``width`` (1..52) bits starting at bit positions ``starts`` (host
    ints, shape ``(F,)``) of packed rows ``(..., W)``: uint64 ``(..., F)``, bit ``i`` of a field
    weighing ``2^i``. The array twin of the CUDA ``enc_field``."""
    xp = array_module(words)
    W = words.shape[-1]
    starts = np.asarray(starts, dtype=np.int64)
    w, o = starts >> 5, starts & 31
    pad = xp.concatenate(
        [xp.asarray(words, dtype=np.uint64), xp.zeros(words.shape[:-1] + (2,), dtype=np.uint64)], axis=-1
    )
    del W
    wd = device_constant(xp, w)  # host constants uploaded once (capturable, plan.py)
    k = pad[..., wd] | (pad[..., wd + 1] << np.uint64(32))
    k = k >> device_constant(xp, o.astype(np.uint64))
    third = width > 64 - o
    if third.any():
        sh = np.where(third, 64 - o, 0).astype(np.uint64)
        hi = pad[..., wd + 2] << device_constant(xp, sh)
        k = k | xp.where(device_constant(xp, third), hi, np.uint64(0))
    return k & np.uint64((1 << width) - 1)


def gray_to_binary(g):
    """Reflected Gray code to binary, elementwise on uint64 (``b = g ^ g>>1 ^ g>>2 ^ ...``)."""
    for s in (1, 2, 4, 8, 16, 32):
        g = g ^ (g >> np.uint64(s))
    return g


def binary_to_gray(k):
    """Binary to reflected Gray code, elementwise on uint64 (``g = k ^ (k >> 1)``)."""
    return k ^ (k >> np.uint64(1))
