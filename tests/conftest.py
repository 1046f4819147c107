"""Shared test configuration: the ``docker`` and ``torch`` markers, the local test image.

Tests marked ``@pytest.mark.docker`` need a Docker engine. Whether one answers is
checked once per session (``GET /_ping`` on the engine's socket, no aiodocker, no
event loop). Tests marked ``@pytest.mark.torch`` need PyTorch importable. Without the
part those tests are skipped with the reason, except when the environment sets
``ASYNCTORCHX_REQUIRE_DOCKER=1`` / ``ASYNCTORCHX_REQUIRE_TORCH=1`` (``.ci/run`` sets
both): then they fail, so CI cannot pass by skipping them.
``bash scripts/docker-engine.sh start`` starts an engine and imports the test image;
``pip install torch==2.13.0`` installs the CPU build of PyTorch.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import shutil
import signal
import socket
import tempfile
import urllib.parse
from collections.abc import AsyncIterator, Iterator

import pytest

#: The test image, made from busybox-static by ``scripts/docker-engine.sh`` (no registry).
DOCKER_TEST_IMAGE = "asynctorchx-test/busybox:latest"
_FIX = "run `bash scripts/docker-engine.sh start` as root"


class _UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection over a unix socket (the Docker engine's default transport)."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


def _engine_request(path: str) -> tuple[int, bytes]:
    """GET ``path`` from the engine named by ``DOCKER_HOST`` (default: the unix socket)."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    url = urllib.parse.urlparse(host)
    conn: http.client.HTTPConnection
    if url.scheme == "unix":
        conn = _UnixHTTPConnection(url.path, timeout=5.0)
    elif url.scheme in ("tcp", "http"):
        conn = http.client.HTTPConnection(url.hostname or "localhost", url.port, timeout=5.0)
    else:
        raise OSError(f"DOCKER_HOST={host!r} uses a transport these tests do not check")
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _docker_unavailable_reason() -> str | None:
    """Return why Docker tests cannot run here, or ``None`` when the engine and image are there."""
    try:
        status, body = _engine_request("/_ping")
    except OSError as err:
        return f"no Docker engine answers ({err}); {_FIX}"
    if status != 200:
        return f"the Docker engine answered /_ping with HTTP {status}: {body[:200]!r}; {_FIX}"
    quoted = urllib.parse.quote(DOCKER_TEST_IMAGE, safe="")
    try:
        status, body = _engine_request(f"/images/{quoted}/json")
    except OSError as err:
        return f"the Docker engine stopped answering ({err}); {_FIX}"
    if status != 200:
        return f"test image {DOCKER_TEST_IMAGE} is missing; {_FIX}"
    json.loads(body)
    return None


@pytest.fixture(scope="session")
def _docker_reason() -> str | None:
    """Session-wide: why Docker tests cannot run (``None``: they can)."""
    return _docker_unavailable_reason()


def _torch_unavailable_reason() -> str | None:
    """Return why PyTorch tests cannot run here, or ``None`` when torch is importable."""
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed; `pip install torch==2.13.0` installs the CPU build"
    return None


#: marker -> (environment variable that makes the part required, why it is missing)
_REQUIRED_PARTS = {
    "docker": ("ASYNCTORCHX_REQUIRE_DOCKER", "_docker_reason"),
    "torch": ("ASYNCTORCHX_REQUIRE_TORCH", None),
}


@pytest.fixture(autouse=True)
def _required_parts(request: pytest.FixtureRequest) -> None:
    """Skip ``docker``/``torch`` tests without the part; fail them when it is required."""
    for marker, (variable, reason_fixture) in _REQUIRED_PARTS.items():
        if request.node.get_closest_marker(marker) is None:
            continue
        reason: str | None = (
            request.getfixturevalue(reason_fixture)
            if reason_fixture is not None
            else _torch_unavailable_reason()
        )
        if reason is not None:
            if os.environ.get(variable) == "1":
                pytest.fail(f"{variable}=1 but {reason}", pytrace=False)
            pytest.skip(reason)


@pytest.fixture
def docker_image() -> str:
    """The local busybox test image ``asynctorchx-test/busybox:latest`` (never pulled)."""
    return DOCKER_TEST_IMAGE


@pytest.fixture
async def docker_apps() -> AsyncIterator[list[str]]:
    """``local_docker`` app ids a test started: deleted after it (containers and cancel
    markers), whatever it asserted."""
    from asynctorchx.schedulers.docker_scheduler import create_scheduler

    started: list[str] = []
    yield started
    async with create_scheduler("cleanup") as sched:
        for app_id in started:
            await sched.delete(app_id)


@pytest.fixture(scope="session", autouse=True)
def _the_suite_leaves_no_temporary_log_directory() -> Iterator[None]:
    """For the whole session, temporary directories go to a private one (this
    process's and its children's): at the end, none of a local scheduler's
    (``asynctorchx_*``) may be left in it. A test whose host is killed without
    cleanup on purpose gives that host a TMPDIR under its own ``tmp_path``."""
    private = tempfile.mkdtemp(prefix="asynctorchx-suite-")
    saved = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir = os.environ["TMPDIR"] = private
    try:
        yield
        assert sorted(n for n in os.listdir(private) if n.startswith("asynctorchx_")) == []
    finally:
        tempfile.tempdir = saved[0]
        if saved[1] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved[1]
        shutil.rmtree(private, ignore_errors=True)


@pytest.fixture(autouse=True)
def _private_local_app_records(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each test's local app records go to a directory of its own, never the user's.

    The local schedulers keep a record of every app under ``ASYNCTORCHX_STATE_DIR``
    (default ``~/.local/state/asynctorchx``); subprocess hosts inherit the variable.
    """
    saved = os.environ.get("ASYNCTORCHX_STATE_DIR")
    os.environ["ASYNCTORCHX_STATE_DIR"] = str(tmp_path_factory.mktemp("state"))
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("ASYNCTORCHX_STATE_DIR", None)
        else:
            os.environ["ASYNCTORCHX_STATE_DIR"] = saved


@pytest.fixture(autouse=True)
def _context_name_restored() -> Iterator[None]:
    """``TORCHX_CONTEXT_NAME`` as it was before the test: the ``run`` command, called in
    process by CLI tests, sets it in this process's environment (as ``torchx run``)."""
    saved = os.environ.get("TORCHX_CONTEXT_NAME")
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TORCHX_CONTEXT_NAME", None)
        else:
            os.environ["TORCHX_CONTEXT_NAME"] = saved


def pytest_configure(config: pytest.Config) -> None:
    """Start from a terminal's signal dispositions, however the suite was launched.

    ``nohup`` ignores SIGHUP and a background job may ignore SIGINT; ignored
    dispositions are inherited by every host process the tests start, and the tests
    that send those signals would then wait for a death that never comes (the
    product rightly leaves an ignored signal ignored: see tests/runner/test_signals.py).
    """
    del config
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
