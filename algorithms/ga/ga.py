"""Genetic algorithm on packed bit strings, batched over islands (seed 002, sections 2.1-2.8).

Genomes are bit strings packed 32 to a ``uint32`` word (:mod:`isles.algorithms.core.encodings`):
``genome (I, N, W)`` for ``I`` islands of ``N`` individuals of ``L`` bits, ``W = ceil(L/32)``,
padding bits of the last word always 0. A real-valued problem sees the decoded phenotype
(binary, Gray or seed 002's decimal digits); a natively binary problem (OneMax, trap-k, knapsack)
sees the bits. Fitness ``f`` and violation ``v`` (Deb's rules rank ``(v, f)``,
:mod:`isles.problems.constraints`) are ``(I, N)`` in ``ctx.dtype``.

**One generation** (all islands at once, no host synchronisation), from population ``P`` with
``(f, v)`` to ``P'``:

1. *elitism* (seed 2.1): slots ``[0, n_elite)`` of ``P'`` are the island's ``n_elite`` best
   individuals of ``P`` in rank order (Deb's rules on ``(v, f)``, ties to the lower index), copied
   unchanged with their ``(f, v)`` (not re-evaluated);
2. *children*, slots ``c`` in ``[n_elite, N - n_renew)``: two parents, each the winner of a
   *tournament* (seed 2.6, appendix A.3) of ``group_size`` individuals of ``P`` drawn uniformly
   with replacement (the best under Deb's rules wins, ties to the first drawn); with
   probability ``p_c`` *crossover* (seed 2.7) of parent 1 and parent 2, else a copy of parent 1;
   then *mutation* (seed 2.8);
3. *partial renewal* (seed 2.1), slots ``[N - n_renew, N)``: fresh random individuals (not
   mutated), ``n_renew = floor(renewal * N)``;
4. evaluation of every slot but the elite ones (``N - n_elite`` evaluations per island).

**Random numbers.** Every number is :class:`isles.algorithms.core.random.CounterRNG`'s hash of
``(seed, island, generation g, draw id, element index)`` with ``g = state["generation"]`` (the
generations completed before this one). Index layouts are per island block, ``c`` is the absolute
slot in ``[0, N)``, ``W`` words, ``L`` bits, ``S = group_size``; ``u`` means the float64 uniform
``(z >> 11) 2^-53`` of hash ``z``, a *word* means ``uint32(z >> 32)``; the ids live in
:mod:`isles.algorithms.ga.draws`, which the kernels import too:

============== ==== ======================================= =========================================
draw           id   index                                   use
============== ==== ======================================= =========================================
DRAW_INIT      0    ``c W + w`` (generation 0)              initial words (masked to the genome bits)
DRAW_SELECT    1    ``(2 c + p) S + t``                     candidate ``t`` of parent ``p``'s tournament:
                                                            ``min(floor(u N), N - 1)``
DRAW_XOVER     2    ``c``                                   crossover iff ``u < p_c``
DRAW_CUT       3    ``2 c`` (one_point), ``2 c + k``        one_point: cut ``1 + min(floor(u (L-1)), L-2)``
                    (two_point, k = 0, 1)                   (``1`` if ``L = 1``); two_point: cuts
                                                            ``min(floor(u (L+1)), L)``
DRAW_XMASK     4    ``c W + w``                             uniform crossover: word ``w``'s mask
DRAW_MUTATE    5    per_bit: ``32 (c W + w) + k``;          per_bit: ``k``-th gap of word ``w``;
                    seed: ``2 c`` and ``2 c + 1``           seed: flip iff ``u < p_m``, bit
                                                            ``min(floor(u L), L - 1)``
DRAW_RENEW     6    ``c W + w``                             renewal words (masked to the genome bits)
============== ==== ======================================= =========================================

**Crossover** (the child takes parent 1's genes where the mask is 0, parent 2's where it is 1):

* ``one_point`` (section 2.7; appendix A.4's first child, *Male* then *Female*): a cut ``k`` in
  ``[1, L - 1]``, bits ``[0, k)`` from parent 1 and ``[k, L)`` from parent 2. A.4's listing as
  OCR'd cuts every individual at its middle (and interleaves even and odd genes); isles draws the
  cut uniformly, the usual one-point crossover the text describes;
* ``two_point``: cuts ``a <= b`` in ``[0, L]``, bits ``[a, b)`` from parent 2 (a cut at an end
  gives one-point crossover; ``a = b`` a copy of parent 1);
* ``uniform``: each bit from either parent with probability 1/2 (Syswerda 1989), one hash per
  word.

**Mutation**:

* ``per_bit`` (standard bit-flip mutation, section 2.8): every bit flips independently with
  probability ``p_m`` (default ``1/L``). Drawn per word by **geometric gaps**: the number of
  non-flipped bits before the next flip is ``G`` with ``P(G >= m) = (1 - p_m)^m``, obtained by
  inversion, ``G = floor(log u' / log(1 - p_m))`` with ``u' = 1 - u`` in ``(0, 1]``, computed
  without a logarithm from the 53-bit integer ``k = z >> 11`` behind ``u``: ``G >= m`` iff
  ``k >= K_m``, ``K_m = ceil((1 - q_m) 2^53)``, ``q_m = (1 - p_m)^m`` (float64, ``m = 0..32``;
  exactly ``u' <= q_m``), so ``G = #{m >= 1 : k >= K_m}``. Starting at position ``-1``, the
  ``k``-th draw of word ``w`` moves to ``pos + 1 + G`` and flips it while it is inside the word's
  genome bits. Independent Bernoulli trials have exactly these geometric waiting times
  (memorylessness), so this is per-bit Bernoulli(``p_m``) in distribution (up to the float64
  rounding of ``q_m``), at an expected cost of ``1 + 32 p_m`` hashes per word instead of 32; the
  padding bits are never touched. NumPy, the CuPy array path and the CUDA kernel use the same
  integer table ``K``, so they flip the same bits;
* ``seed`` (appendix A.5): with probability ``p_m`` one bit of the child, uniform over the ``L``
  bits, flips. (A.5 picks ``lround(u (L - 0.5))``, which gives the two end bits half the
  probability of the others; isles picks uniformly.)

On CuPy, :meth:`GA.step` and :meth:`GA.run` use the fused CUDA generation of
:mod:`isles.algorithms.ga.cuda` when the problem provides ``cuda_objective`` (for real problems with
the encoding's ``cuda_decode``); it draws the same numbers with the same layouts and selects the
same individuals. Otherwise the array code runs on NumPy or CuPy (its operators are in
:mod:`isles.algorithms.ga.operators`; on CuPy the per-bit mutation is one elementwise kernel, so
that no step synchronises with the host).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
from isles.algorithms.core.backend import device_constant
from isles.algorithms.core.base import Context, FusedAlgorithm, State, check_bool, check_range
from isles.algorithms.core.encoding_choice import make_encoding
from isles.algorithms.core.encodings import ENCODINGS, MAX_BITS_PER_VARIABLE, Encoding
from isles.algorithms.core.host_build import check_host_kernel
from isles.algorithms.ga.draws import CROSSOVERS, DRAW_INIT, DRAW_RENEW
from isles.algorithms.ga.operators import crossover, elite_indices, per_bit_flips, random_words, seed_flips, tournament

log = logging.getLogger(__name__)

MUTATIONS = ("per_bit", "seed")

#: default p_m of mutation="seed" (one bit per child with this probability; seed 2.8: "< 5 %")
SEED_P_M = 0.04


def _choice(field: str, value, allowed) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"algorithm.{field}={value!r}: allowed values are {'|'.join(allowed)}")
    return value


def _int_in(field: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= int(value) <= hi:
        raise ValueError(f"algorithm.{field}={value!r}: allowed values are integers {lo}..{hi}")
    return int(value)


@dataclass(frozen=True)
class GAParams:
    """Parameters of :class:`GA` (validated on construction).

    Attributes:
        pop_size: individuals per island ``N >= 2``.
        group_size: tournament size ``S`` in ``[2, N]`` (seed 2.6 "ngroup").
        crossover: ``one_point`` (seed 2.7, A.4), ``two_point`` or ``uniform``.
        p_c: crossover probability in ``[0, 1]``.
        mutation: ``per_bit`` (each bit flips with probability ``p_m``) or ``seed`` (A.5: with
            probability ``p_m`` one random bit of the child flips).
        p_m: mutation probability in ``[0, 1]``; ``None`` (default): ``1/L`` for ``per_bit`` (one
            flip per child on average, Mühlenbein 1992), :data:`SEED_P_M` = 0.04 for ``seed``.
        n_elite: elite individuals copied unchanged, ``0 <= n_elite < N``.
        renewal: fraction in ``[0, 1)`` of each generation replaced by fresh random individuals
            (seed 2.1's partial renewal; not mutated); ``n_renew = floor(renewal N)`` and
            ``n_elite + n_renew < N`` (at least one child).
        encoding: ``auto`` (``bits`` for natively binary problems, else ``binary``), ``binary``,
            ``gray``, ``seed002`` or ``bits`` (:func:`isles.algorithms.core.encoding_choice.make_encoding`).
        bits_per_variable: bits per variable of ``binary``/``gray``, 1..52.
        nvdec, nvbin: ``seed002``'s digits per variable (2..16) and bits per digit (1..16).
        fused: use the fused CUDA generation (:mod:`isles.algorithms.ga.cuda`) where possible on CuPy;
            ``False`` forces the array code.
        epoch: let the fused plan run a call's generations in one launch of the SM-resident epoch
            kernel (:mod:`isles.algorithms.ga.epoch`) where the timing at plan build finds it
            faster (same results); ``False`` keeps the per-generation kernels.
        host_kernel: on NumPy, run generations in the epoch kernel's host build (:class:`isles.algorithms.ga.cuda_host.HostGA`; a
            problem with a ``cuda_objective``): ``"auto"`` (default), ``True`` or ``False``
            (:mod:`isles.algorithms.core.host_build`).

    Defaults. Seed 002 fixes only a mutation probability below 5 % (section 2.8) and the
    population sizes of its study (320-2880); isles chooses ``pop_size = 640`` (the seed's
    second size, whose Rastrigin cell it reports with 42 % failed attempts),
    ``group_size = 2`` (binary tournament, Goldberg & Deb 1991: the mildest selection pressure,
    which keeps the diversity the small 64-bit genome needs), one-point crossover with
    ``p_c = 0.9`` (the seed's operator with the customary probability), per-bit mutation at
    ``1/L``, ``n_elite = 1`` (the best individual never gets lost, so the best fitness is
    monotone) and no renewal (``renewal = 0``; the seed names the feature, not a fraction).
    Checked on seed 002's workload (2 variables, seed002 encoding, N = 640, |f| < 1e-7, 20 runs
    each, CPU): the defaults solve Rastrigin, Ackley and De Jong in 20/20 runs (mean 37, 138 and
    21 generations); tournaments of 3-4 converge faster there (22/49/14 with 3), renewal of 5 %
    and ``p_m = 2/L`` slow it down (Ackley: 193 generations, and 10/20 within 600).

    Raises:
        ValueError: one line naming the field (``algorithm.<field>``) and the allowed values.
    """

    pop_size: int = 640
    group_size: int = 2
    crossover: str = "one_point"
    p_c: float = 0.9
    mutation: str = "per_bit"
    p_m: float | None = None
    n_elite: int = 1
    renewal: float = 0.0
    encoding: str = "auto"
    bits_per_variable: int = 16
    nvdec: int = 8
    nvbin: int = 4
    fused: bool = True
    epoch: bool = True
    host_kernel: bool | str = "auto"

    def __post_init__(self):
        check_host_kernel(self.host_kernel)
        n = check_range("algorithm.pop_size", self.pop_size, 2, integer=True)
        s = check_range("algorithm.group_size", self.group_size, 2, n, integer=True)
        _choice("crossover", self.crossover, CROSSOVERS)
        _choice("mutation", self.mutation, MUTATIONS)
        _choice("encoding", self.encoding, ENCODINGS)
        p_c = check_range("algorithm.p_c", self.p_c, 0, 1)
        p_m = None if self.p_m is None else check_range("algorithm.p_m", self.p_m, 0, 1)
        ne = check_range("algorithm.n_elite", self.n_elite, 0, n, integer=True, hi_open=True)
        ren = check_range("algorithm.renewal", self.renewal, 0, 1, hi_open=True)
        b = _int_in("bits_per_variable", self.bits_per_variable, 1, MAX_BITS_PER_VARIABLE)
        nvdec = _int_in("nvdec", self.nvdec, 2, 16)
        nvbin = _int_in("nvbin", self.nvbin, 1, 16)
        fused, epoch = check_bool("algorithm.fused", self.fused), check_bool("algorithm.epoch", self.epoch)
        n_renew = int(math.floor(ren * n + 1e-9))
        if ne + n_renew >= n:
            raise ValueError(
                f"algorithm.renewal={self.renewal!r}: with pop_size={n} and n_elite={ne} it renews "
                f"{n_renew} individuals and leaves no child; allowed values are numbers >= 0 and "
                f"< {(n - ne) / n:g}"
            )
        for k, val in (
            ("pop_size", n),
            ("group_size", s),
            ("p_c", p_c),
            ("p_m", p_m),
            ("n_elite", ne),
            ("renewal", ren),
            ("bits_per_variable", b),
            ("nvdec", nvdec),
            ("nvbin", nvbin),
            ("fused", fused),
            ("epoch", epoch),
        ):
            object.__setattr__(self, k, val)

    @property
    def n_renew(self) -> int:
        """Fresh random individuals per generation, ``floor(renewal * pop_size)``."""
        return int(math.floor(self.renewal * self.pop_size + 1e-9))

    def mutation_probability(self, n_bits: int) -> float:
        """The effective ``p_m`` for genomes of ``n_bits`` bits (``None`` resolved, see above)."""
        if self.p_m is not None:
            return float(self.p_m)
        return 1.0 / int(n_bits) if self.mutation == "per_bit" else SEED_P_M


# ---- the algorithm ------------------------------------------------------------------------------


def evaluate(ctx: Context, X):
    """``ctx.evaluator(X, dtype=ctx.dtype)``: ``(f, v, n_nan)`` with ``f, v (...)`` in ``ctx.dtype``
    for phenotypes ``X (..., D)`` (float) or ``(..., L)`` (uint8 bits)."""
    return ctx.evaluator(X, dtype=ctx.dtype)


class GA(FusedAlgorithm):
    """Generational GA with elitism, tournaments, crossover, mutation and partial renewal on
    ``I`` islands in lockstep (seed 002; the module docstring gives one generation exactly).

    State (dict): ``genome (I, N, W)`` uint32, ``f, v (I, N)`` in ``ctx.dtype``, ``generation``
    (host int), ``evals`` (host int, evaluations per island: ``N`` at init, ``N - n_elite`` per
    generation), ``nan_evals`` (0-d device int64), and ``hit_generation (I,)`` once the target is
    tracked. Migration moves genomes with their ``(f, v)`` (``FIELDS``).

    The encoding (:mod:`isles.algorithms.core.encodings`) is built from the problem at :meth:`init`
    (``params.encoding``), and :meth:`phenotype` decodes with it.
    """

    name = "ga"
    Params = GAParams
    FIELDS = {"genome": "genome", "f": "f", "v": "v"}
    graph_safe = False  # the fused path replays its own CUDA graph in run()
    FUSED_MODULE = "isles.algorithms.ga.cuda"
    HOST_MODULE = "isles.algorithms.ga.cuda_host"  # the host build, NumPy runs' CPU path (algorithm.host_kernel)
    evaluates_arrivals = True  # adopt() evaluates immigrants of a mixed archipelago

    def __init__(self, params=None, **kwargs):
        super().__init__(params, **kwargs)
        self.encoding: Encoding | None = None
        self._enc_key = None

    def evaluations_per_generation(self) -> int:
        """``N - n_elite``: every slot but the elite ones is evaluated."""
        return int(self.params.pop_size - self.params.n_elite)

    def population_size(self) -> int:
        """``N = pop_size``."""
        return self.params.pop_size

    # -- encoding ---------------------------------------------------------------------------------
    def setup(self, ctx: Context) -> Encoding:
        """The encoding for ``ctx``'s problem (built once per problem, kept as ``self.encoding``).

        Raises:
            ValueError: ``algorithm.encoding`` does not suit the problem, or bad encoding parameters.
        """
        prob = ctx.evaluator.problem
        if self.encoding is None or self._enc_key is not prob:
            p = self.params
            self.encoding = make_encoding(p.encoding, prob, p.bits_per_variable, p.nvdec, p.nvbin)
            self._enc_key = prob
        return self.encoding

    def check_problem(self, problem) -> None:
        """Build the encoding for ``problem`` once, so that a misfit (``algorithm.encoding=seed002``
        on a box other than ``[-1, 1]``, a real encoding on a bit problem) stops before any
        island starts.

        Raises:
            ValueError: as :func:`isles.algorithms.core.encoding_choice.make_encoding`.
        """
        p = self.params
        make_encoding(p.encoding, problem, p.bits_per_variable, p.nvdec, p.nvbin)

    def n_bits(self, ctx: Context) -> int:
        """Genome length ``L`` for ``ctx``'s problem."""
        return self.setup(ctx).n_bits

    def phenotype(self, genome):
        """Decode ``genome (..., W)`` uint32: float64 ``X (..., D)`` for real problems, uint8 bits
        ``(..., L)`` for natively binary ones (NumPy or CuPy, the genome's module).

        Raises:
            RuntimeError: before :meth:`init` (the encoding depends on the problem).
        """
        if self.encoding is None:
            raise RuntimeError("GA.phenotype: call init(ctx) first (the encoding depends on the problem)")
        return self.encoding.decode(genome, np.float64)

    def encode(self, X):
        """Nearest genomes of phenotypes ``X (..., D)`` (seeding; :meth:`Encoding.encode`).

        Raises:
            RuntimeError: before :meth:`init`.
        """
        if self.encoding is None:
            raise RuntimeError("GA.encode: call init(ctx) first (the encoding depends on the problem)")
        return self.encoding.encode(X)

    def evaluate_genomes(self, ctx: Context, genome):
        """``(f, v, n_nan)`` of genomes ``(..., W)``: decode (in ``ctx.dtype`` for real problems),
        then :func:`evaluate`."""
        enc = self.setup(ctx)
        X = enc.decode(genome, ctx.dtype) if enc.genome == "real" else enc.decode(genome)
        return evaluate(ctx, X)

    def adopt(self, ctx: Context, state: State, immigrants, valid):
        """The GA's arrival rule in a mixed archipelago (:meth:`IslandAlgorithm.adopt`): the genome
        is the nearest code of the immigrant's ``x`` (:meth:`encode`; a GA immigrant of the same
        encoding gets its own genome back), re-evaluated, since the code's ``x`` may differ from the
        immigrant's by the encoding's resolution (``evaluates_arrivals``: the mixed batch counts the
        real immigrants' evaluations); NaN results of real immigrants count in ``nan_evals``."""
        xp = ctx.xp
        genome = self.encode(immigrants.genome)
        f, v, _ = self.evaluate_genomes(ctx, genome)
        bad = device_constant(xp, valid) & (xp.isnan(f) | xp.isnan(v))
        s = dict(state)
        s["nan_evals"] = state["nan_evals"] + bad.sum().astype(np.int64)
        return s, type(immigrants)(genome, f.astype(state["f"].dtype), v.astype(state["v"].dtype), {})

    # -- generations ------------------------------------------------------------------------------
    def init(self, ctx: Context) -> State:
        """Uniform random genomes (``DRAW_INIT`` at generation 0), evaluated (``N`` evaluations)."""
        enc = self.setup(ctx)
        n = self.params.pop_size
        G = random_words(ctx.rng, 0, DRAW_INIT, 0, n, enc.n_bits)
        f, v, n_nan = self.evaluate_genomes(ctx, G)
        return {
            "genome": G,
            "f": f,
            "v": v,
            "generation": 0,
            "evals": n,
            "nan_evals": ctx.xp.asarray(n_nan, dtype=np.int64),
        }

    def offspring(self, ctx: Context, state: State):
        """The next population's genomes before evaluation (array code), and the elite indices.

        Returns:
            ``(genome (I, N, W) uint32, elite (I, n_elite) int64)``: slots as in the module
            docstring (elite copies, children, renewals).
        """
        p, xp = self.params, ctx.xp
        L = self.setup(ctx).n_bits
        g = state["generation"]
        G, f, v = state["genome"], state["f"], state["v"]
        N = G.shape[1]
        ne, nr = p.n_elite, p.n_renew
        parts = []
        eidx = elite_indices(f, v, ne) if ne else xp.zeros((G.shape[0], 0), dtype=np.int64)
        if ne:
            parts.append(xp.take_along_axis(G, eidx[..., None], axis=1))
        a, b = ne, N - nr
        par = tournament(ctx.rng, g, f, v, p.group_size, a, b)
        G1 = xp.take_along_axis(G, par[..., 0, None], axis=1)
        G2 = xp.take_along_axis(G, par[..., 1, None], axis=1)
        C = crossover(ctx.rng, g, G1, G2, a, b, p.crossover, p.p_c, L)
        pm = p.mutation_probability(L)
        if p.mutation == "per_bit":
            C = C ^ per_bit_flips(ctx.rng, g, a, b, L, pm)
        else:
            C = C ^ seed_flips(ctx.rng, g, a, b, L, pm)
        parts.append(C)
        if nr:
            parts.append(random_words(ctx.rng, g, DRAW_RENEW, b, N, L))
        return xp.concatenate(parts, axis=1), eidx

    def step(self, ctx: Context, state: State) -> State:
        """One generation of every island (module docstring); no host synchronisation.

        On CuPy with a problem that provides ``cuda_objective`` this is the fused CUDA generation
        (:class:`isles.algorithms.ga.cuda.FusedGA`), built and self-checked at the first call.
        """
        host = self.host_plan(ctx) if ctx.xp is np else None
        if host is not None:  # NumPy: the host build, as run's (algorithm.host_kernel)
            return host(state, 1)
        plan = self.fused_plan(ctx)
        if plan is not None:
            return plan.step(state)
        xp, ne = ctx.xp, self.params.n_elite
        new, eidx = self.offspring(ctx, state)
        fe, ve, n_nan = self.evaluate_genomes(ctx, new[:, ne:])
        f, v = fe, ve
        if ne:
            f = xp.concatenate([xp.take_along_axis(state["f"], eidx, axis=1), fe], axis=1)
            v = xp.concatenate([xp.take_along_axis(state["v"], eidx, axis=1), ve], axis=1)
        s = dict(state)
        s["genome"], s["f"], s["v"] = new, f, v
        s["generation"] = state["generation"] + 1
        s["evals"] = state["evals"] + new.shape[1] - ne
        s["nan_evals"] = state["nan_evals"] + n_nan
        return s
