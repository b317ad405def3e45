"""Anchors for the GA benchmark (``benchmarks/ga_bench.py``): the same binary GA written as a user of
other tools would write it, timed per generation.

Workload A (issue 6): concatenated trap-5 (minimisation: a block of ``k`` bits with ``u`` ones costs
``0`` if ``u = k`` else ``u + 1``), ``L = 100,000`` bits, population ``N = 4096``. Every anchor runs
the operators of isles' GA defaults (:class:`isles.algorithms.ga.ga.GAParams`): tournaments of
``group_size = 2`` (ties to the first drawn), one-point crossover with ``p_c = 0.9`` (else the child
copies parent 1), per-bit mutation with ``p_m = 1/L``, ``n_elite = 1`` (the best individual copied
unchanged), ``N - 1`` children evaluated per generation. Where a library's own operators differ, the
row's note says how.

Anchors (each function returns an :class:`Anchor`: microseconds per generation, the generations
timed, and the best fitness at the start and at the end as a sanity check that it evolves):

* :func:`array_ga` ``("cupy")`` -- (a) plain CuPy, one ``uint8`` per gene, one array call per step
  (``randint`` for the tournaments, fancy indexing for the parents, ``arange < cut`` masks for the
  crossover, ``random < p_m`` for the mutation, ``reshape(...).sum`` for trap-5); CUDA events
  around a Python loop of generations (no host synchronisation inside). ``("numpy")``: the same code
  on NumPy (the CPU row), ``perf_counter``;
* :func:`torch_ga` -- (b) the same in PyTorch (``torch.cuda.Event`` timing; ``perf_counter`` on the
  CPU); ``compile=True`` wraps the generation in ``torch.compile`` (compile time reported apart and
  excluded; any failure is caught and reported); ``selection="evox"`` takes the tournaments from
  ``evox.operators.selection.tournament_selection`` (see (e));
* :func:`deap_ga` -- (c) DEAP on the CPU, list-of-bools individuals, ``tools.selTournament``,
  ``algorithms.varAnd`` with ``tools.cxOnePoint`` and ``tools.mutFlipBit`` (DEAP's idiom: pairs of
  consecutive offspring cross and both children are kept, so ``N - 1`` tournaments and about
  ``(N - 1) / 2`` crossovers per generation instead of ``2 (N - 1)`` and ``N - 1``: the anchor is
  cheaper than the workload), ``tools.selBest`` for the elite, ``toolbox.clone`` (``deepcopy``);
  ``perf_counter``. At ``L = 10^5`` one individual costs tens of milliseconds, so it runs a smaller
  population (``run_pop``) at the full ``L`` and scales the time per generation by ``N / run_pop``
  (every step is linear in the population); the row says so;
* :func:`pygmo_ga` -- (d) pygmo's ``sga`` (C++; the objective is a Python UDP called once per
  individual), integer genes in ``[0, 1]``: ``selection="tournament"`` (``param_s = 2``),
  ``crossover="single"`` (``cr = 0.9``; partner drawn at random among the selected), mutation
  ``"uniform"`` with ``m = 2/L`` (a mutated integer gene is redrawn in ``{0, 1}``, so it flips with
  probability 1/2: ``2/L`` flips ``1/L`` of the bits), and pygmo's own (mu + lambda) replacement
  (the best ``N`` of parents and children survive) instead of one elite. Scaled like DEAP. Skipped
  with a message where ``import pygmo`` fails;
* :func:`evox_status` -- (e) EvoX 1.x (PyTorch) has **no GA**: its single-objective algorithms are
  DE, ES and PSO variants, its operators SBX, DE crossover and polynomial mutation (real-valued)
  plus tournament selection; the only GA-family members are the multi-objective NSGA-II/III
  (NSGA-III's ``data_type=torch.bool`` only changes the initial population). Checked in the
  sources of EvoX 1.3.0 (github EMI-Group/evox, July 2026) and the 1.4.0 wheel (PyPI). The function
  inspects the installed package again and says what it finds; the bench then times
  :func:`torch_ga` with EvoX's ``tournament_selection`` as the closest EvoX row.

Run alone (repository root)::

    python benchmarks/ga_anchors.py --device gpu                  # all anchors, workload A
    python benchmarks/ga_anchors.py --device cpu --scale 0.1 --only numpy,deap
"""
from __future__ import annotations

