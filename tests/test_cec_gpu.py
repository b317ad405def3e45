"""benchmarks/cec_gpu.py: CEC 2014 F1, F8, F10 rebuilt from pygmo's ``cec2014`` (the oracle) as array
code for the GPU benchmarks (benchmarks/gpu28_bench.py part c), checked against pygmo, and the fused
objectives of F8 and F10 (the epoch kernels' path) against the array code; skipped without pygmo."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pygmo")

from isles.algorithms.core.cuda_prelude import PRELUDE  # noqa: E402
from isles.problems.cuda_check import compiler, host_objective  # noqa: E402

from benchmarks.cec_gpu import CECRebuilt  # noqa: E402


@pytest.mark.parametrize("fid", [1, 8, 10])
def test_rebuilt_function_gives_pygmos_values(fid):
    """Random points of the box and points near the optimum: pygmo's values to 1e-7 (relative, or
    absolute below 1); the optimum's error is 0."""
    p = CECRebuilt(fid, 10)
    assert p.check(n=100) < 1e-7
    assert p.evaluate_with(np, p.o[None])[0] == pytest.approx(p.f_star, abs=1e-9)


@pytest.mark.skipif(compiler() is None, reason="no C compiler")
@pytest.mark.parametrize("fid", [8, 10])
def test_fused_objective_equals_the_array_code(fid):
    """The fused source (shift baked in, the D of the instance) folds to the array code's values."""
    p = CECRebuilt(fid, 10)
    assert CECRebuilt(1, 10).cuda_objective is None  # a quadratic form is no fold over coordinates
    rng = np.random.default_rng(1)
    X = np.concatenate([rng.uniform(-100, 100, (50, 10)), p.o + rng.normal(0, 1.0, (50, 10))])
    f, _ = host_objective(p, PRELUDE)(X)
    np.testing.assert_allclose(f, p.evaluate_with(np, X), rtol=1e-12, atol=1e-9)
