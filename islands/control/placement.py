"""Placement: how many island-group actors, on which devices, hosting which islands.

A local run whose ``islands.n_actors`` or ``device`` is left to the default has them chosen first, from a
probe and a cost model (:mod:`isles.islands.control.autoplace`); what is left null here (a cluster) takes
these rules. With GPUs, one actor owns each GPU (``num_gpus=1``) and hosts its share of the islands as one
batch; without GPUs, one actor hosts all the islands (NumPy), and a local run then needs no Ray
at all (:func:`needs_ray`): starting a Ray actor costs seconds on a small machine (15-25 s of a
17-32 s ``+experiment=de_islands`` run on 2 cores, for the same result as 2.8 s in one process;
issue 16 §4), more than a second core gains on NumPy-sized islands. ``islands.n_actors=N`` asks
for N CPU actors (one core each), ``islands.placement=strict_spread`` for one per node.

On Ray the actors are placed with a **placement group**: one bundle per actor (``{"GPU": 1}``, or
``{"CPU": 1}`` without GPUs), reserved before any actor starts, with the strategy of
``islands.placement``: ``spread`` (Ray's ``SPREAD``: over as many nodes as possible, the default),
``strict_spread`` (``STRICT_SPREAD``: one actor per node; by default as many actors as nodes) or
``pack`` (``PACK``: as few nodes as possible). ``islands.n_nodes`` limits the run to that many
nodes (those with the most GPUs, or CPUs), pinned through Ray's node-id label. When a node is
lost, Ray moves its bundles to the remaining nodes (where they fit) and restarts the actors there
(:mod:`isles.islands.coordinator` restores their islands from the last snapshot).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

from isles.algorithms.core.backend import cupy_or_none
from isles.islands.config.choices import STRATEGIES

#: seconds to wait for Ray to reserve the placement group before the run fails
RESERVE_TIMEOUT_S = 120.0


@dataclass
class Placement:
    """Actors to start.

    Attributes:
        groups: island ids of each actor, contiguous blocks (``len(groups)`` actors); sync mode's
            :class:`Balancer` sets others between spans.
        use_gpu: each actor takes one GPU (``num_gpus=1``) and runs CuPy.
        strategy: ``islands.placement`` (a key of :data:`STRATEGIES`).
        node_ids: the Ray node ids the actors may use (``islands.n_nodes``), ``None``: any node.
    """

    groups: list
    use_gpu: bool
    strategy: str = "spread"
    node_ids: tuple | None = None

    @property
    def bundle(self) -> dict:
        """The resources of one actor's placement-group bundle: one GPU, or one CPU."""
        return {"GPU": 1} if self.use_gpu else {"CPU": 1}

    @property
    def device(self) -> str:
        """The ``device`` value each actor gets (``gpu`` or ``cpu``)."""
        return "gpu" if self.use_gpu else "cpu"


def split(n_islands: int, n_actors: int) -> list[list[int]]:
    """Contiguous, near-equal blocks of island ids, e.g. ``split(5, 2) == [[0, 1, 2], [3, 4]]``."""
    base, extra = divmod(n_islands, n_actors)
    out, start = [], 0
    for a in range(n_actors):
        size = base + (1 if a < extra else 0)
        out.append(list(range(start, start + size)))
        start += size
    return out


def plan(n_islands: int, device: str, n_actors: int | None, resources: dict) -> Placement:
    """Decide the actors for ``n_islands`` islands on a cluster with ``resources``.

    Args:
        n_islands: islands in the archipelago (>= 1).
        device: ``auto|cpu|gpu``.
        n_actors: actors wanted (>= 1), or ``None`` for one per GPU (GPU) / one in all (CPU;
            module docstring).
        resources: ``ray.cluster_resources()`` (keys ``CPU``, ``GPU``).

    The values come from a checked config (:func:`isles.islands.config.schema.validated`); only what
    depends on the resources is checked here.

    Raises:
        ValueError: ``device=gpu`` on a cluster without GPUs, or more GPU actors than GPUs.
    """
    n_gpus = int(resources.get("GPU", 0))
    if device == "gpu" and n_gpus == 0:
        raise ValueError(
            "device=gpu: no GPU is visible to Ray on this machine or cluster; allowed values here are auto|cpu"
        )
    use_gpu = device != "cpu" and n_gpus > 0
    if n_actors is None:
        n_actors = n_gpus if use_gpu else 1
    if use_gpu and n_actors > n_gpus:
        raise ValueError(f"islands.n_actors={n_actors}: allowed values are 1..{n_gpus} (one actor per GPU)")
    n_actors = min(n_actors, n_islands)
    return Placement(groups=split(n_islands, n_actors), use_gpu=use_gpu)


