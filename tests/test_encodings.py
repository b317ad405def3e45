"""CPU tests of the GA's genome codes (algorithms/core/: bitstrings.py, encodings.py, real_codes.py,
encoding_choice.py) and CounterRNG's raw hashes.

Packing (LSB first, padding bits 0), standard binary and Gray decoding with round trips, seed
002's decimal-digit code (section 2.2, appendix A.2; the sign erratum of shared/problems.md 7.3),
natively binary genomes, the one-line errors of make_encoding, and the CUDA decoders compiled
as C (``-DISLES_HOST_EMU``) against the array decoders, bit for bit.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from isles.algorithms.core.bitstrings import (
    binary_to_gray,
    extract_fields,
    gray_to_binary,
    n_words,
    pack_bits,
    unpack_bits,
    valid_mask,
)
from isles.algorithms.core.cuda_prelude import ARITHMETIC, HASH
from isles.algorithms.core.encoding_choice import make_encoding
from isles.algorithms.core.encodings import Bits
from isles.algorithms.core.random import CounterRNG, bits_to_uniform
from isles.algorithms.core.real_codes import Binary, Gray, Seed002
from isles.problems.benchmarks import Rastrigin, Sphere
from isles.problems.binary import OneMax

RS = np.random.default_rng(2026)


def _random_words(enc, n):
    G = RS.integers(0, 2**32, size=(n, enc.n_words), dtype=np.uint64).astype(np.uint32)
    return G & enc.valid_mask()


# ---- packing -------------------------------------------------------------------------------------


@pytest.mark.parametrize("L", [1, 5, 31, 32, 33, 64, 100, 1000])
def test_pack_unpack_round_trip_and_padding(L):
    bits = RS.integers(0, 2, size=(3, 4, L), dtype=np.uint8)
    words = pack_bits(bits)
    assert words.dtype == np.uint32 and words.shape == (3, 4, n_words(L))
    assert np.array_equal(unpack_bits(words, L), bits)
    assert not np.any(words & ~valid_mask(L))  # padding bits are 0
    # bit b at word b >> 5, bit b & 31 (LSB first)
    b = L - 1
    one = np.zeros(L, np.uint8)
    one[b] = 1
    w = pack_bits(one)
    assert w[b >> 5] == np.uint32(1 << (b & 31)) and w.sum() == w[b >> 5]


def test_unpack_wrong_words_raises():
    with pytest.raises(ValueError, match="words"):
        unpack_bits(np.zeros((2, 3), np.uint32), 100)


def test_extract_fields_matches_naive():
    for width in (1, 7, 32, 33, 52):
        L = 300
        bits = RS.integers(0, 2, size=(5, L), dtype=np.uint8)
        words = pack_bits(bits)
        starts = np.array([0, 1, 31, 32, 45, 63, 64, 200, L - width])
        k = extract_fields(words, starts, width)
        for j, s in enumerate(starts):
            naive = (bits[:, s : s + width].astype(np.uint64) << np.arange(width, dtype=np.uint64)).sum(axis=1)
            assert np.array_equal(k[:, j], naive)


# ---- binary and Gray -------------------------------------------------------------------------------


def test_binary_decode_known_values():
    enc = Binary(2, 3, lower=0.0, upper=7.0)  # k / 7 * 7 + 0 = k
    # variable 0 = bits 0..2 = (1, 0, 1) -> k = 1 + 4 = 5; variable 1 = (0, 1, 1) -> 6
    words = pack_bits(np.array([1, 0, 1, 0, 1, 1], np.uint8))
    assert np.array_equal(enc.decode(words), [5.0, 6.0])
    enc = Binary(1, 8, -1.0, 1.0)
    assert enc.decode(pack_bits(np.zeros(8, np.uint8)))[0] == -1.0
    assert enc.decode(pack_bits(np.ones(8, np.uint8)))[0] == 1.0
    k = 100
    x = enc.decode(pack_bits(((k >> np.arange(8)) & 1).astype(np.uint8)))[0]
    assert x == -1.0 + (k / 255.0) * 2.0


@pytest.mark.parametrize("cls", [Binary, Gray])
@pytest.mark.parametrize("b", [1, 5, 16, 31, 40])
def test_binary_gray_round_trip(cls, b):
    enc = cls(3, b, lower=[-5.0, 0.0, 2.0], upper=[5.0, 1.0, 2.5])
    assert enc.n_bits == 3 * b and enc.n_words == n_words(3 * b)
    G = _random_words(enc, 200)
    X = enc.decode(G)
    assert X.dtype == np.float64 and X.shape == (200, 3)
    assert np.all(enc.lower <= X) and np.all(enc.upper >= X)
    assert np.array_equal(enc.encode(X), G)
    assert np.array_equal(enc.decode(G, np.float32), X.astype(np.float32))


def test_binary_52_bits_decode_encode_decode():
    enc = Binary(4, 52, lower=-1e3, upper=7e3)
    G = _random_words(enc, 100)
    X = enc.decode(G)
    assert np.array_equal(enc.decode(enc.encode(X)), X)


def test_gray_code():
    g = np.arange(16, dtype=np.uint64)
    assert np.array_equal(gray_to_binary(binary_to_gray(g)), g)
    codes = binary_to_gray(g)
    # reflected Gray: successive codes differ in exactly one bit
    diff = codes[1:] ^ codes[:-1]
    assert all(bin(int(d)).count("1") == 1 for d in diff)
    assert list(codes[:8]) == [0, 1, 3, 2, 6, 7, 5, 4]
    enc = Gray(1, 4, 0.0, 15.0)
    for k in range(16):
        gbits = ((int(codes[k]) >> np.arange(4)) & 1).astype(np.uint8)
        assert enc.decode(pack_bits(gbits))[0] == float(k)


@pytest.mark.parametrize("b", [0, 53, 60, -1, 2.5, True])
def test_bits_per_variable_validated(b):
    with pytest.raises(ValueError, match=r"^algorithm.bits_per_variable=.*: allowed values are integers 1..52$"):
        Binary(2, b)


def test_bits_per_variable_message():
    with pytest.raises(ValueError) as e:
        Binary(2, 60)
    assert str(e.value) == "algorithm.bits_per_variable=60: allowed values are integers 1..52"


# ---- seed 002 ----------------------------------------------------------------------------------------


def _seed002_genome(codes):
    """Genome of digit codes ``codes (D, nvdec)`` of 4 bits each."""
    codes = np.asarray(codes, np.uint64)
    bits = (codes[..., None] >> np.arange(4, dtype=np.uint64)) & np.uint64(1)
    return pack_bits(bits.reshape(-1).astype(np.uint8))


def test_seed002_digits_and_sign():
    enc = Seed002(2)  # 8 digits of 4 bits per variable: 64 bits, 2 words
    assert enc.n_bits == 64 and enc.n_words == 2
    # digit value lround(bd * 9 / 15): 0->0, 2->1 (1.2), 7->4 (4.2), 8->5 (4.8), 15->9
    assert [int(enc.digit_of[b]) for b in (0, 1, 2, 7, 8, 15)] == [0, 1, 1, 4, 5, 9]
    # variable 0: sign code 7 (< 7.5: negative), digits 1..7 = codes of 1,2,3,4,5,6,7
    c = [int(enc.code_of[d]) for d in range(10)]
    v0 = [7, c[1], c[2], c[3], c[4], c[5], c[6], c[7]]
    v1 = [8, c[9], c[0], c[0], c[0], c[0], c[0], c[1]]  # sign code 8: positive
    X = enc.decode(_seed002_genome([v0, v1]))
    assert X[0] == -0.1234567 and X[1] == 0.9000001
    # the coordinates take both signs (erratum 7.3: A.2 as printed never gives a negative one)
    Xr = enc.decode(_random_words(enc, 2000))
    assert (Xr < 0).any() and (Xr > 0).any()
    assert np.all(np.abs(Xr) <= 1 - 1e-7)


def test_seed002_value_is_nearest_double_of_the_decimal():
    enc = Seed002(3)
    G = _random_words(enc, 500)
    X = enc.decode(G)
    bd = enc.digits(G)
    dig = enc.digit_of[bd.astype(np.int64)]
    for r in range(20):
        for j in range(3):
            s = "".join(str(int(d)) for d in dig[r, j, 1:])
            expect = float("0." + s)
            if bd[r, j, 0] * 2 < 15:
                expect = -expect
            assert X[r, j] == expect


def test_seed002_round_trip_and_params():
    enc = Seed002(5, nvdec=5, nvbin=3)
    G = _random_words(enc, 300)
    X = enc.decode(G)
    assert np.array_equal(enc.decode(enc.encode(X)), X)
    x = np.array([[-0.1234, 0.5, 0.0, 0.9999, -0.00006]])
    e4 = Seed002(5, nvdec=5, nvbin=4)  # every decimal digit reachable with 4 bits
    assert np.array_equal(e4.decode(e4.encode(x)), [[-0.1234, 0.5, 0.0, 0.9999, -0.0001]])
    # with 3 bits per digit the digit 2 is unreachable (codes give 0, 1, 3, 4, 5, 6, 8, 9)
    assert sorted(set(enc.digit_of.tolist())) == [0, 1, 3, 4, 5, 6, 8, 9]
    with pytest.raises(ValueError, match=r"^algorithm.nvdec=1: allowed values are integers 2..16$"):
        Seed002(2, nvdec=1)
    with pytest.raises(ValueError, match=r"^algorithm.nvbin=17: allowed values are integers 1..16$"):
        Seed002(2, nvbin=17)


# ---- bits and make_encoding ------------------------------------------------------------------------


def test_bits_encoding():
    enc = Bits(100)
    assert enc.n_words == 4 and enc.genome == "bits"
    bits = RS.integers(0, 2, size=(7, 100), dtype=np.uint8)
    G = enc.encode(bits)
    assert np.array_equal(enc.decode(G), bits) and enc.decode(G).dtype == np.uint8
    # padding bits never reach the phenotype
    assert np.array_equal(enc.decode(G | ~enc.valid_mask()), bits)


def test_padding_bits_do_not_change_real_phenotype():
    for enc in (Binary(3, 11, -2.0, 2.0), Gray(3, 11, -2.0, 2.0), Seed002(3)):
        G = _random_words(enc, 50)
        assert np.array_equal(enc.decode(G | ~enc.valid_mask()), enc.decode(G))


def test_make_encoding():
    r = Rastrigin(2, -1.0, 1.0)
    assert isinstance(make_encoding("seed002", r), Seed002)
    assert type(make_encoding("auto", r)) is Binary
    assert isinstance(make_encoding("gray", r, 10), Gray)
    assert make_encoding("binary", Sphere(3, -4.0, 4.0), 12).n_bits == 36
    om = OneMax(77)
    e = make_encoding("auto", om)
    assert isinstance(e, Bits) and e.n_bits == 77
    with pytest.raises(ValueError, match=r"^algorithm.encoding='gray': .* allowed values are bits\|auto$"):
        make_encoding("gray", om)
    with pytest.raises(
        ValueError, match=r"^algorithm.encoding='bits': .* allowed values are binary\|gray\|seed002\|auto$"
    ):
        make_encoding("bits", r)
    with pytest.raises(ValueError, match=r"^algorithm.encoding='nope'"):
        make_encoding("nope", r)


# ---- the CUDA decoders as C ----------------------------------------------------------------------


def _host_decode(enc, words, f32):
    from isles.algorithms.ga.cuda_host import compile_host, host_compiler  # noqa: PLC0415

    if host_compiler() is None:
        pytest.skip("no C compiler for the host emulation")
    src = (
        f"#define IS_F32 {int(f32)}\n"
        + HASH
        + ARITHMETIC
        + enc.cuda_decode
        + r"""
