"""The codes of real variables (:mod:`isles.algorithms.core.encodings` describes them):
:class:`Binary`, :class:`Gray` and :class:`Seed002`."""

from __future__ import annotations

import numpy as np
from isles.algorithms.core.backend import array_module, device_constant
from isles.algorithms.core.bitstrings import binary_to_gray, extract_fields, gray_to_binary, pack_bits
from isles.algorithms.core.cuda_lib import source
from isles.algorithms.core.encodings import MAX_BITS_PER_VARIABLE, Encoding, _c_array, _c_double


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
            head += f"#define ENC_LO(j) ({_c_double(self.lower[0])})\n#define ENC_WID(j) ({_c_double(self.width[0])})\n"
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
        head = (
            f"#define ENC_W {self.n_words}\n#define ENC_NVDEC {self.nvdec}\n"
            f"#define ENC_NVBIN {self.nvbin}\n#define ENC_MI {self.m}ull\n"
            f"#define ENC_SCALE {_c_double(self.scale)}\n"
        )
        return source("#define ENC_CODE 2\n" + head, "encodings.cuh")