def cluster_nodes() -> list[dict]:
    """The alive nodes of the Ray cluster this process is connected to, as ``{"node_id", "ip",
    "CPU", "GPU"}`` dicts (resources in Ray's units), in ``ray.nodes()`` order."""
    import ray  # noqa: PLC0415

    return [
        {
            "node_id": n["NodeID"],
            "ip": n["NodeManagerAddress"],
            "CPU": float(n["Resources"].get("CPU", 0)),
            "GPU": float(n["Resources"].get("GPU", 0)),
        }
        for n in ray.nodes()
        if n["Alive"]
    ]


def plan_nodes(n_islands: int, device: str, isl: dict, nodes: list[dict]) -> Placement:
    """:func:`plan` on a cluster of ``nodes`` (:func:`cluster_nodes`), with the placement
    fields of ``islands`` (``n_actors``, ``n_nodes``, ``placement``).

    The actors use GPUs when any node has one (and ``device`` is not ``cpu``); ``islands.n_nodes``
    keeps the nodes with the most of that resource (ties by node id); ``strict_spread`` starts
    one actor per kept node unless ``islands.n_actors`` says otherwise.

    Raises:
        ValueError: as :func:`plan`; more nodes, actors (one per node under ``strict_spread``) or
            CPU actors than the cluster has, naming the field and the allowed values.
    """
    total = {k: sum(n[k] for n in nodes) for k in ("CPU", "GPU")}
    key = "GPU" if device != "cpu" and total["GPU"] >= 1 else "CPU"
    usable = [n for n in nodes if n[key] >= 1]
    n_nodes, strategy, n_actors = isl["n_nodes"], isl["placement"], isl["n_actors"]
    if n_nodes is not None:
        if n_nodes > len(usable):
            raise ValueError(
                f"islands.n_nodes={n_nodes}: the cluster has {len(usable)} nodes with a {key}; "
                f"allowed values are null or 1..{len(usable)}"
            )
        usable = sorted(usable, key=lambda n: (-n[key], n["node_id"]))[:n_nodes]
    if strategy == "strict_spread" and n_actors is None:
        n_actors = len(usable)
    p = plan(n_islands, device, n_actors, {k: sum(n[k] for n in usable) for k in ("CPU", "GPU")})
    n = len(p.groups)
    field = f"islands.n_actors={n_actors}" if n_actors is not None else f"islands.n={n_islands}"
    if strategy == "strict_spread" and n > len(usable):
        raise ValueError(
            f"{field}: islands.placement=strict_spread puts one actor per node, and {len(usable)} "
            f"nodes have a {key}; allowed values are 1..{len(usable)}"
        )
    cpus = int(sum(n["CPU"] for n in usable))
    if not p.use_gpu and n > cpus:
        raise ValueError(f"{field}: each actor takes one CPU and Ray offers {cpus} here; allowed values are 1..{cpus}")
    return replace(p, strategy=strategy, node_ids=tuple(n["node_id"] for n in usable) if n_nodes is not None else None)


def reserve(p: Placement, timeout_s: float = RESERVE_TIMEOUT_S):
    """Reserve one bundle per actor (:attr:`Placement.bundle`) as a Ray placement group with the
    strategy of ``p`` (pinned to ``p.node_ids`` if set); wait until Ray has placed it.

    Returns:
        the ``PlacementGroup`` (release it with ``ray.util.remove_placement_group``).

    Raises:
        ValueError: Ray could not place it within ``timeout_s`` seconds (naming
            ``islands.placement`` and the resources still free).
    """
    import ray  # noqa: PLC0415
    from ray.util.placement_group import placement_group, remove_placement_group  # noqa: PLC0415

    n = len(p.groups)
    selector = [{"ray.io/node-id": f"in({','.join(p.node_ids)})"}] * n if p.node_ids else None
    pg = placement_group([p.bundle] * n, strategy=STRATEGIES[p.strategy], bundle_label_selector=selector)
    if not pg.wait(timeout_seconds=timeout_s):
        remove_placement_group(pg)
        free = {k: v for k, v in ray.available_resources().items() if k in ("CPU", "GPU")}
        raise ValueError(
            f"islands.placement={p.strategy}: Ray could not place {n} actors of {p.bundle} within "
            f"{timeout_s:.0f} s (free now: {free}); lower islands.n_actors or islands.n_nodes, or add nodes"
        )
    return pg


