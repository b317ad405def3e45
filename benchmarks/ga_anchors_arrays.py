"""The array anchors of ``ga_anchors.py`` (its docstring says what each runs): (a) plain CuPy /
NumPy, :func:`array_ga`, and (b) PyTorch, :func:`torch_ga` (also the EvoX row's, with EvoX's
tournament selection)."""

from __future__ import annotations

import time

import numpy as np
from ga_anchors_workload import Anchor, _check_workload, _perf_timer, _timed_generations, resolve_p_m

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


def array_ga(
    backend: str = "cupy",
    n_bits: int = 100_000,
    pop: int = 4096,
    k: int = 5,
    group_size: int = 2,
    p_c: float = 0.9,
    p_m: float | None = None,
    n_elite: int = 1,
    seed: int = 0,
    budget_s: float = 10.0,
    repeats: int = 3,
    max_gens: int = 5000,
) -> Anchor:
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
            st[0], st[1] = array_generation(
                xp, rand, st[0], st[1], n_bits=n_bits, k=k, group_size=group_size, p_c=p_c, p_m=pm, n_elite=n_elite
            )

    timer(lambda: advance(2))  # warm-up (kernel compilation, memory pool)
    setup = time.perf_counter() - t0
    gpu = backend == "cupy"
    t, n, times = _timed_generations(
        advance, timer, budget_s=budget_s, repeats=repeats, probe=3 if gpu else 1, lo=5 if gpu else 2, hi=max_gens
    )
    best = float(st[1].min())
    del st[:]
    if gpu:
        xp.get_default_memory_pool().free_all_blocks()
    return Anchor(
        name,
        dev,
        pop,
        n_bits,
        t * 1e6,
        n * repeats,
        pop,
        best0,
        best,
        setup,
        f"median of {repeats} x {n} gens",
        [x * 1e6 for x in times],
    )


# ---- (b) PyTorch (and (e) with EvoX's tournament selection) --------------------------------------


def torch_ga(
    device: str = "cuda",
    compile: bool = False,
    selection: str = "torch",  # noqa: A002
    n_bits: int = 100_000,
    pop: int = 4096,
    k: int = 5,
    group_size: int = 2,
    p_c: float = 0.9,
    p_m: float | None = None,
    n_elite: int = 1,
    seed: int = 0,
    budget_s: float = 10.0,
    repeats: int = 3,
    max_gens: int = 5000,
) -> Anchor:
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
        return Anchor(
            name, dev_name, pop, n_bits, None, best0=best0, note=f"failed in warm-up: {type(e).__name__}: {msg}"
        )
    setup = time.perf_counter() - t0
    if compile:
        note = f"compile + warm-up {setup:.1f} s (excluded); "
    gpu = device == "cuda"
    t, n, times = _timed_generations(
        advance, timer, budget_s=budget_s, repeats=repeats, probe=3 if gpu else 1, lo=5 if gpu else 2, hi=max_gens
    )
    best = float(st[1].min())
    del st[:]
    if gpu:
        torch.cuda.empty_cache()
    return Anchor(
        name,
        dev_name,
        pop,
        n_bits,
        t * 1e6,
        n * repeats,
        pop,
        best0,
        best,
        setup,
        note + f"median of {repeats} x {n} gens",
        [x * 1e6 for x in times],
    )
