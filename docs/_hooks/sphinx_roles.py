"""A griffe extension: Sphinx roles in docstrings shown as code, not as ``:class:`` text.

The package's docstrings are Google style with Sphinx cross-reference roles
(``:class:`Runner```, ``:meth:`~Scheduler.wait```, ``:mod:`._supervisor```). Markdown
has no roles: left alone they render as the literal text ``:class:`` before a code
span. This extension rewrites each role into a code span of its target (``~`` keeps the
last part, as Sphinx shows it), at build time only; the package's source is unchanged.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

#: ``:role:`target``` or ``:role:`title <target>```, any Sphinx/Python-domain role.
ROLE = re.compile(r":(?:py:)?[a-z]+:`(?P<target>[^`]+)`")


def _shown(match: re.Match[str]) -> str:
    """The code span Sphinx would show for one role."""
    target = match.group("target")
    titled = re.fullmatch(r"(?P<title>.+?)\s*<[^>]+>", target)
    if titled is not None:
        target = titled.group("title")
    elif target.startswith("~"):
        target = target[1:].rsplit(".", 1)[-1]
    return f"`{target}`"


def replace_roles(text: str) -> str:
    """Return ``text`` with every Sphinx role replaced by a code span of its target.

    Args:
        text: a docstring.
    """
    return ROLE.sub(_shown, text)


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles into code spans in every docstring griffe reads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite the docstring of ``obj``, if it has one.

        Args:
            obj: the object griffe has just created.
            kwargs: the rest of griffe's hook arguments (unused).
        """
        del kwargs
        if obj.docstring is not None:
            obj.docstring.value = replace_roles(obj.docstring.value)
