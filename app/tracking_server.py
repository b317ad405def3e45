"""Where a run's MLflow records go, checked before the run starts.

``logger.tracking_uri`` (or, when it is null, the ``MLFLOW_TRACKING_URI`` environment variable)
may name an MLflow tracking server, ``http(s)://HOST:PORT``. MLflow's own HTTP client retries an
unreachable server for minutes, and in isles it works in a process of its own
(:class:`isles.app.tracking_process.TrackingProcess`), so a dead server would only show at the end of
the run. :func:`reach_tracking_store` asks the server's ``/health`` endpoint first, with a short
timeout, before Ray or any evolution starts: a server that does not answer is a one-line error,
or, with ``logger.fallback_local=true``, the run goes to the local store instead (one line says
where).

Other URIs (``sqlite:///...``, ``file:...``, ``databricks``, ...) are not probed, but checked
(:func:`check_store_uri`): a scheme MLflow has no store for, a local store that cannot be written,
and a ``file:`` store (or plain path) that MLflow 3 refuses unless ``MLFLOW_ALLOW_FILE_STORE=true``
are one-line errors before the run. A local store (MLflow's default ``mlflow.db``, a relative ``sqlite:`` or ``file:`` path)
inside Ray's temporary copy of a job's working directory (``ray job submit --working-dir``) is
refused before the run starts: Ray deletes that copy with its session (:func:`check_not_in_ray_copy`).
Imports nothing from MLflow (seconds), only the standard library.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
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


def ray_job_copy() -> str | None:
    """The working directory when this process is the entrypoint of a Ray job submitted with a
    working directory (``ray job submit --working-dir DIR``): Ray runs it in its own unpacked copy
    of ``DIR``, under the cluster's temporary session folder, deleted with the session. ``None``
    otherwise (Ray's job supervisor names the job's runtime environment in
    ``RAY_JOB_CONFIG_JSON_ENV_VAR``)."""
    try:
        job = json.loads(os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR") or "{}")
    except ValueError:
        return None
    runtime_env = (job.get("runtime_env") if isinstance(job, dict) else None) or {}
    return os.getcwd() if "working_dir" in runtime_env else None


def local_store_path(uri: str | None) -> str | None:
    """The absolute file or folder that a local MLflow store ``uri`` writes: ``None`` (MLflow's
    default, ``mlflow.db`` in the working directory), ``sqlite:///PATH``, ``file:PATH`` or a plain
    path, relative paths taken from the working directory; ``None`` for any other store (a
    tracking server, ``databricks``, a database server)."""
    if not uri:
        return os.path.abspath("mlflow.db")
    parts = urlsplit(uri)
    if parts.scheme == "sqlite":
        path = uri[len("sqlite:///") :] if uri.startswith("sqlite:///") else ""
        return os.path.abspath(path) if path and path != ":memory:" else None
    if parts.scheme == "file":
        return os.path.abspath(parts.path)
    if uri.split(":")[0] in ("databricks", "databricks-uc", "uc"):  # MLflow's scheme-less stores
        return None
    if not parts.scheme or len(parts.scheme) == 1:  # a plain path (a Windows drive letter too)
        return os.path.abspath(uri)
    return None


def prepare_sqlite_store(uri: str | None) -> str | None:
    """Create and upgrade a local SQLite tracking store once, under a file lock, before any run
    opens it.

    MLflow creates a fresh database's tables and runs its migrations in whichever process opens
    the store first, with no lock (``SqlAlchemyStore.__init__``): two runs started at once in a
    folder without ``mlflow.db`` (a parallel sweep, two terminals) race, and lose their records
    (``duplicate column name: step``, ``table ... already exists``, alembic's ``Online migration
    expected to match one row``) or leave the database half-migrated. Here the process that holds
    an exclusive ``fcntl.flock`` on ``<database>.lock`` (beside the database) creates the tables
    and runs the migrations (MLflow's own ``_initialize_tables``) on MLflow's cached engine; the
    others wait, then find every table there. Without ``fcntl`` (Windows) nothing is locked, as
    in MLflow's own ``_safe_initialize_tables``.

    Args:
        uri: the tracking URI (``None``: MLflow's current one).

    Returns:
        the database's path, or ``None`` for a store that is not a SQLite file (nothing done).
    """
    from mlflow.store.db import utils as db_utils  # noqa: PLC0415
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore  # noqa: PLC0415

    if not uri:
        import mlflow  # noqa: PLC0415  (isles.app.tracking.mlflow_module: imported on first use)

        uri = mlflow.get_tracking_uri()
    if not uri.startswith("sqlite:"):
        return None
    path = local_store_path(uri)
    if path is None:  # sqlite:///:memory: and the like
        return None
    try:
        import fcntl  # noqa: PLC0415
    except ImportError:  # Windows: MLflow's own unlocked creation
        fcntl = None
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".lock", "a") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        engine = SqlAlchemyStore._get_or_create_engine(uri)  # MLflow's cached engine: its stores reuse it
        if not db_utils._all_tables_exist(engine):
            db_utils._initialize_tables(engine)
    return path


def check_not_in_ray_copy(logger_cfg: dict, copy: str | None = None) -> None:
    """Refuse a local MLflow store inside Ray's temporary copy of a job's working directory.

    Args:
        logger_cfg: the plain ``logger`` config.
        copy: that copy's path; default :func:`ray_job_copy` (``None`` outside such a job: nothing
            to check).

    Raises:
        ValueError: one line naming ``logger.tracking_uri``, where the store would go, and the
            stores that outlive the job.
    """
    copy = ray_job_copy() if copy is None else copy
    if not copy:
        return
    uri, named = tracking_uri_of(logger_cfg)
    path = local_store_path(uri)
    root = os.path.join(os.path.realpath(copy), "")
    if path is None or not os.path.join(os.path.realpath(path), "").startswith(root):
        return
    named = named or "logger.tracking_uri=null (MLflow's default store, mlflow.db in the working directory)"
    raise ValueError(
        f"{named}: this Ray job runs in Ray's temporary copy of its working directory ({copy}), "
        "deleted with the Ray session, and the run would be recorded there; allowed values are a "
        "tracking server (logger.tracking_uri=http://HOST:5000, cluster/README.md) or a store "
        "outside that copy (logger.tracking_uri=sqlite:////ABSOLUTE/PATH/mlflow.db), or logger=none"
    )


def local_artifact_root(uri: str | None) -> str | None:
    """Where a new experiment of a local ``sqlite:`` store keeps its artifacts when the database
    is not in the working directory: ``mlruns`` beside it (a ``file:`` URI), so that the artifacts
    stay with the store, not in whichever directory the run was launched from (under ``ray job
    submit``, Ray's temporary copy). ``None`` (MLflow's own default, ``./mlruns``) for a database
    in the working directory and for other stores."""
    if not uri or not uri.startswith("sqlite:"):
        return None
    path = local_store_path(uri)
    if path is None or os.path.dirname(path) == os.path.abspath(os.getcwd()):
        return None
    return Path(os.path.dirname(path), "mlruns").as_uri()


#: the schemes of MLflow's own tracking stores (``postgresql+psycopg2`` counts as ``postgresql``);
#: a plugin's scheme (entry point group ``mlflow.tracking_store``) is accepted too
MLFLOW_SCHEMES = (
    "sqlite",
    "http",
    "https",
    "postgresql",
    "mysql",
    "mssql",
    "file",
    "databricks",
    "databricks-uc",
    "uc",
)
ALLOWED_STORES = (
    "sqlite:///PATH/mlflow.db (a folder you can write), http(s)://HOST:PORT (a tracking server), "
    "postgresql://, mysql://, mssql://, databricks, or logger=none"
)


def _plugin_schemes() -> set:
    """Schemes of tracking stores that installed packages add to MLflow (entry point group
    ``mlflow.tracking_store``)."""
    from importlib.metadata import entry_points  # noqa: PLC0415

    try:
        return {ep.name for ep in entry_points(group="mlflow.tracking_store")}
    except Exception:  # noqa: BLE001  (broken metadata: only MLflow's own schemes)
        return set()


def _mlflow_refuses_file_stores() -> bool:
    """Whether the installed MLflow (3 and later) refuses a ``file:`` store: unless
    ``MLFLOW_ALLOW_FILE_STORE`` is ``true`` or ``1`` (MLflow's own reading of it)."""
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() in ("true", "1"):
        return False
    try:
        return int(version("mlflow").split(".")[0]) >= 3
    except (PackageNotFoundError, ValueError):
        return False


def unwritable(path: str, folder: bool) -> str | None:
    """Why a local store at ``path`` (a database file, or with ``folder`` a ``file:`` store's
    folder) cannot be written, in a few words, or ``None`` when it can (what is missing of the
    path is made by MLflow). Takes the path's nearest part that exists."""
    if os.path.exists(path):
        if folder != os.path.isdir(path):
            return f"{path} is a {'file' if folder else 'folder'}, not a {'folder' if folder else 'file'}"
        return None if os.access(path, os.W_OK) else f"{path} is not writable"
    parent = os.path.dirname(path)
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return f"{parent} is a file, not a folder"
    return None if os.access(parent, os.W_OK | os.X_OK) else f"cannot create anything in {parent}"


def check_store_uri(logger_cfg: dict) -> None:
    """Check, before the run, that MLflow can open the tracking store that ``logger.tracking_uri``
    (or ``MLFLOW_TRACKING_URI``, or MLflow's default ``mlflow.db``) names, without importing MLflow:
    a scheme MLflow knows (its own or a plugin's); a local store (``sqlite:``, ``file:``, a plain
    path) whose file or folder can be written; a ``file:`` store or plain path only where MLflow
    takes one (MLflow 3 refuses them unless ``MLFLOW_ALLOW_FILE_STORE=true``). A tracking server
    is probed by :func:`reach_tracking_store`.

    Raises:
        ValueError: one line naming ``logger.tracking_uri``, what is wrong, and the allowed values.
    """
    uri, named = tracking_uri_of(logger_cfg)
    named = named or "logger.tracking_uri=null (MLflow's default store, mlflow.db in the working directory)"
    scheme = urlsplit(uri).scheme.lower() if uri else "sqlite"
    if uri in ("databricks", "databricks-uc", "uc"):
        return
    if len(scheme) == 1:  # a Windows drive letter: a plain path
        scheme = ""
    base = scheme.split("+")[0]
    if base and base not in MLFLOW_SCHEMES and base not in _plugin_schemes():
        raise ValueError(
            f"{named}: MLflow has no tracking store for the scheme {scheme!r}; allowed values are " + ALLOWED_STORES
        )
    file_store = base in ("", "file")
    if file_store and _mlflow_refuses_file_stores():
        raise ValueError(
            f"{named}: MLflow 3 refuses a file store (a file: URI or a plain path) unless "
            "MLFLOW_ALLOW_FILE_STORE=true is set in the environment; set it, or use "
            "sqlite:///PATH/mlflow.db (MLflow's default) or a tracking server http(s)://HOST:PORT"
        )
    path = local_store_path(uri) if base in ("", "file", "sqlite") else None
    reason = unwritable(path, folder=file_store) if path else None
    if reason:
        raise ValueError(f"{named}: nothing can be written there ({reason}); allowed values are " + ALLOWED_STORES)


def reach_tracking_store(logger_cfg: dict, timeout_s: float = PROBE_TIMEOUT_S) -> dict:
    """The logger config to run with, after checking that its tracking server answers.

    A store MLflow cannot open or write (:func:`check_store_uri`: an unknown scheme, a path that
    cannot be written, a ``file:`` store MLflow refuses) and a local store inside Ray's temporary
    copy of a job's working directory (:func:`check_not_in_ray_copy`) are refused, also after a
    fallback. Any other URI that is not ``http(s)://`` passes unchanged. A server that does not answer within
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
        check_store_uri(logger_cfg)
        check_not_in_ray_copy(logger_cfg)
        return logger_cfg
    reason = probe(uri, timeout_s)
    if reason is None:
        return logger_cfg
    if not logger_cfg.get("fallback_local"):
        raise ValueError(
            f"{named}: no MLflow tracking server answers there ({reason}); start it "
            "(mlflow server --host 127.0.0.1 --port PORT), fix the URI, or set "
            "logger.fallback_local=true to log to the local store instead"
        )
    local = local_store_uri()
    check_store_uri({**logger_cfg, "tracking_uri": local})
    check_not_in_ray_copy({**logger_cfg, "tracking_uri": local})
    print(
        f"isles: the MLflow server {uri} does not answer ({reason}); this run goes to the local store "
        f"{local} (logger.fallback_local=true)",
        file=sys.stderr,
        flush=True,
    )
    return {**logger_cfg, "tracking_uri": local}
