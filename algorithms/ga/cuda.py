"""Fused CUDA generation of the GA (:mod:`isles.algorithms.ga.ga`), and its host emulation.

A plain CuPy loop of the array code launches dozens of kernels per generation and, for long
genomes, writes and re-reads the whole child population several times (crossover, mutation,
unpacking for the objective). Here one generation is **two kernel launches**:

* ``ga_select`` -- blocks ``[0, I)``, one per island: the island's ``n_elite`` best individuals
  in rank order (Deb's rules on ``(v, f)``, ties to the lower index: ``n_elite`` block-wide
  minimum searches, each over the keys greater than the previous winner's) and the stop target
  (island ``i``'s ``hit_generation`` is set to the current generation when its best is feasible
  with ``f <= target``, what :meth:`isles.algorithms.core.base.IslandAlgorithm.track_target` records);
  the other blocks, one thread per slot: the child slots' decisions from the counter hash
  (tournaments over ``(f, v)``, crossover flag and cuts, seed mutation), 20 bytes per slot;
* ``ga_generation`` -- one *group* of ``TPI`` threads per slot of the next population (``IPB``
  groups per block for short genomes, one block of up to 256 threads for long ones): each thread
  builds its words ``w = t, t + TPI, ...``: it issues the reads of only the parent words it needs
  (coalesced; crossover by word masks), draws the words' per-bit mutation masks meanwhile
  (geometric gaps: about one hash per word, no random number per bit) or the renewal words, and
  writes the words to the next population **and** to a shared-memory row; the group then
  evaluates the row from shared memory through the problem's *fused objective* (strided
  ``obj_term``/``obj_unit``, ``obj_merge`` by warp shuffles and shared memory,
  ``obj_final``/``obj_violation``), applies the evaluator's NaN rule (and the static penalty when
  configured) and writes ``f``, ``v`` and an atomic NaN count. The child is never re-read from
  global memory.

:meth:`FusedGA.run` captures ``GRAPH_GENERATIONS`` (64) generations, ping-ponging between two
preallocated populations, plus a kernel that advances a device-side generation counter, into a
**CUDA graph** and replays it (as :class:`isles.algorithms.de.cuda.FusedDE`); the generation of the
draws is ``gen_off + gen_dev + rng.ctr``. Neither :meth:`FusedGA.step` nor :meth:`FusedGA.run`
synchronises with the host.

**Epoch kernel.** Where timed faster when the plan is built (:meth:`FusedGA.choose`), a call's
generations run instead as one launch of ``ga_epoch`` (one block per island calling the same
device functions: ``ga_elite_block``, ``ga_track``, ``ga_decide``, ``ga_slot``;
:mod:`isles.algorithms.ga.epoch`), with the same results bit for bit. ``algorithm.epoch=false``
keeps the per-generation kernels; genomes of more than 1024 words (``TPI > 32``) have no epoch
kernel.

**Same individuals as the NumPy twin.** Draw ids, index layouts and integer arithmetic are those
of :mod:`isles.algorithms.ga.ga` (float64 uniforms, ``floor(u N)``, the same integer mutation thresholds,
masks by words), so under the same seed the fused path builds bit-identical genomes as long as the
objective values agree: exactly for integer-valued objectives (OneMax, trap-k, knapsack with
integer data), up to the rounding of the objective's sum order and CUDA's ``cos``/``exp`` for
real ones (a tournament between two individuals whose ``f`` tie to rounding may then go either
way). The plan checks its objective against the problem's own on random genomes when it is
built, and falls back to the array code (with a warning) if they disagree.

**Host emulation.** The whole generation except the launch scaffolding (decisions, words,
mutation, evaluation, NaN rule, elite search) is plain C as well: compiled with
``-DISLES_HOST_EMU`` by the system C compiler, :class:`HostGA` runs the kernel's code on the CPU
(groups emulated by loops; ``obj_merge`` in thread order), so CI tests it against NumPy without
a GPU (``tests/test_ga.py``).

Supported: CuPy; a problem with ``cuda_objective`` (the fused-objective contract: ``OBJ_NACC``,
``OBJ_HAS_V``, ``obj_init``/``obj_merge``/``obj_final`` [``obj_violation``] and, for real problems,
``OBJ_NEXT``/``obj_term`` with the encoding's ``enc_decode``, for bit problems
``obj_units``/``obj_unit``); float32 or float64; ``I N < 2^31``; a row that fits the device's
shared memory per block (227 KiB on an H100: about 1.8 million bits). Anything else runs the
array code.

Measured on one H100 80GB HBM3 (CuPy 14.2, ``GA.run`` with graph replay, CUDA events, best of
3 x 256 generations, population 4096, one island, float32): trap-5 with 10^5 bits 101 us per
generation (float64 106), of which the trap objective's 20,000 units per individual take about
40 us (the generation without evaluation: 60 us; without evaluation and mutation: 47 us; reading
one parent and writing the child, 102 MB, is about 35 us at the copy bandwidth); OneMax 10^5 bits
65 us; knapsack 10^4 items (strongly correlated) 32 us. Seed 002's workload (Rastrigin, 2
variables, 64 bits, population 640): 7.8 us per generation for one island, 11.5 us for 100
islands in one batch (0.12 us per island-generation).

Files: the source, its configuration macros and thread layout in :mod:`isles.algorithms.ga.cuda_source`;
the host emulation (:class:`~isles.algorithms.ga.cuda_host.HostGA`) in :mod:`isles.algorithms.ga.cuda_host`;
the CuPy plan (:class:`FusedGA`, :func:`make_plan`) here.
"""

