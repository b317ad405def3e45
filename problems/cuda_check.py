"""Host harness of the fused-objective contract: compile a problem's ``cuda_objective`` as C.

The contract (:class:`isles.problems.base.Problem`) makes every fused objective valid C under
``-DISLES_HOST_EMU``. :func:`host_objective` compiles ``prelude + problem.cuda_objective + a C
evaluation loop`` with ``cc -DISLES_HOST_EMU -DIS_F32=0|1 -O2 -ffp-contract=off -shared -fPIC``
(:func:`compile_c`, the one compiler invocation of every host emulation),
loads it with :mod:`ctypes` and evaluates rows serially, the way a kernel does: ``obj_init``;
thread ``t`` of ``n_threads`` folds ``j = t, t + n_threads, ...`` (``obj_term``, or ``obj_unit``
over ``u``) into its own accumulators; the threads' accumulators are merged in thread order with
``obj_merge``; then ``obj_final`` and ``obj_violation``. Used by ``tests/test_fused_objective.py``
to check each source against ``problem.objective`` without a GPU.

``problems`` imports nothing from ``algorithms``: the caller passes the prelude (``PRELUDE``
of ``algorithms/core/cuda_prelude.py``: ``objective.cuh`` of the CUDA library, or ``HASH +
ARITHMETIC + MATH``, the same text).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np
from isles.problems.base import objective_macros

__all__ = ["HostObjective", "host_objective", "compiler", "compile_c", "cache_dir", "pack_bits_le"]

_HARNESS = r"""
#ifndef OBJ_NEXT
#define OBJ_NEXT 0
#endif
#ifndef OBJ_HAS_V
#define OBJ_HAS_V 0
#endif
#if ISLES_BITS
void isles_eval(const unsigned int* W, long rows, int n_words, int n, int n_threads, T* f, T* v) {
    for (long r = 0; r < rows; ++r) {
        const unsigned int* row = W + r * (long)n_words;
        const int units = obj_units(n);
        T acc[OBJ_NACC];
        obj_init(acc);
        for (int t = 0; t < n_threads; ++t) {
            T a[OBJ_NACC];
            obj_init(a);
            for (int u = t; u < units; u += n_threads) obj_unit(a, row, u, n);
            obj_merge(acc, a);
        }
        f[r] = obj_final(acc, n);
#if OBJ_HAS_V
        v[r] = obj_violation(acc, n);
#else
        v[r] = (T)0;
#endif
    }
}
#else
void isles_eval(const T* X, long rows, int n_words, int n, int n_threads, T* f, T* v) {
    (void)n_words;
    for (long r = 0; r < rows; ++r) {
        const T* x = X + r * (long)n;
        T acc[OBJ_NACC];
        obj_init(acc);
        for (int t = 0; t < n_threads; ++t) {
            T a[OBJ_NACC];
            obj_init(a);
            for (int j = t; j < n; j += n_threads) {
                const T xn = (OBJ_NEXT && j + 1 < n) ? x[j + 1] : (T)0;
                obj_term(a, x[j], xn, j);
            }
            obj_merge(acc, a);
        }
        f[r] = obj_final(acc, n);
#if OBJ_HAS_V
        v[r] = obj_violation(acc, n);
#else
        v[r] = (T)0;
#endif
    }
}
#endif
"""

_CACHE: dict = {}


#: the flags of every host emulation: float contraction off, so ``a * b + c`` rounds twice as
#: NumPy does (GCC contracts it into an FMA by default), whatever the compiler
HOST_FLAGS = ("-O2", "-ffp-contract=off", "-shared", "-fPIC")


def compiler() -> str | None:
    """The C compiler of every host emulation (``$CC``, ``cc``, ``gcc`` or ``clang``, the first on
    ``PATH``), or ``None``."""
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return cc
    return None


def cache_dir() -> str | None:
    """The on-disk cache of compiled host libraries: ``$ISLES_HOST_CACHE`` (``off`` or empty: no
    disk cache), else ``$XDG_CACHE_HOME/isles/host``, else ``~/.cache/isles/host``."""
    env = os.environ.get("ISLES_HOST_CACHE")
    if env is not None:
        return None if env.strip().lower() in ("", "0", "off", "none", "false") else os.path.expanduser(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "isles", "host")


@functools.lru_cache(maxsize=8)
def _compiler_id(cc: str) -> str:
    """``cc``'s resolved path and the first line of ``cc --version`` (part of the cache key: a
    changed compiler compiles again)."""
    path = os.path.realpath(shutil.which(cc) or cc)
    try:
        res = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
        version = (res.stdout or res.stderr).splitlines()[0] if (res.stdout or res.stderr) else ""
    except (OSError, subprocess.SubprocessError):
        version = ""
    return f"{path}\0{version}"


def _build(cmd_head: list, source: str, so_path: str) -> None:
    """Compile ``source`` into ``so_path`` with ``cmd_head + [c file, -o, so_path, -lm]``.

    Raises:
        RuntimeError: the compilation failed (the command and its messages)."""
    d = tempfile.mkdtemp(prefix="isles_host_")
    try:
        c_path = os.path.join(d, "unit.c")
        with open(c_path, "w") as fh:
            fh.write(source)
        cmd = [*cmd_head, c_path, "-o", so_path, "-lm"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"host emulation: {' '.join(cmd)} failed:\n{res.stderr[-4000:]}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def compile_c(source: str, flags: tuple = ()) -> ctypes.CDLL:
    """Compile C ``source`` with :func:`compiler`, :data:`HOST_FLAGS` and ``flags`` into a shared
    library and load it. The one compiler invocation of the host emulations and of the host
    builds that are the CPU path (``isles.algorithms.core.host_build``): problems' objectives
    (:func:`host_objective`), the families' epoch kernels, CDE's pair kernel.

    Cached twice: for the process (by source and flags), and on disk in :func:`cache_dir` as
    ``<sha256 of compiler, its version, flags and source>.so``, so that a process (a Ray actor, a
    test, a benchmark) loads a library another one compiled instead of compiling it again (about
    1 s). A library is compiled under a temporary name in the cache folder and renamed into place
    (atomic on one file system), so processes that compile the same one at once never read a
    partial file; a folder that cannot be written compiles into a temporary folder.

    Raises:
        RuntimeError: no C compiler, or the compilation failed (the command and its messages).
    """
    key = hashlib.sha256("\0".join((*flags, source)).encode()).hexdigest()
    lib = _CACHE.get(key)
    if lib is not None:
        return lib
    cc = compiler()
    if cc is None:
        raise RuntimeError("host emulation needs a C compiler ($CC, cc, gcc or clang on PATH)")
    head = [cc, *HOST_FLAGS, *flags]
    folder = cache_dir()
    lib = None
    if folder is not None:
        name = hashlib.sha256("\0".join((_compiler_id(cc), *HOST_FLAGS, *flags, source)).encode()).hexdigest()
        so_path = os.path.join(folder, f"{name}.so")
        try:
            if not os.path.exists(so_path):
                os.makedirs(folder, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=f".{name[:16]}-", suffix=".so", dir=folder)
                os.close(fd)
                try:
                    _build(head, source, tmp)
                    os.replace(tmp, so_path)  # atomic: a reader sees no file or the whole library
                finally:
                    if os.path.exists(tmp):
                        os.unlink(tmp)
            lib = ctypes.CDLL(so_path)
        except OSError:  # a cache folder that cannot be written or read: compile in a temporary folder
            lib = None
    if lib is None:
        d = tempfile.mkdtemp(prefix="isles_host_")
        try:
            so_path = os.path.join(d, "unit.so")
            _build(head, source, so_path)
            lib = ctypes.CDLL(so_path)
        finally:
            shutil.rmtree(d, ignore_errors=True)  # the loaded library outlives its file
    _CACHE[key] = lib
    return lib


def pack_bits_le(B) -> np.ndarray:
    """Pack unpacked bits ``B (rows, L)`` (0/1) into ``(rows, ceil(L/32))`` uint32 words, bit ``b``
    at bit ``b & 31`` of word ``b >> 5`` (the GA's layout), padding bits 0."""
    B = np.ascontiguousarray(np.asarray(B, dtype=np.uint8))
    rows, L = B.shape
    W = (L + 31) // 32
    pad = np.zeros((rows, W * 32), dtype=np.uint8)
    pad[:, :L] = B
    return np.packbits(pad, axis=-1, bitorder="little").view("<u4").astype(np.uint32).reshape(rows, W)


class HostObjective:
    """A problem's fused objective compiled for the host (:func:`host_objective`).

    Attributes:
        source: the full C translation unit; dtype: float32 or float64; genome: real or bits.
    """

    def __init__(self, lib, source: str, dtype, genome: str, n: int):
        self._lib, self.source, self.dtype, self.genome, self.n = lib, source, np.dtype(dtype), genome, n

    def __call__(self, X, n_threads: int = 1):
        """``(f, v)`` of shape ``(rows,)`` in ``dtype`` for ``X (rows, n)``: float rows (real) or
        unpacked 0/1 bits (bits), evaluated with ``n_threads`` emulated threads.

        Raises:
            ValueError: ``X`` is not 2-d with ``n`` columns, or ``n_threads < 1``.
        """
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.n:
            raise ValueError(f"host objective: X has shape {X.shape}, expected (rows, {self.n})")
        if n_threads < 1:
            raise ValueError(f"host objective: n_threads={n_threads} must be >= 1")
        rows = X.shape[0]
        data = pack_bits_le(X) if self.genome == "bits" else np.ascontiguousarray(X, dtype=self.dtype)
        f = np.empty(rows, dtype=self.dtype)
        v = np.empty(rows, dtype=self.dtype)
        self._lib.isles_eval(
            data.ctypes.data_as(ctypes.c_void_p),
            ctypes.c_long(rows),
            ctypes.c_int(data.shape[1]),
            ctypes.c_int(self.n),
            ctypes.c_int(int(n_threads)),
            f.ctypes.data_as(ctypes.c_void_p),
            v.ctypes.data_as(ctypes.c_void_p),
        )
        return f, v


def host_objective(problem, prelude: str, dtype=np.float64) -> HostObjective:
    """Compile ``prelude + problem.cuda_objective + harness`` with gcc and load it (cached).

    Args:
        problem: a :class:`isles.problems.base.Problem` whose ``cuda_objective`` is not ``None``.
        prelude: ``PRELUDE`` (or ``HASH + ARITHMETIC + MATH``) of ``algorithms/core/cuda_prelude.py``.
        dtype: float32 (``IS_F32=1``) or float64.

    Returns:
        A :class:`HostObjective`.

    Raises:
        ValueError: no ``cuda_objective``, bad macros (:func:`isles.problems.base.objective_macros`) or
            an unsupported dtype.
        RuntimeError: no C compiler, or the compilation failed (the message holds the compiler's output).
    """
    src = getattr(problem, "cuda_objective", None)
    if src is None:
        raise ValueError(f"{problem.name}: no cuda_objective")
    genome = getattr(problem, "genome", "real")
    objective_macros(src, genome)
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"host objective: dtype {dtype} (allowed: float32|float64)")
    is_f32 = int(dtype == np.float32)
    n = int(problem.n_bits if genome == "bits" else problem.dim)
    unit = f"#define ISLES_BITS {int(genome == 'bits')}\n" + prelude + "\n" + src + "\n" + _HARNESS
    lib = compile_c(unit, ("-DISLES_HOST_EMU", f"-DIS_F32={is_f32}", "-Wall", "-Wno-unused-function"))
    lib.isles_eval.restype = None
    return HostObjective(lib, unit, dtype, genome, n)