import argparse
import random
import statistics
import time
from dataclasses import asdict, dataclass, field

import numpy as np

#: workload A (issue 6): trap-5, L = 10^5, N = 4096, isles' GA defaults
WORKLOAD_A = {"n_bits": 100_000, "k": 5, "pop": 4096, "group_size": 2, "p_c": 0.9, "p_m": None,
              "n_elite": 1}

#: DEAP / pygmo run a population of at most this many genes (``run_pop * L``) and scale up
DEAP_GENES = 8_000_000
PYGMO_GENES = 100_000_000


@dataclass
class Anchor:
    """One anchor's result. ``us_per_gen`` is for the workload's population ``pop`` (scaled from
    ``run_pop`` where ``run_pop < pop``); ``None`` with ``note`` when the anchor was skipped."""

    name: str
    device: str
    pop: int
    n_bits: int
    us_per_gen: float | None
    generations: int = 0
    run_pop: int | None = None
    best_f0: float | None = None
    best_f: float | None = None
    setup_s: float | None = None  # warm-up, compilation (not in us_per_gen)
    note: str = ""
    spread_us: list = field(default_factory=list)

    def row(self) -> str:
        t = "skipped" if self.us_per_gen is None else f"{self.us_per_gen:,.1f}"
        b = "" if self.best_f is None else f"{self.best_f0:g} -> {self.best_f:g}"
        return f"{self.name:<32}{self.device:<6}{self.pop:>6}{self.n_bits:>8}{self.generations:>6}{t:>14}  {b:<20} {self.note}"

    def as_dict(self) -> dict:
        return asdict(self)


HEADER = f"{'anchor':<32}{'dev':<6}{'N':>6}{'L':>8}{'gens':>6}{'us/gen':>14}  {'best f (start -> end)':<20} note"


def resolve_p_m(p_m, n_bits: int) -> float:
    """``p_m`` (``None``: ``1/L``, isles' default for per-bit mutation)."""
    return 1.0 / n_bits if p_m is None else float(p_m)


def _check_workload(n_bits: int, k: int, pop: int, n_elite: int, group_size: int):
    if n_bits % k:
        raise ValueError(f"n_bits={n_bits} must be a multiple of k={k}")
    if not (0 <= n_elite < pop and 2 <= group_size <= pop and n_bits >= 2):
        raise ValueError(f"bad workload: pop={pop} n_elite={n_elite} group_size={group_size} n_bits={n_bits}")


