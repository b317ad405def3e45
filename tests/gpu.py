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
