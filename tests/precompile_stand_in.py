"""A stand-in for CuPy's ``cupy.cuda.compiler`` in tests/test_precompile.py: its compile step
"compiles" a kernel by writing a file named by the source into ``$STAND_IN_CACHE`` (after
``$STAND_IN_DELAY`` seconds), or loads it where the file is there already."""

from __future__ import annotations

import hashlib
import os
import time

CALLS: list = []  # (source, "compiled" | "loaded") of this process


def _path(source: str) -> str:
    return os.path.join(os.environ["STAND_IN_CACHE"], hashlib.md5(source.encode()).hexdigest())


def in_cache(call: dict) -> bool:
    return os.path.isfile(_path(call["source"]))


def _compile_with_cache_cuda(
    source,
    options,
    arch,
    extra_source=None,
    backend="nvrtc",
    enable_cooperative_groups=False,
    name_expressions=None,
    log_stream=None,
    cache_in_memory=False,
    jitify=False,
    to_ltoir=False,
):
    path = _path(source)
    if os.path.isfile(path):
        CALLS.append((source, "loaded"))
        return ("module", source)
    if "fails" in source:
        raise RuntimeError("compile error")
    time.sleep(float(os.environ.get("STAND_IN_DELAY", "0")))
    with open(path + ".tmp", "w") as fh:
        fh.write(source)
    os.replace(path + ".tmp", path)
    CALLS.append((source, "compiled"))
    if "noload" in source:  # as CuPy without a CUDA context: saved, then the load fails
        raise RuntimeError("no context")
    return ("module", source)
