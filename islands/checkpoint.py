"""Checkpoints of a running archipelago: save every few epochs, resume after a crash.

A checkpoint holds everything the coordinator needs to go on exactly where it stopped: each
group's algorithm state (host arrays), the loop plug-in's state, the migration planned for the
next epoch, the best so far, the history and the counters. Because every random number is a
function of (seed, island, generation), a resumed run continues with the same numbers as an
uninterrupted one and reaches the same result.

States are saved per group but regroup per island (:func:`regroup`), so a run saved with some
number of actors (or GPUs) resumes with another.

Files are written atomically (temporary file, then rename), so a crash during a save never
leaves a broken checkpoint behind.
"""
from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np

VERSION = 2  # 2: the next migration is kept per island ("pending"), states regroup (regroup)


def save(path: str | os.PathLike, payload: dict) -> Path:
    """Write ``payload`` (plain Python and NumPy data) to ``path`` atomically; return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as fh:
        pickle.dump({"version": VERSION, **payload}, fh, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)
    return path


def load(path: str | os.PathLike) -> dict:
    """Read a checkpoint written by :func:`save`.

    Raises:
        ValueError: no such file (field ``checkpoint.resume``) or another checkpoint version.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"checkpoint.resume={str(path)!r}: no such file")
    with open(path, "rb") as fh:
        data = pickle.load(fh)
    if data.get("version") != VERSION:
        raise ValueError(f"checkpoint.resume={str(path)!r}: version {data.get('version')}, this isles reads {VERSION}")
    return data


def regroup(states: list, old_groups: list, new_groups: list) -> list:
    """Group states saved for islands grouped as ``old_groups`` as ``new_groups``.

    The layout every island algorithm's state follows (:class:`isles.algorithms.core.base.IslandAlgorithm`):
    arrays of one or more dimensions carry the island axis first; 0-d arrays are totals of the
    group (``nan_evals``: summed, and kept on the group of the first island that had it); host
    ints are the same on every island (``generation``, ``evals`` per island).

    Args:
        states: one state dict (host arrays) per old group.
        old_groups, new_groups: global island ids of each group, e.g. ``[[0, 1], [2, 3]]``.

    Returns:
        one state dict per new group (the same list when the grouping is unchanged).
    """
    if [list(g) for g in old_groups] == [list(g) for g in new_groups]:
        return states
    where = {gid: (g, p) for g, ids in enumerate(old_groups) for p, gid in enumerate(ids)}
    out = []
    for n, ids in enumerate(new_groups):
        new = {}
        for key, value in states[where[ids[0]][0]].items():
            if isinstance(value, np.ndarray) and value.ndim >= 1:
                new[key] = np.stack([states[where[gid][0]][key][where[gid][1]] for gid in ids])
            elif isinstance(value, np.ndarray):  # a group total: all of it on the first new group
                new[key] = sum(st[key] for st in states) if n == 0 else np.zeros_like(value)
            else:
                new[key] = value
        out.append(new)
    return out
