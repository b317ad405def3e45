"""GPU test modules start with ``cp = cupy_or_skip()``: CuPy and a visible CUDA device, or skip."""

import pytest


def cupy_or_skip():
    """Return the ``cupy`` module, or skip the calling test module (no CuPy or no CUDA device)."""
    cp = pytest.importorskip("cupy")
    try:
        n = cp.cuda.runtime.getDeviceCount()
    except Exception:  # no driver
        n = 0
    if n == 0:
        pytest.skip("no CUDA device visible", allow_module_level=True)
    return cp


def epoch_and_per_generation(plan, s0: dict, n: int = 50, split: int = 30, eblock: int | None = None) -> tuple:
    """``(epoch state, per-generation state)`` of a fused plan with an epoch kernel (DE, FEP, the
    GA) after the same ``n`` generations from ``s0``, in two calls (``split`` + the rest) or one
    (``split >= n``): the epoch tests' two runs. ``eblock``: the epoch kernel's threads per block
    instead of the plan's choice."""
    assert plan is not None and plan.epoch is not None, plan and plan.epoch_reason
    if eblock is not None:
        plan.epoch = type(plan.epoch)(plan, plan.epoch_src, eblock)
    out = []
    for use in (True, False):
        plan.use_epoch = use
        s = plan.run(dict(s0), min(split, n))
        out.append(plan.run(s, n - split) if n > split else s)
    return out[0], out[1]