from __future__ import annotations

import numpy as np
from isles.algorithms.core.backend import device_constant
from isles.algorithms.core.cuda_lib import source
from isles.algorithms.core.epoch_layout import EpochPaths
from isles.algorithms.core.graph import GRAPH_GENERATIONS, PingPongGraph
from isles.algorithms.core.plan import counter_kernels, elementwise, kernels, require_supported, verified_plan
from isles.algorithms.ga.cuda_source import kernel_source, unsupported_reason
from isles.algorithms.ga.draws import DRAW_MUTATE, flip_thresholds

VERIFY_RTOL = {np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-10}


def per_bit_flips_cupy(rng, generation: int, start: int, stop: int, n_bits: int, K: np.ndarray):
    """CuPy twin of :func:`isles.algorithms.ga.operators.per_bit_flips` (same draws, same thresholds ``K``): one
    elementwise kernel over ``(I, M, W)`` words, no host synchronisation."""
    cp = rng.xp
    kernel = elementwise(
        cp,
        "raw uint64 keys, raw uint64 ctr, uint64 gd, raw uint64 K, int64 M, int64 W, int64 start, int64 L",
        "uint32 m",
        r"""
        const long long w = i % W;
        const long long rest = i / W;
        const long long c = start + rest % M;
        const long long isl = rest / M;
        const u64 s = isles_mix64(gd + (ctr[0] << 16));
        const int nb = (w == W - 1) ? (int)(L - 32 * (W - 1)) : 32;
        const u64 base = ((u64)c * (u64)W + (u64)w) * 32ull;
        m = ga_flips(keys[isl], s, (keys[isl] ^ s) + base * GOLDEN, base, nb, &K[0], K[nb]);
        """,
        "isles_ga_flips",
        source("ga_flips.cuh"),
    )
    W = (int(n_bits) + 31) // 32
    M = stop - start
    out = cp.empty((rng.n_streams, M, W), dtype=np.uint32)
    gd = ((int(generation) << 16) + DRAW_MUTATE) & ((1 << 64) - 1)
    Kd = device_constant(cp, np.asarray(K, dtype=np.uint64))  # uploaded once: capturable
    kernel(rng.keys, rng.ctr, np.uint64(gd), Kd, np.int64(M), np.int64(W), np.int64(start), np.int64(n_bits), out)
    return out


# ---- the CuPy plan ------------------------------------------------------------------------------


def _kernels(cp, src: str):
    # compiled once per device and source (algorithms/core/plan.py)
    return kernels(cp, src, ("ga_select", "ga_generation", "ga_eval_rows"))


