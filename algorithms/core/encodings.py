"""Bit-string genomes for the GA: the codes that map bits to a problem's input.

Genomes are packed 32 bits to a ``uint32`` word (:mod:`isles.algorithms.core.bitstrings`). Files:
the :class:`Encoding` interface, the codes' names and :class:`Bits` here; the codes of real
variables (:class:`~isles.algorithms.core.real_codes.Binary`,
:class:`~isles.algorithms.core.real_codes.Gray`, :class:`~isles.algorithms.core.real_codes.Seed002`)
in :mod:`isles.algorithms.core.real_codes`; the choice of a code for a problem
(:func:`~isles.algorithms.core.encoding_choice.make_encoding`) in
:mod:`isles.algorithms.core.encoding_choice`.

**Encodings** (the phenotype of a genome, :meth:`Encoding.decode`):

* :class:`Binary` -- standard binary code: variable ``j`` owns bits ``[j b, (j + 1) b)``, bit
  ``i`` of the variable has weight ``2^i``, ``x_j = lower_j + k / (2^b - 1) (upper_j - lower_j)``
  with ``k`` that unsigned integer (Goldberg 1989, ch. 3);
* :class:`Gray` -- the same with the reflected Gray code, ``k = gray_to_binary(bits)``
  (Caruana & Schaffer 1988: neighbouring values differ by one bit);
* :class:`Seed002` -- seed 002's decimal-digit code (section 2.2, appendix A.2), domain
  ``[-1, 1]``;
* :class:`Bits` -- natively binary problems (OneMax, trap-k, knapsack): the phenotype is the bit
  string itself, ``uint8`` 0/1 of shape ``(..., L)``.

Every encoding decodes on NumPy or CuPy alike (array-module agnostic, no host synchronisation)
and carries :attr:`Encoding.cuda_decode`, CUDA source (also valid C under ``-DISLES_HOST_EMU``)
of ``ISLES_DEV T enc_decode(const unsigned int* row, int j)``: variable ``j`` of the packed row,
bit-identical to :meth:`Encoding.decode` (integer extraction, then float64 operations with
explicit round-to-nearest intrinsics, then a cast to ``T``): the configuration macros of the
encoding before ``encodings.cuh`` of the CUDA library (:mod:`isles.algorithms.core.cuda_lib`),
which brings ``arith.cuh`` (``T``, ``ISLES_DEV``) where it is not included yet.
"""

from __future__ import annotations

import math

import numpy as np
from isles.algorithms.core.bitstrings import n_words, pack_bits, unpack_bits, valid_mask
from isles.algorithms.core.cuda_lib import source

MAX_BITS_PER_VARIABLE = 52  # k must be exact in float64
ENCODINGS_REAL = ("binary", "gray", "seed002")
ENCODINGS = ("auto",) + ENCODINGS_REAL + ("bits",)


def _c_double(x: float) -> str:
    """A C literal that parses to exactly the double ``x`` (17 significant digits)."""
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"encoding bound {x} is not finite")
    return f"{x:.17g}" if ("e" in f"{x:.17g}" or "." in f"{x:.17g}") else f"{x:.17g}.0"


def _c_array(name: str, values) -> str:
    body = ", ".join(_c_double(v) for v in values)
    return (
        f"#ifdef ISLES_HOST_EMU\nstatic const double {name}[{len(values)}] = {{{body}}};\n#else\n"
        f"__device__ const double {name}[{len(values)}] = {{{body}}};\n#endif\n"
    )


class Encoding:
    """Base class of the genome codes (see the module docstring).

    Attributes:
        name: ``binary``, ``gray``, ``seed002`` or ``bits``.
        genome: ``"real"`` (decodes to float ``X (..., D)``) or ``"bits"`` (``uint8 (..., L)``).
        n_bits: genome length ``L``.
        n_words: ``W = ceil(L / 32)``.
        dim: phenotype length (``D`` variables, or ``L`` for :class:`Bits`).
    """

    name = "encoding"
    genome = "real"

    def __init__(self, n_bits: int, dim: int):
        self.n_bits = int(n_bits)
        self.n_words = n_words(self.n_bits)
        self.dim = int(dim)

    def valid_mask(self, xp=np):
        """``(W,)`` uint32 mask of the genome bits of each word (:func:`valid_mask`)."""
        return valid_mask(self.n_bits, xp)

    def decode(self, words, dtype=np.float64):
        """Phenotype of packed genomes ``(..., W)`` uint32 (NumPy or CuPy)."""
        raise NotImplementedError

    def encode(self, X):
        """Nearest genome ``(..., W)`` uint32 of phenotypes ``X (..., D)`` (tests, user seeding)."""
        raise NotImplementedError

    @property
    def cuda_decode(self) -> str:
        """CUDA/C source of ``ISLES_DEV T enc_decode(const unsigned int* row, int j)``."""
        raise NotImplementedError

    def _check(self, words):
        if words.shape[-1] != self.n_words:
            raise ValueError(
                f"{self.name} encoding: genome has {words.shape[-1]} words, expected {self.n_words} "
                f"({self.n_bits} bits)"
            )


class Bits(Encoding):
    """Natively binary problems: the phenotype is the bit string, uint8 0/1 ``(..., L)``.

    Args:
        n_bits: ``L >= 1``.

    Raises:
        ValueError: ``n_bits < 1``.
    """

    name = "bits"
    genome = "bits"

    def __init__(self, n_bits: int):
        if isinstance(n_bits, bool) or int(n_bits) < 1:
            raise ValueError(f"problem.n_bits={n_bits!r}: allowed values are integers >= 1")
        super().__init__(int(n_bits), int(n_bits))

    def decode(self, words, dtype=np.uint8):
        """Bits ``(..., L)`` uint8 0/1 (:func:`unpack_bits`); ``dtype`` is ignored (always uint8).

        Raises:
            ValueError: the genome has the wrong number of words.
        """
        self._check(words)
        return unpack_bits(words, self.n_bits)

    def encode(self, X):
        """:func:`pack_bits` of ``X (..., L)``."""
        return pack_bits(X)

    @property
    def cuda_decode(self) -> str:
        """``enc_decode(row, j)``: bit ``j`` as ``T`` (kernels of bit problems read the packed
        row through ``obj_unit`` instead)."""
        return source(f"#define ENC_CODE 3\n#define ENC_W {self.n_words}\n", "encodings.cuh")
