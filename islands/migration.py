"""Migration policies: which individuals emigrate, and where immigrants land.

All functions work on a batch of ``I`` islands on one device (NumPy or CuPy), with no host
synchronisation, following pagmo 2's policies:

* emigrant selection ``select_best``: the ``k`` best individuals of each island under Deb's rules;
* immigrant replacement ``replace_worst``: immigrants overwrite the worst individuals
  unconditionally; ``fair_replace``: an immigrant replaces a resident only if it is better
  (the island keeps the best ``N`` of residents plus immigrants, as ``pagmo::fair_replace``).

Immigrant blocks are padded to a common width ``K``; ``valid (I, K)`` marks real immigrants.
"""
from __future__ import annotations

from algorithms.core.backend import array_module
from problems.constraints import better

REPLACEMENTS = ("fair_replace", "replace_worst")


def rank_order(f, v):
    """Indices ``(I, N)`` sorting each island best-first under Deb's rules (stable, lexicographic (v, f))."""
    xp = array_module(f)
    by_f = xp.argsort(f, axis=-1, kind="stable")
    v_sorted = xp.take_along_axis(v, by_f, axis=-1)
    by_v = xp.argsort(v_sorted, axis=-1, kind="stable")
    return xp.take_along_axis(by_f, by_v, axis=-1)


def select_best(f, v, k: int):
    """Emigrant indices ``(I, k)``: the ``k`` best individuals of each island (best first).

    Raises:
        ValueError: ``k`` larger than the population ``N`` or below 1 (field ``islands.n_migrants``).
    """
    n = f.shape[-1]
    if not 1 <= k <= n:
        raise ValueError(f"islands.n_migrants={k}: allowed values are integers 1..{n} (the population size)")
    return rank_order(f, v)[:, :k]


def gather(X, f, v, idx):
    """Rows ``idx (I, k)`` of a batch: ``(X (I, k, D), f (I, k), v (I, k))``."""
    xp = array_module(f)
    return (
        xp.take_along_axis(X, idx[..., None], axis=1),
        xp.take_along_axis(f, idx, axis=1),
        xp.take_along_axis(v, idx, axis=1),
    )


def replacement(policy: str, f, v, imm_X, imm_f, imm_v, valid, X):
    """Where immigrants go.

    Args:
        policy: ``"fair_replace"`` or ``"replace_worst"``.
        f, v: residents' ranking pair ``(I, N)``; ``X`` residents ``(I, N, D)``.
        imm_X, imm_f, imm_v: immigrants ``(I, K, D)``, ``(I, K)``, ``(I, K)`` with ``K <= N``.
        valid: ``(I, K)`` bool, real immigrants (padding is False).

    Returns:
        ``(idx (I, K), X_new (I, K, D), f_new (I, K), v_new (I, K), accepted (I, K), order (I, K))``:
        write ``X_new`` at ``idx``; where an immigrant is not accepted the resident is written
        back; ``order`` is the permutation applied to the immigrants (best first), so that
        ``accepted[i, j]`` refers to immigrant ``order[i, j]`` of the input.

    Raises:
        ValueError: unknown policy (field ``islands.replacement``).
    """
    if policy not in REPLACEMENTS:
        raise ValueError(f"islands.replacement={policy!r}: allowed values are {'|'.join(REPLACEMENTS)}")
    xp = array_module(f)
    K = imm_f.shape[-1]
    # immigrants best-first, residents worst-first: pairing them keeps the best N of the union
    imm_order = rank_order(xp.where(valid, imm_f, xp.inf), xp.where(valid, imm_v, xp.inf))
    imm_X, imm_f, imm_v = gather(imm_X, imm_f, imm_v, imm_order)
    valid = xp.take_along_axis(valid, imm_order, axis=1)
    idx = rank_order(f, v)[:, ::-1][:, :K]
    res_X, res_f, res_v = gather(X, f, v, idx)
    accepted = valid if policy == "replace_worst" else valid & better(imm_f, imm_v, res_f, res_v)
    X_new = xp.where(accepted[..., None], imm_X, res_X)
    f_new = xp.where(accepted, imm_f, res_f)
    v_new = xp.where(accepted, imm_v, res_v)
    return idx, X_new, f_new, v_new, accepted, imm_order
