"""The library anchors of ``ga_anchors.py`` (its docstring says what each runs): (c) DEAP,
:func:`deap_ga`, (d) pygmo, :func:`pygmo_ga`, and (e) what EvoX offers, :func:`evox_status`."""

from __future__ import annotations

import random
import statistics
import time

import numpy as np
from ga_anchors_workload import DEAP_GENES, PYGMO_GENES, Anchor, _check_workload, default_run_pop, resolve_p_m

# ---- (c) DEAP -------------------------------------------------------------------------------------


def deap_ga(
    n_bits: int = 100_000,
    pop: int = 4096,
    k: int = 5,
    group_size: int = 2,
    p_c: float = 0.9,
    p_m: float | None = None,
    n_elite: int = 1,
    seed: int = 0,
    run_pop: int | None = None,
    gens: int = 5,
    budget_s: float = 30.0,
) -> Anchor:
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
            u = sum(ind[b : b + k])
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
        for ind, fit in zip(invalid, map(tb.evaluate, invalid), strict=False):
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
    note = "DEAP varAnd (pairs cross, both children kept), deepcopy clone, 1 core; " + (
        f"ran N={R}, time x{scale:.4g} to N={pop}" if pop > R else "full population"
    )
    return Anchor(
        "deap (list of bools)",
        "cpu",
        pop,
        n_bits,
        t * 1e6,
        n,
        R,
        float(best0),
        float(best),
        setup,
        note,
        [x * scale * 1e6 for x in times],
    )


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


def pygmo_ga(
    n_bits: int = 100_000,
    pop: int = 4096,
    k: int = 5,
    group_size: int = 2,
    p_c: float = 0.9,
    p_m: float | None = None,
    n_elite: int = 1,
    seed: int = 0,
    run_pop: int | None = None,
    gens: int = 5,
    budget_s: float = 30.0,
) -> Anchor:
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
        return pg.algorithm(
            pg.sga(
                gen=n,
                cr=p_c,
                m=min(1.0, 2.0 * pm),
                param_s=group_size,
                crossover="single",
                mutation="uniform",
                selection="tournament",
                seed=seed + n,
            )
        )

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
    note = (
        "sga: tournament 2, single-point cr=0.9 with a random partner, uniform int mutation m=2/L, "
        "(mu+lambda) survival; 1 core; "
        + (f"ran N={R}, time x{scale:.4g} to N={pop}" if pop > R else "full population")
    )
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
        return {
            "importable": False,
            "version": None,
            "has_ga": False,
            "ga_like": [],
            "message": f"{EVOX_FINDINGS}. (evox not importable here: {type(e).__name__}: {e})",
        }
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
        msg = (
            f"evox {version}: GA-like names found {ga_like}; not timed (API unknown to this script), "
            f"algorithms: {sorted(names)}"
        )
    else:
        msg = (
            f"{EVOX_FINDINGS}. Installed evox {version}: algorithms {sorted(names)}; operators {sorted(ops)}; "
            f"GA-like names: {ga_like or 'none'}"
        )
    return {"importable": True, "version": version, "has_ga": has_ga, "ga_like": ga_like, "message": msg}
