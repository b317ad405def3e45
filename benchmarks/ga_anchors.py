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

Files: workload A, :class:`Anchor` and the timers in ``ga_anchors_workload.py``; (a) and (b) in
``ga_anchors_arrays.py``; (c), (d) and (e) in ``ga_anchors_libraries.py``; this file runs them.

Run alone (repository root)::

    python benchmarks/ga_anchors.py --device gpu                  # all anchors, workload A
    python benchmarks/ga_anchors.py --device cpu --scale 0.1 --only numpy,deap
"""

from __future__ import annotations

import argparse
import time

from ga_anchors_arrays import array_ga, torch_ga
from ga_anchors_libraries import deap_ga, evox_status, pygmo_ga
from ga_anchors_workload import HEADER, WORKLOAD_A, Anchor, scaled_workload_a

# ---- all anchors ----------------------------------------------------------------------------------

ANCHORS_GPU = ("cupy", "torch", "torch_compile", "evox", "deap", "pygmo")
ANCHORS_CPU = ("numpy", "torch", "deap", "pygmo", "evox")


def run_anchors(
    device: str,
    workload: dict,
    only=None,
    seed: int = 0,
    budget_s: float = 10.0,
    repeats: int = 3,
    compile_on_cpu: bool = False,
    deap_pop=None,
    pygmo_pop=None,
    log=print,
) -> tuple[list[Anchor], dict]:
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
                    r = Anchor(
                        "evox", device, w["pop"], w["n_bits"], None, note="EvoX has no GA (and is not installed)"
                    )
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
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
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


def main(argv=None) -> int:
    args = parse(argv)
    w = scaled_workload_a(args.scale)
    only = [s for s in args.only.split(",") if s] if args.only else None
    print(
        f"# workload A: trap-{w['k']}, L={w['n_bits']}, N={w['pop']}, tournament {w['group_size']}, "
        f"one-point p_c={w['p_c']}, per-bit p_m=1/L, {w['n_elite']} elite; device {args.device}",
        flush=True,
    )
    print(HEADER, flush=True)
    run_anchors(
        args.device,
        w,
        only,
        args.seed,
        args.budget,
        args.repeats,
        args.compile_on_cpu,
        args.deap_pop,
        args.pygmo_pop,
        log=lambda s: print(s, flush=True),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
