"""The documentation site (issue 36 §5): ``mkdocs build --strict`` over ``docs/`` with the API
reference generated from the docstrings (mkdocstrings, griffe reading the source statically), as
CI builds it. In strict mode every warning fails the build: a relative link to a page that is not
there, an anchor that no heading makes, a snippet whose file is missing, a docstring section
griffe cannot read, an object an API page names that does not exist. ``mkdocs`` comes with the
``docs`` extra, which the ``test`` extra includes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def mkdocs_build(config: Path, site: Path, cwd: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of ``config`` into ``site``, from ``cwd`` (the snippets' base)."""
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # no banner about MkDocs 2 on stderr
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.slow
def test_the_site_builds_strict(tmp_path):
    """The whole site, API reference included, builds without a single warning."""
    p = mkdocs_build(ROOT / "mkdocs.yml", tmp_path / "site", ROOT)
    assert p.returncode == 0, p.stderr[-6000:]
    site = tmp_path / "site"
    for page in ["index.html", "architecture/index.html", "api/islands/index.html", "cluster/index.html"]:
        assert (site / page).is_file(), page
    islands = (site / "api/islands/index.html").read_text()
    assert "isles.islands.group" in islands  # objects named by their import path, not by their folder
    assert ":class:`" not in islands  # Sphinx roles printed as code (docs/hooks/griffe_roles.py)
    # the README's worked example, included into the user's-problem page, is the one the tests run
    text = re.sub(r"<[^>]+>", "", (site / "user_problems/index.html").read_text())  # highlighted code as text
    assert "class PressureVessel(Problem):" in text
    assert 'class="mermaid"' in (site / "architecture/index.html").read_text()


def test_a_broken_link_or_anchor_fails_the_strict_build(tmp_path):
    """The project's settings (its mkdocs.yml, inherited) turn a link to a missing page and an
    anchor that no heading makes into errors, not a site with dead links."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[gone](no_such_page.md), [here](other.md#no-such-heading)\n")
    (docs / "other.md").write_text("# Other\n\n## A heading\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: docs\nhooks: []\nplugins: [search]\nnav: [index.md, other.md]\n"
    )
    p = mkdocs_build(config, tmp_path / "site", tmp_path)
    assert p.returncode != 0, p.stderr[-3000:]
    assert "no_such_page.md" in p.stderr, p.stderr[-3000:]
    assert "no-such-heading" in p.stderr, p.stderr[-3000:]


def test_sphinx_roles_become_code_spans():
    """The docstrings' Sphinx roles print as code in the API reference, as Sphinx would show them
    (``~`` keeps the last part), and the rest of a docstring is left as it is."""
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        from griffe_roles import plain
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    text = "see :class:`~isles.islands.group.IslandGroup`, :func:`isles.app.job.run_job` and ``x``; :mod:`isles.app`."
    assert plain(text) == "see `IslandGroup`, `isles.app.job.run_job` and ``x``; `isles.app`."
    assert plain(":ref:`the schema <schema>` and :meth:`Group.run_span`") == "`the schema` and `Group.run_span`"
