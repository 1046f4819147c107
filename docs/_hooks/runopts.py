"""An mkdocs hook: the run options of each scheduler, generated from its ``runopts``.

A scheduler page says ``<!-- runopts NAME -->`` on a line of its own; the build replaces
that line with a table made from the run options that the capabilities of the scheduler
registered as ``NAME`` make (no scheduler is created, nothing is copied by hand). The build
fails when a page names a scheduler that is not registered, and when a registered
scheduler has no page ``schedulers/NAME.md``.
"""

from __future__ import annotations

import html
import re
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

from asynctorchx.schedulers import get_scheduler_capabilities, get_scheduler_factories
from asynctorchx.specs import CfgVal, get_type_name, runopts

#: ``<!-- runopts local_cwd -->`` alone on a line.
MARKER = re.compile(r"^<!-- runopts (?P<name>\S+) -->$", flags=re.MULTILINE)


def scheduler_run_opts(name: str) -> runopts:
    """Return the run options of the registered scheduler ``name``, creating no scheduler.

    Args:
        name: a registered scheduler name (``local_cwd``).

    Raises:
        PluginError: ``name`` is not registered, or its capabilities cannot make its
            options without a scheduler.
    """
    factories = get_scheduler_factories()
    if name not in factories:
        raise PluginError(f"<!-- runopts {name} -->: no scheduler {name!r} ({list(factories)})")
    caps = get_scheduler_capabilities(factories[name])
    if caps is None or caps.run_opts is None:
        raise PluginError(f"scheduler {name!r} does not give its run options without an instance")
    return caps.run_opts()


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell: no line break, ``|`` escaped, and ``<``,
    ``>``, ``&`` outside code spans shown as written (help says ``<image_repo>:<id>``)."""
    parts = text.replace("\n", " ").split("`")
    for index in range(0, len(parts), 2):  # even parts are outside backticks
        parts[index] = html.escape(parts[index], quote=False)
    return "`".join(parts).replace("|", "\\|")


def _default(value: CfgVal) -> str:
    """A default as a user would write it, or a dash for none."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, (list, dict)) and not value:
        return "—"
    return f"`{_cell(str(value))}`"


def run_options_table(name: str) -> str:
    """Return the Markdown table of the run options of scheduler ``name``.

    Args:
        name: a registered scheduler name.

    Raises:
        PluginError: as :func:`scheduler_run_opts`.
    """
    opts = scheduler_run_opts(name)
    if not len(opts):
        return f"`{name}` takes no run options."
    rows = [
        "| option | type | default | required | what it does |",
        "| --- | --- | --- | --- | --- |",
    ]
    for key, opt in opts:
        required = "yes" if opt.is_required else "no"
        type_name = _cell(get_type_name(opt.opt_type))
        default = _default(opt.default)
        rows.append(f"| `{key}` | `{type_name}` | {default} | {required} | {_cell(opt.help)} |")
    return "\n".join(rows)


def on_files(files: Files, config: Any) -> Files:
    """Fail the build when a registered scheduler has no page of its own.

    Args:
        files: every file of the site.
        config: the mkdocs configuration (unused).

    Raises:
        PluginError: a registered scheduler has no ``schedulers/NAME.md``.
    """
    del config
    pages = {file.src_uri for file in files.documentation_pages()}
    missing = [name for name in get_scheduler_factories() if f"schedulers/{name}.md" not in pages]
    if missing:
        raise PluginError(f"schedulers without a page in docs/schedulers/: {missing}")
    return files


def on_page_markdown(markdown: str, page: Page, config: Any, files: Files) -> str:
    """Replace every ``<!-- runopts NAME -->`` line with the options table of ``NAME``.

    Args:
        markdown: the page's Markdown.
        page: the page (unused).
        config: the mkdocs configuration (unused).
        files: every file of the site (unused).

    Raises:
        PluginError: a marker names a scheduler that is not registered.
    """
    del page, config, files
    return MARKER.sub(lambda match: run_options_table(match.group("name")), markdown)