def actor_options(p: Placement, pg=None, index: int = 0, max_restarts: int = 0) -> dict:
    """Ray options of island-group actor ``index``: a whole GPU or one CPU, in bundle ``index``
    of the placement group ``pg`` (if given), and how often Ray restarts it when it dies (its
    tasks are not retried: the coordinator restores a snapshot instead)."""
    opts = {
        "num_gpus": p.bundle.get("GPU", 0),
        "num_cpus": p.bundle.get("CPU", 0),  # exactly its bundle
        "max_restarts": int(max_restarts),
        "max_task_retries": 0,
    }
    if pg is not None:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy  # noqa: PLC0415

        opts["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
            placement_group=pg, placement_group_bundle_index=index
        )
    return opts


def ray_location() -> dict:
    """Where this process runs in Ray: ``{"ray_gpu_ids": [str], "node_id": hex str, "node_ip":
    str}``; no GPU ids and ``None`` node outside Ray (a process that has not imported ``ray`` is
    outside it: Ray is not imported to find that out, issue 16 §4)."""
    if "ray" not in sys.modules:
        return {"ray_gpu_ids": [], "node_id": None, "node_ip": None}
    try:
        import ray  # noqa: PLC0415

        if ray.is_initialized():
            return {
                "ray_gpu_ids": [str(g) for g in ray.get_gpu_ids()],
                "node_id": ray.get_runtime_context().get_node_id(),
                "node_ip": ray.util.get_node_ip_address(),
            }
    except Exception:  # noqa: BLE001, S110  (not inside Ray)
        pass
    return {"ray_gpu_ids": [], "node_id": None, "node_ip": None}


def where(info: dict) -> str:
    """Where an island group runs, in words, from its :meth:`IslandGroup.info`: ``"cpu, node
    49d7afe3 at 10.0.0.2 (host)"``, ``"NVIDIA H100 (GPU 0), node ..."``; without Ray, ``"cpu
    (host)"``."""
    gpus = info.get("ray_gpu_ids") or []
    text = info["device"] + (f" (GPU {','.join(gpus)})" if gpus else "")
    if info.get("node_id"):
        text += f", node {info['node_id'][:8]} at {info['node_ip']}"
    return f"{text} ({info['host']})"


def local_resources(num_cpus: int | None = None, device: str = "auto") -> dict:
    """This machine's resources as Ray would count them: ``{"CPU": cores (or num_cpus), "GPU":
    CUDA devices CuPy sees}``; with ``device="cpu"`` the GPUs are not looked for (``"GPU": 0``:
    a CPU run neither imports CuPy nor initialises CUDA)."""
    import os  # noqa: PLC0415

    cp = cupy_or_none() if device != "cpu" else None
    gpus = int(cp.cuda.runtime.getDeviceCount()) if cp is not None else 0
    return {"CPU": int(num_cpus or os.cpu_count() or 1), "GPU": gpus}


def needs_ray(cfg: dict) -> bool:
    """Whether a run needs Ray at all: a cluster address, async mode, or more than one island
    group on this machine. A local run whose islands share one group (one GPU; CPU islands unless
    ``islands.n_actors`` asks for more) runs in this process instead: the same code and result,
    without Ray's seconds of start-up and shutdown, and without importing Ray.

    Args:
        cfg: the run config with the schema's defaults (:func:`isles.islands.config.schema.validated`)."""
    isl = cfg["islands"]
    if cfg["ray"]["address"] or isl["mode"] != "sync":
        return True
    device = cfg["device"]
    here = {"node_id": "local", "ip": "127.0.0.1", **local_resources(cfg["ray"]["num_cpus"], device)}
    return len(plan_nodes(isl["n"], device, isl, [here]).groups) > 1


#: sync mode's placement by cost (:class:`Balancer`): the busiest actor's measured CPU seconds per epoch
#: below which nothing moves (cheap islands: a move would cost more than it saves), and the least
#: share of the busiest actor's load that a move must take off
BALANCE_MIN_EPOCH_S = 0.05
BALANCE_GAIN = 0.1