def _choose_gens(t_probe: float, budget_s: float, repeats: int, lo: int, hi: int, multiple: int = 1) -> int:
    """Generations per timed repeat so that ``repeats`` of them take about ``budget_s``."""
    n = int(budget_s / max(repeats, 1) / max(t_probe, 1e-9))
    n = max(lo, min(hi, n))
    return max(multiple, n // multiple * multiple)


def _timed_generations(advance, timer, *, budget_s, repeats, probe, lo, hi, multiple=1):
    """Probe ``probe`` generations, then ``repeats`` timed blocks; ``(median s/gen, gens, spread)``."""
    t_probe = timer(lambda: advance(probe)) / probe
    n = _choose_gens(t_probe, budget_s, repeats, lo, hi, multiple)
    times = [timer(lambda: advance(n)) / n for _ in range(repeats)]
    return statistics.median(times), n, times


def _perf_timer(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# ---- (a) plain CuPy / NumPy -----------------------------------------------------------------------

def trap_fitness(xp, B, k: int):
    """Trap-k (minimisation) of ``B (M, L)`` 0/1 genes, one value per row (int64)."""
    u = B.reshape(B.shape[0], -1, k).sum(axis=-1, dtype=xp.int32)
    return xp.where(u == k, 0, u + 1).sum(axis=-1)


def array_generation(xp, rand, pop, f, *, n_bits, k, group_size, p_c, p_m, n_elite):
    """One generation of the plain array GA; returns ``(pop, f)``. ``rand(shape)`` gives uniforms."""
    N, L, M = pop.shape[0], n_bits, pop.shape[0] - n_elite
    elite = xp.argsort(f)[:n_elite]
    cand = xp.random.randint(0, N, size=(M, 2, group_size))  # tournament candidates
    fc = f[cand]
    win, fw = cand[..., 0], fc[..., 0]
    for t in range(1, group_size):  # strictly better replaces: ties to the first drawn
        b = fc[..., t] < fw
        win = xp.where(b, cand[..., t], win)
        fw = xp.where(b, fc[..., t], fw)
    P1, P2 = pop[win[:, 0]], pop[win[:, 1]]
    cut = xp.random.randint(1, L, size=(M, 1))  # genes [0, cut) from parent 1
    cross = rand((M, 1)) < p_c
    take1 = (xp.arange(L)[None, :] < cut) | ~cross
    child = xp.where(take1, P1, P2)
    child ^= rand((M, L)) < p_m  # per-bit mutation
    fch = trap_fitness(xp, child, k)
    return xp.concatenate([pop[elite], child]), xp.concatenate([f[elite], fch])


def array_ga(backend: str = "cupy", n_bits: int = 100_000, pop: int = 4096, k: int = 5, group_size: int = 2,
             p_c: float = 0.9, p_m: float | None = None, n_elite: int = 1, seed: int = 0,
             budget_s: float = 10.0, repeats: int = 3, max_gens: int = 5000) -> Anchor:
    """(a) The GA as plain array code, ``backend`` ``"cupy"`` (CUDA events) or ``"numpy"``
    (``perf_counter``). About ``budget_s`` seconds of timed generations after a warm-up."""
    _check_workload(n_bits, k, pop, n_elite, group_size)
    pm = resolve_p_m(p_m, n_bits)
    if backend == "cupy":
        try:
            import cupy as xp  # noqa: PLC0415
            xp.cuda.runtime.getDeviceCount()
        except Exception as e:  # noqa: BLE001
            return Anchor("cupy (uint8 genes)", "gpu", pop, n_bits, None, note=f"CuPy unavailable: {e}")
        xp.random.seed(seed)

        def rand(shape):
            return xp.random.random(shape, dtype=xp.float32)

        def timer(fn):
            s, e = xp.cuda.Event(), xp.cuda.Event()
            s.record()
            fn()
            e.record()
            e.synchronize()
            return xp.cuda.get_elapsed_time(s, e) * 1e-3
        name, dev = "cupy (uint8 genes)", "gpu"
    else:
        xp = np
        gen = np.random.default_rng(seed)
        np.random.seed(seed)

        def rand(shape):
            return gen.random(shape, dtype=np.float32)

        timer = _perf_timer
        name, dev = "numpy (uint8 genes)", "cpu"
    t0 = time.perf_counter()
    P = (rand((pop, n_bits)) < 0.5).astype(xp.uint8)
    F = trap_fitness(xp, P, k)
    best0 = float(F.min())
    st = [P, F]

    def advance(n):
        for _ in range(n):
            st[0], st[1] = array_generation(xp, rand, st[0], st[1], n_bits=n_bits, k=k, group_size=group_size,
                                            p_c=p_c, p_m=pm, n_elite=n_elite)

    timer(lambda: advance(2))  # warm-up (kernel compilation, memory pool)
    setup = time.perf_counter() - t0
    gpu = backend == "cupy"
    t, n, times = _timed_generations(advance, timer, budget_s=budget_s, repeats=repeats,
                                     probe=3 if gpu else 1, lo=5 if gpu else 2, hi=max_gens)
    best = float(st[1].min())
    del st[:]
    if gpu:
        xp.get_default_memory_pool().free_all_blocks()
    return Anchor(name, dev, pop, n_bits, t * 1e6, n * repeats, pop, best0, best, setup,
                  f"median of {repeats} x {n} gens", [x * 1e6 for x in times])


# ---- (b) PyTorch (and (e) with EvoX's tournament selection) --------------------------------------

def torch_ga(device: str = "cuda", compile: bool = False, selection: str = "torch",  # noqa: A002
             n_bits: int = 100_000, pop: int = 4096, k: int = 5, group_size: int = 2, p_c: float = 0.9,
             p_m: float | None = None, n_elite: int = 1, seed: int = 0, budget_s: float = 10.0,
             repeats: int = 3, max_gens: int = 5000) -> Anchor:
    """(b) The GA in PyTorch, one ``uint8`` per gene, on ``device`` (``"cuda"``: CUDA events,
    ``"cpu"``: ``perf_counter``). ``compile=True``: the generation under ``torch.compile``
    (compile time in ``setup_s``); ``selection="evox"``: tournaments from
    ``evox.operators.selection.tournament_selection``."""
    _check_workload(n_bits, k, pop, n_elite, group_size)
    name = "torch" + (".compile" if compile else " eager") + (" + evox tournament" if selection == "evox" else "")
    dev_name = "gpu" if device == "cuda" else "cpu"
    try:
        import torch  # noqa: PLC0415
        if device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False")
    except Exception as e:  # noqa: BLE001
        return Anchor(name, dev_name, pop, n_bits, None, note=f"PyTorch unavailable: {e}")
    evox_sel = None
    if selection == "evox":
        try:
            from evox.operators.selection import tournament_selection as evox_sel  # noqa: PLC0415
        except Exception as e:  # noqa: BLE001
            return Anchor(name, dev_name, pop, n_bits, None, note=f"evox not importable: {type(e).__name__}: {e}")
    pm = resolve_p_m(p_m, n_bits)
    dev = torch.device(device)
    torch.manual_seed(seed)
    N, L, M = pop, n_bits, pop - n_elite

    def fitness(B):
        u = B.view(B.shape[0], -1, k).sum(-1, dtype=torch.int32)
        return torch.where(u == k, 0, u + 1).sum(-1)

    def parents_torch(f):
        cand = torch.randint(0, N, (M, 2, group_size), device=dev)
        fc = f[cand]
        win, fw = cand[..., 0], fc[..., 0]
        for t in range(1, group_size):
            b = fc[..., t] < fw
            win = torch.where(b, cand[..., t], win)
            fw = torch.where(b, fc[..., t], fw)
        return win

    def parents_evox(f):
        return evox_sel(2 * M, f, group_size).view(M, 2)

    parents = parents_evox if selection == "evox" else parents_torch

    def generation(P, f):
        elite = torch.argsort(f)[:n_elite]
        win = parents(f)
        P1, P2 = P[win[:, 0]], P[win[:, 1]]
        cut = torch.randint(1, L, (M, 1), device=dev)
        cross = torch.rand(M, 1, device=dev) < p_c
        take1 = (torch.arange(L, device=dev)[None, :] < cut) | ~cross
        child = torch.where(take1, P1, P2)
        child ^= torch.rand(M, L, device=dev) < pm
        return torch.cat([P[elite], child]), torch.cat([f[elite], fitness(child)])

    if device == "cuda":
        def timer(fn):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            return s.elapsed_time(e) * 1e-3
    else:
        timer = _perf_timer
    t0 = time.perf_counter()
    step = generation
    P = (torch.rand(N, L, device=dev) < 0.5).to(torch.uint8)
    f = fitness(P)
    best0 = float(f.min())
    st = [P, f]

    def advance(n):
        for _ in range(n):
            st[0], st[1] = step(st[0], st[1])

    note = ""
    try:
        if compile:
            import torch._dynamo  # noqa: PLC0415

            torch._dynamo.reset()
            step = torch.compile(generation, dynamic=False)
        timer(lambda: advance(3))  # warm-up (and compilation)
    except Exception as e:  # noqa: BLE001
        msg = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
        return Anchor(name, dev_name, pop, n_bits, None, best0=best0,
                      note=f"failed in warm-up: {type(e).__name__}: {msg}")
    setup = time.perf_counter() - t0
    if compile:
        note = f"compile + warm-up {setup:.1f} s (excluded); "
    gpu = device == "cuda"
    t, n, times = _timed_generations(advance, timer, budget_s=budget_s, repeats=repeats,
                                     probe=3 if gpu else 1, lo=5 if gpu else 2, hi=max_gens)
    best = float(st[1].min())
    del st[:]
    if gpu:
        torch.cuda.empty_cache()
    return Anchor(name, dev_name, pop, n_bits, t * 1e6, n * repeats, pop, best0, best, setup,
                  note + f"median of {repeats} x {n} gens", [x * 1e6 for x in times])


# ---- (c) DEAP -------------------------------------------------------------------------------------

def default_run_pop(pop: int, n_bits: int, genes: int) -> int:
    """The population a CPU library runs: all of ``pop`` if ``pop * n_bits <= genes``, else
    ``max(16, genes // n_bits)``."""
    return pop if pop * n_bits <= genes else min(pop, max(16, genes // n_bits))


def deap_ga(n_bits: int = 100_000, pop: int = 4096, k: int = 5, group_size: int = 2, p_c: float = 0.9,
            p_m: float | None = None, n_elite: int = 1, seed: int = 0, run_pop: int | None = None,
            gens: int = 5, budget_s: float = 30.0) -> Anchor:
    """(c) DEAP on one CPU core (module docstring). Runs ``run_pop`` individuals (default
    :func:`default_run_pop`) at the full ``n_bits`` for up to ``gens`` timed generations (fewer if
    they would exceed ``budget_s``) after one warm-up generation; ``us_per_gen`` is scaled by
    ``pop / run_pop``."""
    _check_workload(n_bits, k, pop, n_elite, group_size)
    try:
        from deap import algorithms, base, creator, tools  # noqa: PLC0415
    except Exception as e:  # noqa: BLE001
        return Anchor("deap", "cpu", pop, n_bits, None, note=f"DEAP unavailable: {e}")
    pm = resolve_p_m(p_m, n_bits)
    R = default_run_pop(pop, n_bits, DEAP_GENES) if run_pop is None else min(int(run_pop), pop)
    R = max(R, n_elite + 2, group_size)
    random.seed(seed)
    if not hasattr(creator, "IslesTrapFitness"):
        creator.create("IslesTrapFitness", base.Fitness, weights=(-1.0,))
        creator.create("IslesTrapIndividual", list, fitness=creator.IslesTrapFitness)
    L = n_bits

    def evaluate(ind):
        total = 0
        for b in range(0, L, k):
            u = sum(ind[b:b + k])
            total += 0 if u == k else u + 1
        return (total,)

    tb = base.Toolbox()
    tb.register("attr_bool", lambda: random.random() < 0.5)
    tb.register("individual", tools.initRepeat, creator.IslesTrapIndividual, tb.attr_bool, L)
    tb.register("population", tools.initRepeat, list, tb.individual)
    tb.register("evaluate", evaluate)
    tb.register("mate", tools.cxOnePoint)
    tb.register("mutate", tools.mutFlipBit, indpb=pm)
    tb.register("select", tools.selTournament, tournsize=group_size)

    def generation(population):
        elite = tools.selBest(population, n_elite)
        offspring = tb.select(population, len(population) - n_elite)
        offspring = algorithms.varAnd(offspring, tb, cxpb=p_c, mutpb=1.0)
        invalid = [ind for ind in offspring if not ind.fitness.valid]
        for ind, fit in zip(invalid, map(tb.evaluate, invalid)):
            ind.fitness.values = fit
        return elite + offspring

    t0 = time.perf_counter()
    population = tb.population(n=R)
    for ind in population:
        ind.fitness.values = tb.evaluate(ind)
    best0 = min(ind.fitness.values[0] for ind in population)
    t1 = time.perf_counter()
    population = generation(population)  # warm-up
    t_gen = time.perf_counter() - t1
    setup = time.perf_counter() - t0
    n = max(1, min(int(gens), int(budget_s / max(t_gen, 1e-9))))
    times = []
    for _ in range(n):
        t1 = time.perf_counter()
        population = generation(population)
        times.append(time.perf_counter() - t1)
    best = min(ind.fitness.values[0] for ind in population)
    scale = pop / R
    t = statistics.median(times) * scale
    note = ("DEAP varAnd (pairs cross, both children kept), deepcopy clone, 1 core; "
            + (f"ran N={R}, time x{scale:.4g} to N={pop}" if R < pop else "full population"))
    return Anchor("deap (list of bools)", "cpu", pop, n_bits, t * 1e6, n, R, float(best0), float(best), setup,
                  note, [x * scale * 1e6 for x in times])


# ---- (d) pygmo ------------------------------------------------------------------------------------

class TrapUDP:
    """Trap-k for pygmo: ``L`` integer genes in ``[0, 1]``, one objective (minimised)."""

    def __init__(self, n_bits: int, k: int):
        self.n_bits, self.k = int(n_bits), int(k)

    def fitness(self, x):
        u = np.asarray(x).reshape(-1, self.k).sum(axis=1)
        return [float(np.where(u == self.k, 0.0, u + 1.0).sum())]

    def get_bounds(self):
        return ([0.0] * self.n_bits, [1.0] * self.n_bits)

    def get_nix(self):
        return self.n_bits

    def get_name(self):
        return f"trap{self.k}"


def pygmo_ga(n_bits: int = 100_000, pop: int = 4096, k: int = 5, group_size: int = 2, p_c: float = 0.9,
             p_m: float | None = None, n_elite: int = 1, seed: int = 0, run_pop: int | None = None,
             gens: int = 5, budget_s: float = 30.0) -> Anchor:
    """(d) pygmo's ``sga`` (module docstring), skipped where ``import pygmo`` fails. Runs
    ``run_pop`` individuals (default :func:`default_run_pop`) and scales by ``pop / run_pop``."""
    _check_workload(n_bits, k, pop, n_elite, group_size)
    try:
        import pygmo as pg  # noqa: PLC0415
    except Exception as e:  # noqa: BLE001
        return Anchor("pygmo sga", "cpu", pop, n_bits, None, note=f"skipped: import pygmo failed ({e})")
    pm = resolve_p_m(p_m, n_bits)
    R = default_run_pop(pop, n_bits, PYGMO_GENES) if run_pop is None else min(int(run_pop), pop)
    R = max(R, group_size, 2)
    t0 = time.perf_counter()
    prob = pg.problem(TrapUDP(n_bits, k))
    P = pg.population(prob, size=R, seed=seed)
    best0 = float(P.champion_f[0])

    def algo(n):
        return pg.algorithm(pg.sga(gen=n, cr=p_c, m=min(1.0, 2.0 * pm), param_s=group_size, crossover="single",
                                   mutation="uniform", selection="tournament", seed=seed + n))

    t1 = time.perf_counter()
    P = algo(1).evolve(P)  # warm-up
    t_gen = time.perf_counter() - t1
    setup = time.perf_counter() - t0
    n = max(1, min(int(gens), int(budget_s / max(t_gen, 1e-9))))
    a = algo(n)
    t1 = time.perf_counter()
    P = a.evolve(P)
    t = (time.perf_counter() - t1) / n
    best = float(P.champion_f[0])
    scale = pop / R
    note = ("sga: tournament 2, single-point cr=0.9 with a random partner, uniform int mutation m=2/L, "
            "(mu+lambda) survival; 1 core; "
            + (f"ran N={R}, time x{scale:.4g} to N={pop}" if R < pop else "full population"))
    return Anchor("pygmo sga", "cpu", pop, n_bits, t * scale * 1e6, n, R, best0, best, setup, note)


# ---- (e) EvoX -------------------------------------------------------------------------------------

#: what the EvoX sources showed (1.3.0 on GitHub, the 1.4.0 wheel), for the message
EVOX_FINDINGS = (
    "EvoX has no GA: EvoX 1.x (PyTorch; 1.3.0 source, 1.4.0 wheel) offers single-objective DE "
    "(DE, JaDE, ODE, SaDE, SHADE, CoDE), ES (CMA-ES, OpenES, SNES, ...) and PSO variants, "
    "multi-objective NSGA-II/III, MOEA/D, RVEA(a), HypE; operators: SBX and DE crossover, "
    "polynomial mutation, tournament selection -- no one-point crossover, no bit-flip mutation, no "
    "binary-genome GA (NSGA-III's data_type=torch.bool only changes the initial population; the "
    "JAX-era EvoX 0.x had a OneMax GA only as a docs example)"
)


def evox_status() -> dict:
    """Whether the installed EvoX has a GA: ``{"importable", "version", "has_ga", "ga_like",
    "message"}``. Looks for GA-like names (``GA``, ``Genetic``, ``SGA``, bit-flip or one-point
    operators) in ``evox.algorithms`` and ``evox.operators``; NSGA-II/III (multi-objective, real
    operators) do not count."""
    import re  # noqa: PLC0415

    try:
        import evox  # noqa: PLC0415
        import evox.algorithms as ea  # noqa: PLC0415
        import evox.operators as eo  # noqa: PLC0415
    except Exception as e:  # noqa: BLE001
        return {"importable": False, "version": None, "has_ga": False, "ga_like": [],
                "message": f"{EVOX_FINDINGS}. (evox not importable here: {type(e).__name__}: {e})"}
    version = getattr(evox, "__version__", None)
    if version is None:
        try:
            from importlib.metadata import version as _dist_version  # noqa: PLC0415

            version = _dist_version("evox")
        except Exception:  # noqa: BLE001
            version = "?"
    names = set(getattr(ea, "__all__", dir(ea)))
    ops = []
    for sub in ("crossover", "mutation", "selection"):
        m = getattr(eo, sub, None)
        ops += [f"{sub}.{n}" for n in getattr(m, "__all__", dir(m) if m else [])]
    ga_algos = sorted(n for n in names if re.search(r"(^|[^N])S?GA\b|Genetic", n) and not n.startswith("NSGA"))
    bit_ops = sorted(n for n in ops if re.search(r"bit_?flip|one_?point|single_?point", n, re.I))
    ga_like = ga_algos + bit_ops
    has_ga = bool(ga_algos)
    if has_ga:
        msg = (f"evox {version}: GA-like names found {ga_like}; not timed (API unknown to this script), "
               f"algorithms: {sorted(names)}")
    else:
        msg = (f"{EVOX_FINDINGS}. Installed evox {version}: algorithms {sorted(names)}; operators {sorted(ops)}; "
               f"GA-like names: {ga_like or 'none'}")
    return {"importable": True, "version": version, "has_ga": has_ga, "ga_like": ga_like, "message": msg}


# ---- all anchors ----------------------------------------------------------------------------------

ANCHORS_GPU = ("cupy", "torch", "torch_compile", "evox", "deap", "pygmo")
ANCHORS_CPU = ("numpy", "torch", "deap", "pygmo", "evox")


def run_anchors(device: str, workload: dict, only=None, seed: int = 0, budget_s: float = 10.0,
                repeats: int = 3, compile_on_cpu: bool = False, deap_pop=None, pygmo_pop=None,
                log=print) -> tuple[list[Anchor], dict]:
    """Every anchor of ``device`` (``gpu``: CuPy, torch, torch.compile, torch + EvoX tournament,
    DEAP, pygmo; ``cpu``: NumPy, torch on the CPU, DEAP, pygmo) on ``workload`` (keys of
    :data:`WORKLOAD_A`). Returns the rows and :func:`evox_status`. Each anchor is guarded: a
    failure gives a row with ``us_per_gen = None`` and the reason."""
    w = dict(WORKLOAD_A, **workload)
    names = only or (ANCHORS_GPU if device == "gpu" else ANCHORS_CPU)
    kw = {key: w[key] for key in ("n_bits", "pop", "k", "group_size", "p_c", "p_m", "n_elite")}
    tdev = "cuda" if device == "gpu" else "cpu"
    ev = evox_status()
    rows = []
    for name in names:
        t0 = time.perf_counter()
        try:
            if name in ("cupy", "numpy"):
                r = array_ga(name, seed=seed, budget_s=budget_s, repeats=repeats, **kw)
            elif name == "torch":
                r = torch_ga(tdev, seed=seed, budget_s=budget_s, repeats=repeats, **kw)
            elif name == "torch_compile":
                if device == "cpu" and not compile_on_cpu:
                    continue
                r = torch_ga(tdev, compile=True, seed=seed, budget_s=budget_s, repeats=repeats, **kw)
            elif name == "evox":
                log(f"# EvoX: {ev['message']}")
                if ev["importable"]:
                    r = torch_ga(tdev, selection="evox", seed=seed, budget_s=budget_s, repeats=repeats, **kw)
                    r.note = "EvoX has no GA: torch GA with evox.operators.selection.tournament_selection; " + r.note
                else:
                    r = Anchor("evox", device, w["pop"], w["n_bits"], None, note="EvoX has no GA (and is not installed)")
            elif name == "deap":
                r = deap_ga(seed=seed, run_pop=deap_pop, budget_s=max(budget_s, 10.0), **kw)
            elif name == "pygmo":
                r = pygmo_ga(seed=seed, run_pop=pygmo_pop, budget_s=max(budget_s, 10.0), **kw)
            else:
                raise ValueError(f"unknown anchor {name!r}: allowed {sorted(set(ANCHORS_GPU + ANCHORS_CPU))}")
        except ValueError:
            raise
        except Exception as e:  # noqa: BLE001  (an anchor must not stop the bench)
            r = Anchor(name, device, w["pop"], w["n_bits"], None, note=f"failed: {type(e).__name__}: {e}"[:200])
        log(r.row() + f"   [{time.perf_counter() - t0:.1f} s wall]")
        rows.append(r)
    return rows, ev


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--device", default="gpu", choices=("gpu", "cpu"))
    p.add_argument("--scale", type=float, default=1.0, help="multiplies N and L of workload A")
    p.add_argument("--only", default=None, help=f"comma list of {sorted(set(ANCHORS_GPU + ANCHORS_CPU))}")
    p.add_argument("--budget", type=float, default=10.0, help="seconds of timed generations per anchor")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--deap-pop", type=int, default=None, help="DEAP's population (default: automatic)")
    p.add_argument("--pygmo-pop", type=int, default=None, help="pygmo's population (default: automatic)")
    p.add_argument("--compile-on-cpu", action="store_true", help="also try torch.compile on the CPU")
    return p.parse_args(argv)


def scaled_workload_a(scale: float) -> dict:
    """Workload A at ``scale``: ``L = 5 round(10^5 scale / 5)`` (>= 10), ``N = round(4096 scale)`` (>= 8)."""
    L = max(10, int(round(WORKLOAD_A["n_bits"] * scale / WORKLOAD_A["k"])) * WORKLOAD_A["k"])
    N = max(8, int(round(WORKLOAD_A["pop"] * scale)))
    return dict(WORKLOAD_A, n_bits=L, pop=N)


def main(argv=None) -> int:
    args = parse(argv)
    w = scaled_workload_a(args.scale)
    only = [s for s in args.only.split(",") if s] if args.only else None
    print(f"# workload A: trap-{w['k']}, L={w['n_bits']}, N={w['pop']}, tournament {w['group_size']}, "
          f"one-point p_c={w['p_c']}, per-bit p_m=1/L, {w['n_elite']} elite; device {args.device}", flush=True)
    print(HEADER, flush=True)
    run_anchors(args.device, w, only, args.seed, args.budget, args.repeats, args.compile_on_cpu,
                args.deap_pop, args.pygmo_pop, log=lambda s: print(s, flush=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
