"""``local_docker`` workspaces: build a directory into an image, honouring ``.dockerignore``.

:func:`build_workspace` tars the directory into a build context (:func:`build_context`)
and builds it on the engine, as TorchX 0.7.0's ``torchx.schedulers.docker_scheduler``
does for its workspaces. The ``.dockerignore`` rules are Docker's (https://docs.docker.com/build/concepts/context/#dockerignore-files):
one pattern a line, ``#`` comments, a leading ``/`` ignored, ``*`` and ``?`` match within
one path segment, ``**`` any number of segments, ``!`` re-includes, the last matching
line wins, and a pattern that matches a directory excludes everything under it.
"""

from __future__ import annotations

import io
import logging
import os
import re
import tarfile
from collections.abc import Mapping

import anyio
import anyio.to_thread
import attrs

from asynctorchx import __version__
from asynctorchx.errors import WorkspaceBuildError
from asynctorchx.schedulers.docker._engine import Engine
from asynctorchx.schedulers.docker._request import LABEL_VERSION
from asynctorchx.specs.api import CfgVal, Role

logger = logging.getLogger(__name__)

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


def build_context(workspace: str, base_image: str) -> bytes:
    """Tar ``workspace`` into an in-memory Docker build context.

    Files matched by the directory's ``.dockerignore`` are left out (the Dockerfile and
    ``.dockerignore`` themselves always go in, as Docker does). When the directory has no
    ``Dockerfile.torchx``, one of ``FROM <base_image>`` + ``COPY . .`` is added (TorchX's
    default, in ``torchx.schedulers.docker_scheduler``).

    Args:
        workspace: the directory to build.
        base_image: the image the default Dockerfile starts from (role 0's image).

    Returns:
        the uncompressed tar bytes.

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
    reinclude = any(rule.include for rule in rules)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
            prefix = "" if rel_dir == "." else f"{rel_dir}/"
            # An ignored directory may still hold a re-included file (`!dir/keep`),
            # so descend unless no rule re-includes anything.
            dirnames[:] = [
                name
                for name in sorted(dirnames)
                if reinclude or not is_ignored(prefix + name, rules)
            ]
            for name in [*dirnames, *sorted(filenames)]:
                if prefix + name in always or not is_ignored(prefix + name, rules):
                    tar.add(os.path.join(dirpath, name), arcname=prefix + name, recursive=False)
        if not os.path.isfile(os.path.join(root, DEFAULT_DOCKERFILE)):
            content = f"FROM {base_image}\nCOPY . .\n".encode()
            info = tarfile.TarInfo(DEFAULT_DOCKERFILE)
            info.size = len(content)  # mode 0o644: TarInfo's default
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


async def build_workspace(
    engine: Engine, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
) -> None:
    """Build ``workspace`` into an image and set ``role.image`` to it.

    The build context is the directory tarred with its ``.dockerignore`` honoured (in a
    worker thread); the Dockerfile is the directory's ``Dockerfile.torchx``, or
    ``FROM <role.image>`` + ``COPY . .`` when it has none (TorchX's default). The role's
    image becomes the built image's id, or ``<image_repo>:<id>`` when the ``image_repo``
    option is set (the image is tagged so, not pushed: push it yourself for remote
    engines).

    Args:
        engine: the engine to build on.
        role: the role to patch (role 0 of the app); its ``image`` is the default
            Dockerfile's base.
        workspace: the directory to build.
        cfg: the resolved run options (``image_repo`` and ``quiet`` are read: the build's
            output is logged at INFO unless ``quiet``).

    Raises:
        WorkspaceBuildError: the build failed; the message holds the build log.
        NotADirectoryError: ``workspace`` is not a directory.
        SchedulerUnavailableError: no engine (under trio, or none answers).
    """
    await engine.connect()
    context = await anyio.to_thread.run_sync(build_context, workspace, role.image)
    quiet = cfg.get("quiet") is True
    if not quiet:
        logger.info("building workspace %s into an image (this may take a while)", workspace)
    image_id = await _build(engine, context, workspace, quiet=quiet)
    image_repo = cfg.get("image_repo")
    if isinstance(image_repo, str) and image_repo:
        tag = image_id.split(":")[-1][:12]
        await engine.tag_image(image_id, image_repo, tag)
        role.image = f"{image_repo}:{tag}"
    else:
        role.image = image_id


async def _build(engine: Engine, context: bytes, workspace: str, *, quiet: bool) -> str:
    """Build the tar ``context`` of ``workspace``; return the image id.

    Each line of the build's output is logged at INFO unless ``quiet`` (TorchX's
    ``quiet`` option, ``torchx.workspace.docker_workspace``); it is kept for the error
    message either way.

    Raises:
        WorkspaceBuildError: the build failed or gave no image id; the message holds the
            build log.
    """
    log: list[str] = []

    def output(text: str) -> None:
        log.append(text)
        if (line := text.strip("\r\n")) and not quiet:
            logger.info("%s", line)

    try:
        labels = {LABEL_VERSION: __version__}
        image_id = await engine.build_image(context, DEFAULT_DOCKERFILE, labels, output)
    except Exception as err:
        message = getattr(err, "message", str(err))
        raise WorkspaceBuildError(
            f"building workspace {workspace!r} failed: {message}\n{''.join(log)}"
        ) from err
    if image_id is None:
        raise WorkspaceBuildError(
            f"building workspace {workspace!r} gave no image id; log:\n{''.join(log)}"
        )
    return image_id
