"""The default placement (issue 35): with ``islands.n_actors`` and ``device`` left at their defaults,
how many actors (GPUs, or CPU actors) and which device a local run takes, from what the run costs
(a probe, :mod:`isles.islands.control.probe`) and the cost model (:mod:`isles.islands.control.cost_model`).

What is chosen (:func:`choose`), before Ray starts, on this machine:

* ``islands.n_actors`` null: 1 to ``min(islands.n, GPUs or cores)`` actors; given: that many;
* ``device=auto``: the GPU or the CPU (on a machine with a GPU); ``cpu``/``gpu``: that one.

The default takes one actor on the preferred device (a GPU where there is one) unless another
placement is predicted at least :data:`isles.islands.control.cost_model.GAIN` faster. A value given
is honoured; where the model predicts it slower than the default, a warning says so in one line
(``device=gpu`` is then also compared with the CPU; ``device=cpu`` never looks for a GPU). Nothing is
probed where there is nothing to choose: one candidate (one GPU and ``device=gpu``, one core, one
island on the CPU), ``device=cpu`` with ``islands.n_actors`` given, a cluster (``ray.address``: its
nodes are known once Ray runs; every GPU of it, as before), ``islands.placement=strict_spread``, or an
async run resumed from a checkpoint (it keeps its grouping). Where the probe fails (the run will
say why), the placement is today's default.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

from isles.islands.control.cost_model import (
    GAIN,
    UNIT,
    DeviceCosts,
    Workload,
    describe,
    epoch_time,
    ms,
    pick,
    predicted,
    words,
)
from isles.islands.control.placement import local_resources

log = logging.getLogger("isles.islands.coordinator")


@dataclass
class Choice:
    """The placement a run takes, and why.

    Attributes:
        device: ``cpu`` or ``gpu``; n_actors: actors (one group each).
        units: ``{"cpu": cores, "gpu": GPUs}`` of this machine (GPUs not looked for under ``device=cpu``).
        costs: ``{device: DeviceCosts}`` probed; workload: the run's :class:`Workload`.
        default: the placement the defaults would take ``(device, actors)``; line: the one line that
            says what was chosen; warning: one line where a value given is predicted slower than the
            default, else ``None``; probe_s: seconds the probe took.
    """

    device: str
    n_actors: int
    units: dict
    costs: dict
    workload: Workload
    default: tuple
    line: str
    warning: str | None
    probe_s: float

    @property
    def predicted_s(self) -> float:
        """Predicted seconds of the run as placed."""
        return predicted(self.costs[self.device], self.workload, self.n_actors)

    def applied(self, cfg: dict) -> dict:
        """``cfg`` (a checked config, kept trusted: :class:`isles.islands.config.schema.Validated`)
        with this placement's ``device`` and ``islands.n_actors``."""
        return type(cfg)({**cfg, "device": self.device, "islands": {**cfg["islands"], "n_actors": self.n_actors}})

    def params(self) -> dict:
        """The choice and its figures as MLflow parameters (``placement.*``)."""
        c = self.costs[self.device]
        out = {
            "placement.device": self.device,
            "placement.n_actors": self.n_actors,
            "placement.available": ", ".join(f"{v} {k}" for k, v in self.units.items() if v),
            "placement.epoch_ms": round(epoch_time(c, self.workload, self.n_actors) * 1e3, 6),
            "placement.exchange_ms": round(c.exchange * 1e3, 6),
            "placement.predicted_s": round(self.predicted_s, 3),
            "placement.default": f"{self.default[0]}, {self.default[1]} actors",
            "placement.probe_s": round(self.probe_s, 3),
            "placement.load": round(self.workload.load, 2),
            "placement.line": self.line,
        }
        for d, cd in self.costs.items():
            out[f"placement.{d}.epoch_one_ms"] = round(cd.epoch_s * 1e3, 6)
        if self.warning:
            out["placement.warning"] = self.warning
        return out


def candidates(n: int, device: str, n_actors, units: dict) -> tuple:
    """``(every, allowed)``: the placements ``[(device, actors)]`` the defaults choose among on a
    machine of ``units`` (``{"cpu": cores, "gpu": GPUs}``), and those the config allows
    (``device``: ``auto|cpu|gpu``; ``n_actors``: ``islands.n_actors`` or ``None``)."""
    devices = [d for d in ("gpu", "cpu") if units.get(d, 0) > 0 and (device != "cpu" or d == "cpu")]
    every = [(d, a) for d in devices for a in range(1, min(n, units[d]) + 1)]
    want = None if n_actors is None else min(int(n_actors), n)
    allowed = [(d, a) for d, a in every if device in ("auto", d) and want in (None, a)]
    return every, allowed


