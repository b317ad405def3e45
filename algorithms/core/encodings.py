"""Bit-string genomes for the GA: packing, and the codes that map bits to a problem's input.

**Packing.** A genome of ``L`` bits is stored as ``W = ceil(L / 32)`` ``uint32`` words: bit ``b``
of the genome is bit ``b & 31`` of word ``b >> 5`` (least significant bit first). The padding
bits of the last word (``L`` not a multiple of 32) are always 0: every operator of the GA keeps
them 0 and no code reads them (:func:`pack_bits`, :func:`unpack_bits`, :func:`valid_mask`).
A population is ``(..., W)`` ``uint32`` (``(I, N, W)`` for ``I`` islands of ``N`` individuals).

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

from isles.algorithms.core.backend import array_module, device_constant
from isles.algorithms.core.cuda_lib import source
from isles.algorithms.core.plan import elementwise

MAX_BITS_PER_VARIABLE = 52  # k must be exact in float64
ENCODINGS_REAL = ("binary", "gray", "seed002")
ENCODINGS = ("auto",) + ENCODINGS_REAL + ("bits",)

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
        cp, "raw uint32 w, int64 L, int64 W", "uint8 b",
        "const long long r = i / L, j = i - r * L; b = (unsigned char)((w[r * W + (j >> 5)] >> (j & 31)) & 1u);",
        "isles_unpack_bits")


def extract_fields(words, starts, width: int):
    """Unsigned integers of ``width`` (1..52) bits starting at bit positions ``starts`` (host
    ints, shape ``(F,)``) of packed rows ``(..., W)``: uint64 ``(..., F)``, bit ``i`` of a field
    weighing ``2^i``. The array twin of the CUDA ``enc_field``."""
    xp = array_module(words)
    W = words.shape[-1]
    starts = np.asarray(starts, dtype=np.int64)
    w, o = starts >> 5, starts & 31
    pad = xp.concatenate([xp.asarray(words, dtype=np.uint64),
                          xp.zeros(words.shape[:-1] + (2,), dtype=np.uint64)], axis=-1)
    del W
    wd = device_constant(xp, w)  # host constants uploaded once (capturable, plan.py)
    k = pad[..., wd] | (pad[..., wd + 1] << np.uint64(32))
    k = k >> device_constant(xp, o.astype(np.uint64))
    third = (width > 64 - o)
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


def _c_double(x: float) -> str:
    """A C literal that parses to exactly the double ``x`` (17 significant digits)."""
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"encoding bound {x} is not finite")
    return f"{x:.17g}" if ("e" in f"{x:.17g}" or "." in f"{x:.17g}") else f"{x:.17g}.0"


def _c_array(name: str, values) -> str:
    body = ", ".join(_c_double(v) for v in values)
    return (f"#ifdef ISLES_HOST_EMU\nstatic const double {name}[{len(values)}] = {{{body}}};\n#else\n"
            f"__device__ const double {name}[{len(values)}] = {{{body}}};\n#endif\n")


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


class Binary(Encoding):
    """Standard binary code of ``dim`` variables of ``b`` bits each (``L = dim * b``).

    Variable ``j`` is the unsigned integer ``k`` of bits ``[j b, (j + 1) b)`` (bit ``i`` of the
    variable has weight ``2^i``), decoded in float64 as
    ``x_j = lower_j + (k / (2^b - 1)) * (upper_j - lower_j)`` (each operation rounded to nearest,
    ``upper_j - lower_j`` precomputed in float64), then cast to the requested dtype. ``k = 0`` gives
    ``lower_j``, ``k = 2^b - 1`` gives ``lower_j + (upper_j - lower_j)``.

    Args:
        dim: number of variables ``D >= 1``.
        bits_per_variable: ``b`` in 1..52 (``k`` must be exact in float64).
        lower, upper: bounds, a number or ``D`` numbers (float64).

    Raises:
        ValueError: ``algorithm.bits_per_variable`` outside 1..52; bounds of the wrong length,
            not finite, or ``lower > upper``.
    """

    name = "binary"

    def __init__(self, dim: int, bits_per_variable: int = 16, lower=0.0, upper=1.0):
        b = bits_per_variable
        if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or not 1 <= int(b) <= MAX_BITS_PER_VARIABLE:
            raise ValueError(
                f"algorithm.bits_per_variable={b!r}: allowed values are integers 1..{MAX_BITS_PER_VARIABLE}"
            )
        dim = int(dim)
        if dim < 1:
            raise ValueError(f"{self.name} encoding: dim={dim}: allowed values are integers >= 1")
        self.b = int(b)
        super().__init__(dim * self.b, dim)
        lo = np.broadcast_to(np.asarray(lower, dtype=np.float64), (dim,)).copy()
        hi = np.broadcast_to(np.asarray(upper, dtype=np.float64), (dim,)).copy()
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))) or np.any(lo > hi):
            raise ValueError(f"{self.name} encoding: bounds must be finite with lower <= upper")
        self.lower, self.upper = lo, hi
        self.width = hi - lo
        self.m = float((1 << self.b) - 1)
        self._dev: dict = {}

    def _consts(self, xp):
        key = xp.__name__
        if key not in self._dev:
            self._dev[key] = (xp.asarray(self.lower), xp.asarray(self.width))
        return self._dev[key]

    def integers(self, words):
        """The variables' unsigned integers ``k`` (after Gray decoding where applicable):
        uint64 ``(..., D)``."""
        self._check(words)
        return extract_fields(words, np.arange(self.dim) * self.b, self.b)

    def decode(self, words, dtype=np.float64):
        """``X (..., D)`` in ``dtype`` (computed in float64, then cast) from words ``(..., W)``.

        Raises:
            ValueError: the genome has the wrong number of words.
        """
        xp = array_module(words)
        lo, wd = self._consts(xp)
        k = self.integers(words).astype(np.float64)
        x = lo + (k / self.m) * wd
        return x.astype(dtype, copy=False)

    def encode(self, X):
        """Nearest code: ``k = round((x - lower) / (upper - lower) * (2^b - 1))`` clipped to
        ``[0, 2^b - 1]`` (``k = 0`` where ``upper = lower``), then whichever of ``k - 1, k, k + 1``
        decodes closest to ``x`` (float rounding); returns words ``(..., W)`` uint32. For every
        genome, ``decode(encode(decode(w))) == decode(w)``."""
        xp = array_module(X)
        X = xp.asarray(X, dtype=np.float64)
        lo, wd = self._consts(xp)
        safe = xp.where(wd > 0, wd, 1.0)
        t = xp.where(wd > 0, (X - lo) / safe, 0.0)
        k0 = xp.clip(xp.rint(t * self.m), 0, self.m)
        # float rounding can put the nearest code one step away: take the best of k0 - 1, k0, k0 + 1
        best, err = k0, None
        for dk in (0.0, -1.0, 1.0):
            k = xp.clip(k0 + dk, 0, self.m)
            e = xp.abs(lo + (k / self.m) * wd - X)
            if err is None:
                err = e
            else:
                take = e < err
                best, err = xp.where(take, k, best), xp.where(take, e, err)
        return self._pack_integers(self._to_code(best.astype(np.uint64)))

    def _to_code(self, k):
        return k

    def _pack_integers(self, k):
        xp = array_module(k)
        bits = (k[..., None] >> xp.arange(self.b, dtype=np.uint64)) & np.uint64(1)
        return pack_bits(bits.reshape(k.shape[:-1] + (self.dim * self.b,)).astype(np.uint8))

    _gray = False  # enc_decode applies gray_to_binary (encodings.cuh ENC_GRAY)

    @property
    def cuda_decode(self) -> str:
        """``enc_decode(row, j)``: ``k`` by word extraction, then ``lower_j + (k / m) * width_j``
        in float64 with ``__dadd_rn``/``__dmul_rn``/``__ddiv_rn`` (no FMA), cast to ``T``."""
        uniform = bool(np.all(self.lower == self.lower[0]) and np.all(self.width == self.width[0]))
        head = f"#define ENC_W {self.n_words}\n#define ENC_B {self.b}\n#define ENC_D {self.dim}\n"
        head += f"#define ENC_M {_c_double(self.m)}\n"
        if uniform:
            head += (f"#define ENC_LO(j) ({_c_double(self.lower[0])})\n"
                     f"#define ENC_WID(j) ({_c_double(self.width[0])})\n")
        else:
            head += _c_array("enc_lo", self.lower) + _c_array("enc_wid", self.width)
            head += "#define ENC_LO(j) (enc_lo[(j)])\n#define ENC_WID(j) (enc_wid[(j)])\n"
        head += f"#define ENC_GRAY {int(self._gray)}\n"
        return source("#define ENC_CODE 1\n" + head, "encodings.cuh")


class Gray(Binary):
    """Reflected Gray code of ``dim`` variables of ``b`` bits (Caruana & Schaffer 1988).

    As :class:`Binary`, with ``k = gray_to_binary(g)`` where ``g`` is the variable's ``b``-bit
    integer (bit ``i`` weighs ``2^i``): ``k = g ^ (g >> 1) ^ (g >> 2) ^ ...``. Adjacent values of
    ``k`` differ in one bit of the genome (no Hamming cliffs).

    Raises:
        ValueError: as :class:`Binary`.
    """

    name = "gray"

    def integers(self, words):
        """The variables' binary integers ``k = gray_to_binary(g)``: uint64 ``(..., D)``."""
        return gray_to_binary(super().integers(words))

    def _to_code(self, k):
        return binary_to_gray(k)

    _gray = True


