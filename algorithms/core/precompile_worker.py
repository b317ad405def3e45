"""A worker process of :class:`isles.algorithms.core.precompile.Precompiler`, run as
``python -c WORKER PATH_OF_THIS_FILE COMPILER_MODULE`` (:data:`~isles.algorithms.core.precompile.WORKER`):
the standard library only, so that it starts fast and needs no isles on its path.
"""

from __future__ import annotations

import importlib
import json
import sys


def worker(compiler_module: str = "cupy.cuda.compiler") -> None:
    """A worker process of :class:`~isles.algorithms.core.precompile.Precompiler`: reads one compile call a line (JSON) on stdin,
    runs ``compiler_module._compile_with_cache_cuda`` on it (which writes the kernel into the
    cache before it loads it, so a worker needs no CUDA context), answers ``ok`` or ``failed``."""
    compiler = importlib.import_module(compiler_module)
    for line in sys.stdin:
        call = json.loads(line)
        call["options"] = tuple(call["options"])
        if call.get("name_expressions") is not None:
            call["name_expressions"] = tuple(call["name_expressions"])
        try:
            compiler._compile_with_cache_cuda(**call)
            answer = "ok"
        except Exception:  # noqa: BLE001  (a module load without a context, after the cache file is written)
            answer = "ok" if compiled_in_cache(compiler, call) else "failed"
        sys.stdout.write(answer + "\n")
        sys.stdout.flush()


def compiled_in_cache(compiler, call: dict) -> bool:
    """Whether the kernel of ``call`` is in the cache (a stand-in compiler may say so with its
    own ``in_cache(call)``; CuPy's step is assumed to have saved it where it got to the load)."""
    check = getattr(compiler, "in_cache", None)
    return bool(check(call)) if check is not None else True
