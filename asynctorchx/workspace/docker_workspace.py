"""Docker image workspaces (TorchX's ``docker_workspace``) and the engine connection they share.

``.dockerignore`` follows Docker's rules
(https://docs.docker.com/build/concepts/context/#dockerignore-files).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import re
import tarfile
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import attrs

from asynctorchx import __version__
from asynctorchx.errors import (
    DockerEngineError,
    DockerEngineUnreachableError,
    SchedulerClosedError,
    SchedulerUnavailableError,
    WorkspaceBuildError,
)
from asynctorchx.specs.api import CfgVal, Role

logger = logging.getLogger(__name__)

#: The label of the asynctorchx version on what is created (TorchX's).
LABEL_VERSION = "torchx.pytorch.org/version"

#: The Dockerfile a workspace build uses; written from the role's image when missing.
DEFAULT_DOCKERFILE = "Dockerfile.torchx"

#: aiodocker's status for "cannot connect" (not an HTTP one).
_NO_CONNECTION = 900

_START_ENGINE = "start one, e.g. `bash scripts/docker-engine.sh start`, or set DOCKER_HOST"


def _mapped_error(err: Exception, request: str, where: str) -> Exception | None:
    """The :mod:`asynctorchx.errors` error for an aiodocker/aiohttp error, else ``None``."""
    import aiodocker
    import aiohttp

    if isinstance(err, aiodocker.DockerError):
        if err.status == _NO_CONNECTION:
            return DockerEngineUnreachableError(
                f"the Docker engine at {where} does not answer ({err.message}): {_START_ENGINE}"
            )
        return DockerEngineError(err.status, str(err.message), request=request)
    if isinstance(err, aiohttp.ClientError):
        return DockerEngineUnreachableError(
            f"the connection to the Docker engine at {where} broke during {request} ({err!r}):"
            " check `docker info`, then retry"
        )
    return None


class DockerEngine:
    """One Docker engine, over one aiodocker client opened on first use (asyncio only).

    Args:
        docker_host: the engine's URL; ``None``: ``DOCKER_HOST`` or the default socket.
        session_name: the scheduler's session, named in :class:`SchedulerClosedError`.
        backend: the scheduler the errors name.

    Raises:
        SchedulerUnavailableError: (every request) no aiodocker, or trio.
        DockerEngineUnreachableError: (every request) the engine does not answer.
        SchedulerClosedError: (every request) :meth:`close` was called.
        DockerEngineError: (every request) the engine answered 4xx/5xx.
    """

    def __init__(self, docker_host: str | None, session_name: str, backend: str) -> None:
        self.docker_host = docker_host
        self.session_name = session_name
        self.backend = backend
        self._docker: Any = None
        self._lock = anyio.Lock()
        self._closed = False

    @property
    def key(self) -> str:
        """The engine's address as configured (``""``: the default), to key per-engine state."""
        return self.docker_host or os.environ.get("DOCKER_HOST") or ""

    @contextlib.contextmanager
    def _errors(self, request: str, done: Collection[int] = ()) -> Iterator[None]:
        """Map the errors raised inside; a status in ``done`` (404 for a removal) is a success."""
        try:
            yield
        except Exception as err:
            mapped = _mapped_error(err, request, self.key or "the default socket")
            if mapped is None:
                raise
            if not (isinstance(mapped, DockerEngineError) and mapped.status in done):
                raise mapped from err

    @contextlib.asynccontextmanager
    async def _request(self, request: str, done: Collection[int] = ()) -> AsyncIterator[Any]:
        """The aiodocker client for one request, its errors mapped (:meth:`_errors`)."""
        docker = await self.connect()
        with self._errors(request, done):
            yield docker

    async def connect(self) -> Any:
        """Return the aiodocker client, opened once the engine answers ``GET /version``."""
        if self._closed:
            raise SchedulerClosedError(
                f"the {self.backend} scheduler of session {self.session_name!r} is closed:"
                " create a new one"
            )
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise SchedulerUnavailableError(
                f"{self.backend} needs an asyncio event loop for the Docker engine"
                " (aiodocker runs on asyncio only):"
                " run it under asyncio, e.g. anyio.run(main, backend='asyncio')"
            ) from None
        async with self._lock:
            if self._docker is not None:
                return self._docker
            try:
                import aiodocker
            except ImportError as err:
                raise SchedulerUnavailableError(
                    f"{self.backend} needs the aiodocker package ({err}): pip install aiodocker"
                ) from err
            docker = None
            try:
                docker = aiodocker.Docker(url=self.docker_host)
                await docker.version()
            except (aiodocker.DockerError, ValueError, OSError) as err:
                if docker is not None:
                    await docker.close()
                bad_url = isinstance(err, ValueError)
                raise (SchedulerUnavailableError if bad_url else DockerEngineUnreachableError)(
                    f"no Docker engine answers at {self.key or 'the default socket'} ({err}):"
                    f" {_START_ENGINE}"
                ) from err
            self._docker = docker
            return docker

    async def close(self) -> None:
        """Close the connection; idempotent, never raises. Later requests raise closed."""
        self._closed = True
        docker, self._docker = self._docker, None
        if docker is not None:
            with contextlib.suppress(Exception):
                await docker.close()

    async def tag_image(self, image: str, repo: str, tag: str) -> None:
        """Tag ``image`` as ``repo:tag`` (``docker tag``)."""
        async with self._request(f"POST images/{image}/tag") as docker:
            await docker.images.tag(image, repo, tag=tag)

    async def push_image(self, image: str, repo: str, tag: str) -> None:
        """Tag ``image`` as ``repo:tag`` and push it anonymously (TorchX's ``push_images``)."""
        await self.tag_image(image, repo, tag)
        try:
            async with self._request(f"POST images/{repo}/push?tag={tag}") as docker:
                await docker.images.push(repo, tag=tag)
        except DockerEngineError as err:
            raise DockerEngineError(
                err.status,
                f"pushing {repo}:{tag} failed ({err.message}): check that the registry"
                " answers and accepts pushes from this engine, or fix the run option image_repo",
                request=err.request,
            ) from err

    async def build_image(
        self,
        context: bytes,
        dockerfile: str,
        labels: Mapping[str, str],
        output: Callable[[str], None],
    ) -> str | None:
        """Build an image from an uncompressed tar context; return its id (``None``: none named).

        ``output`` gets each piece of the build's output; a failed step raises
        :class:`WorkspaceBuildError`.
        """
        image_id: str | None = None
        async with self._request("POST build") as docker:
            stream = docker.images.build(
                fileobj=io.BytesIO(context),
                encoding="identity",
                path_dockerfile=dockerfile,
                labels=dict(labels),
                pull=False,
                forcerm=True,  # a failed step's container is removed too
                stream=True,
            )
            async with contextlib.aclosing(stream) as records:
                async for record in records:
                    if "stream" in record:
                        output(str(record["stream"]))
                    if "error" in record or "errorDetail" in record:
                        raise WorkspaceBuildError(str(record.get("error") or record["errorDetail"]))
                    if isinstance(aux := record.get("aux"), dict) and "ID" in aux:
                        image_id = str(aux["ID"])
        return image_id