def choose(
    cfg: dict, plugins, topology, resources: dict | None = None, measure=None, load: float | None = None
) -> Choice | None:
    """The placement of the local run ``cfg`` (checked), or ``None`` where nothing is chosen (module
    docstring).

    Args:
        plugins: the loop's plug-in factories; topology: the run's instantiated topology.
        resources: ``{"CPU": cores, "GPU": GPUs}`` (default: this machine's,
            :func:`isles.islands.control.placement.local_resources`).
        measure: ``(device, units) -> DeviceCosts`` (default: the probe,
            :func:`isles.islands.control.probe.measure`; tests inject costs).
        load: the machine's load per core (default: the 1-minute load average over the cores,
            :func:`os.getloadavg`; 1 where it is not known).
    """
    isl, device, fixed = cfg["islands"], cfg["device"], cfg["islands"]["n_actors"]
    if (
        cfg["ray"]["address"]
        or isl["placement"] == "strict_spread"
        or (isl["mode"] != "sync" and cfg["checkpoint"]["resume"])
    ):
        return None
    if device == "cpu" and fixed is not None:
        return None
    if resources is None:
        resources = local_resources(cfg["ray"]["num_cpus"], "cpu" if device == "cpu" else "auto")
    units = {"gpu": int(resources.get("GPU", 0)), "cpu": int(resources.get("CPU", 1))}
    if device == "cpu":
        units["gpu"] = 0
    n = int(isl["n"])
    every, allowed = candidates(n, device, fixed, units)
    first = "gpu" if units["gpu"] else "cpu"
    prefer = (first if device == "auto" else device, 1 if fixed is None else min(int(fixed), n))
    if len(every) < 2 or prefer not in allowed:  # nothing to choose; or a value given that the run refuses
        return None
    if measure is None:
        from isles.islands.control.probe import measure as probe  # noqa: PLC0415

        def measure(d, u):
            return probe(cfg, plugins, topology, d, u)

    t0 = time.perf_counter()
    try:
        costs = {d: measure(d, units[d]) for d in dict.fromkeys(d for d, _ in every)}
    except Exception as err:  # noqa: BLE001  (the run itself says what fails)
        log.debug("placement: the probe failed (%s: %s); the default placement stays", type(err).__name__, err)
        return None
    probe_s = time.perf_counter() - t0
    if load is None:
        load = machine_load(units["cpu"])
    w = Workload(n, int(isl["migration_interval"]), int(cfg["generations"]), isl["mode"] != "sync", load)
    default = pick(costs, w, every, (first, 1))
    run = pick(costs, w, allowed, prefer)
    return Choice(
        device=run[0],
        n_actors=run[1],
        units=units,
        costs=costs,
        workload=w,
        default=default,
        line=_line(costs, w, run, allowed, units, probe_s),
        warning=_warning(cfg, costs, w, run, default),
        probe_s=probe_s,
    )


def machine_load(cores: int) -> float:
    """The 1-minute load average per core (:func:`os.getloadavg`), or 1 where the system has none."""
    try:
        return os.getloadavg()[0] / max(1, cores)
    except (AttributeError, OSError):  # Windows
        return 1.0


def _line(costs: dict, w: Workload, run: tuple, allowed: list, units: dict, probe_s: float) -> str:
    """The one line that says what was chosen, e.g. ``4 GPUs; using 1: an epoch computes in 0.5 ms on
    one GPU (2 ms on the CPU), an exchange between GPUs costs 3.3 ms (predicted 0.5 s against 7.8 s on 1
    CPU actor; probe 0.41 s)``: what this machine offers, the placement (:func:`describe`), one epoch of
    all the islands on each device probed, the exchange, the predicted time against the best other
    placement allowed, and the probe's seconds."""
    d, c = run[0], costs[run[0]]
    have = f"{units['gpu']} GPU{'s' * (units['gpu'] != 1)}" if units["gpu"] else f"{units['cpu']} CPU cores"
    where = {"gpu": "one GPU", "cpu": "the CPU"}
    others = "".join(f" ({ms(o.epoch_s)} on {where[k]})" for k, o in costs.items() if k != d)
    rest = [p for p in allowed if p != run]
    alt = min(rest, key=lambda p: predicted(costs[p[0]], w, p[1])) if rest else None
    against = f" against {predicted(costs[alt[0]], w, alt[1]):.1f} s on {words(alt)}" if alt else ""
    return (
        f"{have}; using {describe(run, units['gpu'])}: an epoch computes in {ms(c.epoch_s)} on {where[d]}{others}, "
        f"an exchange between {UNIT[d]}s costs {ms(c.exchange)} (predicted {predicted(c, w, run[1]):.1f} s"
        f"{against}; probe {probe_s:.2f} s)"
    )


def _warning(cfg: dict, costs: dict, w: Workload, run: tuple, default: tuple) -> str | None:
    """One line where the values given (``islands.n_actors``, ``device``) are predicted slower than the
    default placement by more than the model's margin, else ``None``."""
    t_run, t_default = predicted(costs[run[0]], w, run[1]), predicted(costs[default[0]], w, default[1])
    if run == default or t_default >= (1.0 - GAIN) * t_run:
        return None
    isl = cfg["islands"]
    given = [f"device={cfg['device']}"] * (cfg["device"] != "auto")
    given += [f"islands.n_actors={isl['n_actors']}"] * (isl["n_actors"] is not None)
    return (
        f"{' '.join(given)}: predicted {t_run:.1f} s on {words(run)} against {t_default:.1f} s on "
        f"{words(default)} (the default placement: leave {'them' if len(given) > 1 else 'it'} out to take it)"
    )


__all__ = ["Choice", "DeviceCosts", "candidates", "choose"]
