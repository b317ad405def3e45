"""Compile a run's CUDA kernels in parallel while it starts (the first GPU run on a machine).

CuPy compiles every kernel (isles' own CUDA modules, and the elementwise and reduction kernels
that array code generates) with NVRTC the first time it is launched: one after another, in the
thread that launches it, then keeps it in its kernel cache (``~/.cupy/kernel_cache``, or
``CUPY_CACHE_DIR``). With an empty cache the main job compiles about 100 kernels, about 25 s of
NVRTC in line with the run (one H100; ``benchmarks/job_bench.py --cold``).

A **kernel list** is the ordered list of the compilations one run asks CuPy for: the arguments
of CuPy's compile step (source, options, backend, name expressions, ...), with this machine's
install paths and CuPy's own header text written as placeholders, and the seconds each took.
isles ships the lists of its experiments (``kernels.json.gz`` beside this file, made on a GPU
machine by ``python benchmarks/record_kernels.py``). :func:`start` compiles the list of the
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
import gzip
import importlib.util
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

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
    return {**dict(zip(ARGS, args)), **kwargs}


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
        self.command = command or [sys.executable, "-c", WORKER, str(Path(__file__).resolve()), compiler_module]
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
            try:
                proc.stdin.close()
            except OSError:
                pass

    def stop(self) -> None:
        """Hand out nothing more (the run compiles what it still needs itself) and end the workers."""
        with self.lock:
            left, self.pending = self.pending, []
        for i in left:
            self.done[i].set()
        for proc in self.procs:
            try:
                proc.stdin.close()
            except OSError:
                pass

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


def worker(compiler_module: str = "cupy.cuda.compiler") -> None:
    """A worker process of :class:`Precompiler`: reads one compile call a line (JSON) on stdin,
    runs ``compiler_module._compile_with_cache_cuda`` on it (which writes the kernel into the
    cache before it loads it, so a worker needs no CUDA context), answers ``ok`` or ``failed``."""
    import importlib  # noqa: PLC0415

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


def load_lists(path: Path = LIST_PATH) -> dict:
    """The kernel lists file: ``{"cupy": version, "kernels": [entry, ...], "seconds": [...],
    "experiments": {name: [index, ...]}}``; ``{}`` where there is none."""
    if not path.is_file():
        return {}
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


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

WORKER = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='isles_precompile_worker')['worker'](sys.argv[2])"
"""The code a worker process runs (``python -c WORKER PATH_OF_THIS_FILE COMPILER_MODULE``)."""


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

        if lists.get("cupy") != cupy.__version__ or not hasattr(compiler, "_compile_with_cache_cuda"):
            log.debug("precompile: kernel list of CuPy %s, this is %s", lists.get("cupy"), cupy.__version__)
            return None
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
        arch = compiler._get_arch()  # the run's device's; the workers need no device of their own
        paths, headers = machine_paths(cupy), header_source(cupy)
        calls = [
            {**from_portable(lists["kernels"][i], paths, headers), "arch": arch}
            for i in order_of(indices, lists.get("seconds"))
        ]
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
