"""A user's own modules (``problem._target_=my_module.MyProblem``) on a Ray cluster.

The driver imports them from the launch directory or ``PYTHONPATH`` (:func:`isles.cli.main`).
A local Ray's workers see the same directories (Ray adds the driver's directory, and isles passes
``PYTHONPATH``). A cluster's workers do not: Ray adds the driver's directory only when the job has
no ``working_dir``, and a path of the driver's machine means nothing on another node. So
:func:`init_ray <isles.app.ray_setup.init_ray>` ships the files that :func:`user_module_paths`
finds as Ray's ``runtime_env`` ``py_modules``.
"""

from __future__ import annotations

import importlib.util
import os
import site
import sysconfig


def config_targets(cfg) -> list[str]:
    """Every ``_target_`` string in the plain config ``cfg`` (nested dicts and lists)."""
    found = []
    if isinstance(cfg, dict):
        for key, value in cfg.items():
            if key == "_target_" and isinstance(value, str):
                found.append(value)
            else:
                found += config_targets(value)
    elif isinstance(cfg, list):
        for value in cfg:
            found += config_targets(value)
    return found


def _installed_roots() -> list[str]:
    """Folders of installed code (the standard library and site-packages)."""
    paths = sysconfig.get_paths()
    roots = [paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    roots += site.getsitepackages() + [site.getusersitepackages()]
    return [os.path.realpath(r) for r in roots if r]


def _inside(path: str, folder: str | None) -> bool:
    if not folder:
        return False
    folder = os.path.realpath(folder)
    return os.path.commonpath([os.path.realpath(path), folder]) == folder


def user_module_paths(cfg: dict, shipped: tuple = ()) -> list[str]:
    """Files or package folders of the user's modules that the config's ``_target_``\\ s name:
    the top-level module of each target, unless it is isles, installed code, or inside one of the
    folders ``shipped`` already travels in (the checkout as Ray's ``working_dir``, the directory
    of a ``ray job submit --working-dir``). Modules that cannot be found are left to the config
    check (:func:`isles.islands.config.build.build_problem`).

    Returns:
        Absolute paths, sorted: a ``.py`` file or a package folder each, as Ray's ``py_modules`` takes them.
    """
    tops = sorted({t.split(".")[0] for t in config_targets(cfg)} - {"isles"})
    installed = _installed_roots()
    paths = []
    for top in tops:
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        if spec.submodule_search_locations:
            path = list(spec.submodule_search_locations)[0]
        elif spec.origin and spec.origin.endswith(".py"):
            path = spec.origin
        else:  # built-in, frozen or compiled: not the user's source
            continue
        if any(_inside(path, root) for root in installed) or any(_inside(path, s) for s in shipped):
            continue
        paths.append(os.path.realpath(path))
    return sorted(set(paths))
