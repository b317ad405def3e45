"""A job's callbacks: the config group ``callbacks`` (``conf/callbacks/``), a mapping of names to
``_target_`` nodes, each built with the run's :class:`RunContext` and called in the order written
(:class:`isles.islands.control.callbacks.Callback`; the MLflow tracker comes after them all).

The default (``conf/callbacks/default.yaml``) holds the built-ins, each a factory here that returns
``None`` where its run has no use for it: :func:`solution_file` (``best_solution.json``), :func:`history_files`
(``history.csv``, ``migrations.csv``) and :func:`progress` (the console's bar and summary).

A user's own: ``+callbacks.mine._target_=my_module.MyCallback`` (a class or function called with
the node's other keys and ``run=``, the :class:`RunContext`), or a file ``conf/callbacks/NAME.yaml``
whose ``defaults`` list takes ``default``; ``~callbacks.progress`` leaves a built-in out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hydra.utils import get_object, instantiate
from isles.app.progress import ConsoleProgress
from isles.app.run_files import HistoryFiles, SolutionFile
from isles.islands.config.build import cannot_build
from isles.islands.control.callbacks import HOOKS, Callback, checked


@dataclass(frozen=True)
class RunContext:
    """What a callback is built with (the ``run`` argument of its ``_target_``).

    Attributes:
        problem: the run's problem object; config: the run's resolved config (plain dict, without
            ``hydra``); folder: the run's output folder, or ``None`` (nothing written); resumed: the run
            resumes a checkpoint.
    """

    problem: Any
    config: dict
    folder: str | None
    resumed: bool = False


def solution_file(run: RunContext) -> Callback:
    """:class:`isles.app.run_files.SolutionFile`: ``best_solution.json`` in the output folder."""
    return SolutionFile(run.problem, run.config, run.folder)


def history_files(run: RunContext) -> Callback | None:
    """:class:`isles.app.run_files.HistoryFiles` in the output folder, or ``None`` without one."""
    return HistoryFiles(run.folder, resumed=run.resumed) if run.folder else None


def progress(run: RunContext) -> Callback | None:
    """:class:`isles.app.progress.ConsoleProgress` where ``progress`` is true, else ``None``."""
    return ConsoleProgress(run.problem) if run.config["progress"] else None


def _nodes(nodes) -> dict:
    """The config's ``callbacks`` mapping without its ``None`` entries.

    Raises:
        ValueError: not a mapping of nodes with ``_target_`` (one line naming ``callbacks`` or ``callbacks.<name>``).
    """
    if nodes is None:
        return {}
    if not isinstance(nodes, dict):
        raise ValueError(
            f"callbacks={nodes!r}: allowed values are a mapping of names to nodes with _target_ "
            "(conf/callbacks/default.yaml)"
        )
    for name, node in nodes.items():
        if node is not None and (not isinstance(node, dict) or node.get("_target_") is None):
            raise ValueError(f"callbacks.{name}={node!r}: allowed values are nodes with _target_")
    return {name: node for name, node in nodes.items() if node is not None}


def check_callbacks(nodes) -> None:
    """Check the config's ``callbacks`` before anything runs (:func:`isles.app.job.prepare`): each
    target imports, and a class target is a :class:`isles.islands.control.callbacks.Callback` (a
    function's return is checked when :func:`build_callbacks` calls it).

    Raises:
        ValueError: one line naming ``callbacks.<name>``, as :func:`build_callbacks`.
    """
    for name, node in _nodes(nodes).items():
        field, target = f"callbacks.{name}._target_={node['_target_']!r}", node["_target_"]
        try:
            obj = get_object(target)
        except Exception as err:
            raise ValueError(cannot_build(f"callbacks.{name}", target, err)) from None
        if isinstance(obj, type) and not issubclass(obj, Callback):
            missing = [h for h in HOOKS if not callable(getattr(obj, h, None))]
            raise ValueError(
                f"{field}: {obj.__module__}.{obj.__qualname__} is not a callback: it lacks {', '.join(missing)} "
                "(subclass isles.islands.control.callbacks.Callback: a no-op for each method it does not define)"
            )


def build_callbacks(nodes, run: RunContext) -> list:
    """The run's callbacks from the config's ``callbacks`` mapping, in its order (``None``-valued
    entries and factories that return ``None`` left out).

    Raises:
        ValueError: one line naming ``callbacks.<name>``: not a mapping of nodes with ``_target_``, a
            target that cannot be built (:func:`isles.islands.config.build.cannot_build`), or an object
            that is not a :class:`isles.islands.control.callbacks.Callback`.
    """
    out = []
    for name, node in _nodes(nodes).items():
        target = node["_target_"]
        try:
            cb = instantiate(node, _partial_=True, _convert_="all")(run=run)
        except Exception as err:
            cause = err.__cause__ or err
            if isinstance(cause, ValueError):
                raise cause from None
            raise ValueError(cannot_build(f"callbacks.{name}", target, err)) from None
        if cb is not None:
            try:
                out.append(checked(cb, f"callbacks.{name}._target_={target!r}"))
            except TypeError as err:
                raise ValueError(str(err)) from None
    return out