class FusedGA(EpochPaths, PingPongGraph):
    """Compiled fused GA generation for one ``(ga, ctx)`` (see the module docstring), with the
    SM-resident epoch kernel (:mod:`isles.algorithms.ga.epoch`) where it applies: :attr:`epoch`
    (or ``None``, :attr:`epoch_reason` says why), chosen by :meth:`choose`; :meth:`run` dispatches
    (:class:`isles.algorithms.core.epoch_layout.EpochPaths`).

    Args:
        ga: the :class:`isles.algorithms.ga.ga.GA`.
        ctx: a CuPy :class:`isles.algorithms.core.base.Context` whose problem has ``cuda_objective``.
        tpi: threads per slot (default :func:`layout`'s choice; benchmarks).
        extra: macro overrides (:func:`kernel_source`; benchmarks).

    Raises:
        ValueError: the configuration is unsupported (:func:`unsupported_reason`).
    """

    FAMILY = "GA"

    def __init__(self, ga, ctx, tpi: int | None = None, extra: dict | None = None):
        cp = require_supported("fused GA", unsupported_reason(ga, ctx))

        self.cp, self.ga, self.ctx, self.params = cp, ga, ctx, ga.params
        self.problem = ctx.evaluator.problem
        self.source, self.cfg = kernel_source(ga, ctx, tpi, extra)
        self.I, self.N, self.W = ctx.n_islands, self.params.pop_size, self.cfg["GA_W"]
        self.L = self.cfg["GA_L"]
        self.NEK = self.cfg["GA_NEK"]
        self.tpi, self.ipb, self.block = self.cfg["GA_TPI"], self.cfg["GA_IPB"], self.cfg["GA_BLOCK"]
        self.dtype = np.dtype(ctx.dtype)
        self.total = self.I * self.N
        self.grid = -(-self.total // self.ipb)
        self.smem = max(4, self.ipb * self.W * 4)
        ks = _kernels(cp, self.source)
        self._k_select, self._k_gen, self._k_eval = ks["ga_select"], ks["ga_generation"], ks["ga_eval_rows"]
        self._k_set, self._k_add = counter_kernels(cp)
        if self.smem > 48 * 1024:
            for k in (self._k_gen, self._k_eval):
                k.max_dynamic_shared_size_bytes = self.smem
        t = self.dtype.type
        pm = self.params.mutation_probability(self.L)
        self._p_c, self._p_m = np.float64(self.params.p_c), np.float64(pm)
        self._K = cp.asarray(flip_thresholds(pm))
        self._penalty = t(
            getattr(ctx.evaluator, "penalty", 0.0)
            if getattr(ctx.evaluator, "handling", "feasibility") == "penalty"
            else 0.0
        )
        self._target = t(ctx.target if ctx.target is not None else 0.0)
        self._track = np.int32(ctx.target is not None)
        self._keys = ctx.rng.keys
        self._ctr = ctx.rng.ctr
        self._zero = cp.zeros((), dtype=np.int64)
        self._gen = cp.zeros((), dtype=np.int64)
        self._nan = cp.zeros((), dtype=np.int64)
        self._elite = cp.zeros((self.I, self.NEK), dtype=np.int32)
        self._sel = cp.zeros((self.I, self.N, 5), dtype=np.int32)  # child slots' decisions (GASel)
        self._hit = cp.full((self.I,), -1, dtype=np.int64)
        self._bufs = None
        self._graph = None
        self.graph_generations = GRAPH_GENERATIONS
        #: the SM-resident epoch kernel (:mod:`isles.algorithms.ga.epoch`) where it applies, else
        #: ``None`` and :attr:`epoch_reason` says why; :meth:`choose` sets :attr:`use_epoch`
        self.epoch, self.epoch_reason, self.use_epoch, self.timings = None, None, False, None
        from isles.algorithms.ga.epoch import EpochGA, epoch_unsupported_reason  # noqa: PLC0415

        if not getattr(self.params, "epoch", True):
            self.epoch_reason = "algorithm.epoch=false"
        else:
            self.epoch_reason = epoch_unsupported_reason(self.tpi, self.W)
        if self.epoch_reason is None:
            #: the epoch kernel's source before its block's defines (:class:`EpochGA`)
            self.epoch_src = kernel_source(ga, ctx, tpi, extra, tail=("ga_epoch.cu",))[0]
            self.epoch = EpochGA(self, self.epoch_src)

    def _timing_state(self) -> dict:
        """A random population for :meth:`choose` (timing only: the run's draws are counter-based)."""
        cp = self.cp
        rs = np.random.default_rng(20261124)
        enc = self.ga.setup(self.ctx)
        G = rs.integers(0, 2**32, size=(self.I, self.N, self.W), dtype=np.uint64).astype(np.uint32)
        G = cp.asarray(G & enc.valid_mask())
        f, v, _ = self.evaluate(G)
        return {"genome": G, "f": f, "v": v, "generation": 0, "evals": 0, "nan_evals": cp.zeros((), np.int64)}

    # -- launches -------------------------------------------------------------------------------
    def _launch_select(self, src, gen_dev, gen_off, track, decide=True):
        _, f, v = src
        eb = self.cfg["GA_EBLOCK"]
        grid = self.I + (-(-self.total // eb) if decide else 0)
        self._k_select(
            (grid,),
            (eb,),
            (
                f,
                v,
                self._elite,
                self._hit,
                np.int32(track),
                self._target,
                gen_dev,
                np.int64(gen_off),
                self._ctr,
                self._sel,
                self._keys,
                np.int32(self.I),
                self._p_c,
                self._p_m,
            ),
        )

    def _launch_gen(self, src, dst, gen_dev, gen_off, nan):
        G, f, v = src
        Gn, fn, vn = dst
        self._k_gen(
            (self.grid,),
            (self.block,),
            (
                G,
                f,
                v,
                self._elite,
                self._sel,
                Gn,
                fn,
                vn,
                self._keys,
                gen_dev,
                np.int64(gen_off),
                self._ctr,
                nan,
                np.int32(self.total),
                self._K,
                self._penalty,
            ),
            shared_mem=self.smem,
        )

    def _generation(self, src, dst, gen_dev, gen_off, nan, track):
        self._launch_select(src, gen_dev, gen_off, track)
        self._launch_gen(src, dst, gen_dev, gen_off, nan)

    def _arrays(self, state):
        cp = self.cp
        G, f, v = state["genome"], state["f"], state["v"]
        if G.shape != (self.I, self.N, self.W) or f.shape != (self.I, self.N) or v.shape != f.shape:
            raise ValueError(
                f"fused GA: state shapes genome{G.shape} f{f.shape} v{v.shape} do not match "
                f"(I, N, W) = ({self.I}, {self.N}, {self.W})"
            )
        G = cp.ascontiguousarray(G, dtype=np.uint32)
        f = cp.ascontiguousarray(f, dtype=self.dtype)
        v = cp.ascontiguousarray(v, dtype=self.dtype)
        return G, f, v

    # -- evaluation -----------------------------------------------------------------------------
    def evaluate(self, genome):
        """``(f, v, bad)`` of genomes ``(..., W)`` by the kernel's own objective code (CuPy)."""
        cp = self.cp
        G = cp.ascontiguousarray(genome, dtype=np.uint32).reshape(-1, self.W)
        n = G.shape[0]
        f, v = cp.empty(n, self.dtype), cp.empty(n, self.dtype)
        bad = cp.empty(n, np.int32)
        grid = max(1, -(-n // self.ipb))
        self._k_eval((grid,), (self.block,), (G, f, v, bad, np.int32(n), self._penalty), shared_mem=self.smem)
        sh = genome.shape[:-1]
        return f.reshape(sh), v.reshape(sh), bad.reshape(sh)

    def verify(self, n_rows: int = 64) -> float:
        """Largest relative difference ``|f_k - f_p| / (1 + |f_p|)`` (and the same for ``v``)
        between the kernel's objective and the array path's (decode + evaluator) on random
        genomes, all-zero and all-one genomes (one host synchronisation)."""
        cp = self.cp
        rs = np.random.default_rng(20261122)
        enc = self.ga.setup(self.ctx)
        G = rs.integers(0, 2**32, size=(n_rows, self.W), dtype=np.uint64).astype(np.uint32)
        G[0] = 0
        G[1] = 0xFFFFFFFF
        G &= enc.valid_mask()
        Gd = cp.asarray(G)
        fk, vk, _ = self.evaluate(Gd)
        fp, vp, _ = self.ga.evaluate_genomes(self.ctx, Gd)
        if getattr(self.ctx.evaluator, "handling", "feasibility") == "penalty":
            pass  # the evaluator applied the penalty already, as the kernel did
        err = 0.0
        for a, b in ((fk, fp), (vk, vp)):
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            same = a64 == b64  # infinities agree
            e = cp.where(same, 0.0, cp.abs(a64 - b64) / (1.0 + cp.abs(b64)))
            err = max(err, float(cp.nan_to_num(e, nan=np.inf).max()))
        return err

    # -- the algorithm ----------------------------------------------------------------------------
    def step(self, state):
        """One generation (two kernel launches, no host sync); returns a new state."""
        cp = self.cp
        src = self._arrays(state)
        dst = tuple(cp.empty_like(a) for a in src)
        nan = cp.zeros((), dtype=np.int64)
        self._generation(src, dst, self._zero, int(state["generation"]), nan, 0)
        s = dict(state)
        s["genome"], s["f"], s["v"] = dst
        s["generation"] = state["generation"] + 1
        s["evals"] = state["evals"] + self.N - self.params.n_elite
        s["nan_evals"] = state["nan_evals"] + nan
        return s

    def _step(self, src, dst, k):
        """One generation ``src -> dst`` with draws of generation ``gen + k`` (:class:`PingPongGraph`)."""
        self._generation(src, dst, self._gen, k, self._nan, int(self._track))

    def _buffers(self):
        if self._bufs is None:
            cp = self.cp
            self._bufs = tuple(
                (
                    cp.empty((self.I, self.N, self.W), np.uint32),
                    cp.empty((self.I, self.N), self.dtype),
                    cp.empty((self.I, self.N), self.dtype),
                )
                for _ in range(2)
            )
        return self._bufs

    def _load_hit(self, state) -> None:
        """The state's ``hit_generation`` (or -1 everywhere) into the device's ``_hit``."""
        hg = state.get("hit_generation")
        if hg is None:
            self._hit.fill(-1)
        else:
            self.cp.copyto(self._hit, self.cp.asarray(hg, dtype=np.int64))

    def _finish(self, state, fin, n: int):
        """New state after ``n`` generations whose last population is in buffer set ``fin``
        (fresh copies; the NaN count and, with a target, ``hit_generation`` from the device)."""
        s = dict(state)
        s["genome"], s["f"], s["v"] = (a.copy() for a in fin)
        s["generation"] = state["generation"] + n
        s["evals"] = state["evals"] + n * (self.N - self.params.n_elite)
        s["nan_evals"] = state["nan_evals"] + self._nan
        if int(self._track):
            s["hit_generation"] = self._hit.copy()
        return s

    def _run_generations(self, state, n: int):
        """``n >= 1`` generations by the per-generation kernels: CUDA-graph replays plus single
        launches, tracking the target on every population (the last included); no host sync.
        Returns a new state (fresh arrays)."""
        self._start(self._arrays(state), state["generation"])
        track = int(self._track)
        if track:
            self._load_hit(state)
        self._nan.fill(0)
        fin, rem = self._advance(n)
        if track:  # the last population
            self._launch_select(fin, self._gen, rem, 1, decide=False)
        return self._finish(state, fin, n)


def make_plan(ga, ctx):
    """A verified :class:`FusedGA` for ``(ga, ctx)``, or ``None`` where it does not apply.

    Builds (compiles, cached by source) and self-checks the kernel's objective against the array
    path (:meth:`FusedGA.verify`, one host synchronisation), then times the per-generation and the
    epoch kernels and keeps the faster (:meth:`FusedGA.choose`). Returns ``None`` with a log line
    when unsupported, and with a ``RuntimeWarning`` when the check fails.
    """
    return verified_plan(
        "GA",
        "array",
        unsupported_reason(ga, ctx),
        lambda: FusedGA(ga, ctx),
        VERIFY_RTOL,
        lambda p: f"L={p.L}, W={p.W}, TPI={p.tpi}, IPB={p.ipb}",
    )
