"""Array-module selection: NumPy on the CPU, CuPy on a CUDA GPU, with the same code.

Every algorithm and problem in isles is written against an array module ``xp`` that is either
``numpy`` or ``cupy``. This module picks it, moves arrays between host and device, and names the
device for logs.
"""

from __future__ import annotations

import functools
import importlib.abc
import sys

import numpy as np
from array_api_compat import is_cupy_array

DEVICES = ("auto", "cpu", "gpu")


class _NoOptunaForCupyx(importlib.abc.MetaPathFinder):
    """Refuses ``import optuna`` when ``cupyx.optimizing`` asks for it, and only then.

    ``cupyx.optimizing`` (CuPy's kernel tuner, which isles never calls) imports ``optuna`` when it
    is installed (the ``sweep`` extra installs it): 3.7 s of a GPU run's start-up on the H100
    machine (issue 16 §4). It is reached from ``import cupy`` itself (CuPy 13) or later, from the
    first CuPy evaluation through ``array_api_compat``'s CuPy namespace and ``cupyx.scipy.special``
    (CuPy 14). The import raises ``ImportError`` there, which CuPy catches; an ``import optuna``
    from anywhere else (a sweep, the user's code) is untouched."""

    def find_spec(self, name, path=None, target=None):
        """``None`` (let the other finders look) unless ``cupyx.optimizing`` imports Optuna.

        Raises:
            ImportError: ``optuna`` imported from ``cupyx.optimizing``.
        """
        if name != "optuna" and not name.startswith("optuna."):
            return None
        frame = sys._getframe(1)
        while frame is not None:
            if str(frame.f_globals.get("__name__", "")).startswith("cupyx.optimizing"):
                raise ImportError("optuna is not imported for cupyx.optimizing (isles.algorithms.core.backend)")
            frame = frame.f_back
        return None


def import_cupy():
    """Import and return ``cupy``, with :class:`_NoOptunaForCupyx` on ``sys.meta_path`` (installed
    once) so that neither ``import cupy`` nor a later ``cupyx.scipy.special`` imports Optuna. The
    one thing lost: ``cupyx.optimizing.optimize`` says Optuna is not installed.

    Raises:
        ImportError: CuPy is not installed (or fails to import).
    """
    if not any(isinstance(f, _NoOptunaForCupyx) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoOptunaForCupyx())
    import cupy  # noqa: PLC0415

    return cupy


def cupy_or_none():
    """Return the ``cupy`` module (:func:`import_cupy`) when it imports and sees at least one
    GPU, else ``None``."""
    try:
        cupy = import_cupy()

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy
    except Exception:  # ImportError, CUDARuntimeError (no driver), ...
        return None
    return None


def get_xp(device: str = "auto"):
    """Return the array module for ``device``.

    Args:
        device: ``"auto"`` (CuPy when a GPU is visible, else NumPy), ``"cpu"`` (NumPy) or
            ``"gpu"`` (CuPy; a GPU must be visible).

    Raises:
        ValueError: ``device`` is not one of ``auto|cpu|gpu``, or ``gpu`` was asked for where no
            GPU (or no CuPy) is visible.
    """
    if device not in DEVICES:
        raise ValueError(f"device={device!r}: allowed values are {'|'.join(DEVICES)}")
    if device == "cpu":
        return np
    cp = cupy_or_none()
    if device == "gpu" and cp is None:
        raise ValueError(
            "device=gpu: no GPU is visible to this process (CuPy missing or no CUDA device); "
            "allowed values here are auto|cpu"
        )
    return cp if cp is not None else np


def array_module(a):
    """The array module of ``a``: ``cupy`` for a CuPy array, else ``numpy`` (scalars, lists, NumPy
    arrays), without importing CuPy (:func:`array_api_compat.is_cupy_array`). The runtime's and the
    algorithms' one detector. It returns the module itself, not array_api_compat's wrapped namespace
    (:func:`array_api_compat.array_namespace`): the array code calls NumPy's and CuPy's own functions
    and keywords (``argsort(kind="stable")``, ``take_along_axis``, ``cupy.cuda``) and tests ``xp is np``."""
    return sys.modules["cupy"] if is_cupy_array(a) else np


def to_host(a) -> np.ndarray:
    """Copy an array (NumPy or CuPy) or scalar to a NumPy array on the host."""
    if hasattr(a, "get"):
        return a.get()
    return np.asarray(a)


def device_name(xp) -> str:
    """Human-readable device name with the GPU's PCI bus id (unique per physical GPU, also where
    Ray shows each actor its GPU as ``cuda:0``), e.g. ``"NVIDIA H100 80GB HBM3 (cuda:0, PCI
    0000:19:00.0)"``, or ``"cpu"``."""
    if xp is np:
        return "cpu"
    return _gpu_name(xp.cuda.Device().id)


@functools.cache
def _gpu_name(device_id: int) -> str:
    """:func:`device_name` of CUDA device ``device_id`` (cached: the query takes about 1 ms)."""
    import cupy  # noqa: PLC0415

    props = cupy.cuda.runtime.getDeviceProperties(device_id)
    name = props["name"]
    name = name.decode() if isinstance(name, bytes) else name
    return f"{name} (cuda:{device_id}, PCI {cupy.cuda.Device(device_id).pci_bus_id})"


def synchronize(xp) -> None:
    """Wait for all queued device work (no-op on NumPy). Use around timers of GPU code."""
    if xp is not np:
        xp.cuda.get_current_stream().synchronize()


def dtype_of(name: str):
    """NumPy dtype for a config name (``float32`` or ``float64``).

    Raises:
        ValueError: any other name.
    """
    if name not in ("float32", "float64"):
        raise ValueError(f"dtype={name!r}: allowed values are float32|float64")
    return np.dtype(name)


_CONSTANTS: dict = {}
_CONSTANTS_MAX = 512


def device_constant(xp, a):
    """The host constant ``a`` (a NumPy array, e.g. index tables built with ``np.arange``) as a
    **read-only** array of ``xp``: ``a`` itself on NumPy; on CuPy a device copy uploaded once per
    device and content (a small cache of the last ``512``), so that a generation that uses it has
    no host-to-device copy after its first call and can be captured as a CUDA graph
    (:mod:`isles.algorithms.core.plan`). Callers must not write into the result."""
    if xp is np:
        return np.asarray(a)
    a = np.ascontiguousarray(a)
    key = (xp.cuda.Device().id, a.dtype.str, a.shape, a.tobytes())
    hit = _CONSTANTS.get(key)
    if hit is None:
        if len(_CONSTANTS) >= _CONSTANTS_MAX:
            _CONSTANTS.pop(next(iter(_CONSTANTS)))
        hit = _CONSTANTS[key] = xp.asarray(a)
    return hit
