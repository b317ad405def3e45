"""Security defaults of the Ray that isles starts or joins: the dashboard's address and Ray's
token authentication.

* **Dashboard.** With ``ray.include_dashboard=true`` the dashboard of a local Ray listens on
  ``ray.dashboard_host``, :data:`LOCAL_DASHBOARD_HOST` unless the user opts in to another address
  (``0.0.0.0``: every interface). On a cluster the cluster's ``ray start`` decides
  (``cluster/aws.yaml`` binds it to 127.0.0.1; reach it through an SSH tunnel).
* **Token authentication** (Ray >= 2.52). A Ray that ``ray.init()`` starts has it on unless
  ``RAY_AUTH_MODE`` says otherwise, and Ray then logs at every start the WARNING
  ``Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled to opt out.
  For more information, see https://docs.ray.io/en/latest/ray-security/token-auth.html`` (also when
  ``ray.address=auto`` finds a token). isles leaves authentication as Ray decides and, within
  :func:`token_notice`, replaces that warning by one informational line naming the token's file.
  ``RAY_AUTH_MODE=token`` (Ray's own setting: authentication on, chosen explicitly) makes Ray and
  isles print nothing; ``RAY_AUTH_MODE=disabled`` turns authentication off.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import stat
import sys
from contextlib import contextmanager
from pathlib import Path

LOCAL_DASHBOARD_HOST = "127.0.0.1"
"""Where the dashboard of a Ray that isles starts listens unless ``ray.dashboard_host`` says
otherwise: this machine only."""

AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"
"""The logger Ray warns through when it turns token authentication on by itself."""

ENABLED_WARNING = "Token authentication is enabled for this Ray cluster"
"""The start of that warning (Ray 2.52 and later)."""


def check_dashboard_host(value) -> None:
    """Refuse a ``ray.dashboard_host`` that is not an IP address.

    Raises:
        ValueError: one line naming ``ray.dashboard_host`` and the allowed values.
    """
    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        raise ValueError(
            f"ray.dashboard_host={value!r}: allowed values are IP addresses of this machine: "
            f"{LOCAL_DASHBOARD_HOST} (this machine only, the default) or 0.0.0.0 (every "
            "interface: whoever reaches this machine reaches the dashboard)"
        ) from None


def token_location() -> str:
    """Where Ray reads the token, in Ray's order: the ``RAY_AUTH_TOKEN`` variable, the file that
    ``RAY_AUTH_TOKEN_PATH`` names, else ``~/.ray/auth_token`` (the user's home expanded)."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "the RAY_AUTH_TOKEN environment variable"
    if os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return os.environ["RAY_AUTH_TOKEN_PATH"]
    return str(Path.home() / ".ray" / "auth_token")


def protect_default_token() -> None:
    """Make ``~/.ray/auth_token`` readable by its owner only, as Ray's documentation asks (Ray
    writes it with the process umask, often world-readable). A token named by
    ``RAY_AUTH_TOKEN_PATH``, or a file another user owns, is left as it is."""
    if os.environ.get("RAY_AUTH_TOKEN_PATH") or os.environ.get("RAY_AUTH_TOKEN"):
        return
    path = Path.home() / ".ray" / "auth_token"
    try:
        st = path.stat()
        if st.st_uid == os.getuid() and st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            path.chmod(stat.S_IRUSR | stat.S_IWUSR)
    except OSError:  # no token file (authentication off), or one we may not change
        pass


class _HoldEnabledWarning(logging.Filter):
    """Drops Ray's warning that token authentication is on, and remembers that it came."""

    def __init__(self):
        super().__init__()
        self.seen = False

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith(ENABLED_WARNING):
            self.seen = True
            return False
        return True


@contextmanager
def token_notice(stream=None):
    """Around ``ray.init``: Ray's warning that it turned token authentication on is
    held back; afterwards, if it came, ``~/.ray/auth_token`` is made readable by its owner only
    (:func:`protect_default_token`) and one line goes to ``stream`` (stderr by default)::

        isles: Ray token authentication is on; token: /home/me/.ray/auth_token (export RAY_AUTH_MODE=token to skip this line)

    Only that one warning of that one logger is held; everything else Ray logs passes."""
    logger = logging.getLogger(AUTH_LOGGER)
    hold = _HoldEnabledWarning()
    logger.addFilter(hold)
    try:
        yield
    finally:
        logger.removeFilter(hold)
    if hold.seen:
        protect_default_token()
        print(
            f"isles: Ray token authentication is on; token: {token_location()} "
            "(export RAY_AUTH_MODE=token to skip this line)",
            file=stream or sys.stderr,
        )
