"""How a job's errors are told apart and reported: a config refusal of isles' own checks
(:func:`is_config_error`, exit status 2) or a failure inside the run (exit status 1,
:func:`isles.app.job.failure_line`), and an error's one-line message (:func:`error_message`)."""

from __future__ import annotations

import os
import re
import sys
import traceback

from isles.app.report import is_library


def _frames(err: BaseException) -> tuple[str, list]:
    """The full traceback text of ``err`` (a Ray task error's remote traceback too) and its frames
    outside installed packages and the standard library, ``[(file, line), ...]``, innermost last."""
    text = "".join(traceback.format_exception(err)) + str(getattr(err, "traceback_str", ""))
    frames = [
        (m.group(1), m.group(2)) for m in re.finditer(r'File "([^"]+)", line (\d+)', text) if not is_library(m.group(1))
    ]
    return text, frames


def _own_folders() -> tuple[str, ...]:
    """The folders of isles' own code (``isles/``, and a checkout's ``algorithms/``, ``problems/``,
    ``islands/``, ``app/``), each ending in a path separator."""
    import isles.algorithms  # noqa: PLC0415
    import isles.problems  # noqa: PLC0415

    mods = (
        sys.modules["isles"],
        isles.algorithms,
        isles.problems,
        sys.modules["isles.islands"],
        sys.modules["isles.app"],
    )
    return tuple(os.path.join(os.path.dirname(os.path.realpath(m.__file__)), "") for m in mods)


def is_config_error(err: BaseException) -> bool:
    """Whether ``err`` is one of isles' one-line refusals of a config value (exit status 2): a
    ``ValueError`` raised by isles' own checks, before or during the run. A ``ValueError`` raised
    in a user's code (a problem's objective, or NumPy called from it: the innermost frame outside
    installed packages is the user's file) is a failure inside the run, like any other error
    (:func:`failure_line`, exit status 1). On a cluster whose workers run isles from another path
    than this process, a refusal raised in an actor counts as a failure inside the run."""
    cause = getattr(err, "cause", None) or err
    if not isinstance(cause, ValueError):
        return False
    _, frames = _frames(err)
    return not frames or os.path.realpath(frames[-1][0]).startswith(_own_folders())


#: config keys of earlier versions and where they went: an unknown-key line about one names the new place
MOVED = {
    "master": "a plug-in of the list plugins: +plugin=master_swarm (docs/architecture.md)",
    "islands.master_sends_best": "plugins.0.sends_best, with +plugin=master_swarm or +experiment=cmepso",
}


def error_message(err: BaseException) -> str:
    """The first line of ``err``'s message (of its cause, for a Ray task error); an unknown key
    that an earlier version had (:data:`MOVED`) gets where it went."""
    cause = getattr(err, "cause", None) or err
    line = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    # the schema's line (islands/config/schema.py check_keys): KEY: unknown key[ (did you mean 'K'?)][; ...]
    m = re.match(r"(\S+): unknown key(?: \(did you mean '[^']*'\?\))?(?=;|$)", line)
    if m and m.group(1) in MOVED:
        return f"{m.group(1)}: unknown key (it moved: {MOVED[m.group(1)]}){line[m.end() :]}"
    return line
