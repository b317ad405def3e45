"""Compile a run's CUDA kernels in parallel while it starts (the first GPU run on a machine).

CuPy compiles every kernel (isles' own CUDA modules, and the elementwise and reduction kernels
that array code generates) with NVRTC the first time it is launched: one after another, in the
thread that launches it, then keeps it in its kernel cache (``~/.cupy/kernel_cache``, or
``CUPY_CACHE_DIR``). With an empty cache the main job compiles about 100 kernels, about 25 s of
NVRTC in line with the run (one H100; ``benchmarks/job_bench.py --cold``).

isles ships the experiments' kernel lists (:mod:`isles.algorithms.core.kernel_lists`).
:func:`start` compiles the list of the
experiment being started in worker processes (:class:`Precompiler`), the slowest kernels first,
while the run composes its config, builds its problem and starts Ray and MLflow; CuPy's compile
step is wrapped so that a kernel the run asks for while a worker compiles it waits for that
worker rather than compiling it twice, and then loads it from the cache. The result of a run is
the same either way: CuPy compiles the same source with the same options.

Everything here is an optimisation. A list made with another CuPy version, a CuPy without the
compile step this wraps, no GPU, ``device=cpu``, or a failure of any kind leaves CuPy compiling
as before (the failure is logged at DEBUG level). ``ISLES_PRECOMPILE=0`` turns it off;
``ISLES_PRECOMPILE_STATS=1`` prints what the workers did when the run ends.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from isles.algorithms.core.kernel_lists import (
    LIST_PATH,
    _bound,
    _key,
    from_portable,
    header_source,
    load_lists,
    machine_paths,
)

log = logging.getLogger(__name__)


class Precompiler:
    """Worker processes compiling a kernel list into CuPy's kernel cache, and the wrapper of
    CuPy's compile step in this process that lets the run wait for a kernel a worker compiles.

    NVRTC compiles little in parallel within one process (15 threads took the main job's cold
    start on one H100 machine only from 27.7 to 21.2 s), so
    the kernels are compiled by ``workers`` processes (:func:`worker`), each fed one kernel at a
    time from one queue (the longest first, then in the run's order of first use); a worker
    writes the kernel into the cache shared by every process of the machine (the same
    ``CUPY_CACHE_DIR``). When the run asks for a kernel of the list: compiled, or being compiled
    by a worker, it waits for that worker and then loads the kernel from the cache (CuPy's own
    step, which finds the file); not yet handed to a worker, it takes the kernel off the queue
    and compiles it itself.

    Args:
        compiler: the module whose ``_compile_with_cache_cuda`` is wrapped (CuPy's
            ``cupy.cuda.compiler``, or a stand-in in tests).
        calls: the compile step's arguments of each kernel (:func:`from_portable`), in the order
            to compile them.
        workers: number of worker processes (>= 1).
        command: the worker's command line (default: :data:`WORKER` run by this Python, compiling
            through ``compiler_module``).
        compiler_module: the module the workers compile through (their ``compiler``).
    """

    def __init__(
        self,
        compiler,
        calls: list[dict],
        workers: int,
        command: list[str] | None = None,
        compiler_module: str = "cupy.cuda.compiler",
    ):

        self.compiler = compiler
        self.original = compiler._compile_with_cache_cuda
        self.calls = calls
        self.lock = threading.Lock()
        self.pending: list[int] = list(range(len(calls)))  # not yet handed to a worker
        self.done = [threading.Event() for _ in calls]
        self.index = {}
        for i, call in enumerate(calls):
            self.index.setdefault(_key(call), i)
        # -c, not the file as a script: a script's folder goes first on sys.path, and this one
        # holds random.py
        self.command = command or [sys.executable, "-c", WORKER, str(WORKER_FILE), compiler_module]
        self.n_workers = max(1, int(workers))
        self.procs: list = []
        self.compiled = 0  # kernels the workers compiled
        self.waited = 0  # kernels the run waited for (then loaded from the cache)
        self.taken = 0  # kernels the run took off the queue and compiled itself

    def install(self) -> Precompiler:
        """Wrap the compile step and start the workers; returns ``self``."""

        original = self.original

        def compile_step(*args, **kwargs):
            i = self.index.get(_key(_bound(args, kwargs)))
            if i is not None:
                with self.lock:
                    mine = i in self.pending
                    if mine:
                        self.pending.remove(i)
                if mine:
                    self.taken += 1
                else:  # a worker has it; one that hangs is not waited for beyond WAIT_S
                    self.done[i].wait(WAIT_S)
                    self.waited += 1
            return original(*args, **kwargs)

        compile_step.__wrapped__ = original
        self.compiler._compile_with_cache_cuda = compile_step
        for _ in range(min(self.n_workers, len(self.calls))):
            proc = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                bufsize=1,
            )
            self.procs.append(proc)
            threading.Thread(target=self._feed, args=(proc,), name="isles-precompile", daemon=True).start()
        return self

    def _next(self) -> int | None:
        with self.lock:
            return self.pending.pop(0) if self.pending else None

    def _feed(self, proc) -> None:
        """Hand ``proc`` one kernel at a time until the queue is empty, then end it."""
        i = None
        try:
            while (i := self._next()) is not None:
                call = {k: v for k, v in self.calls[i].items() if k not in ("log_stream",)}
                proc.stdin.write(json.dumps(call) + "\n")
                proc.stdin.flush()
                answer = proc.stdout.readline()
                if answer.strip() == "ok":
                    self.compiled += 1
                self.done[i].set()
                if not answer:  # the worker died: the run compiles what is left itself
                    break
                i = None
        except Exception as err:  # noqa: BLE001  (a broken pipe, a worker gone: the run compiles the rest)
            log.debug("precompile: a worker failed (%s)", err)
        finally:
            if i is not None:
                self.done[i].set()
            with contextlib.suppress(OSError):
                proc.stdin.close()

    def stop(self) -> None:
        """Hand out nothing more (the run compiles what it still needs itself) and end the workers."""
        with self.lock:
            left, self.pending = self.pending, []
        for i in left:
            self.done[i].set()
        for proc in self.procs:
            with contextlib.suppress(OSError):
                proc.stdin.close()

    def end(self) -> None:
        """Stop (:meth:`stop`) and end the workers now (at the run's exit: a worker killed while
        it compiles leaves at most a temporary file in the cache, which CuPy ignores)."""
        self.stop()
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            try:
                proc.wait(5)
                proc.stdout.close()
            except Exception:  # noqa: BLE001, S110  (at exit)
                pass

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the workers to end; whether all did within ``timeout`` seconds."""

        end = None if timeout is None else time.monotonic() + timeout
        for proc in self.procs:
            try:
                proc.wait(None if end is None else max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                return False
        return True


def experiment_of(argv: list[str]) -> str | None:
    """The experiment a command line starts (``+experiment=NAME``, ``experiment=NAME``,
    ``++experiment=NAME``), or ``None`` (none, or a sweep over several)."""
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key.lstrip("+") == "experiment" and value and "," not in value:
            return value
    return None


def wants_gpu(argv: list[str]) -> bool:
    """Whether a command line may use a GPU in this process: not ``device=cpu``, not a multirun
    (its jobs start apart), not a run on a cluster (``ray.address``)."""
    for arg in argv:
        key, _, value = arg.partition("=")
        key = key.lstrip("+")
        if (key == "device" and value == "cpu") or key == "ray.address" and value not in ("", "null"):
            return False
    return not any(a in ("-m", "--multirun") for a in argv)


WAIT_S = 120.0
"""The longest the run waits for a kernel a worker compiles before it compiles it itself (the
slowest kernel recorded took 3.3 s)."""

WORKER_FILE = Path(__file__).resolve().parent / "precompile_worker.py"
"""The worker's file (:mod:`isles.algorithms.core.precompile_worker`)."""

WORKER = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='isles_precompile_worker')['worker'](sys.argv[2])"
"""The code a worker process runs (``python -c WORKER PATH COMPILER_MODULE``, PATH the file of
:mod:`isles.algorithms.core.precompile_worker`)."""


