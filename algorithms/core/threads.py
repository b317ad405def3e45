"""The CPU threads of an isles process: how many cores it has, and its BLAS/OpenMP pools set from them.

NumPy's BLAS (OpenBLAS, MKL) starts one thread per core of the machine by default. An island
group's matrices are small (CMA-ES at D = 30: 30 x 30), and a machine runs several island
processes (one per actor) or other work: the pool's threads then wait on each other. On a loaded
2-core machine ``+experiment=cmaes`` at D = 30 took 62-85 s a run with the default threads and
9.5-10.3 s with ``OPENBLAS_NUM_THREADS=1`` (issue 37). So isles sets each process's BLAS threads
itself (:func:`limit_blas_threads`, with threadpoolctl) from the cores the process has
(:func:`process_cores`: a Ray actor's CPU resources, 1 per CPU actor when several share a machine;
else the cores the process may run on) and the size of its matrices (:func:`blas_threads_for`:
one thread below 256 rows). ``ISLES_BLAS_THREADS`` (an integer) overrides it.

The host builds of the epoch kernels run one process's islands on threads
(:func:`host_threads`: OpenMP over the islands, ``ISLES_HOST_THREADS`` overrides), so one
process uses its cores.
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = ["process_cores", "blas_threads_for", "limit_blas_threads", "host_threads"]

log = logging.getLogger(__name__)

#: matrix rows per BLAS thread (:func:`blas_threads_for`)
ROWS_PER_THREAD = 128

_LIMITERS: list = []  # threadpoolctl's limiters of this process (kept: the limit lasts)


def process_cores() -> int:
    """The cores this process has: inside a Ray actor its CPU resources (at least 1; a GPU actor's
    bundle may hold none), else the cores it may run on (``os.sched_getaffinity``, else
    ``os.cpu_count()``)."""
    if "ray" in sys.modules:  # never imports Ray to find out
        try:
            import ray  # noqa: PLC0415

            if ray.is_initialized():
                ctx = ray.get_runtime_context()
                if ctx.get_actor_id() is not None:
                    return max(1, int(ctx.get_assigned_resources().get("CPU", 0)))
        except Exception:  # noqa: BLE001  (not inside a Ray worker)
            pass
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def blas_threads_for(dim: int | None, cores: int) -> int:
    """The BLAS threads of a process with ``cores`` cores whose matrices are ``dim x dim`` (the
    problem's dimension; ``None``: unknown): ``min(cores, max(1, dim // ROWS_PER_THREAD))``, so 1
    below 256 rows. Measured on a loaded 2-core machine: CMA-ES at D = 30, 4 islands, 200
    generations took 1.4 s of wall (0.24 s of CPU) with 1 thread and 24.5 s (5.6 s) with 2; a
    30 x 30 ``eigh`` or product is too small to share, and an island process's parallelism is its
    islands (actors, and the host builds' OpenMP threads). The threshold for large matrices is
    an estimate, not a measurement: ``ISLES_BLAS_THREADS`` sets the count."""
    if dim is None:
        return max(1, int(cores))
    return max(1, min(int(cores), int(dim) // ROWS_PER_THREAD))


def limit_blas_threads(n: int | None = None, dim: int | None = None) -> int:
    """Set this process's BLAS and OpenMP thread pools (threadpoolctl) to ``n`` threads (default:
    ``$ISLES_BLAS_THREADS``, else :func:`blas_threads_for` of ``dim`` and :func:`process_cores`);
    returns the number set. Without threadpoolctl, nothing is set (one debug line).

    Raises:
        ValueError: ``n`` or ``$ISLES_BLAS_THREADS`` is not an integer >= 1 (named)."""
    if n is None:
        n = _env_int("ISLES_BLAS_THREADS")
        if n is None:
            n = blas_threads_for(dim, process_cores())
    n = int(n)
    if n < 1:
        raise ValueError(f"BLAS threads {n}: allowed values are integers >= 1")
    try:
        from threadpoolctl import threadpool_limits  # noqa: PLC0415
    except ImportError:  # pragma: no cover  (a dependency; kept optional for lean installs)
        log.debug("threadpoolctl missing: BLAS threads left as they are")
        return n
    _LIMITERS.clear()
    _LIMITERS.append(threadpool_limits(limits=n))
    return n


def _env_int(name: str) -> int | None:
    env = os.environ.get(name)
    if not env:
        return None
    try:
        n = int(env)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{name}={env}: allowed values are integers >= 1")
    return n


def host_threads(n_islands: int) -> int:
    """Threads of a host build's island loop: ``$ISLES_HOST_THREADS``, else :func:`process_cores`,
    at most ``n_islands`` (islands are the unit of work) and at least 1.

    Raises:
        ValueError: ``$ISLES_HOST_THREADS`` is not an integer >= 1 (named)."""
    n = _env_int("ISLES_HOST_THREADS")
    return max(1, min(int(n_islands), n if n is not None else process_cores()))