@attrs.define
class _Rule:
    regex: re.Pattern[str]
    include: bool


#: One token of a ``.dockerignore`` pattern: ``**`` (and its ``/``), ``*``, ``?``, a class,
#: an escaped character, or any other character.
_TOKEN = re.compile(r"\*\*/?|\*|\?|\[[^\]]*\]|\\.|.", re.DOTALL)


def _regex_of(token: str) -> str:
    """The regex of one :data:`_TOKEN`: ``*`` and ``?`` do not cross ``/``, ``**`` does."""
    if token.startswith("**"):
        return "(?:.*/)?" if token.endswith("/") else ".*"
    if token == "*":
        return "[^/]*"
    if token == "?":
        return "[^/]"
    if token.startswith("[") and len(token) > 1:
        body = token[1:-1]
        return f"[^{body[1:]}]" if body[:1] in ("^", "!") else f"[{body}]"
    return re.escape(token[-1])  # an escaped character (`\x`), or any other: itself


def _translate(pattern: str) -> re.Pattern[str]:
    """One ``.dockerignore`` pattern as a regex over ``/``-separated relative paths."""
    return re.compile("".join(map(_regex_of, _TOKEN.findall(pattern))) + r"\Z")


def parse_dockerignore(text: str) -> list[_Rule]:
    """The rules of a ``.dockerignore`` file's text, in order."""
    rules: list[_Rule] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        include = line.startswith("!")
        line = os.path.normpath(line.removeprefix("!").strip()).replace(os.sep, "/").lstrip("/")
        if line in ("", "."):
            continue
        rules.append(_Rule(_translate(line), include))
    return rules


def is_ignored(rel_path: str, rules: list[_Rule]) -> bool:
    """Whether ``rules`` exclude ``rel_path``: the last matching it or a parent decides."""
    parts = rel_path.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    ignored = False
    for rule in rules:
        if any(rule.regex.match(candidate) for candidate in candidates):
            ignored = not rule.include
    return ignored


def build_context(workspace: str, base_image: str) -> bytes:
    """Tar ``workspace`` into a build context, honouring ``.dockerignore``.

    Without a ``Dockerfile.torchx``, one of ``FROM <base_image>`` and ``COPY . .`` is added
    (TorchX's default).

    Raises:
        NotADirectoryError: ``workspace`` is not a directory.
    """
    root = os.path.abspath(workspace)
    if not os.path.isdir(root):
        raise NotADirectoryError(f"workspace {workspace!r} is not a directory: pass a directory")
    ignore_file = Path(root, ".dockerignore")
    rules = parse_dockerignore(ignore_file.read_text("utf-8")) if ignore_file.is_file() else []
    always = {DEFAULT_DOCKERFILE, ".dockerignore"}
    reinclude = any(rule.include for rule in rules)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
            prefix = "" if rel_dir == "." else f"{rel_dir}/"
            # an ignored directory may still hold a re-included file (`!dir/keep`)
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
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


async def build_workspace(
    engine: DockerEngine, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
) -> None:
    """Build ``workspace`` into an image on ``engine`` and set ``role.image`` to it.

    ``role.image`` becomes the image id, or ``<image_repo>:<id>`` (tagged, not pushed);
    the build log goes to INFO unless ``quiet``.

    Raises:
        WorkspaceBuildError: the build failed or named no image (with its log).
        NotADirectoryError: ``workspace`` is not a directory.
    """
    await engine.connect()
    context = await anyio.to_thread.run_sync(build_context, workspace, role.image)
    quiet = cfg.get("quiet") is True
    if not quiet:
        logger.info("building workspace %s into an image (this may take a while)", workspace)
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
    image_repo = cfg.get("image_repo")
    if isinstance(image_repo, str) and image_repo:
        tag = image_id.split(":")[-1][:12]
        await engine.tag_image(image_id, image_repo, tag)
        role.image = f"{image_repo}:{tag}"
    else:
        role.image = image_id
