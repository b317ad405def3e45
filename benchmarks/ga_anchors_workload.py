"""Workload A of the GA anchors (``ga_anchors.py``, its docstring says what each anchor runs), the
:class:`Anchor` row every anchor returns, and the timing helpers the anchors and ``ga_bench.py``
share."""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field

#: workload A (issue 6): trap-5, L = 10^5, N = 4096, isles' GA defaults
WORKLOAD_A = {"n_bits": 100_000, "k": 5, "pop": 4096, "group_size": 2, "p_c": 0.9, "p_m": None, "n_elite": 1}


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


def default_run_pop(pop: int, n_bits: int, genes: int) -> int:
    """The population a CPU library runs: all of ``pop`` if ``pop * n_bits <= genes``, else
    ``max(16, genes // n_bits)``."""
    return pop if pop * n_bits <= genes else min(pop, max(16, genes // n_bits))


def scaled_workload_a(scale: float) -> dict:
    """Workload A at ``scale``: ``L = 5 round(10^5 scale / 5)`` (>= 10), ``N = round(4096 scale)`` (>= 8)."""
    L = max(10, int(round(WORKLOAD_A["n_bits"] * scale / WORKLOAD_A["k"])) * WORKLOAD_A["k"])
    N = max(8, int(round(WORKLOAD_A["pop"] * scale)))
    return dict(WORKLOAD_A, n_bits=L, pop=N)
