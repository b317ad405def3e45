"""isles: a distributed, multi-GPU island runner for evolutionary algorithms.

One top-level package with three parts, each a folder of the repository mapped into it by
setuptools' ``package-dir`` (``pyproject.toml``):

* :mod:`isles.algorithms`: the algorithms (DE, PSO/EPSO/CMEPSO, GA, FEP, CDE) over NumPy or CuPy;
* :mod:`isles.problems`: the problems (benchmarks, engineering designs, binary, min-max, CEC2006);
* :mod:`isles.islands`: the island runtime (Ray actors, migration, coordinator, tracking);
* ``isles.conf``: the Hydra configs (package data), run by :func:`isles.cli.main`.

From a checkout (``python run.py``, the tests, the benchmarks), the repository's folders are the
package's parts even when isles is not installed: :data:`CHECKOUT` is then the repository root,
and it is added to this package's search path. Installed from a wheel, :data:`CHECKOUT` is
``None`` and the parts live inside the package.
"""
from __future__ import annotations

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

MOVED = {"problems": ("from problems.base import Problem", "from isles.problems.base import Problem"),
         "algorithms": ("from algorithms.de.de import DE", "from isles.algorithms.de.de import DE"),
         "islands": ("from islands.job import run_job", "from isles.islands.job import run_job")}
"""The repository's folders that were top-level packages before isles became one package:
``{old name: (an old import, the same import now)}``."""


def moved_message(name: str) -> str:
    """One line naming the old import of the part ``name`` (``"problems"``, ...) and the new one."""
    old, new = MOVED[name]
    return f"the package '{name}' moved into isles: write `{new}`, not `{old}` (every `{name}.X` is now `isles.{name}.X`)"


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
