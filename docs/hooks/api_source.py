"""MkDocs hook: the package ``isles`` as griffe reads it for the API reference (``docs/api/``).

The repository's folders are the package's parts (``pyproject.toml``'s ``package-dir``:
``algorithms/`` is ``isles.algorithms``, ...). griffe reads the source statically and does not
follow that mapping, so before the build this hook lays the package out as installed, with
symbolic links into the checkout: ``build/mkdocs_api/isles/`` holds copies of ``isles/*.py`` and
links to the folders ``algorithms``, ``problems``, ``islands`` and ``app``. ``mkdocs.yml`` points mkdocstrings there
(``paths: [build/mkdocs_api]``), so the reference names every object by its import path
(``isles.islands.group.IslandGroup``) and always shows the checkout's own code, never an installed
copy's.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from mkdocs.plugins import event_priority

PARTS = ("algorithms", "problems", "islands", "app")
"""The folders that ``pyproject.toml`` maps into ``isles`` and that the reference documents."""


def api_tree(root: Path) -> Path:
    """Lay out ``root/build/mkdocs_api/isles`` as the installed package (copies of ``isles/*.py``,
    symbolic links to the parts' folders in the checkout ``root``); return ``root/build/mkdocs_api`` (griffe's search path).

    Raises:
        FileNotFoundError: a part of :data:`PARTS` or ``isles/`` is missing from ``root``.
    """
    base = root / "build" / "mkdocs_api"
    pkg = base / "isles"
    shutil.rmtree(base, ignore_errors=True)
    pkg.mkdir(parents=True)
    for src in sorted((root / "isles").glob("*.py")):  # copied: griffe resolves a linked __init__.py
        shutil.copy2(src, pkg / src.name)  # to its folder and would look for the parts there
    for part in PARTS:
        src = root / part
        if not (src / "__init__.py").is_file():
            raise FileNotFoundError(f"{src}: no package there (docs/hooks/api_source.py: PARTS)")
        (pkg / part).symlink_to(src.resolve(), target_is_directory=True)
    return base


@event_priority(100)  # before mkdocstrings' own on_config, which fixes griffe's search paths
def on_config(config):
    """MkDocs' ``on_config`` event: build the tree before mkdocstrings reads any source (first of
    the plugins' ``on_config``: a clean checkout has no ``build/`` yet)."""
    api_tree(Path(config.config_file_path).resolve().parent)
    return config
