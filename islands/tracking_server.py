"""Where a run's MLflow records go, checked before the run starts.

``logger.tracking_uri`` (or, when it is null, the ``MLFLOW_TRACKING_URI`` environment variable)
may name an MLflow tracking server, ``http(s)://HOST:PORT``. MLflow's own HTTP client retries an
unreachable server for minutes, and in isles it works in a process of its own
(:class:`isles.islands.tracking.TrackingProcess`), so a dead server would only show at the end of
the run. :func:`reach_tracking_store` asks the server's ``/health`` endpoint first, with a short
timeout, before Ray or any evolution starts: a server that does not answer is a one-line error,
or, with ``logger.fallback_local=true``, the run goes to the local store instead (one line says
where).

Other URIs (``sqlite:///...``, ``file:...``, ``databricks``, ...) are MLflow's to open and are
not probed. Imports nothing from MLflow (seconds), only the standard library.
"""
from __future__ import annotations

import os
import sys
from urllib.parse import urlsplit

#: seconds the ``/health`` probe waits for the server (a refused connection returns at once)
PROBE_TIMEOUT_S = 5.0


def tracking_uri_of(logger_cfg: dict) -> tuple[str | None, str]:
    """The URI MLflow will use and how to name it in a message: ``logger.tracking_uri``, else
    ``MLFLOW_TRACKING_URI`` (named ``logger.tracking_uri=null (MLFLOW_TRACKING_URI=...)``), else
    ``None`` (MLflow's default local store)."""
    uri = logger_cfg.get("tracking_uri")
    if uri:
        return str(uri), f"logger.tracking_uri={str(uri)!r}"
    env = os.environ.get("MLFLOW_TRACKING_URI")
    return (env, f"logger.tracking_uri=null (MLFLOW_TRACKING_URI={env!r})") if env else (None, "")


def _ssl_context():
    """The TLS settings MLflow's client would use: ``MLFLOW_TRACKING_INSECURE_TLS=true`` skips
    verification, ``MLFLOW_TRACKING_SERVER_CERT_PATH`` names a CA bundle. Returns an
    ``ssl.SSLContext`` or ``None`` (Python's default)."""
    import ssl  # noqa: PLC0415  (with urllib.request: only a run that logs to a server needs them)

    if os.environ.get("MLFLOW_TRACKING_INSECURE_TLS", "").lower() == "true":
        return ssl._create_unverified_context()  # noqa: S323  (the user asked for it, as MLflow does)
    cafile = os.environ.get("MLFLOW_TRACKING_SERVER_CERT_PATH")
    return ssl.create_default_context(cafile=cafile) if cafile else None


def probe(uri: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Ask the tracking server at ``uri`` (``http(s)://HOST:PORT[/prefix]``) for ``/health``.

    Returns:
        ``None`` when something answers over HTTP (any status: a proxy or an authenticating
        server answers too, and MLflow's client reports what it says), else the reason in a few
        words (``[Errno 111] Connection refused``, ``timed out``, a TLS error).
    """
    import urllib.error  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415

    url = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s, context=_ssl_context()):  # noqa: S310  (http(s) only)
            return None
    except urllib.error.HTTPError:
        return None
    except urllib.error.URLError as err:
        return str(err.reason)
    except (OSError, ValueError) as err:  # timeouts, resets, a malformed host
        return str(err) or type(err).__name__


def local_store_uri() -> str:
    """The local store a run falls back to: ``sqlite:///<launch directory>/mlflow.db`` (MLflow's
    default store, where ``mlflow ui`` started in that directory looks)."""
    return "sqlite:///" + os.path.abspath("mlflow.db")


def reach_tracking_store(logger_cfg: dict, timeout_s: float = PROBE_TIMEOUT_S) -> dict:
    """The logger config to run with, after checking that its tracking server answers.

    A URI that is not ``http(s)://`` passes unchanged. A server that does not answer within
    ``timeout_s`` seconds is an error, or, with ``logger.fallback_local=true``, is replaced by
    :func:`local_store_uri` with one line on stderr saying where the run goes.

    Args:
        logger_cfg: the plain ``logger`` config (``tracking_uri``, ``fallback_local``, ...).
        timeout_s: seconds to wait for ``/health``.

    Returns:
        ``logger_cfg`` itself, or a copy with ``tracking_uri`` set to the local store.

    Raises:
        ValueError: one line naming ``logger.tracking_uri`` and the URI, the reason, and what to do.
    """
    uri, named = tracking_uri_of(logger_cfg)
    if not uri or urlsplit(uri).scheme not in ("http", "https"):
        return logger_cfg
    reason = probe(uri, timeout_s)
    if reason is None:
        return logger_cfg
    if not logger_cfg.get("fallback_local"):
        raise ValueError(f"{named}: no MLflow tracking server answers there ({reason}); start it "
                         "(mlflow server --host 127.0.0.1 --port PORT), fix the URI, or set "
                         "logger.fallback_local=true to log to the local store instead")
    local = local_store_uri()
    print(f"isles: the MLflow server {uri} does not answer ({reason}); this run goes to the local store "
          f"{local} (logger.fallback_local=true)", file=sys.stderr, flush=True)
    return {**logger_cfg, "tracking_uri": local}