def order_of(indices: list[int], seconds: list | None, slow: float = 1.0) -> list[int]:
    """The order the workers take an experiment's kernels ``indices`` (in its order of first
    use) in: those that took ``slow`` seconds or more when recorded first, longest first (they
    would end last), then the others in the order of first use."""
    seconds = seconds or []
    t = {i: seconds[i] if i < len(seconds) else 0.0 for i in indices}
    return sorted((i for i in indices if t[i] >= slow), key=lambda i: -t[i]) + [i for i in indices if t[i] < slow]


def pool_size() -> int:
    """Worker processes: the CPUs this process may use, less one for the run, 1 to 12."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover  (macOS)
        cpus = os.cpu_count() or 2
    return max(1, min(12, cpus - 1))


def cache_dir() -> Path:
    """CuPy's kernel cache folder: ``CUPY_CACHE_DIR``, else ``~/.cupy/kernel_cache``."""
    return Path(os.environ.get("CUPY_CACHE_DIR") or Path.home() / ".cupy" / "kernel_cache")


def cache_holds(folder: Path, n: int) -> bool:
    """Whether CuPy's kernel cache ``folder`` holds ``n`` kernels or more (a machine that has
    run isles on its GPU before). Then nothing is precompiled: the workers would only load what
    is there, and a run that waits for them is slower than one that loads the kernels itself
    (one H100: the main job's warm start 4.1 s, 7.8 s with workers). A cache of other kernels
    that happens to be as large leaves the run compiling in line, as CuPy does."""
    try:
        with os.scandir(folder) as entries:
            count = 0
            for entry in entries:
                count += entry.is_file()
                if count >= n:
                    return True
    except OSError:
        pass
    return False


