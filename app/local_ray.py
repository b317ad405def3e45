"""How isles starts a local Ray (a run without ``ray.address``): on loopback, in a session of its own.

* **Loopback only.** Ray gives a node the address other nodes reach it by, and its GCS, raylet,
  workers and agents listen on every interface (``0.0.0.0``/``::``) or on that address. A local
  run has no other node, so its Ray is started as Ray starts a single-machine Ray where clusters
  are not supported (macOS, Windows: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` unset): the node's
  address is 127.0.0.1, and every listening socket of that Ray is on loopback. (Ray resolves
  ``ray.init(_node_ip_address="127.0.0.1")`` to the machine's reachable address, so that argument
  alone does not do it.) A run that joins a cluster (``ray.address``) is untouched: its driver must
  be reachable by the cluster's nodes.
* **A session of its own.** ``timeout``, Slurm's ``scancel`` and ``kill -- -PGID`` signal the
  whole process group of the run. Ray starts its processes (GCS, raylet, and through the raylet the
  workers and agents) in the driver's group, so a SIGTERM to the group took Ray down under the
  driver, which then waited 60 s for the GCS and exited 1 with no checkpoint. Started in a session
  (and process group) of their own, Ray's processes are not reached by a signal to the run's group;
  the driver, which treats SIGTERM like Ctrl-C, writes its checkpoint and stops Ray itself. Ray's
  processes still die with the driver: Ray's kernel fate-sharing (``prctl(PR_SET_PDEATHSIG)`` on
  Linux) does not depend on the process group. Where Ray has no kernel fate-sharing (it then
  cleans up through a reaper that kills the driver's process group), the processes stay in the
  driver's group.

Source: ``ray._private.services.start_ray_process`` (Ray 2.60), which starts every Ray process of
a node through ``ConsolePopen``, and ``get_node_ip_address``, which returns the loopback address
when ``ray_constants.ENABLE_RAY_CLUSTER`` is false.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack, contextmanager


@contextmanager
def local_ray():
    """Around the ``ray.init`` that starts a local Ray: its node address is 127.0.0.1 (every
    listening socket on loopback) and its processes start in a session of their own (a signal to
    the run's process group reaches the driver only). Ray's internals that this relies on are
    looked up first; where this Ray has none of them, ``ray.init`` runs as Ray does it.
    """
    from unittest import mock  # noqa: PLC0415  (asyncio and ssl with it: only a run that starts Ray needs them)

    try:
        from ray._private import ray_constants, services, utils  # noqa: PLC0415
    except ImportError:  # another Ray's layout: Ray's own defaults
        ray_constants = services = utils = None
    with ExitStack() as stack:
        if hasattr(ray_constants, "ENABLE_RAY_CLUSTER"):  # node address 127.0.0.1: listening on loopback
            stack.enter_context(mock.patch.object(ray_constants, "ENABLE_RAY_CLUSTER", False))
        popen = getattr(services, "ConsolePopen", None)
        if popen is not None and sys.platform != "win32" and utils.detect_fate_sharing_support():

            class OwnSession(popen):
                """Ray's ``ConsolePopen`` with ``start_new_session=True``."""

                def __init__(self, *args, **kwargs):
                    kwargs["start_new_session"] = True
                    super().__init__(*args, **kwargs)

            stack.enter_context(mock.patch.object(services, "ConsolePopen", OwnSession))
        yield
