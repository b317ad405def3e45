"""Checkpoints of a running archipelago: save every few epochs, resume after a crash.

A checkpoint holds everything the coordinator needs to go on exactly where it stopped: each
group's algorithm state (host arrays), the master swarm's state, the migration planned for the
next epoch, the best so far, the history and the counters. Because every random number is a
function of (seed, island, generation), a resumed run continues with the same numbers as an
uninterrupted one and reaches the same result.

Files are written atomically (temporary file, then rename), so a crash during a save never
leaves a broken checkpoint behind.
"""
from __future__ import annotations

import os
import pickle
from pathlib import Path

VERSION = 1


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
