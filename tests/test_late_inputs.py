"""Unclear or late inputs (issue 34 §2): each is one line before Ray starts (exit status 2), or a
warning, or the command as the user typed it.

* a mixed run (``groups``) refuses ``islands.n`` and ``algorithm`` overrides, which its groups
  replace, and takes ``groups=[...]`` over the experiment's mapping (Hydra's merge refused it);
* an ``algorithm.X`` the chosen family does not take names the family's keys and who takes X;
* ``isles show`` refuses a ``best_solution.json`` whose fields are not what isles writes;
* constraints that are NaN everywhere get a warning, as an objective that is;
* the printed resume command starts as the run was started;
* a Hydra plug-in whose extra is missing (``hparams_search=de_optuna`` without ``isles[sweep]``)
  names the extra to install.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from isles.app import interrupts, job, overrides
from isles.app.overrides import launch_command, preprocess
from isles.app.sweeper import check_plugin_extras
from isles.app.tracking import run_source
from isles.islands.config.build import build_algorithm
from isles.islands.results import RunResult

from isles.show import main as show_main
from tests.helpers import make_cfg

ROOT = Path(__file__).resolve().parents[1]
QUICK = ["device=cpu", "logger=none", "progress=false", "generations=2"]
MIXED = ["+experiment=mixed_islands", "problem.dim=4", *QUICK]


def run_cli(*args, cwd=ROOT, prefix=(), timeout=180):
    """``python run.py ARGS`` (``prefix``: Python's own arguments before the script)."""
    cmd = [sys.executable, *prefix, str(ROOT / "run.py"), *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def one_line(p, status: int = 2) -> str:
    """The one ``isles: error:`` line of a run that stopped with ``status``, without its prefix."""
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == status and len(lines) == 1 and lines[0].startswith("isles: error: "), p.stderr[-3000:]
    return lines[0].removeprefix("isles: error: ")


# -- 1. mixed runs ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "override,message",
    [
        (
            "islands.n=3",
            "islands.n=3 does not apply to a mixed run: its islands are the groups' (groups.de.islands=4, "
            "groups.fep.islands=4, groups.pso.islands=4); change those",
        ),
        (
            "algorithm=cmaes",
            "algorithm=cmaes does not apply to a mixed run: its islands run the groups' algorithms "
            "(groups.de.algorithm=de, groups.fep.algorithm=fep, groups.pso.algorithm=pso); change those",
        ),
        ("algorithm.F=0.3", "algorithm.F=0.3 does not apply to a mixed run"),
        ("+algorithm.F=0.3", "algorithm.F=0.3 does not apply to a mixed run"),
    ],
)
def test_a_mixed_run_refuses_what_its_groups_replace(override, message, monkeypatch):
    """Before: ``islands.n=3`` ran 12 islands and ``algorithm=cmaes`` ran DE, FEP and PSO, silently."""
    monkeypatch.setattr(job, "init_ray", lambda *a, **k: pytest.fail("Ray started"))
    with pytest.raises(ValueError) as err:
        job.prepare(make_cfg(*MIXED, override, return_hydra_config=True))
    assert str(err.value).startswith(message) and "\n" not in str(err.value), str(err.value)


def test_islands_n_and_algorithm_still_apply_to_a_run_without_groups():
    cfg = make_cfg("+experiment=de_islands", "islands.n=3", "algorithm.F=0.3", *QUICK, return_hydra_config=True)
    prepared = job.prepare(cfg)
    assert prepared.plain["islands"]["n"] == 3 and prepared.plain["algorithm"]["F"] == 0.3


def test_the_list_form_of_groups_replaces_the_experiments_mapping():
    """docs/mixed_islands.md's list form over ``+experiment=mixed_islands`` (Hydra: 5 lines, ``Cannot
    merge DictConfig with ListConfig``); a built-in's name whose ``Params`` need the problem's
    dimension (L-SHADE, CMA-ES) takes it as a one-algorithm run does (issue 36 §1; was one line,
    ``groups.0.algorithm.pop_size=None``)."""
    plain = job.prepare(make_cfg(*MIXED, "groups=[{algorithm: de, islands: 2}, {algorithm: pso, islands: 3}]")).plain
    assert [(g["name"], g["islands"]) for g in plain["groups"]] == [("de", 2), ("pso", 3)]
    assert plain["islands"]["n"] == 5
    built = job.prepare(make_cfg(*MIXED, "groups=[{algorithm: lshade, islands: 2}, {algorithm: cmaes, islands: 2}]"))
    assert [a.params.dim for a in built.algorithm.algorithms] == [4, 4]  # problem.dim=4


def test_empty_and_listed_groups_on_the_command_line(tmp_path):
    """``groups=[]`` on the mixed experiment is the documented one line (was Hydra's merge error), and
    the list form runs."""
    assert one_line(run_cli(*MIXED, "groups=[]")) == (
        "groups=[]: allowed values are a list or a mapping of one or more groups"
    )
    p = run_cli(
        *MIXED, "groups=[{algorithm: de, islands: 1}, {algorithm: pso, islands: 1}]", f"hydra.run.dir={tmp_path}"
    )
    assert p.returncode == 0 and p.stdout.startswith("isles: best f="), p.stderr[-2000:]


def test_preprocess_rewrites_only_what_hydra_would_refuse():
    args = ["+experiment=mixed_islands", "groups=[]", "algorithm.F=0.5", "groups.de.algorithm.CR=0.1", "seed=1,2"]
    assert preprocess([*args, "algorithm.F=0.1,0.2", "-m", "+algorithm.X=1", "algorithm=de"]) == [
        "+experiment=mixed_islands",
        "groups=null",
        "groups=[]",
        "++algorithm.F=0.5",
        "++groups.de.algorithm.CR=0.1",
        "seed=1,2",
        "algorithm.F=0.1,0.2",  # a sweep: left to Hydra
        "-m",
        "+algorithm.X=1",
        "algorithm=de",
    ]
    optuna = ["hparams_search=de_optuna", "algorithm.F=0.5"]  # Optuna matches a fixed F to its search space by key
    assert preprocess(optuna) == optuna


# -- 2. a key the chosen family does not take --------------------------------------------------------
def test_an_option_another_family_takes_is_one_line_naming_who_takes_it():
    """``algorithm.host_kernel=auto`` on CMA-ES: Hydra's 6-line struct error before, and its hint
    ``+algorithm.host_kernel=auto`` a ``TypeError``; now both are the same one line."""
    expected = "algorithm.host_kernel=auto: cmaes takes no parameter 'host_kernel' (its parameters: dim, pop_size, "
    for typed in ("algorithm.host_kernel=auto", "+algorithm.host_kernel=auto"):
        line = one_line(run_cli("+experiment=cmaes", typed, *QUICK))
        assert line.startswith(expected) and line.endswith(
            "; host_kernel is a parameter of algorithm=cde|de|epso|fep|ga|jso|lshade|pso"
        )


def test_an_unknown_algorithm_key_suggests_the_close_one_and_groups_name_their_field():
    node = {"_target_": "isles.algorithms.de.de.DE", "pop_sise": 10}
    with pytest.raises(ValueError, match=r"^algorithm.pop_sise=10: de takes no parameter 'pop_sise' \(did you mean "):
        build_algorithm(node)
    with pytest.raises(ValueError) as err:
        job.prepare(make_cfg(*MIXED, "groups.pso.algorithm.n_replicas=2"))
    assert str(err.value).startswith("groups.pso.algorithm.n_replicas=2: pso takes no parameter 'n_replicas'")
    assert str(err.value).endswith("n_replicas is a parameter of algorithm=epso")


# -- 3. isles show on a file that is not isles' ------------------------------------------------------
@pytest.mark.parametrize(
    "record,message",
    [
        ({"x": "abc", "f": 1.0}, "x='abc' (allowed: a non-empty list of numbers)"),
        ({"x": [1.0, "2"], "f": 1.0}, "x=[1.0, '2'] (allowed: a non-empty list of numbers)"),
        ({"x": [], "f": 1.0}, "x=[] (allowed: a non-empty list of numbers)"),
        ({"x": [1.0], "f": "1.5"}, "f='1.5' (allowed: a number)"),
        ({"x": [1.0], "f": 1.0, "g": [0.1, None]}, "g=[0.1, None] (allowed: a list of numbers)"),
        ({"x": [1.0], "f": 1.0, "feasible": "yes"}, "feasible='yes' (allowed: true|false)"),
    ],
)
def test_show_refuses_a_file_whose_fields_are_not_isles(tmp_path, capsys, record, message):
    """Before: ``x`` the string "abc" printed ``x1=a, x2=b, x3=c``, exit status 0."""
    (tmp_path / "best_solution.json").write_text(json.dumps(record))
    assert show_main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("isles: error: show "), err
    assert err.rstrip("\n").endswith(f"is not a best_solution.json of isles: {message}"), err


def test_show_still_prints_a_record_with_nan_and_nulls(tmp_path):
    (tmp_path / "best_solution.json").write_text('{"x": [1, NaN], "f": NaN, "g": null, "feasible": null, "seed": 0}')
    assert show_main([str(tmp_path)]) == 0


# -- 4. constraints that are NaN everywhere ---------------------------------------------------------
def test_constraints_nan_everywhere_warn_in_one_line(tmp_path):
    """Equality constraints NaN everywhere: ``INFEASIBLE``, exit 0 and no word before."""
    p = run_cli(
        "problem._target_=tests.user_designs.TrussEqualityNaN", "islands.n=1", f"hydra.run.dir={tmp_path}", *QUICK
    )
    assert p.returncode == 0 and " INFEASIBLE " in p.stdout, p.stderr[-2000:]
    (warning,) = [ln for ln in p.stderr.splitlines() if ln.startswith("isles: warning:")]
    assert warning.startswith("isles: warning: no individual ever had finite constraints: all ")
    assert "at the best x g4 (h = 0) is NaN" in warning


def test_result_warnings_for_constraints():
    base = dict(best_x=np.zeros(2), best_f=1.0, generations=5, wall_s=0.1, startup_s=0.0, evaluations=10)
    assert RunResult(best_v=0.5, nan_evals=3, **base).warnings == []
    solution = {"g": [0.5, float("nan"), float("nan")], "g_type": ["inequality", "inequality", "equality"]}
    (w,) = RunResult(best_v=np.inf, nan_evals=10, solution=solution, **base).warnings
    assert w.startswith("no individual ever had finite constraints: all 10 evaluations gave NaN; ")
    assert "at the best x g2, g3 (h = 0) are NaN" in w
    (w,) = RunResult(best_v=np.inf, nan_evals=4, **base).warnings
    assert w.startswith("the best individual has no finite constraint violation (v=inf); 4 of 10 evaluations gave NaN")


# -- 5. the resume command as the run was started ----------------------------------------------------
@pytest.mark.parametrize(
    "argv,head",
    [
        (["/home/me/isles/run.py", "seed=1"], "python /home/me/isles/run.py"),
        (["run.py", "seed=1"], "python run.py"),
        (["/venv/bin/isles", "seed=1"], "isles"),
        (["/src/isles/isles/__main__.py", "seed=1"], "python -m isles"),
        (["/venv/bin/pytest", "-q"], "python run.py"),  # not started by isles (a library call): the checkout's
    ],
)
def test_the_resume_command_starts_as_the_run_was_started(monkeypatch, argv, head):
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(overrides, "typed_argv", None)
    monkeypatch.setattr(interrupts, "task_overrides", lambda: ["+experiment=de", "seed=1"])
    assert interrupts.resume_command("/tmp/ck.pkl") == f"{head} +experiment=de seed=1 checkpoint.resume=/tmp/ck.pkl"


def test_the_command_recorded_is_the_one_typed(monkeypatch):
    """The run's command (MLflow's note) keeps the script's path and the overrides as typed, not as
    :func:`preprocess` rewrote them for Hydra."""
    assert run_source(["/home/me/run.py", "seed=1"])["command"] == "python /home/me/run.py seed=1"
    monkeypatch.setattr(sys, "argv", ["/x/run.py", "algorithm.F=0.5"])
    monkeypatch.setattr(overrides, "typed_argv", None)
    overrides.preprocess_argv()
    assert sys.argv[1:] == ["++algorithm.F=0.5"]
    assert launch_command() == ("run.py", ["python", "/x/run.py"], ["algorithm.F=0.5"])


# -- 6. a Hydra plug-in whose extra is not installed -------------------------------------------------
#: the run without the Optuna sweeper (as ``pip install isles`` without the ``sweep`` extra)
NO_OPTUNA = "import runpy, sys; sys.modules['hydra_plugins.hydra_optuna_sweeper'] = None; " + (
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def test_a_sweep_without_the_sweep_extra_names_it():
    """Hydra's 10-line ``Could not find 'hydra/sweeper/optuna'`` before; the extra is installed here,
    so its absence is simulated (its module made unimportable in front of the run)."""
    p = run_cli("-m", "+experiment=de_islands", "hparams_search=de_optuna", *QUICK, prefix=["-c", NO_OPTUNA])
    line = one_line(p)
    assert line.startswith("hparams_search=de_optuna: needs Hydra's optuna plug-in (hydra/sweeper=optuna)")
    assert line.endswith('not installed: pip install "isles[sweep]"')


def test_installed_plug_ins_pass_the_check():
    conf = str(ROOT / "conf")
    check_plugin_extras(["+experiment=de_islands", "hparams_search=de_optuna", "hydra/launcher=ray_cluster"], conf)
    check_plugin_extras(["hparams_search=nosuch", "problem=spring", "seed=1"], conf)  # left to Hydra, or none
