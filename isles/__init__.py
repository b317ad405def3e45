"""isles: a distributed, multi-GPU island runner for evolutionary algorithms.

One top-level package with four parts, each a folder of the repository mapped into it by
setuptools' ``package-dir`` (``pyproject.toml``):

* :mod:`isles.algorithms`: the algorithms (DE, PSO/EPSO/CMEPSO, GA, FEP, CDE) over NumPy or CuPy;
* :mod:`isles.problems`: the problems (benchmarks, engineering designs, binary, min-max, CEC2006);
* :mod:`isles.islands`: the island runtime (Ray actors, placement, migration, planner, loops,
  recovery, transport, the typed config schema);
* :mod:`isles.app`: the application around the runtime (one job from a config, MLflow tracking,
  sweeps, Ray's security defaults, console output and plots);
* ``isles.conf``: the Hydra configs (package data), run by :func:`isles.cli.main`.

From a checkout (``python run.py``, the tests, the benchmarks), the repository's folders are the
package's parts even when isles is not installed: :data:`CHECKOUT` is then the repository root,
and it is added to this package's search path. Installed from a wheel, :data:`CHECKOUT` is
``None`` and the parts live inside the package.
"""

from __future__ import annotations

import sys
from pathlib import Path

__version__ = "0.1.0"


def _checkout() -> Path | None:
    """The repository root if this package runs from a checkout of isles, else ``None``."""
    root = Path(__file__).resolve().parent.parent
    here = Path(__file__).resolve().parent
    if (here / "algorithms").is_dir():  # installed (wheel): the parts are inside the package
        return None
    if (root / "islands" / "coordinator.py").is_file() and (root / "pyproject.toml").is_file():
        return root
    return None


CHECKOUT: Path | None = _checkout()
"""The repository root when isles runs from a checkout (its folders are the package's parts)."""

if CHECKOUT is not None and str(CHECKOUT) not in __path__:  # noqa: F821  (module __path__)
    __path__.append(str(CHECKOUT))  # noqa: F821


def git_commit() -> str:
    """The checkout's HEAD commit, or ``"unknown"`` (an installed wheel, or no git); the tag
    ``git_commit`` of a run and of a sweep's parent run (:mod:`isles.app.tracking`,
    :mod:`isles.app.sweep_runs`)."""
    import subprocess  # noqa: PLC0415

    if CHECKOUT is None:
        return "unknown"
    try:
        return (
            subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=CHECKOUT, capture_output=True, text=True, timeout=5
            ).stdout.strip()
            or "unknown"
        )
    except Exception:
        return "unknown"


MOVED = {
    "problems": ("from problems.base import Problem", "from isles.problems.base import Problem"),
    "algorithms": ("from algorithms.de.de import DE", "from isles.algorithms.de.de import DE"),
    "islands": ("from islands.coordinator import Coordinator", "from isles.islands.coordinator import Coordinator"),
}
"""The repository's folders that were top-level packages before isles became one package:
``{old name: (an old import, the same import now)}``."""

MOVED_MODULES = {
    f"isles.islands.{name}": f"isles.app.{name}"
    for name in (
        "job",
        "tracking",
        "tracking_server",
        "sweep_runs",
        "ray_security",
        "plots",
        "report",
        "progress",
        "user_modules",
    )
}
"""Modules of the application that lived in the runtime's part before (issue 19):
``{old module: new module}``; an import of an old one is refused with one line naming the new one."""


def moved_message(name: str) -> str:
    """One line naming the old import of the part ``name`` (``"problems"``, ...) and the new one."""
    old, new = MOVED[name]
    return (
        f"the package '{name}' moved into isles: write `{new}`, not `{old}` (every `{name}.X` is now `isles.{name}.X`)"
    )


def refuse_old_name(name: str) -> None:
    """Called first by each part's ``__init__.py`` with its ``__name__``: a part imported under its
    old top-level name (``from problems.base import Problem`` from a checkout, whose root is on
    ``sys.path``) would be a second copy of isles' classes, so that ``isinstance`` and the
    registries silently disagree.

    Raises:
        ImportError: ``name`` is an old top-level name (a key of :data:`MOVED`), naming the new import.
    """
    if name in MOVED:
        raise ImportError(moved_message(name), name=name)
    if name == "app":  # a part that never was top-level: the same second-copy danger
        raise ImportError(
            "the folder 'app' is the part isles.app: write `from isles.app.job import run_job`, "
            "not `from app.job import run_job`",
            name=name,
        )


def moved_module_message(name: str) -> str:
    """One line naming the new module of the moved module ``name`` (a key of :data:`MOVED_MODULES`)."""
    new = MOVED_MODULES[name]
    return f"the module {name} moved to {new}: write `import {new}` (every `{name}.X` is now `{new}.X`)"


class _MovedModules:
    """A finder at the end of ``sys.meta_path``, asked only for modules that no other finder
    found: an import of a moved module (:data:`MOVED_MODULES`) is refused with one line naming
    the new module, instead of ``No module named ...``."""

    @staticmethod
    def find_spec(fullname: str, path=None, target=None):
        """Raises ImportError for a key of :data:`MOVED_MODULES`; ``None`` (not found) otherwise."""
        if fullname in MOVED_MODULES:
            raise ImportError(moved_module_message(fullname), name=fullname)
        return None


if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    sys.meta_path.append(_MovedModules())
