"""The CUDA library of isles: every kernel's source, assembled from the ``.cu``/``.cuh`` files of
``algorithms/core/cuda/`` (package data of ``isles.algorithms.core``, read with
:mod:`importlib.resources`).

Each concept is written once, in one file:

========================  =========================================================================
file                      what it holds
========================  =========================================================================
``rng.cuh``               ``ISLES_DEV``/``ISLES_KERNEL``, ``u64``, the counter-based generator of
                          :mod:`isles.algorithms.core.random` (``isles_mix64``, ``draw_bits``,
                          ``unif53``, ``unif24``)
``arith.cuh``             ``T`` (``IS_F32``), round-to-nearest operations without FMA contraction
                          (``add_rn`` ..., and the float64 ``dadd_rn`` ...), ``unifT``, ``T_INF``
``math.cuh``              ``t_cos`` ... on ``T``, ``t_popc``
``bounds.cuh``            ``isles_bound``: clip, reflect, reinit of one coordinate
``deb.cuh``               ``ISLES_BETTER``: Deb's comparison (any types; elementwise kernels too)
``fitness.cuh``           ``isles_better`` on ``T`` and ``isles_fix_fv``: the NaN and static-penalty
                          rule of :class:`isles.problems.constraints.Evaluator`
``reduce.cuh``            warp and block merges of a fused objective's accumulators (device)
``block.cuh``             ``BLOCK_SYNC``, ``ISLES_ATOMIC_MIN``/``ISLES_ATOMIC_ADD`` of the epoch kernels'
                          block loops, no-ops and plain updates under the one-thread host emulation
``encodings.cuh``         the encodings' decoder parts (``enc_field``, ``enc_decode`` per code)
``npsum.cuh``             sums in NumPy's pairwise order (``isles_np_sumsq``): a kernel's sum equal
                          to the NumPy twin's bit for bit
``counter.cu``            ``isles_set_i64``/``isles_add_i64``: the device generation counter
``track.cu``              the per-generation stop-target kernel
``de_epoch_threads.cuh``  host only: ``de_epoch_host``'s islands on OpenMP threads (the host build;
                          ``ga_epoch_threads.cuh``, ``fep_epoch_threads.cuh`` the GA's and FEP's)
``migration.cu``          the fused migration of an island group (emigrant selection; routing,
                          replacement, every leaf's write and the events), ``migration_kernels.py``
``de.cu`` ...             each family's kernels (``de_variation.cu``, ``ga.cu``, ``ga_flips.cuh``,
                          ``fep.cu``, ``pso.cu``, ``cde_pairs.cu``, ``cde_epoch.cu``)
========================  =========================================================================

A file names what it needs with ``#include "x.cuh"``; :func:`source` inlines it at its first
mention in one assembly and drops later mentions (NVRTC, CuPy's ``RawModule``, would need include
paths; the host C compiler of the emulations gets the same single text). Every ``.cuh`` also has
an include guard, so texts assembled separately may still be concatenated.

Configuration (sizes, flags, the draw ids of :mod:`isles.algorithms.de.de` and the other
families) comes from Python as ``#define`` lines (:func:`defines`) before the library text: one
source of truth for every constant that the NumPy twins also use.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

__all__ = ["source", "read", "defines", "draw_ids", "names"]

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([\w.]+)"[ \t]*$', re.M)
_NAME = re.compile(r"^[\w]+\.cuh?$")


def names() -> list[str]:
    """The file names of the library (``*.cu``, ``*.cuh``), sorted."""
    folder = resources.files("isles.algorithms.core").joinpath("cuda")
    return sorted(p.name for p in folder.iterdir() if _NAME.match(p.name))


@functools.cache
def read(name: str) -> str:
    """The text of library file ``name`` (e.g. ``"rng.cuh"``), includes not resolved.

    Raises:
        FileNotFoundError: no such file in ``algorithms/core/cuda/``.
    """
    if not _NAME.match(name):
        raise FileNotFoundError(f"CUDA library: {name!r} is not a .cu/.cuh file name")
    path = resources.files("isles.algorithms.core").joinpath("cuda", name)
    if not path.is_file():
        raise FileNotFoundError(f"CUDA library: no file {name!r} (allowed: {', '.join(names())})")
    return path.read_text(encoding="utf-8")


def _inline(text: str, seen: set) -> str:
    def sub(m):
        name = m.group(1)
        if name in seen:
            return f'// (#include "{name}": already included)'
        seen.add(name)
        return _inline(read(name), seen)

    return _INCLUDE.sub(sub, text)


@functools.lru_cache(maxsize=512)
def source(*parts: str) -> str:
    """One translation unit: ``parts`` concatenated in order, each either a library file name
    (``"math.cuh"``, ``"de.cu"``: read, its ``#include "x.cuh"`` lines inlined) or literal text
    (defines, a problem's ``cuda_objective``). A library file is inlined once: at its first
    mention, as a part or through an include; later mentions become a comment. Cached: a
    launcher may assemble its source at every launch.

    Raises:
        FileNotFoundError: a named or included file is not in the library.
    """
    seen: set = set()
    out = []
    for part in parts:
        if _NAME.match(part):
            if part in seen:
                continue
            seen.add(part)
            part = read(part)
        out.append(_inline(part, seen))
    return "\n".join(out) + "\n"


def defines(values: dict) -> str:
    """``#define K V`` lines of ``values`` (a kernel's configuration), in order."""
    return "".join(f"#define {k} {v}\n" for k, v in values.items())


def draw_ids(**ids: int) -> str:
    """``#define DRAW_X <id>ull`` lines of the family's Python draw ids (``draw_ids(DRAW_INDEX=
    DRAW_INDEX, ...)``): the kernels never write a draw id themselves."""
    for k, v in ids.items():
        if not k.startswith("DRAW_") or isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"draw id {k}={v!r}: allowed are DRAW_* names with integers >= 0")
    return "".join(f"#define {k} {int(v)}ull\n" for k, v in ids.items())
