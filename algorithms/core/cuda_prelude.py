"""The base of the CUDA library (:mod:`isles.algorithms.core.cuda_lib`) as texts, for callers that
concatenate a prelude themselves (the problems' host harness, :func:`isles.problems.cuda_check.host_objective`,
takes ``HASH + ARITHMETIC + MATH``).

* :data:`HASH`: ``rng.cuh``, the counter-based generator (``isles_mix64``, ``draw_bits``,
  ``unif53``) and the platform macros (``ISLES_DEV``);
* :data:`ARITHMETIC`: ``arith.cuh``, ``T`` and the round-to-nearest operations (``add_rn`` ...);
* :data:`MATH`: ``math.cuh``, ``t_cos`` ... and ``t_popc``;
* :data:`BOUNDS`: ``bounds.cuh``, ``isles_bound``;
* :data:`PRELUDE`: ``objective.cuh``, all that a problem's CUDA source may use.

Each text is its file with its includes inlined; the files' include guards make a concatenation
of several of them valid. The kernels of the families assemble their sources with
:func:`isles.algorithms.core.cuda_lib.source` instead.
"""

from isles.algorithms.core.cuda_lib import source

HASH = source("rng.cuh")
ARITHMETIC = source("arith.cuh")
MATH = source("math.cuh")
BOUNDS = source("bounds.cuh")
PRELUDE = source("objective.cuh")
