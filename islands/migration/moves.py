"""Migration routing, and the policies applied to an island group: which individuals emigrate,
which reach whom, where they land.

One code path moves whole individuals (:class:`isles.algorithms.core.population.Population`: genome of
any dtype, fitness, violation and extras such as per-individual velocities or step sizes) for
every algorithm, following pagmo 2's policies, which are objects (:mod:`isles.islands.migration.policies`):

* emigrant selection (``islands.selection``): e.g. :class:`~isles.islands.migration.policies.SelectBest`,
  the ``k`` best individuals of each island under Deb's rules (:func:`select_best`);
* routing :func:`route`: which emigrants (of islands in this group, of islands elsewhere, of the
  loop's plug-in) each destination island receives, with fair truncation;
* immigrant replacement (``islands.replacement``): ``replace_worst`` overwrites the worst
  residents unconditionally; ``fair_replace`` replaces a resident only by a better immigrant
  (the island keeps the best ``N`` of residents plus immigrants, as ``pagmo::fair_replace``);
  or a user's class (:func:`replacement`).

:func:`emigrants_of` and :func:`immigrate` apply these to an island group's state (one code
path for every algorithm and population role); :func:`migration_events` reports what moved.

Immigrant blocks are padded to a common width ``K``; ``valid (I, K)`` marks real immigrants.
Everything but :func:`route` (host planning on a few integers) runs on the device without host
synchronisation. On CuPy, with the built-in policies and sources in the group, the same results
come from two kernels instead of about 30 array operations (:mod:`isles.islands.migration.fused`;
``ISLES_FUSED_MIGRATION=0`` turns them off); the array code here is their twin and fallback.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from isles.algorithms.core.backend import device_constant, to_host
from isles.algorithms.core.population import Population, by_role
from isles.islands.migration import fused as fused_migration
from isles.islands.migration import policies
from isles.islands.migration.contract import guarded

# re-exported: app/job.py and the tests import them from here
from isles.islands.migration.policies import check_n_migrants, rank_order, replacement_policy, selection_policy  # noqa: F401
from isles.islands.mixed import ROLE, layout_of

#: the names of the built-in replacements (:data:`isles.islands.migration.policies.REPLACEMENTS`)
REPLACEMENTS = tuple(policies.REPLACEMENTS)
PAD = -2  # source id of a padding slot in route()'s src_of


def check_replacement(policy) -> None:
    """``islands.replacement``: a name of :data:`REPLACEMENTS` or ``{_target_: ...}``
    (:func:`isles.islands.migration.policies.replacement_policy`).

    Raises:
        ValueError: one line naming the field and the allowed values.
    """
    replacement_policy(policy)


def check_selection(policy) -> None:
    """``islands.selection``: ``select_best`` or ``{_target_: ...}``
    (:func:`isles.islands.migration.policies.selection_policy`).

    Raises:
        ValueError: one line naming the field and the allowed values.
    """
    selection_policy(policy)


def select_best(f, v, k: int):
    """Emigrant indices ``(I, k)``: the ``k`` best individuals of each island (best first;
    :class:`isles.islands.migration.policies.SelectBest`); ``k`` in ``1..N`` is the caller's to check, once
    (:func:`isles.islands.migration.policies.check_migrants`)."""
    return policies.SelectBest().select(f, v, k)


def route(inbound: dict, n_dest: int, offsets: dict, counts: dict, capacity: int, rotate: int = 0):
    """Plan which pool rows each destination island receives (host side, a few integers).

    The pool is the concatenation of every source's emigrants: source ``s`` has ``counts[s]``
    emigrants (best first) at pool rows ``offsets[s] .. offsets[s] + counts[s] - 1``. Sources are
    islands (global ids) and the loop's plug-in (id ``-1``); a source may have fewer emigrants
    than the others (the plug-in sends one).

    Fair truncation: a destination takes its sources' emigrants round-robin (the best emigrant of
    every source, then the second of every source, ...), in the order the sources are listed,
    and stops at ``capacity`` (its population size): when there is no room for all of them, each
    source loses its worst emigrants first and no source is dropped while another sends two.
    When there are more sources than room for one emigrant each, the list of sources is rotated
    by ``rotate`` (callers pass the generation), so that over the run every source, the
    plug-in included, gets in equally often instead of the last-listed ones never.

    Args:
        inbound: ``{destination position (0..n_dest-1): [source ids]}``.
        n_dest: islands in this group ``I``.
        offsets, counts: ``{source id: first pool row}``, ``{source id: emigrants}``.
        capacity: most immigrants one island accepts (``N``).
        rotate: rotation of the source list when not every source fits (see above).

    Returns:
        ``(rows (I, K) int64, src_of (I, K) int64, valid (I, K) bool)``: pool row, source id
        (:data:`PAD` for padding) and validity of each immigrant slot; ``K`` is the largest
        number of immigrants of any destination (0 when nothing migrates).

    Raises:
        KeyError: a source without an entry in ``offsets``/``counts``.
    """
    plans = {}
    for dst, sources in inbound.items():
        srcs = list(dict.fromkeys(sources))  # each source once, first mention first
        if len(srcs) > capacity:
            r = int(rotate) % len(srcs)
            srcs = srcs[r:] + srcs[:r]
        taken = []
        depth = max((counts[s] for s in srcs), default=0)
        for j in range(depth):
            for s in srcs:
                if j < counts[s] and len(taken) < capacity:
                    taken.append((s, offsets[s] + j))
        plans[int(dst)] = taken
    K = max((len(t) for t in plans.values()), default=0)
    rows = np.zeros((n_dest, K), dtype=np.int64)
    src_of = np.full((n_dest, K), PAD, dtype=np.int64)
    valid = np.zeros((n_dest, K), dtype=bool)
    for dst, taken in plans.items():
        for j, (s, r) in enumerate(taken):
            rows[dst, j], src_of[dst, j], valid[dst, j] = r, s, True
    return rows, src_of, valid


def replacement(policy, residents: Population, immigrants: Population, valid, context=None):
    """Where immigrants go: ``policy.replace(residents, immigrants, valid[, context])``
    (:meth:`isles.islands.migration.policies.Replacement.replace`), a user's policy's return
    checked (:func:`isles.islands.migration.contract.guarded`).

    Args:
        policy: a replacement policy object, or a config value of ``islands.replacement``
            (``"fair_replace"``, ``"replace_worst"``, ``{_target_: ...}``;
            :func:`isles.islands.migration.policies.replacement_policy`).
        residents: the islands' population ``(I, N)``.
        immigrants: ``(I, K)`` with the residents' leaves (:meth:`Population.conform`), ``K <= N``.
        valid: ``(I, K)`` bool, real immigrants (padding is False).
        context: the :class:`isles.islands.migration.contract.MigrationContext` of the
            destination islands (for a policy that takes one), or ``None``.

    Returns:
        ``(idx (I, K), new (I, K) Population, accepted (I, K), order (I, K))``: write ``new`` at
        ``idx`` (distinct per island; the built-ins: the ``K`` worst residents, worst first); where
        an immigrant is not accepted the resident is written back unchanged; ``order`` is the
        permutation applied to the immigrants (best first), so ``accepted[i, j]`` refers to
        immigrant ``order[i, j]`` of the input.

    Raises:
        ValueError: an unknown policy (:func:`check_replacement`).
        isles.islands.migration.contract.PolicyError: a user's policy's return breaks its contract.
    """
    return guarded(replacement_policy(policy), "replace").replace(residents, immigrants, valid, context)


def emigrants_of(algorithm, state: dict, k: int, selection=None, context=None):
    """The ``k`` emigrants of every population role (:meth:`IslandAlgorithm.populations`) of each
    family's part of ``state`` (:func:`isles.islands.mixed.layout_of`), chosen by ``selection`` (a policy
    with ``select(f, v, k[, context])``, a user's checked, :func:`isles.islands.migration.contract.guarded`;
    ``None``: the ``k`` best, :class:`isles.islands.migration.policies.SelectBest`): a :class:`Population`
    ``(I, k)`` for a one-population algorithm, else a :class:`PopulationRoles` (a mixed batch: its
    families' emigrants as they travel, :meth:`isles.islands.mixed.Mixed.emigrants`). ``context``: the
    islands' :class:`isles.islands.migration.contract.MigrationContext` (each part's islands', each
    role's with its ``role``), or ``None``.

    Raises:
        isles.islands.migration.contract.PolicyError: a user's selection's return breaks its contract.
    """
    selection = policies.SelectBest() if selection is None else guarded(selection, "select")
    layout = layout_of(algorithm)
    parts, chosen = layout.parts(state), []
    for part in parts:
        pops = part.algorithm.populations(part.state)
        fused = type(selection) is policies.SelectBest and _fused(pops[next(iter(pops))])
        out = {}
        for r, p in pops.items():
            if fused:  # one kernel (isles.islands.migration.fused), the same emigrants; k checked once, at construction
                out[r] = fused_migration.select_best(p, k)
            if out.get(r) is None:
                out[r] = p.take(selection.select(p.f, p.v, k, _context(context, part.rows, len(parts), r)))
        chosen.append(out)
    return layout.emigrants(parts, chosen)


def immigrate(
    algorithm, ctx, state: dict, island_ids: list, emigrants, inbound: dict, remote: dict, policy, context=None
):
    """Immigrants into a group's islands, through :func:`route` and :func:`replacement`: the one
    code path for every algorithm and every family of a mixed batch (:func:`isles.islands.mixed.layout_of`:
    one part per family). Each population role receives emigrants of the same role only; the family
    makes its individuals of them by its arrival rule where individuals travel between families
    (:meth:`IslandAlgorithm.adopt`), else may re-assess them before they compete
    (:meth:`IslandAlgorithm.assess_immigrants`).

    Args:
        algorithm, ctx, state: the group's algorithm, context and state.
        island_ids: the group's islands (global ids); emigrants: their own emigrants
            (:func:`emigrants_of`), sources for islands of the same group.
        inbound: ``{destination position: [source ids]}``; remote: ``{source id: Population
            (1, k)}`` of islands elsewhere and of the plug-ins (ids ``-1, -2, ...``, one individual).
        policy: the replacement policy (:func:`replacement`), e.g. the group's built from
            ``islands.replacement``.
        context: the islands' :class:`isles.islands.migration.contract.MigrationContext` (for a
            policy that takes one; each part's islands', each role's with its ``role``), or ``None``.

    Returns:
        ``(state, events)``: the new state and one ``(src_of, order, accepted, f_new)`` over the
        group's ``I`` rows per part and role that received immigrants (device arrays;
        :func:`migration_events` reads them).
    """
    layout = layout_of(algorithm)
    xp, I = ctx.xp, len(island_ids)
    emigrants = by_role(emigrants)
    remote = {rid: by_role(r) for rid, r in remote.items()}
    parts, events, adopted = layout.parts(state, ctx), [], 0
    for part in parts:
        a, lo, hi, _ = part.algorithm, *part.rows.indices(I)
        mine_in = {pos - lo: srcs for pos, srcs in inbound.items() if lo <= pos < hi}
        for role, residents in a.populations(part.state).items():
            travel = ROLE if layout.travels else role
            mine = emigrants[travel]
            like = mine if layout.travels else residents  # the leaves that travel
            k = mine.shape[1]
            offsets, counts, pool = {}, {}, [mine]
            for p, gid in enumerate(island_ids):
                offsets[gid], counts[gid] = p * k, k
            row = I * k
            for rid in sorted(remote):
                got = remote[rid] if not layout.travels else {travel: next(iter(remote[rid].values()))}
                if travel not in got:  # a source without this role (the plug-in's best)
                    continue
                r = got[travel].conform(like)
                offsets[rid], counts[rid] = row, r.shape[1]
                pool.append(r)
                row += r.shape[1]
            rows, src_of, valid = route(
                mine_in, hi - lo, offsets, counts, residents.shape[1], rotate=int(state["generation"])
            )
            if not valid.any():
                continue
            if not layout.travels and not remote and _fused(residents):  # one kernel (fused.py), the same result
                done = fused_migration.immigrate_role(
                    a, ctx, part.state, role, residents, mine, rows, valid, replacement_policy(policy)
                )
                if done is not None:
                    part.state = done[0]
                    events.append((src_of, *done[1:]))
                    continue
            flat = Population.from_leaves(
                {
                    name: xp.concatenate([v.reshape((-1,) + v.shape[2:]) for v in arrays])
                    for name, arrays in _stack_leaves([p.conform(like) for p in pool]).items()
                }
            )
            rows_d = device_constant(xp, rows)
            immigrants = flat.map(lambda v, rows_d=rows_d: v[rows_d])
            if layout.travels:  # the family's arrival rule: its own individuals of them
                part.state, immigrants = a.adopt(part.ctx, part.state, immigrants, valid)
                adopted += int(valid.sum()) if a.evaluates_arrivals else 0
            else:
                part.state, immigrants = a.assess_immigrants(ctx, part.state, role, immigrants)
            residents = a.populations(part.state)[role]
            c = _context(context, part.rows, len(parts), role)
            idx, new, accepted, order = replacement(policy, residents, immigrants, device_constant(xp, valid), c)
            part.state = a.replace_role(part.ctx or ctx, part.state, role, idx, new)
            events.append(_padded(xp, I, lo, (src_of, order, accepted, new.f)))
    return layout.merged(parts, state, adopted), events


def _context(context, rows: slice, n_parts: int, role):
    """``context`` of a part's islands at ``rows`` (of one of ``n_parts``) and of ``role``; ``None`` for ``None``."""
    if context is None:
        return None
    c = context.part(rows) if n_parts > 1 else context
    return c if role is None else dataclasses.replace(c, role=role)


