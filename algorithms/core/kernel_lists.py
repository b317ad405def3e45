"""Kernel lists: the CUDA compilations a run asks CuPy for, written so that another machine can
replay them (:mod:`isles.algorithms.core.precompile` compiles them while a run starts).

A **kernel list** is the ordered list of the compilations one run asks CuPy for: the arguments
of CuPy's compile step ``cupy.cuda.compiler._compile_with_cache_cuda`` (source, options, backend,
name expressions, ...), with this machine's install paths and CuPy's own header text written as
placeholders, and the seconds each took. isles ships the lists of its experiments
(``kernels.json.gz`` beside this file), recorded on a GPU machine by
``python benchmarks/record_kernels.py`` (:class:`Recorder`, :func:`merge`); the GPU tests keep
theirs in ``tests/data/gpu_test_kernels.json.gz``.
"""

from __future__ import annotations

import atexit
import gzip
import json
import os
import time
from pathlib import Path

LIST_PATH = Path(__file__).resolve().parent / "kernels.json.gz"
"""The kernel lists shipped with isles (package data)."""

HEADERS = "{cupy_headers}"
"""Placeholder of CuPy's header text, the ``extra_source`` CuPy adds to the cache key of the
kernels it generates (``cupy._core.core._get_header_source()``)."""

ARGS = (
    "source",
    "options",
    "arch",
    "extra_source",
    "backend",
    "enable_cooperative_groups",
    "name_expressions",
    "log_stream",
    "cache_in_memory",
    "jitify",
    "to_ltoir",
)
"""The parameters of CuPy's compile step ``cupy.cuda.compiler._compile_with_cache_cuda``, in order."""

KEPT = (
    "source",
    "options",
    "extra_source",
    "backend",
    "enable_cooperative_groups",
    "name_expressions",
    "jitify",
    "to_ltoir",
)
"""The parameters that choose the compiled kernel, recorded in a kernel list; ``arch`` (the
device's, when CuPy is not told), ``log_stream`` and ``cache_in_memory`` are not."""


def _bound(args: tuple, kwargs: dict) -> dict:
    """The call's arguments by name (:data:`ARGS`)."""
    return {**dict(zip(ARGS, args, strict=False)), **kwargs}


def _key(call: dict) -> tuple:
    """What identifies one compilation of a kernel list: the :data:`KEPT` arguments, hashable
    (``arch``: the workers are given the device's, which the run's CuPy leaves ``None``)."""
    return tuple(tuple(v) if isinstance(v, list) else v for v in (call.get(k) for k in KEPT))


def placeholders(paths: dict) -> list[tuple[str, str]]:
    """``[(path, placeholder), ...]`` of ``paths`` (``{placeholder: path}``), longest path first,
    so that a path inside another is replaced after it; empty paths are left out."""
    return sorted(((p, k) for k, p in paths.items() if p), key=lambda t: -len(t[0]))


def to_portable(call: dict, paths: dict, headers: str | None) -> dict | None:
    """One compilation as a kernel list records it: the :data:`KEPT` arguments with this
    machine's paths (``paths``, :func:`machine_paths`) in the options as placeholders and
    CuPy's header text as :data:`HEADERS`; ``None`` for a call that cannot be replayed elsewhere
    (another ``extra_source``, an explicit ``arch``)."""
    if call.get("arch") is not None:
        return None
    extra = call.get("extra_source")
    if extra is not None and extra != headers:
        return None
    subs = placeholders(paths)

    def portable(text: str) -> str:
        for path, name in subs:
            text = text.replace(path, name)
        return text

    names = call.get("name_expressions")
    return {
        "source": call["source"],
        "options": [portable(o) for o in call.get("options") or ()],
        "extra_source": None if extra is None else HEADERS,
        "backend": call.get("backend", "nvrtc"),
        "enable_cooperative_groups": bool(call.get("enable_cooperative_groups", False)),
        "name_expressions": None if names is None else list(names),
        "jitify": bool(call.get("jitify", False)),
        "to_ltoir": bool(call.get("to_ltoir", False)),
    }