void decode_rows(const unsigned int* rows, int n, int W, int D, T* out) {
    for (int r = 0; r < n; ++r) for (int j = 0; j < D; ++j) out[r * D + j] = enc_decode(rows + (long)r * W, j);
}
"""
    )
    lib = compile_host(src)
    words = np.ascontiguousarray(words, dtype=np.uint32)
    out = np.empty((words.shape[0], enc.dim), np.float32 if f32 else np.float64)
    lib.decode_rows(
        words.ctypes.data_as(ctypes.c_void_p), words.shape[0], enc.n_words, enc.dim, out.ctypes.data_as(ctypes.c_void_p)
    )
    return out


@pytest.mark.parametrize(
    "enc",
    [
        Binary(3, 16, -5.0, 5.0),
        Binary(7, 52, [-1, -2, -3, -4, -5, -6, -7], [1, 2, 3, 4, 5, 6, 70]),
        Gray(5, 13, -1.0, 3.0),
        Binary(4, 1, 0.0, 1.0),
        Seed002(2),
        Seed002(5, 5, 3),
        Bits(100),
    ],
    ids=lambda e: f"{e.name}{e.n_bits}",
)
@pytest.mark.parametrize("f32", [False, True])
def test_cuda_decode_matches_decode(enc, f32):
    G = _random_words(enc, 300)
    dt = np.float32 if f32 else np.float64
    a = enc.decode(G, dt) if enc.genome == "real" else enc.decode(G).astype(dt)
    b = _host_decode(enc, G, f32)
    assert np.array_equal(a, b) and np.array_equal(np.signbit(a), np.signbit(b))


# ---- CounterRNG raw hashes -------------------------------------------------------------------------


def test_rng_bits_are_uniforms_bits():
    r = CounterRNG(np, 3, [0, 5, 7])
    z = r.bits(4, 9, (6, 5))
    assert z.dtype == np.uint64 and z.shape == (3, 6, 5)
    assert np.array_equal(bits_to_uniform(z), r.uniform(4, 9, (6, 5)))
    assert np.array_equal(bits_to_uniform(z, np.float32), r.uniform(4, 9, (6, 5), np.float32))
    # uniform itself is unchanged by the additions: a few fixed numbers
    u = CounterRNG(np, 0, [0]).uniform(0, 0, (3,))
    assert np.array_equal(u, bits_to_uniform(CounterRNG(np, 0, [0]).bits(0, 0, 3)))


def test_rng_bits_at_and_uniform_at():
    r = CounterRNG(np, 3, [0, 5, 7])
    z = r.bits(4, 9, (6, 5)).reshape(3, -1)
    idx = np.array([[3, 29], [0, 1], [7, 7]])
    assert np.array_equal(r.bits_at(4, 9, idx), z[np.arange(3)[:, None], idx])
    st, ix = np.array([2, 0, 1, 1]), np.array([4, 4, 11, 0])
    assert np.array_equal(r.uniform_at(4, 9, ix, st), bits_to_uniform(z[st, ix]))
    # an index beyond any earlier shape is the same element of a larger draw
    big = r.bits(4, 9, 1000)
    assert np.array_equal(r.bits_at(4, 9, np.array([[999]])[[0, 0, 0]]), big[:, 999:])
    with pytest.raises(ValueError, match="draw"):
        r.bits(0, -1, 3)