def _padded(xp, I: int, lo: int, event: tuple) -> tuple:
    """A part's event ``(src_of, order, accepted, f)`` of its rows from ``lo`` over the batch's ``I`` rows
    (the others padding: source :data:`PAD`, nothing accepted); the event itself where it has them all."""
    src_of, order, accepted, f = event
    n, K = src_of.shape
    if n == I:
        return event
    src = np.full((I, K), PAD, dtype=src_of.dtype)
    src[lo : lo + n] = src_of

    def padded(a, fill):
        out = xp.full((I, K), fill, dtype=a.dtype)
        out[lo : lo + n] = a
        return out

    return src, padded(order, 0), padded(accepted, False), padded(f, 0)


def migration_events(pending, island_ids: list) -> list:
    """What :func:`immigrate`'s ``events`` moved, as host tuples ``(src, dst, accepted, best f
    moved)`` (one per source and destination island; ``best f moved`` is ``None`` when nothing
    was accepted); ``[]`` for ``None``."""
    if pending is None:
        return []
    events = []
    for src_of, order, accepted, f_new in pending:  # one entry per population role
        order, accepted, f_new = to_host(order), to_host(accepted), to_host(f_new)
        src = np.take_along_axis(np.asarray(src_of), order, axis=1)
        real = src != PAD
        dst, src, acc, f = np.nonzero(real)[0], src[real], accepted[real], f_new[real]
        lo = int(src.min(initial=PAD))  # plug-ins' sources -3, -4, ... lie below PAD
        span = int(src.max(initial=PAD)) - lo + 1
        # one key per (destination, source), sorted destination first: one np.unique, not one per island
        keys, inv = np.unique(dst * span + (src - lo), return_inverse=True)
        n = np.bincount(inv[acc], minlength=len(keys))
        best = np.full(len(keys), np.inf, dtype=f.dtype)
        with np.errstate(invalid="ignore"):  # a NaN f moved stays NaN, as min() gives it, without a warning
            np.minimum.at(best, inv[acc], f[acc])
        for key, c, b in zip(keys.tolist(), n.tolist(), best.tolist(), strict=False):
            d, s = divmod(key, span)
            events.append((s + lo, island_ids[d], c, b if c else None))
    return events


def _fused(pop: Population) -> bool:
    """Whether migration may take the fused kernels for ``pop`` (CuPy arrays and
    ``ISLES_FUSED_MIGRATION`` not ``0``, :func:`isles.islands.migration.fused.enabled`); they
    still decline a policy or layout they do not support."""
    return pop.xp is not np and fused_migration.enabled()


def _stack_leaves(pops) -> dict:
    """``{leaf name: [array of each population]}`` for populations with the same leaves."""
    out: dict = {}
    for p in pops:
        for name, a in p.leaves().items():
            out.setdefault(name, []).append(a)
    return out