def from_portable(entry: dict, paths: dict, headers: str | None) -> dict:
    """The compile step's arguments of a recorded kernel (:func:`to_portable`) on this machine."""
    options = []
    for o in entry["options"]:
        for name, path in paths.items():
            o = o.replace(name, path or "")
        options.append(o)
    names = entry.get("name_expressions")
    return {
        "source": entry["source"],
        "options": tuple(options),
        "arch": None,
        "extra_source": headers if entry.get("extra_source") == HEADERS else None,
        "backend": entry.get("backend", "nvrtc"),
        "enable_cooperative_groups": entry.get("enable_cooperative_groups", False),
        "name_expressions": None if names is None else tuple(names),
        "log_stream": None,
        "cache_in_memory": False,
        "jitify": entry.get("jitify", False),
        "to_ltoir": entry.get("to_ltoir", False),
    }


def machine_paths(cupy) -> dict:
    """``{placeholder: path}`` of the install paths that CuPy writes into compile options:
    CuPy's package folder and its CUDA path."""
    try:
        cuda = cupy.cuda.get_cuda_path() or ""
    except Exception:  # noqa: BLE001
        cuda = ""
    return {"{cupy_dir}": os.path.dirname(os.path.abspath(cupy.__file__)), "{cuda_path}": cuda}


def header_source(cupy) -> str | None:
    """CuPy's header text (the ``extra_source`` of its generated kernels), or ``None`` where this
    CuPy does not expose it."""
    try:
        return cupy._core.core._get_header_source()
    except Exception:  # noqa: BLE001
        return None


def load_lists(path: Path = LIST_PATH) -> dict:
    """The kernel lists file: ``{"cupy": version, "kernels": [entry, ...], "seconds": [...],
    "experiments": {name: [index, ...]}}``; ``{}`` where there is none."""
    if not path.is_file():
        return {}
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


class Recorder:
    """Records every call of CuPy's compile step in this process (for
    ``benchmarks/record_kernels.py``): :meth:`install` wraps it, :attr:`calls` holds
    ``(portable entry, seconds)`` in call order, calls that cannot be replayed left out."""

    def __init__(self, compiler, paths: dict, headers: str | None):
        self.compiler, self.paths, self.headers = compiler, paths, headers
        self.original = compiler._compile_with_cache_cuda
        self.calls: list[tuple[dict, float]] = []

    def install(self) -> Recorder:
        """Wrap the compile step; returns ``self``."""
        original = self.original

        def compile_step(*args, **kwargs):
            t0 = time.perf_counter()
            result = original(*args, **kwargs)
            entry = to_portable(_bound(args, kwargs), self.paths, self.headers)
            if entry is not None:
                self.calls.append((entry, time.perf_counter() - t0))
            return result

        self.compiler._compile_with_cache_cuda = compile_step
        return self

    def save(self, path: str) -> None:
        """Write the recorded calls as JSON: ``[{"entry": ..., "s": seconds}, ...]``."""
        with open(path, "w", encoding="utf-8") as fh:
            json.dump([{"entry": e, "s": s} for e, s in self.calls], fh)


def record_to(path: str) -> Recorder | None:
    """Record this process' compilations into ``path`` at exit (``ISLES_RECORD_KERNELS=path``);
    ``None`` without CuPy."""

    try:
        import cupy  # noqa: PLC0415
        from cupy.cuda import compiler  # noqa: PLC0415
    except ImportError:
        return None
    rec = Recorder(compiler, machine_paths(cupy), header_source(cupy)).install()
    atexit.register(rec.save, path)
    return rec


def merge(records: dict, cupy_version: str) -> dict:
    """One kernel lists file from recorded runs ``{experiment: [{"entry", "s"}, ...]}``: each
    distinct kernel once (``kernels``, with its longest recorded compile time in ``seconds``),
    and each experiment's kernels as indices in its order of first use."""
    kernels, seconds, index, experiments = [], [], {}, {}
    for name, calls in records.items():
        order = []
        for call in calls:
            key = json.dumps(call["entry"], sort_keys=True)
            if key not in index:
                index[key] = len(kernels)
                kernels.append(call["entry"])
                seconds.append(0.0)
            i = index[key]
            seconds[i] = max(seconds[i], round(float(call["s"]), 4))
            if i not in order:
                order.append(i)
        experiments[name] = order
    return {"cupy": cupy_version, "kernels": kernels, "seconds": seconds, "experiments": experiments}
