"""Placement: how many island-group actors, on which devices, hosting which islands.

With GPUs, one actor owns each GPU (``num_gpus=1``) and hosts its share of the islands as one
batch; without GPUs, one actor per CPU core (at most one per island) runs NumPy, except when the
islands exchange every generation (``islands.migration_interval=1``): then one actor hosts them
all, because a Ray round trip per generation (milliseconds) costs more than a second core gains
on NumPy-sized islands. ``islands.n_actors`` overrides both.
"""
from __future__ import annotations

from dataclasses import dataclass

from isles.algorithms.core.backend import DEVICES, cupy_or_none


@dataclass(frozen=True)
class Placement:
    """Actors to start.

    Attributes:
        groups: island ids of each actor, contiguous blocks (``len(groups)`` actors).
        use_gpu: each actor takes one GPU (``num_gpus=1``) and runs CuPy.
    """

    groups: list
    use_gpu: bool

    @property
    def device(self) -> str:
        """The ``device`` value each actor gets (``gpu`` or ``cpu``)."""
        return "gpu" if self.use_gpu else "cpu"


def split(n_islands: int, n_actors: int) -> list[list[int]]:
    """Contiguous, near-equal blocks of island ids, e.g. ``split(5, 2) == [[0, 1, 2], [3, 4]]``."""
    base, extra = divmod(n_islands, n_actors)
    out, start = [], 0
    for a in range(n_actors):
        size = base + (1 if a < extra else 0)
        out.append(list(range(start, start + size)))
        start += size
    return out


def plan(n_islands: int, device: str, n_actors: int | None, resources: dict,
         migration_interval: int | None = None) -> Placement:
    """Decide the actors for ``n_islands`` islands on a cluster with ``resources``.

    Args:
        n_islands: islands in the archipelago (>= 1).
        device: ``auto|cpu|gpu``.
        n_actors: actors wanted, or ``None`` for one per GPU (GPU) / per CPU (CPU).
        resources: ``ray.cluster_resources()`` (keys ``CPU``, ``GPU``).
        migration_interval: generations between exchanges; ``1`` puts CPU islands in one actor
            when ``n_actors`` is ``None`` (module docstring).

    Raises:
        ValueError: ``islands.n < 1``, ``islands.n_actors < 1``, unknown device, or
            ``device=gpu`` on a cluster without GPUs.
    """
    if not isinstance(n_islands, int) or n_islands < 1:
        raise ValueError(f"islands.n={n_islands}: allowed values are integers >= 1")
    if device not in DEVICES:
        raise ValueError(f"device={device!r}: allowed values are {'|'.join(DEVICES)}")
    if n_actors is not None and (not isinstance(n_actors, int) or n_actors < 1):
        raise ValueError(f"islands.n_actors={n_actors}: allowed values are null (auto) or integers >= 1")
    n_gpus = int(resources.get("GPU", 0))
    if device == "gpu" and n_gpus == 0:
        raise ValueError("device=gpu: no GPU is visible to Ray on this machine or cluster; allowed values here are auto|cpu")
    use_gpu = device != "cpu" and n_gpus > 0
    if n_actors is None:
        if use_gpu:
            n_actors = n_gpus
        elif migration_interval == 1:
            n_actors = 1
        else:
            n_actors = max(1, int(resources.get("CPU", 1)))
    if use_gpu and n_actors > n_gpus:
        raise ValueError(f"islands.n_actors={n_actors}: allowed values are 1..{n_gpus} (one actor per GPU)")
    n_actors = min(n_actors, n_islands)
    return Placement(groups=split(n_islands, n_actors), use_gpu=use_gpu)


def local_resources(num_cpus: int | None = None) -> dict:
    """This machine's resources as Ray would count them: ``{"CPU": cores (or num_cpus), "GPU":
    CUDA devices CuPy sees}``."""
    import os  # noqa: PLC0415

    cp = cupy_or_none()
    gpus = int(cp.cuda.runtime.getDeviceCount()) if cp is not None else 0
    return {"CPU": int(num_cpus or os.cpu_count() or 1), "GPU": gpus}


def needs_ray(cfg: dict) -> bool:
    """Whether a run needs Ray at all: a cluster address, async mode, or more than one island
    group on this machine. A local run whose islands share one group (one GPU; CPU islands that
    exchange every generation) runs in this process instead: the same code and result, without
    Ray's seconds of start-up and shutdown."""
    isl = cfg["islands"]
    if (cfg.get("ray") or {}).get("address") or isl.get("mode", "sync") != "sync":
        return True
    p = plan(isl["n"], cfg.get("device", "auto"), isl.get("n_actors"),
             local_resources((cfg.get("ray") or {}).get("num_cpus")), isl.get("migration_interval"))
    return len(p.groups) > 1
