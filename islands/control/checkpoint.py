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
import tempfile
from pathlib import Path

import numpy as np

VERSION = 5  # 2: the next migration is kept per island ("pending"), states regroup (regroup); 3: the
# history holds EpochRecord objects (isles.islands.results), no longer dicts; 4: the typed loop state
# (records.LoopState) with the plug-ins' states ("plugins"); 5: the records' group_metrics, a mixed run's
# algorithm isles.islands.mixed.Mixed


def save(path: str | os.PathLike, payload: dict) -> Path:
    """Write ``payload`` (plain Python and NumPy data) to ``path`` atomically; return the path.

    The data goes to a temporary file beside ``path``, is flushed to the disk, and then replaces
    ``path`` in one step: an interrupted save (a signal, a full disk, a lost node) leaves the
    previous checkpoint whole, never a truncated one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            pickle.dump({"version": VERSION, **payload}, fh, protocol=pickle.HIGHEST_PROTOCOL)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def check_path(path: str | os.PathLike) -> None:
    """Refuse a ``checkpoint.path`` that a save could not write, before the run (a save makes
    the missing folders and writes a temporary file beside the checkpoint,
    :func:`save`).

    Raises:
        ValueError: one line naming ``checkpoint.path``: an existing folder, a parent that is a
            file, or a folder where this process cannot create a file (and why).
    """
    path = Path(path)
    field = f"checkpoint.path={str(path)!r}"
    if path.is_dir():
        raise ValueError(f"{field}: is a folder; allowed values are file paths in a folder you can write")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:  # the folders a save would make
        folder = folder.parent
    if not folder.is_dir():
        raise ValueError(
            f"{field}: {str(folder)!r} is a file, not a folder; allowed values are file paths in a folder you can write"
        )
    try:  # as save does: a temporary file in the folder
        fd, probe = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise ValueError(
            f"{field}: cannot write in {str(folder)!r} ({err.strerror or err}); allowed values "
            "are file paths in a folder you can write"
        ) from None


def load(path: str | os.PathLike) -> dict:
    """Read a checkpoint written by :func:`save`.

    Raises:
        ValueError: one line naming ``checkpoint.resume`` and what the file is: missing, a
            folder, unreadable, empty, truncated (a pickle that ends early), not an isles
            checkpoint (another file, or a pickle of something else), or a checkpoint of another
            version.
    """
    path = Path(path)
    field = f"checkpoint.resume={str(path)!r}"
    if not path.exists():
        raise ValueError(f"{field}: no such file")
    if path.is_dir():
        raise ValueError(f"{field}: is a folder, not an isles checkpoint")
    try:
        with open(path, "rb") as fh:
            head = fh.read(1)
            fh.seek(0)
            # every checkpoint starts as a pickle of protocol >= 2 does: anything else is not unpickled
            data = pickle.load(fh) if head == pickle.PROTO else None
    except OSError as err:
        raise ValueError(f"{field}: cannot be read ({err.strerror or err})") from None
    except Exception as err:  # noqa: BLE001  (whatever unpickling a broken or foreign pickle raises)
        if isinstance(err, EOFError) or "truncated" in str(err):
            raise ValueError(
                f"{field}: truncated (the file ends before the checkpoint does); "
                "resume from an earlier checkpoint or start a new run"
            ) from None
        raise ValueError(
            f"{field}: not an isles checkpoint ({type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else 'unreadable'})"
        ) from None
    if not head:
        raise ValueError(f"{field}: an empty file, not an isles checkpoint")
    if head != pickle.PROTO:
        raise ValueError(f"{field}: not an isles checkpoint (not a pickle file)")
    if not isinstance(data, dict) or "version" not in data:
        raise ValueError(f"{field}: not an isles checkpoint (a pickle of {type(data).__name__})")
    if data["version"] != VERSION:
        raise ValueError(f"{field}: version {data['version']}, this isles reads {VERSION}")
    return data


def generations_done(data: dict) -> int:
    """The generations a checkpoint's run has done: the sync loop's ``done_gens``, or in async
    mode the most any group has done (``async.gens``), or with the shared pool (``async.done``, where
    the groups run different generations) the island-generations spent per island."""
    if data.get("mode") == "async":
        return int(data["async"]["done"] if "done" in data["async"] else max(data["async"]["gens"]))
    return int(data["done_gens"])


def regroup(states: list, old_groups: list, new_groups: list, island_axes) -> list:
    """Group states saved for islands grouped as ``old_groups`` as ``new_groups``.

    Each field is split and joined along the island axis its algorithm declares
    (:meth:`isles.algorithms.core.base.IslandAlgorithm.island_axes`); a field without one is a
    total of the group when it is a 0-d array or NumPy scalar (``nan_evals``: summed, and kept on
    the first new group) and otherwise the same on every island (``generation``, ``evals`` per island: taken
    from the old group of the new group's first island).

    Args:
        states: one state dict (host arrays) per old group.
        old_groups, new_groups: global island ids of each group, e.g. ``[[0, 1], [2, 3]]``.
        island_axes: ``state -> {key: island axis or None}``, the algorithm's ``island_axes``
            (called only when the grouping changes).

    Returns:
        one state dict per new group (the same list when the grouping is unchanged).

    Raises:
        ValueError: a field whose declared island axis does not have one entry per island of
            its group (one line naming the field and its shape).
    """
    if [list(g) for g in old_groups] == [list(g) for g in new_groups]:
        return states
    axes = island_axes(states[0])
    for g, (state, ids) in enumerate(zip(states, old_groups, strict=False)):
        for key, axis in axes.items():
            if axis is not None and np.shape(state[key])[axis] != len(ids):
                raise ValueError(
                    f"state field {key!r} of shape {np.shape(state[key])}: its island axis {axis} "
                    f"has not one entry per island of group {g} ({len(ids)} islands); declare the "
                    "field's island axis in the algorithm's ISLAND_AXES (island_axes())"
                )
    where = {gid: (g, p) for g, ids in enumerate(old_groups) for p, gid in enumerate(ids)}
    out = []
    for n, ids in enumerate(new_groups):
        new = {}
        for key, value in states[where[ids[0]][0]].items():
            axis = axes[key]
            if axis is not None:
                new[key] = np.stack(
                    [np.take(states[where[gid][0]][key], where[gid][1], axis=axis) for gid in ids], axis=axis
                )
            elif isinstance(value, (np.ndarray, np.generic)) and value.ndim == 0:  # a group total (a NumPy
                # scalar on CPU, a 0-d array from a GPU): all of it on the first new group
                new[key] = sum(st[key] for st in states) if n == 0 else np.zeros_like(value)[()]
            else:
                new[key] = value
        out.append(new)
    return out