class Seed002(Encoding):
    """Seed 002's decimal-digit code (section 2.2, Fig. 2.1-2.2, appendix A.2).

    Each of the ``dim`` variables owns ``nvdec`` digits of ``nvbin`` bits (``L = dim * nvdec *
    nvbin``; the seed's 2 variables x 8 digits x 4 bits = 64 bits); digit ``d`` of variable ``j``
    is bits ``[(j nvdec + d) nvbin, (j nvdec + d + 1) nvbin)``, bit ``i`` weighing ``2^i``
    (``bd = BinDec(bits)``; the seed does not print BinDec's bit order). With ``m = 2^nvbin - 1``:

    * digit value ``lround(bd * 9 / m)`` (A.2's ``lroundf(BinDec * lim)``), computed exactly in
      integers as ``floor((18 bd + m) / (2 m))`` (round half up; A.2's float32 ``lim`` could round
      a tie either way);
    * digit 0 is the sign: negative when ``bd < m * 0.5`` (A.2; for ``nvbin = 4`` exactly when the
      digit value is below 5, section 2.2), computed as ``2 bd < m``;
    * digits ``1..nvdec-1`` give ``|x| = sum_i digit_i 10^-i``, computed as the exact integer
      ``K = sum_i digit_i 10^(nvdec-1-i)`` and one correctly rounded float64 division
      ``K / 10^(nvdec-1)`` (the nearest double to the decimal; A.2 accumulates ``powf`` terms in
      float32), then cast to the requested dtype.

    Domain ``[-1, 1]`` (``|x| <= 1 - 10^-(nvdec-1)``): :func:`make_encoding` refuses it for a
    problem whose box is not ``[-1, 1]`` in every variable.

    **Erratum** (``shared/problems.md`` 7.3): as printed, A.2 applies the sign after the
    coordinate loop to a variable that was just reset to 0, so no coordinate would ever be
    negative (domain ``[0, 1)``). isles implements the evident intent of section 2.2: each
    variable's own sign digit sets its sign.

    Args:
        dim: variables ``D >= 1``.
        nvdec: digits per variable, 2..16 (sign + ``nvdec - 1`` decimals; ``K`` exact in float64).
        nvbin: bits per digit, 1..16.

    Raises:
        ValueError: ``algorithm.nvdec`` or ``algorithm.nvbin`` out of range.
    """

    name = "seed002"

    def __init__(self, dim: int, nvdec: int = 8, nvbin: int = 4):
        for field, val, lo, hi in (("nvdec", nvdec, 2, 16), ("nvbin", nvbin, 1, 16)):
            if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or not lo <= int(val) <= hi:
                raise ValueError(f"algorithm.{field}={val!r}: allowed values are integers {lo}..{hi}")
        dim = int(dim)
        if dim < 1:
            raise ValueError(f"seed002 encoding: dim={dim}: allowed values are integers >= 1")
        self.nvdec, self.nvbin = int(nvdec), int(nvbin)
        super().__init__(dim * self.nvdec * self.nvbin, dim)
        self.m = (1 << self.nvbin) - 1
        self.scale = float(10 ** (self.nvdec - 1))
        # digit value of every bd in [0, m] and, per digit 0..9, the nearest code (encode)
        bd = np.arange(self.m + 1, dtype=np.int64)
        self.digit_of = (18 * bd + self.m) // (2 * self.m)
        self.code_of = np.array([int(np.argmin(np.abs(self.digit_of - d))) for d in range(10)], dtype=np.uint64)

    def digits(self, words):
        """Raw digit codes ``bd`` uint64 ``(..., D, nvdec)`` (digit 0 = the sign digit)."""
        self._check(words)
        starts = np.arange(self.dim * self.nvdec) * self.nvbin
        bd = extract_fields(words, starts, self.nvbin)
        return bd.reshape(bd.shape[:-1] + (self.dim, self.nvdec))

    def decode(self, words, dtype=np.float64):
        """``X (..., D)`` in ``dtype`` (float64 value, then cast), see the class docstring.

        Raises:
            ValueError: the genome has the wrong number of words.
        """
        xp = array_module(words)
        bd = self.digits(words)
        m = np.uint64(self.m)
        dig = (np.uint64(18) * bd[..., 1:] + m) // (np.uint64(2) * m)
        pw = device_constant(xp, 10 ** np.arange(self.nvdec - 2, -1, -1, dtype=np.uint64))
        K = (dig * pw).sum(axis=-1, dtype=np.uint64)
        x = K.astype(np.float64) / self.scale
        neg = (np.uint64(2) * bd[..., 0]) < m
        return xp.where(neg, -x, x).astype(dtype, copy=False)

    def encode(self, X):
        """Nearest code: ``K = round(|x| 10^(nvdec-1))`` clipped, its decimal digits, each digit's
        nearest ``nvbin``-bit code, sign code ``0`` (negative) or ``m`` (non-negative)."""
        xp = array_module(X)
        X = xp.asarray(X, dtype=np.float64)
        K = xp.clip(xp.rint(xp.abs(X) * self.scale), 0, self.scale - 1).astype(np.uint64)
        pw = xp.asarray(10 ** np.arange(self.nvdec - 2, -1, -1, dtype=np.uint64))
        dig = (K[..., None] // pw) % np.uint64(10)
        codes = xp.asarray(self.code_of)[dig.astype(np.int64)]
        sign = xp.where(X < 0, np.uint64(0), np.uint64(self.m))[..., None]
        allc = xp.concatenate([sign, codes], axis=-1)  # (..., D, nvdec)
        bits = (allc[..., None] >> xp.arange(self.nvbin, dtype=np.uint64)) & np.uint64(1)
        return pack_bits(bits.reshape(X.shape[:-1] + (self.n_bits,)).astype(np.uint8))

    @property
    def cuda_decode(self) -> str:
        """``enc_decode(row, j)``: integer digits, ``K``, one ``__ddiv_rn``, the sign, cast to ``T``."""
        head = (f"#define ENC_W {self.n_words}\n#define ENC_NVDEC {self.nvdec}\n"
                f"#define ENC_NVBIN {self.nvbin}\n#define ENC_MI {self.m}ull\n"
                f"#define ENC_SCALE {_c_double(self.scale)}\n")
        return source("#define ENC_CODE 2\n" + head, "encodings.cuh")


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


def problem_genome(problem) -> str:
    """``"bits"`` for natively binary problems (``problem.genome == "bits"``), else ``"real"``."""
    return "bits" if getattr(problem, "genome", "real") == "bits" else "real"


def make_encoding(name: str, problem, bits_per_variable: int = 16, nvdec: int = 8, nvbin: int = 4) -> Encoding:
    """The encoding ``name`` for ``problem``.

    Args:
        name: ``auto`` (``bits`` for a natively binary problem, else ``binary``), ``binary``,
            ``gray``, ``seed002`` (real-valued problems: ``problem.dim``, ``problem.lower``,
            ``problem.upper``) or ``bits`` (``problem.genome == "bits"``, ``problem.n_bits``).
        problem: the problem.
        bits_per_variable: ``b`` of binary/gray; nvdec, nvbin: seed002's digits.

    An encoding never leaves the problem's box: ``binary`` and ``gray`` decode into
    ``problem.lower..problem.upper``; ``seed002`` decodes into the seed's fixed domain ``[-1, 1]``
    and is refused for any other box (rather than searching outside it, or only part of it).

    Raises:
        ValueError: one line naming ``algorithm.encoding`` and the values allowed for this problem
            (a real encoding on a bit problem or vice versa, ``seed002`` on a box other than
            ``[-1, 1]`` in every variable, or an unknown name), or a bad
            ``bits_per_variable``/``nvdec``/``nvbin``.
    """
    kind = problem_genome(problem)
    pname = getattr(problem, "name", type(problem).__name__)
    if kind == "bits":
        if name not in ("auto", "bits"):
            raise ValueError(
                f"algorithm.encoding={name!r}: problem {pname} is natively binary; allowed values "
                f"are bits|auto"
            )
        n_bits = getattr(problem, "n_bits", None)
        return Bits(n_bits if n_bits is not None else problem.dim)
    if name not in ("auto",) + ENCODINGS_REAL:
        raise ValueError(
            f"algorithm.encoding={name!r}: problem {pname} is real-valued; allowed values are "
            f"{'|'.join(ENCODINGS_REAL)}|auto"
        )
    if name in ("auto", "binary"):
        return Binary(problem.dim, bits_per_variable, problem.lower, problem.upper)
    if name == "gray":
        return Gray(problem.dim, bits_per_variable, problem.lower, problem.upper)
    lo, hi = np.asarray(problem.lower, dtype=np.float64), np.asarray(problem.upper, dtype=np.float64)
    if not (np.all(lo == -1.0) and np.all(hi == 1.0)):
        raise ValueError(
            f"algorithm.encoding=seed002 decodes into seed 002's domain [-1, 1], not the box of problem "
            f"{pname} (lower {_short(lo)}, upper {_short(hi)}); allowed values for this box are "
            f"binary|gray|auto (they decode into problem.lower..problem.upper)"
        )
    return Seed002(problem.dim, nvdec, nvbin)


def _short(v: np.ndarray) -> str:
    """A bound vector for a one-line message: one number when all are equal, else the first few."""
    if v.size and np.all(v == v[0]):
        return f"{v[0]:g}"
    return "[" + ", ".join(f"{x:g}" for x in v[:6]) + (", ..." if v.size > 6 else "") + "]"
