"""The first GPU run's kernels compiled in parallel (algorithms/core/precompile.py), on a stand-in
for CuPy's compile step (tests/precompile_stand_in.py): worker processes fill the cache, the run
waits for what they compile and compiles itself what they have not started, a dead worker costs
nothing, and the kernel lists travel between machines. The GPU side is tests/test_precompile_gpu.py."""

from __future__ import annotations

import gzip
import importlib.machinery
import json
import sys
import types
from pathlib import Path

import pytest
from isles.algorithms.core import kernel_lists, precompile

from tests import precompile_stand_in as stand_in

ROOT = Path(__file__).resolve().parents[1]


def _call(source: str) -> dict:
    return {
        "source": source,
        "options": ("-I/x/include", "--std=c++17"),
        "arch": "90",
        "extra_source": None,
        "backend": "nvrtc",
        "enable_cooperative_groups": False,
        "name_expressions": None,
        "log_stream": None,
        "cache_in_memory": False,
        "jitify": False,
        "to_ltoir": False,
    }


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STAND_IN_CACHE", str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the workers import tests.precompile_stand_in
    monkeypatch.chdir(ROOT)
    stand_in.CALLS.clear()
    original = stand_in._compile_with_cache_cuda
    yield tmp_path
    stand_in._compile_with_cache_cuda = getattr(stand_in._compile_with_cache_cuda, "__wrapped__", original)


def _ask(call: dict):
    """The run asking CuPy's step for a kernel, as CuPy calls it: positional source, options and
    arch, which the run leaves ``None`` (the workers are given the device's)."""
    rest = {k: v for k, v in call.items() if k not in ("source", "options", "arch")}
    return stand_in._compile_with_cache_cuda(call["source"], call["options"], None, **rest)


def test_workers_fill_the_cache_and_the_run_waits_for_them(cache, monkeypatch):
    monkeypatch.setenv("STAND_IN_DELAY", "0.2")
    calls = [_call(f"kernel {i}") for i in range(8)]
    pre = precompile.Precompiler(stand_in, calls, workers=3, compiler_module="tests.precompile_stand_in").install()
    results = [_ask(c) for c in calls]  # the run's order of first use
    assert results == [("module", c["source"]) for c in calls]
    assert pre.wait(120)
    assert all((cache / f).is_file() for f in [precompile_file(c) for c in calls])
    own = {s: how for s, how in stand_in.CALLS}
    assert pre.compiled + pre.taken == len(calls) and pre.compiled >= 1
    # what a worker compiled the run only loaded; what the run took off the queue it compiled
    assert sum(how == "compiled" for how in own.values()) == pre.taken
    assert pre.waited == len(calls) - pre.taken


def precompile_file(call: dict) -> str:
    import hashlib  # noqa: PLC0415

    return hashlib.md5(call["source"].encode()).hexdigest()


def test_a_kernel_off_the_list_and_a_failed_one_compile_as_before(cache):
    calls = [_call("listed"), _call("fails here")]
    pre = precompile.Precompiler(stand_in, calls, workers=1, compiler_module="tests.precompile_stand_in").install()
    assert pre.wait(120)
    assert _ask(_call("not listed")) == ("module", "not listed")
    assert _ask(calls[0]) == ("module", "listed")
    with pytest.raises(RuntimeError, match="compile error"):  # the run's own call raises CuPy's error
        _ask(calls[1])


def test_a_worker_that_saves_then_cannot_load_counts_as_compiled(cache):
    calls = [_call("noload kernel")]
    pre = precompile.Precompiler(stand_in, calls, workers=1, compiler_module="tests.precompile_stand_in").install()
    assert pre.wait(120) and pre.compiled == 1
    assert _ask(calls[0]) == ("module", "noload kernel") and stand_in.CALLS == [("noload kernel", "loaded")]


