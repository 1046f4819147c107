"""``docs/architecture.md`` names only things that exist in the package.

Every name it quotes in backticks is checked against the code: a module path
(``schedulers/local/_records.py``, or a bare ``_records.py``) must be a file of the package, a
dotted import path (``asynctorchx.runner.api``) must import, and an identifier (``AppRecord``,
``Capabilities.apps_live_in_process``) must be a word of the package's source. TorchX's names
(``torchx.*``), shell words and file names outside the package are not read.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "asynctorchx"
PAGE = REPO / "docs" / "architecture.md"

_QUOTED = re.compile(r"`([^`\n]+)`")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*(?:\(\))?")


def _quoted() -> set[str]:
    text = PAGE.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return set(_QUOTED.findall(text))


def test_every_module_path_it_names_is_a_file_of_the_package() -> None:
    files = [p.relative_to(REPO).as_posix() for p in PACKAGE.rglob("*.py")]
    missing = []
    for token in _quoted():
        if re.search(r"[{<*]", token):
            continue
        for part in re.findall(r"[\w/]+\.py|[\w/]+/(?=$)", token):
            if not (REPO / part).exists() and not any(
                f.endswith("/" + part.rstrip("/")) or f"/{part}" in f for f in files
            ):
                missing.append(part)
    assert missing == [], f"docs/architecture.md names files that do not exist: {sorted(missing)}"


def test_every_import_path_it_names_imports() -> None:
    bad = []
    for token in _quoted():
        if re.fullmatch(r"asynctorchx(\.\w+)+", token):
            try:
                importlib.import_module(token)
            except ImportError:
                bad.append(token)
    assert bad == [], f"docs/architecture.md names import paths that do not import: {bad}"


def test_every_identifier_it_names_is_in_the_source() -> None:
    source = "\n".join(p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py"))
    words = set(re.findall(r"\w+", source))
    missing = []
    for token in _quoted():
        if not _IDENTIFIER.fullmatch(token) or token.startswith(("torchx", "asynctorchx")):
            continue
        for part in token.removesuffix("()").split("."):
            if part not in words:
                missing.append(token)
    assert missing == [], f"docs/architecture.md names what the code lacks: {sorted(missing)}"
