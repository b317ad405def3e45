"""griffe extension: the docstrings' Sphinx roles as Markdown code for the API reference.

isles' docstrings are Google style (``Args:``, ``Returns:``, ``Raises:``) and name other objects
with Sphinx roles (``:class:`IslandGroup```, ``:func:`~isles.app.job.run_job```), which Markdown
would print as they are. This extension rewrites each role into a code span of its target
(``IslandGroup``; a leading ``~`` keeps the last part only, as Sphinx shows it) before
mkdocstrings renders the docstring. Loaded by ``mkdocs.yml`` (``extensions``).
"""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(
    r":(?:py:)?(?:mod|func|class|meth|attr|data|exc|obj|const|ref|term):`(~?)([^`<]*?)(?:\s*<([^`>]+)>)?`"
)
"""A Sphinx role: ``:class:`Name```, ``:func:`~pkg.mod.name```, ``:ref:`text <target>```."""


def plain(text: str) -> str:
    """``text`` with every Sphinx role replaced by a Markdown code span of what Sphinx would show.

    ``":class:`~a.b.C`"`` -> ``"`C`"``; ``":mod:`a.b`"`` -> ``"`a.b`"``.
    """

    def code(m: re.Match) -> str:
        tilde, name, target = m.group(1), m.group(2).strip(), m.group(3)
        shown = name or target or ""
        if tilde:
            shown = shown.rsplit(".", 1)[-1]
        return f"`{shown}`"

    return ROLE.sub(code, text)


class SphinxRoles(griffe.Extension):
    """Rewrite the Sphinx roles of every loaded object's docstring (see :func:`plain`)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        """griffe's event for each object loaded: its docstring's roles become code spans."""
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
