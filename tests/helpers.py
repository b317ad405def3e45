"""Config composition for tests (the same composition ``run.py`` does)."""

from pathlib import Path

from hydra import compose, initialize_config_dir
from isles.app.overrides import preprocess, retarget
from isles.islands.config import schema as _schema  # noqa: F401  (registers isles_schema in Hydra's ConfigStore)
from omegaconf import OmegaConf, open_dict

CONF = str(Path(__file__).resolve().parents[1] / "conf")


def make_cfg(*overrides: str, return_hydra_config: bool = False):
    """Compose ``conf/config.yaml`` with Hydra overrides, as ``python run.py OVERRIDES`` would
    (after :func:`isles.app.overrides.preprocess`; with ``return_hydra_config``, the ``hydra`` node
    too: sweeper, launcher, ...). A class named by ``problem._target_=...`` (or
    ``topology={_target_: ...}``) gets only the keys of ``overrides``, as in a run
    (:func:`isles.app.overrides.retarget`): not the experiment's problem's bounds."""
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(config_name="config", overrides=preprocess(list(overrides)), return_hydra_config=True)
    cfg = retarget(cfg)
    if not return_hydra_config:
        with open_dict(cfg):
            del cfg["hydra"]
    return cfg


def plain(cfg) -> dict:
    """Resolved plain-dict config."""
    return OmegaConf.to_container(cfg, resolve=True)


def island_ctx(xp, prob, islands=3, seed=4, dtype=None, handling="feasibility", target=None):
    """A :class:`isles.algorithms.core.base.Context` of ``islands`` islands on ``xp`` (float64 by
    default) for ``prob``, with the evaluator's ``handling`` (penalty factor 100) and a stop
    ``target``: the epoch-kernel tests' context."""
    import numpy as np  # noqa: PLC0415
    from isles.algorithms.core.base import Context  # noqa: PLC0415
    from isles.algorithms.core.random import CounterRNG  # noqa: PLC0415
    from isles.problems.constraints import Evaluator  # noqa: PLC0415

    ctx = Context(
        xp,
        np.float64 if dtype is None else dtype,
        Evaluator(prob, handling, 100.0),
        CounterRNG(xp, seed, range(islands)),
    )
    ctx.target = target
    return ctx


def host_run_and_steps(host, s0: dict, n: int) -> tuple:
    """``(one, steps)``: a host twin's ``run(s0, n)`` (the epoch kernel's block loop in one call)
    and ``n`` of its ``step`` calls (the per-generation kernels' steps) from the same state."""
    one = host.run(dict(s0), n)
    st = dict(s0)
    for _ in range(n):
        st = host.step(st)
    return one, st


def interrupt_at(monkeypatch, epoch: int) -> None:
    """Make the coordinator raise ``KeyboardInterrupt`` (Ctrl-C) once it has published ``epoch``
    (undo with ``monkeypatch.undo()``)."""
    from isles.islands.control.callbacks import Monitors  # noqa: PLC0415

    publish = Monitors.publish

    def publish_then_interrupt(self, record):
        publish(self, record)
        if record.epoch == epoch:
            raise KeyboardInterrupt

    monkeypatch.setattr(Monitors, "publish", publish_then_interrupt)


def one_epoch(group, k: int, inbound: dict | None = None, remote: dict | None = None):
    """One epoch of ``group`` alone (a span of one epoch, no peers) with the migration ``inbound``
    ``{destination position: [source ids]}`` and ``remote`` ``{source id: Population (1, k)}`` first:
    its :class:`isles.islands.records.EpochSummary`."""
    from isles.islands.records import Plan, Route, SpanOrder  # noqa: PLC0415

    route = Route(0, [group.island_ids], topology=None, n=len(group.island_ids), seed=0)
    return group.run_span(SpanOrder(1, [k], 0, route, Plan(inbound or {}, remote or {})))[0]


def run_span(
    group,
    ks,
    topology,
    *,
    groups=None,
    index: int = 0,
    epoch0: int = 0,
    span: int = 1,
    first=None,
    snapshots=(),
    seed: int = 0,
    **route,
):
    """``group.run_span`` of epochs ``ks`` after ``epoch0``: group ``index`` of ``groups`` (default:
    this group alone) on ``topology``; ``route``: more :class:`isles.islands.records.Route` fields
    (``peers``, ``transport``, ``timeout_s``); ``first``: the first epoch's Plan. Its summaries."""
    from isles.islands.records import Plan, Route, SpanOrder  # noqa: PLC0415

    groups = groups or [group.island_ids]
    r = Route(index, groups, topology, sum(map(len, groups)), seed, **route)
    return group.run_span(SpanOrder(span, list(ks), epoch0, r, first or Plan(), tuple(snapshots)))


def cmepso_run(*overrides: str):
    """A CMEPSO run of the runtime (``+experiment=cmepso``: EPSO slave islands and the master swarm
    plug-in, ``conf/plugin/master_swarm.yaml``) in this process, without MLflow or progress output;
    ``overrides`` name the device. Its :class:`isles.islands.results.RunResult`."""
    from hydra.utils import instantiate  # noqa: PLC0415
    from isles.islands.config.build import build_plugins  # noqa: PLC0415
    from isles.islands.coordinator import Coordinator  # noqa: PLC0415

    cfg = plain(make_cfg("+experiment=cmepso", "logger=none", "progress=false", *overrides))
    return Coordinator(cfg, instantiate(cfg["topology"]), build_plugins(cfg["plugins"]), use_ray=False).run()


def assert_same_runs(a, b, metrics=()) -> None:
    """Two runs' results, bit for bit: the best, the evaluations, and every epoch's island bests and
    plug-in ``metrics`` (e.g. ``master_best_f``)."""
    import numpy as np  # noqa: PLC0415

    assert a.best_f == b.best_f and a.evaluations == b.evaluations
    np.testing.assert_array_equal(a.best_x, b.best_x)
    assert len(a.history) == len(b.history)
    for x, y in zip(a.history, b.history, strict=False):
        np.testing.assert_array_equal(x.island_best_f, y.island_best_f)
        for key in metrics:
            assert x.plugin_metrics[key] == y.plugin_metrics[key], key


def numpy_twin(alg):
    """``alg`` with ``algorithm.host_kernel=false``: its :meth:`run` on NumPy is then the array code
    (the reference twin of the family's host build, :mod:`isles.algorithms.core.host_build`)."""
    import dataclasses  # noqa: PLC0415

    return type(alg)(dataclasses.replace(alg.params, host_kernel=False))


def assert_no_compiler_line(caplog, mode) -> None:
    """A host build's fallback where no C compiler exists, as ``caplog`` recorded it: no line for
    ``host_kernel=False``, else one ``... not the host kernel (... C compiler ...)`` line, INFO for
    ``auto`` and WARNING for ``True``."""
    import logging  # noqa: PLC0415

    recs = [r for r in caplog.records if "not the host kernel" in r.getMessage()]
    if mode is False:
        assert not recs
    else:
        level = logging.WARNING if mode is True else logging.INFO
        assert len(recs) == 1 and recs[0].levelno == level and "C compiler" in recs[0].getMessage()
