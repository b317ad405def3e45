"""Security defaults of the Ray that isles starts (issue 10 §5): the dashboard on 127.0.0.1 unless
the user opts in, and Ray's token authentication on, announced by one line instead of Ray's
warning at every start."""

from __future__ import annotations

import io
import ipaddress
import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from isles.app.job import validate
from isles.app.ray_security import AUTH_LOGGER, ENABLED_WARNING, token_notice

from tests.helpers import make_cfg, plain

ROOT = Path(__file__).resolve().parents[1]

# Starts a local Ray the way run.py does (app/ray_setup.py: init_ray) with the dashboard on, then
# reports where the dashboard listens, what its job API answers without and with the token, and
# whether the dashboard's port answers on this machine's non-loopback address.
PROBE = r"""
import json, os, socket, sys, urllib.error, urllib.request
import psutil, ray
from isles.app.ray_setup import init_ray

init_ray({"num_cpus": 1, "include_dashboard": True})
try:
    url = ray._private.worker.get_dashboard_url()
    port = int(url.rsplit(":", 1)[1])

    def status(headers):
        req = urllib.request.Request(f"http://127.0.0.1:{port}/api/jobs/", headers=headers)
        try:
            return urllib.request.urlopen(req, timeout=60).status
        except urllib.error.HTTPError as err:
            return err.code

    token = open(sys.argv[1]).read().strip()
    node_ip = ray.util.get_node_ip_address()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:  # this machine's address towards the network (a UDP "connect" sends nothing)
        udp.connect(("192.0.2.1", 9))
        outside_ip = udp.getsockname()[0]
    except OSError:  # no route: loopback only
        outside_ip = "127.0.0.1"
    finally:
        udp.close()
    gcs_port = int(ray.get_runtime_context().gcs_address.rsplit(":", 1)[1])
    answers = []
    for p in (port, gcs_port):
        try:
            socket.create_connection((outside_ip, p), 10).close()
            answers.append(p)
        except OSError:
            pass
    outside = "answers" if answers else "refused"
    worker = ray.get(ray.remote(lambda: os.getpid()).remote())  # a worker process too
    ray_pids = {os.getpid()} | {c.pid for c in psutil.Process().children(recursive=True)}
    listening = sorted({(psutil.Process(c.pid).name(), c.laddr.ip) for c in psutil.net_connections(kind="inet")
                        if c.status == psutil.CONN_LISTEN and c.pid in ray_pids})
    print(json.dumps({"url": url, "node_ip": node_ip, "outside_ip": outside_ip, "outside": outside,
                      "worker_found": worker in ray_pids, "listening": listening,
                      "without_token": status({}), "with_token": status({"Authorization": f"Bearer {token}"})}))
finally:
    ray.shutdown()
"""


def _loopback(ip: str) -> bool:
    """Whether ``ip`` is a loopback address (an IPv4-mapped one, ``::ffff:127.0.0.1``, too)."""
    addr = ipaddress.ip_address(ip)
    return addr.is_loopback or bool(getattr(addr, "ipv4_mapped", None) and addr.ipv4_mapped.is_loopback)


@pytest.mark.slow  # starts Ray with its dashboard
def test_local_ray_is_its_own_on_loopback_with_token_auth_and_one_notice_line(tmp_path):
    """A local run's Ray (RAY_AUTH_MODE unset, a fresh home), on a machine where ``ray start`` left
    a cluster's address behind (Ray's ``ray_current_cluster`` file, here naming nothing): the run
    starts a Ray of its own instead of joining it; every socket that the driver and its Ray's
    processes listen on (GCS, raylet, agents, workers, dashboard) is on loopback, and neither the
    dashboard nor the GCS answers on the machine's reachable address; the dashboard's job
    API refuses a request without the token (401) and accepts one with it; stderr has isles' one
    line naming the token's file instead of Ray's warning; the token file is readable by its owner
    only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_ADDRESS"))}
    ray_tmp = Path(tempfile.mkdtemp(prefix="isles-r", dir="/tmp"))  # short: Ray's socket paths
    (ray_tmp / "ray").mkdir()
    (ray_tmp / "ray" / "ray_current_cluster").write_text("127.0.0.1:1")
    env.update(
        HOME=str(tmp_path), RAY_TMPDIR=str(ray_tmp), PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    )
    token = tmp_path / ".ray" / "auth_token"
    try:
        p = subprocess.run(
            [sys.executable, "-c", PROBE, str(token)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["url"].startswith("127.0.0.1:")
    # every listening socket of the driver and the Ray processes it started (GCS, raylet, agents, a
    # worker) is on loopback: none on 0.0.0.0, ::, or the machine's reachable address
    names = {name for name, _ in out["listening"]}
    assert out["worker_found"] and {"gcs_server", "raylet"} <= names, out["listening"]
    assert all(_loopback(ip) for _, ip in out["listening"]), out["listening"]
    assert out["without_token"] == 401 and out["with_token"] == 200
    assert out["node_ip"] == "127.0.0.1"  # the node's address, which Ray hands to its processes
    if out["outside_ip"] != "127.0.0.1":  # neither the dashboard nor the GCS answers from outside
        assert out["outside"] == "refused"
    assert ENABLED_WARNING not in p.stderr
    notices = [ln for ln in p.stderr.splitlines() if "token authentication" in ln.lower()]
    assert notices == [
        f"isles: Ray token authentication is on; token: {token} (export RAY_AUTH_MODE=token to skip this line)"
    ]
    assert stat.S_IMODE(token.stat().st_mode) == 0o600


def test_notice_replaces_only_rays_warning_and_nothing_without_it(monkeypatch):
    """Within token_notice, Ray's warning through its auth logger is held back and becomes one line;
    another warning of the same logger still passes; without the warning (RAY_AUTH_MODE set,
    Ray older than 2.52, or authentication off) nothing is printed."""
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", "/somewhere/token")
    logger = logging.getLogger(AUTH_LOGGER)
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    keep = Keep()
    logger.addHandler(keep)
    try:
        out = io.StringIO()
        with token_notice(out):
            logger.warning(ENABLED_WARNING + ". Set RAY_AUTH_MODE=disabled to opt out.")
            logger.warning("something else")
        assert seen == ["something else"]
        assert out.getvalue() == (
            "isles: Ray token authentication is on; token: /somewhere/token "
            "(export RAY_AUTH_MODE=token to skip this line)\n"
        )
        quiet = io.StringIO()
        with token_notice(quiet):
            logger.warning("something else")
        assert quiet.getvalue() == "" and seen == ["something else"] * 2
        logger.warning(ENABLED_WARNING)  # outside token_notice Ray's logging is untouched
        assert seen[-1] == ENABLED_WARNING
    finally:
        logger.removeHandler(keep)


def test_dashboard_host_must_be_an_ip_address():
    """``ray.dashboard_host`` is checked before Ray starts: one line naming the field and the
    allowed values; the default is 127.0.0.1 and 0.0.0.0 is the explicit opt-in."""
    cfg = plain(make_cfg("ray.dashboard_host=0.0.0.0"))
    validate(cfg)
    assert plain(make_cfg())["ray"]["dashboard_host"] == "127.0.0.1"
    for host in ["localhost", "0.0.0.0.1", "", "my-laptop"]:
        cfg["ray"]["dashboard_host"] = host
        with pytest.raises(ValueError) as err:
            validate(cfg)
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith(f"ray.dashboard_host={host!r}: allowed values are")
        assert "127.0.0.1" in msg and "0.0.0.0" in msg
