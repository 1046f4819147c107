"""docs/embedding.md shows the example web service's code as it is.

Its excerpts (``py`` blocks after an ``<!-- excerpt: path -->`` comment) are not run by
tests/test_docs.py, as they are parts of modules; each must be found, line for line,
in the file it names, so that the page cannot drift from the code. (Skipped, as the
other tests of the example, without the ``web`` extra.)
"""

from __future__ import annotations

import re
import textwrap

from tests.examples.conftest import REPO
from tests.test_docs import fenced_blocks

PAGE = REPO / "docs" / "embedding.md"
_EXCERPT = re.compile(r"<!-- excerpt: (?P<path>\S+) -->")


def _excerpts() -> list[tuple[str, str, int]]:
    """Each excerpt of the page: the file it names, its code, its line on the page."""
    lines = PAGE.read_text().splitlines()
    found = []
    for block in fenced_blocks(PAGE):
        marker = _EXCERPT.fullmatch(lines[block.line - 2].strip())
        if marker is not None:
            found.append((marker.group("path"), block.code, block.line))
    return found


def _contains(source: str, excerpt: str) -> bool:
    """Whether ``excerpt`` is a run of ``source``'s lines, all indented alike."""
    wanted = textwrap.dedent(excerpt).splitlines()
    lines = source.splitlines()
    return any(
        textwrap.dedent("\n".join(lines[i : i + len(wanted)])).splitlines() == wanted
        for i in range(len(lines) - len(wanted) + 1)
    )


def test_the_page_shows_excerpts_of_each_module_of_the_example() -> None:
    assert {path for path, _, _ in _excerpts()} == {
        "examples/web/app.py",
        "examples/web/events.py",
        "examples/web/guard.py",
        "examples/web/jobs.py",
    }


def test_every_excerpt_is_in_the_file_it_names() -> None:
    stale = [
        f"docs/embedding.md:{line} is not in {path}"
        for path, code, line in _excerpts()
        if not _contains((REPO / path).read_text(), code)
    ]
    assert stale == []


def test_an_edited_excerpt_is_caught() -> None:
    source = (REPO / "examples/web/jobs.py").read_text()
    _, code, _ = next(e for e in _excerpts() if e[0] == "examples/web/jobs.py")
    assert _contains(source, code)
    assert not _contains(source, code.replace("return None", "return job"))