def test_dead_workers_leave_the_run_compiling_by_itself(cache):
    calls = [_call(f"kernel {i}") for i in range(4)]
    pre = precompile.Precompiler(stand_in, calls, workers=2, command=[sys.executable, "-c", "pass"]).install()
    assert [_ask(c) for c in calls] == [("module", c["source"]) for c in calls]  # no wait without end
    assert pre.compiled == 0 and pre.wait(120)


def test_stop_hands_out_nothing_more(cache, monkeypatch):
    monkeypatch.setenv("STAND_IN_DELAY", "0.3")
    calls = [_call(f"kernel {i}") for i in range(6)]
    pre = precompile.Precompiler(stand_in, calls, workers=1, compiler_module="tests.precompile_stand_in").install()
    pre.stop()
    assert pre.wait(120)
    assert [_ask(c) for c in calls] == [("module", c["source"]) for c in calls]
    assert pre.compiled <= 1


def test_end_kills_busy_workers(cache, monkeypatch):
    monkeypatch.setenv("STAND_IN_DELAY", "5")
    pre = precompile.Precompiler(
        stand_in, [_call("slow")], workers=1, compiler_module="tests.precompile_stand_in"
    ).install()
    pre.end()
    assert all(p.poll() is not None for p in pre.procs)


def test_a_cache_that_holds_the_list_is_not_precompiled(tmp_path, monkeypatch):
    lists = tmp_path / "lists.json.gz"
    tmp_path = tmp_path / "cache"
    tmp_path.mkdir()
    assert not precompile.cache_holds(tmp_path / "missing", 1)
    for i in range(3):
        (tmp_path / f"{i}.cubin").write_bytes(b"x")
    assert precompile.cache_holds(tmp_path, 3) and not precompile.cache_holds(tmp_path, 4)
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    assert precompile.cache_dir() == tmp_path
    with gzip.open(lists, "wt") as fh:
        json.dump(kernel_lists.merge({"x": [{"entry": {"source": str(i)}, "s": 0.1} for i in range(3)]}, "0"), fh)
    touched = []

    class Spy(types.ModuleType):
        def __getattr__(self, name):
            touched.append(name)
            raise AttributeError(name)

    spy = Spy("cupy")
    spy.__spec__ = importlib.machinery.ModuleSpec("cupy", None)  # found, as an installed CuPy is
    monkeypatch.setitem(sys.modules, "cupy", spy)
    assert precompile.start("x", lists) is None  # a warm cache: nothing starts, CuPy not asked
    assert touched == []
    (tmp_path / "2.cubin").unlink()
    assert precompile.start("x", lists) is None and touched  # a cold one: CuPy asked (a stand-in here)


def test_a_recorded_kernel_is_replayed_with_this_machines_paths():
    headers = "/* cupy headers */"
    call = {
        **_call("k"),
        "arch": None,
        "options": ("-I/old/site/cupy/_core/include", "-I/usr/cuda/include"),
        "extra_source": headers,
        "name_expressions": ("f<1>",),
    }
    entry = kernel_lists.to_portable(call, {"{cupy_dir}": "/old/site/cupy", "{cuda_path}": "/usr/cuda"}, headers)
    assert entry["options"] == ["-I{cupy_dir}/_core/include", "-I{cuda_path}/include"]
    assert entry["extra_source"] == kernel_lists.HEADERS and "/old" not in json.dumps(entry)
    back = kernel_lists.from_portable(entry, {"{cupy_dir}": "/new/cupy", "{cuda_path}": "/opt/cuda"}, "/* new */")
    assert back["options"] == ("-I/new/cupy/_core/include", "-I/opt/cuda/include")
    assert back["extra_source"] == "/* new */" and back["name_expressions"] == ("f<1>",)
    # another extra source, or an explicit arch, cannot be replayed on another machine
    assert kernel_lists.to_portable({**call, "extra_source": "other"}, {}, headers) is None
    assert kernel_lists.to_portable({**call, "arch": "80"}, {}, headers) is None