def balanced(groups: list, costs: dict, gain: float = BALANCE_GAIN) -> list | None:
    """The islands of ``groups`` spread over as many actors by cost: the costliest island first, each to
    the least loaded actor (fewest islands on a tie), each actor's islands in id order; ``None`` where
    that takes less than ``gain`` of the busiest actor's load off it, or changes nothing.

    Args:
        groups: island ids per actor now; costs: ``{island id: cost}`` (seconds, >= 0).
    """
    now = max(sum(costs[i] for i in g) for g in groups)
    load, out = [0.0] * len(groups), [[] for _ in groups]
    for i in sorted(costs, key=lambda i: (-costs[i], i)):
        a = min(range(len(groups)), key=lambda a: (load[a], len(out[a]), a))
        load[a] += costs[i]
        out[a].append(i)
    out = [sorted(g) for g in out]
    if max(load) > (1.0 - gain) * now or sorted(out) == sorted(sorted(g) for g in groups):
        return None
    return out


class Balancer:
    """Sync mode on CPU actors of this machine: spreads the islands over the actors by their measured
    cost, keeping the result bit for bit (the random numbers are the islands' own: only which actor
    runs which island changes, :func:`isles.islands.control.checkpoint.regroup`).

    The rule, with nothing to tune: after each span the actors' CPU seconds (their processes', psutil:
    the objective's work, not the waits for peers) are split over their islands as the islands'
    last estimates share them (evenly at first: a move then tells the islands' costs apart); where the
    busiest actor spent at least :data:`BALANCE_MIN_EPOCH_S` an epoch and a placement by those costs
    (:func:`balanced`) takes at least :data:`BALANCE_GAIN` of its load off it, the islands move
    before the next span. Many cheap islands per actor, GPU actors, in-process groups or actors on
    other nodes: nothing is measured, nothing moves.

    Args:
        executor: the run's :class:`isles.islands.control.executor.Executor`; groups: its actors.
    """

    def __init__(self, executor, groups):
        self.ex, self.groups, self.moved, self.cost = executor, groups, False, {}
        self.cpu = self.measure()

    def measure(self) -> list | None:
        """Each actor's ``(pid, process CPU seconds)`` (user + system) now, or ``None`` (:class:`Balancer`)."""
        if not self.ex.use_ray or self.ex.cfg.device != "cpu" or len(self.groups) < 2:
            return None
        import socket  # noqa: PLC0415

        import psutil  # noqa: PLC0415  (Ray's dependency)

        try:
            if any(info.get("host") != socket.gethostname() for info in self.ex.infos):
                return None
            return [(info["pid"], sum(psutil.Process(info["pid"]).cpu_times()[:2])) for info in self.ex.infos]
        except (psutil.Error, KeyError):  # an actor restarting
            return None

    def due(self, groups: list, n_epochs: int) -> list | None:
        """The new island ids per actor after a span of ``n_epochs`` epochs in ``groups`` (island ids
        per actor), or ``None`` (the rule: :class:`Balancer`)."""
        now, before = self.measure(), self.cpu
        self.cpu = now
        if now is None or before is None or [p for p, _ in now] != [p for p, _ in before]:  # a restarted actor
            return None
        used = [a - b for (_, a), (_, b) in zip(now, before, strict=False)]
        for g, u in zip(
            groups, used, strict=False
        ):  # each actor's seconds over its islands, as their last estimates share them
            w = {i: max(self.cost.get(i, 1.0), 1e-9) for i in g}
            self.cost.update({i: u * w[i] / sum(w.values()) for i in g})
        if max(used) / max(1, n_epochs) < BALANCE_MIN_EPOCH_S:
            return None
        return balanced(groups, self.cost)

    def move(self, placement, new: list, states: list, regroup, plugins=None, old: list | None = None) -> None:
        """Give each actor its islands of ``new`` with their states (``states``: one per actor of ``old``,
        default ``placement.groups``; host arrays), regrouped by ``regroup(states, old, new)`` (the sync
        loop's, :func:`isles.islands.control.checkpoint.regroup` or the algorithm's own), and the plug-ins'
        ``plugins`` (``None``: theirs stay), and make ``new`` the placement's grouping."""
        moved = regroup(states, old or placement.groups, new)
        ex = self.ex
        ex.gather(
            [ex.call(g, "regroup", ids, st, plugins) for g, ids, st in zip(self.groups, new, moved, strict=False)]
        )
        placement.groups = [list(g) for g in new]
        self.moved = True
        ex.infos = [{**info, "island_ids": list(ids)} for info, ids in zip(ex.infos, new, strict=False)]
        self.cpu = self.measure()
