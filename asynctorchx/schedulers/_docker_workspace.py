"""Build contexts for ``local_docker`` workspaces: a tar of a directory honouring ``.dockerignore``.

Private helpers of :mod:`asynctorchx.schedulers.docker_scheduler`. The ``.dockerignore``
rules are Docker's (https://docs.docker.com/build/concepts/context/#dockerignore-files):
one pattern a line, ``#`` comments, a leading ``/`` ignored, ``*`` and ``?`` match within
one path segment, ``**`` any number of segments, ``!`` re-includes, the last matching
line wins, and a pattern that matches a directory excludes everything under it.
"""

from __future__ import annotations

import io
import os
import re
import tarfile

import attrs

#: The Dockerfile a workspace build uses; written from the role's image when missing.
DEFAULT_DOCKERFILE = "Dockerfile.torchx"


@attrs.define
class _Rule:
    regex: re.Pattern[str]
    include: bool


def _translate(pattern: str) -> re.Pattern[str]:
    """Turn one ``.dockerignore`` pattern into a regex over ``/``-separated relative paths."""
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**", i):
            i += 2
            if i < len(pattern) and pattern[i] == "/":
                i += 1
                out.append("(?:.*/)?")
            else:
                out.append(".*")
            continue
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(ch))
            else:
                body = pattern[i + 1 : end]
                if body.startswith("^") or body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end
        elif ch == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(ch))
        i += 1
    return re.compile("".join(out) + r"\Z")


def parse_dockerignore(text: str) -> list[_Rule]:
    """Parse the text of a ``.dockerignore`` file into ordered rules."""
    rules: list[_Rule] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        include = line.startswith("!")
        if include:
            line = line[1:].strip()
        line = os.path.normpath(line).replace(os.sep, "/").lstrip("/")
        if line in ("", "."):
            continue
        rules.append(_Rule(_translate(line), include))
    return rules


def is_ignored(rel_path: str, rules: list[_Rule]) -> bool:
    """Return True if ``rel_path`` (``/``-separated, relative) is excluded by ``rules``.

    A path is matched by a rule when the rule matches the path or one of its parent
    directories; the last matching rule decides.
    """
    parts = rel_path.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    ignored = False
    for rule in rules:
        if any(rule.regex.match(candidate) for candidate in candidates):
            ignored = not rule.include
    return ignored


def build_context(workspace: str, base_image: str) -> tuple[bytes, bool]:
    """Tar ``workspace`` into an in-memory Docker build context.

    Files matched by the directory's ``.dockerignore`` are left out (the Dockerfile and
    ``.dockerignore`` themselves always go in, as Docker does). When the directory has no
    ``Dockerfile.torchx``, one of ``FROM <base_image>`` + ``COPY . .`` is added (TorchX's
    default, seed 003).

    Args:
        workspace: the directory to build.
        base_image: the image the default Dockerfile starts from (role 0's image).

    Returns:
        the uncompressed tar bytes, and whether the default Dockerfile was generated.

    Raises:
        NotADirectoryError: ``workspace`` is not a directory.
    """
    root = os.path.abspath(workspace)
    if not os.path.isdir(root):
        raise NotADirectoryError(f"workspace {workspace!r} is not a directory: pass a directory")
    ignore_file = os.path.join(root, ".dockerignore")
    rules: list[_Rule] = []
    if os.path.isfile(ignore_file):
        with open(ignore_file, encoding="utf-8") as fh:
            rules = parse_dockerignore(fh.read())
    always = {DEFAULT_DOCKERFILE, ".dockerignore"}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
            rel_dir = "" if rel_dir == "." else rel_dir
            kept_dirs = []
            for name in sorted(dirnames):
                rel = f"{rel_dir}/{name}" if rel_dir else name
                # An ignored directory may still hold a re-included file (`!dir/keep`),
                # so descend unless no rule re-includes anything.
                if is_ignored(rel, rules) and not any(rule.include for rule in rules):
                    continue
                kept_dirs.append(name)
                if not is_ignored(rel, rules):
                    tar.add(os.path.join(dirpath, name), arcname=rel, recursive=False)
            dirnames[:] = kept_dirs
            for name in sorted(filenames):
                rel = f"{rel_dir}/{name}" if rel_dir else name
                if rel in always or not is_ignored(rel, rules):
                    tar.add(os.path.join(dirpath, name), arcname=rel, recursive=False)
        generated = not os.path.isfile(os.path.join(root, DEFAULT_DOCKERFILE))
        if generated:
            content = f"FROM {base_image}\nCOPY . .\n".encode()
            info = tarfile.TarInfo(DEFAULT_DOCKERFILE)
            info.size = len(content)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue(), generated
