"""A job's Ray: fail fast on a ``ray.address`` that cannot work (:func:`check_ray_address`, run
with the config checks of :func:`isles.app.job.validate`), then start a local Ray or connect to a
cluster (:func:`init_ray`, called by :func:`isles.app.job.run_job`)."""

from __future__ import annotations

import os
import socket
from contextlib import nullcontext

from isles.app.local_ray import local_ray
from isles.app.ray_security import LOCAL_DASHBOARD_HOST, token_notice
from isles.app.tracking_server import ray_job_copy
from isles.app.user_modules import user_module_paths
from isles.islands.config.schema import RayConfig, with_defaults

from isles import CHECKOUT

RAY_EXCLUDES = [
    ".git",
    "outputs",
    "multirun",
    "mlruns",
    "mlflow.db",
    "mlflow.db.lock",
    "mlartifacts",
    ".devbundle",
    "*.egg-info",
]


@token_notice()  # Ray's warning that token authentication is on becomes one line (ray_security.py)
def init_ray(ray_cfg: dict, cfg: dict | None = None) -> None:
    """Start a local Ray (no ``ray.address``) or connect to a cluster (``ray.address``).

    The local Ray is the run's own: a cluster that ``ray start`` left running on this machine is
    not joined (only ``ray.address``, or Ray's ``RAY_ADDRESS`` variable, names a cluster).

    From a checkout, the repository travels to a cluster's workers as the Ray ``working_dir``
    (and local workers find it on ``PYTHONPATH``); an installed isles must be installed on the
    cluster's nodes too (``cluster/``). A local Ray's dashboard (``ray.include_dashboard``) listens
    on ``ray.dashboard_host`` (127.0.0.1 unless the user opts in); Ray's token authentication stays
    as Ray sets it (:mod:`isles.app.ray_security`). A job submitted with ``ray job submit
    --working-dir .`` ships the checkout already: its working directory is not sent again.

    On a cluster, the user's own modules that the run's config ``cfg`` names (``_target_``) and
    that travel in neither of those go to the workers as ``py_modules``
    (:func:`isles.app.user_modules.user_module_paths`).
    """
    import ray  # noqa: PLC0415

    if ray.is_initialized():
        return
    ray_cfg = with_defaults(ray_cfg, RayConfig)  # the schema's defaults for the keys not given
    address = ray_cfg["address"]
    if address:
        copy = ray_job_copy()  # ray job submit --working-dir: the driver runs in Ray's copy, shipped already
        env = {} if CHECKOUT is None or copy else {"working_dir": str(CHECKOUT), "excludes": RAY_EXCLUDES}
        modules = user_module_paths(cfg or {}, tuple(p for p in (copy, env.get("working_dir")) if p))
        if modules:
            env["py_modules"] = modules
        ray.init(address=address, runtime_env=env, log_to_driver=True)
    else:
        path = os.pathsep.join(p for p in (str(CHECKOUT or ""), os.environ.get("PYTHONPATH", "")) if p)
        # "local": a Ray of the run's own, never the cluster a `ray start` (another user's, another
        # job's) left running on this machine, which Ray would join; RAY_ADDRESS still names one
        joins = bool(os.environ.get("RAY_ADDRESS"))  # Ray's own variable names a cluster: Ray joins it
        # a Ray of the run's own: on 127.0.0.1 only, its processes in a session of their own (local_ray.py)
        with nullcontext() if joins else local_ray():
            ray.init(
                address=None if joins else "local",
                num_cpus=ray_cfg["num_cpus"],
                include_dashboard=bool(ray_cfg["include_dashboard"]),
                dashboard_host=ray_cfg["dashboard_host"] or LOCAL_DASHBOARD_HOST,
                runtime_env={"env_vars": {"PYTHONPATH": path}},
                log_to_driver=True,
                configure_logging=True,
                logging_level="warning",
            )


def check_ray_address(address, timeout_s: float = 10.0) -> None:
    """Fail fast on a ``ray.address`` that cannot work, instead of Ray's minutes of retries.

    ``null`` (a local Ray) passes. ``auto`` (the cluster that ``ray start`` started on this
    machine, or ``RAY_ADDRESS``) must find one, as Ray looks for it; the address found is then
    checked as ``host:port``. ``ray://host:port`` needs Ray Client (``pip install "ray[client]"``);
    ``host:port`` must accept a TCP connection within ``timeout_s`` seconds.

    Raises:
        ValueError: one line naming ``ray.address`` and the address, and what to do.
    """
    if not address:
        return
    target = str(address)
    if target == "auto":
        found = _auto_address()
        if found is None:
            raise ValueError(
                "ray.address='auto': no Ray cluster is running on this machine (Ray found no "
                "'ray start' and RAY_ADDRESS is unset); start one (ray start --head), give "
                "ray.address=HOST:PORT, or leave ray.address out for a local Ray"
            )
        if found == "auto" or ("://" in found and not found.startswith("ray://")):
            return  # this Ray cannot say where, or names a URL (RAY_ADDRESS=http://...): Ray decides
        target = found
    if target.startswith("ray://"):
        try:
            import grpc  # noqa: F401, PLC0415  (Ray Client's transport)
        except ImportError:
            raise ValueError(
                f"ray.address={target!r}: a ray:// address needs Ray Client; install it with "
                "pip install 'ray[client]' (or pip install -e '.[client]')"
            ) from None
        target = target[len("ray://") :]
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"ray.address={address!r}: allowed values are null, auto, host:port or ray://host:port")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as err:
        raise ValueError(
            f"ray.address={address!r}: nothing answers there ({err.strerror or err}); start the "
            "cluster (ray start --head) or leave ray.address out for a local Ray"
        ) from None


def _auto_address() -> str | None:
    """The cluster address that ``ray.init(address="auto")`` would connect to (``RAY_ADDRESS``,
    else the latest ``ray start`` on this machine, else a running Ray found by its processes), or
    ``None`` when Ray finds none; ``"auto"`` when this Ray version's lookup is not available."""
    try:
        from ray._private.services import canonicalize_bootstrap_address  # noqa: PLC0415  (Ray's own lookup)
    except ImportError:
        return "auto"
    try:
        return canonicalize_bootstrap_address("auto")
    except ConnectionError:
        return None
    except Exception:  # noqa: BLE001  (another Ray's lookup: Ray's own connection decides)
        return "auto"