def test_merge_keeps_each_kernel_once_in_its_order_of_first_use():
    a, b, c = ({"source": s} for s in "abc")
    lists = kernel_lists.merge(
        {
            "x": [{"entry": a, "s": 0.1}, {"entry": b, "s": 2.0}, {"entry": a, "s": 0.3}],
            "y": [{"entry": c, "s": 0.2}, {"entry": b, "s": 3.0}],
        },
        "14.2.0",
    )
    assert lists["kernels"] == [a, b, c] and lists["seconds"] == [0.3, 3.0, 0.2]
    assert lists["experiments"] == {"x": [0, 1], "y": [2, 1]}
    # slow kernels first, longest first; then the run's order of first use
    assert precompile.order_of([0, 2, 1, 3], [0.1, 3.0, 0.2, 1.5]) == [1, 3, 0, 2]


@pytest.mark.parametrize(
    ("argv", "experiment", "gpu"),
    [
        (["+experiment=cmepso"], "cmepso", True),
        (["++experiment=fep", "device=cpu"], "fep", False),
        (["-m", "+experiment=de_islands", "seed=1,2"], "de_islands", False),
        (["+experiment=cde,fep"], None, True),
        (["+experiment=ga", "ray.address=auto"], "ga", False),
        (["seed=3"], None, True),
    ],
)
def test_the_command_line_says_what_to_precompile(argv, experiment, gpu):
    assert precompile.experiment_of(argv) == experiment
    assert precompile.wants_gpu(argv) is gpu


def test_every_experiment_has_a_kernel_list():
    """benchmarks/record_kernels.py on a GPU machine records a new experiment's list."""
    with gzip.open(kernel_lists.LIST_PATH, "rt") as fh:
        lists = json.load(fh)
    names = {p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml")}
    assert names <= set(lists["experiments"]), sorted(names - set(lists["experiments"]))
    assert all(0 <= i < len(lists["kernels"]) for idx in lists["experiments"].values() for i in idx)


def test_isles_precompile_fills_the_cache_with_every_listed_kernel(cache, tmp_path, monkeypatch):
    """``isles precompile`` (issue 34 §4): every kernel of the lists, in worker processes, into the
    kernel cache; afterwards a run loads each (none compiled), and CuPy's compile step is its own again."""
    lists = tmp_path / "lists.json.gz"
    entries = {
        name: [{"entry": kernel_lists.to_portable({**_call(src), "arch": None}, {}, None), "s": 0.1} for src in sources]
        for name, sources in {"x": ["a", "b"], "y": ["b", "c"], "z": ["d"]}.items()
    }
    with gzip.open(lists, "wt") as fh:
        json.dump(kernel_lists.merge(entries, "0"), fh)
    fake = types.SimpleNamespace(
        __version__="0",
        __file__=str(tmp_path / "cupy" / "__init__.py"),
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=lambda: 1), get_cuda_path=lambda: ""),
    )
    monkeypatch.setattr(stand_in, "_get_arch", lambda: "90", raising=False)
    step = stand_in._compile_with_cache_cuda
    args = {"path": lists, "workers": 2, "cupy": fake, "compiler": stand_in, "compiler_module": stand_in.__name__}
    assert precompile.fill_cache(["x", "y"], **args) == 3
    assert stand_in._compile_with_cache_cuda is step and stand_in.CALLS == []  # the workers compiled
    for src in "abc":
        assert _ask(_call(src)) == ("module", src)
    assert [(src, "loaded") for src in "abc"] == stand_in.CALLS and not stand_in.in_cache(_call("d"))
    with pytest.raises(ValueError, match=r"^precompile w: no kernel list for it; allowed values are x, y, z$"):
        precompile.fill_cache(["w"], **args)
    fake.__version__ = "1"
    with pytest.raises(RuntimeError, match="kernel lists are of CuPy 0 and this is CuPy 1"):
        precompile.fill_cache(None, **args)