def start(experiment: str | None, path: Path = LIST_PATH) -> Precompiler | None:
    """Compile the kernel list of ``experiment`` in worker processes (:class:`Precompiler`) for
    the current CUDA device; ``None`` (nothing started) where there is no list for it, CuPy's
    kernel cache holds as many kernels already (:func:`cache_holds`), no GPU, another CuPy
    version, or ``ISLES_PRECOMPILE=0``. The workers are ended when this process exits.
    Never raises."""
    if not experiment or os.environ.get("ISLES_PRECOMPILE", "1") == "0":
        return None
    try:
        if importlib.util.find_spec("cupy") is None:  # a machine without CuPy reads no list
            return None
        lists = load_lists(path)
        indices = lists.get("experiments", {}).get(experiment)
        if not indices or cache_holds(cache_dir(), len(indices)):
            return None
        import cupy  # noqa: PLC0415
        from cupy.cuda import compiler  # noqa: PLC0415

        calls = compile_calls(lists, indices, cupy, compiler)
        if calls is None:
            return None
        pre = Precompiler(compiler, calls, pool_size()).install()
        atexit.register(pre.end)
        if os.environ.get("ISLES_PRECOMPILE_STATS"):  # benchmarks: what the workers did, at exit
            atexit.register(
                lambda: print(
                    f"isles: precompile {experiment}: {len(calls)} kernels listed, "
                    f"{pre.compiled} compiled by {len(pre.procs)} workers, the run "
                    f"waited for {pre.waited} and compiled {pre.taken} itself",
                    file=sys.stderr,
                    flush=True,
                )
            )
        return pre
    except Exception as err:  # noqa: BLE001  (an optimisation: CuPy compiles as before)
        log.debug("precompile: not started (%s)", err)
        return None


def compile_calls(lists: dict, indices: list[int], cupy, compiler) -> list[dict] | None:
    """The compile step's arguments of the kernels ``indices`` of ``lists`` (:func:`load_lists`) on
    this machine (its install paths, CuPy's headers, the current device's architecture: the
    workers need no device of their own), in the order to compile them (:func:`order_of`);
    ``None`` where the lists were recorded with another CuPy, this CuPy has no compile step to
    wrap, or there is no GPU."""
    if lists.get("cupy") != cupy.__version__ or not hasattr(compiler, "_compile_with_cache_cuda"):
        log.debug("precompile: kernel list of CuPy %s, this is %s", lists.get("cupy"), cupy.__version__)
        return None
    if cupy.cuda.runtime.getDeviceCount() < 1:
        return None
    arch = compiler._get_arch()
    paths, headers = machine_paths(cupy), header_source(cupy)
    return [
        {**from_portable(lists["kernels"][i], paths, headers), "arch": arch}
        for i in order_of(indices, lists.get("seconds"))
    ]


def fill_cache(
    experiments: list[str] | None = None,
    path: Path = LIST_PATH,
    workers: int | None = None,
    cupy=None,
    compiler=None,
    compiler_module: str = "cupy.cuda.compiler",
) -> int:
    """Compile every kernel of the shipped lists (of ``experiments``, default all) into CuPy's
    kernel cache for this machine's GPU, in ``workers`` processes (default :func:`pool_size`),
    and wait for them: ``isles precompile``, run once after installing isles (or in a container's
    build), so that no run on this machine compiles a kernel of the lists, its first included
    (issue 34 §4: 7-8.7 s whole for the first run of each experiment on a fresh H200). A kernel
    already cached is loaded, not compiled again.

    Args:
        experiments: names of experiments (``conf/experiment/``) whose lists to compile.
        path: the kernel lists file.
        workers: worker processes.
        cupy, compiler, compiler_module: CuPy, its ``cupy.cuda.compiler`` and that module's name
            (stand-ins in tests).

    Returns:
        how many kernels the workers compiled or found in the cache.

    Raises:
        ValueError: one line naming an experiment without a list, and those with one.
        RuntimeError: one line: no CuPy, no GPU, or lists recorded with another CuPy version.
    """
    lists = load_lists(path)
    known = lists.get("experiments", {})
    for name in experiments or ():
        if name not in known:
            raise ValueError(f"precompile {name}: no kernel list for it; allowed values are {', '.join(sorted(known))}")
    indices = list(dict.fromkeys(i for name in experiments or sorted(known) for i in known[name]))
    if cupy is None:
        try:
            import cupy  # noqa: PLC0415
            from cupy.cuda import compiler  # noqa: PLC0415
        except ImportError as err:
            raise RuntimeError(f"precompile: CuPy cannot be imported ({err}); install it for your CUDA") from None
    calls = compile_calls(lists, indices, cupy, compiler) if indices else []
    if calls is None:
        raise RuntimeError(
            f"precompile: no GPU here, or the kernel lists are of CuPy {lists.get('cupy')} and this is "
            f"CuPy {cupy.__version__} (benchmarks/record_kernels.py records them again)"
        )
    pre = Precompiler(compiler, calls, workers or pool_size(), compiler_module=compiler_module).install()
    try:
        pre.wait()
    finally:
        pre.end()
        compiler._compile_with_cache_cuda = pre.original
    return pre.compiled


def start_in_background(argv: list[str]) -> threading.Thread | None:
    """Start :func:`start` for the experiment of the command line ``argv`` in a thread of its
    own (importing CuPy takes a second, which the run's own start-up overlaps); ``None`` where
    the command line names no experiment or cannot use a GPU here (:func:`wants_gpu`)."""
    experiment = experiment_of(argv)
    if experiment is None or not wants_gpu(argv):
        return None
    t = threading.Thread(target=start, args=(experiment,), name="isles-precompile", daemon=True)
    t.start()
    return t
