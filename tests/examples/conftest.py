"""What the example web service's tests need: the ``web`` extra, a browser, a server.

The tests of ``examples/web`` need the ``web`` extra (``pip install -e '.[web]'``);
those marked ``@pytest.mark.browser`` also need Chromium and its driver
(``apt-get install -y chromium chromium-driver``). Without them the tests are skipped
with that hint, except when ``ASYNCTORCHX_REQUIRE_WEB=1`` /
``ASYNCTORCHX_REQUIRE_BROWSER=1`` (``.ci/run`` sets both): then they fail, so CI
cannot pass by skipping them (as ``ASYNCTORCHX_REQUIRE_DOCKER`` in tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[2]
#: the modules of the ``web`` extra the tests import
WEB_MODULES = ("starlette", "sse_starlette", "uvicorn", "httpx", "selenium")
BROWSER_HINT = "apt-get install -y chromium chromium-driver"


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``browser`` marker (tests that drive a headless Chromium)."""
    config.addinivalue_line(
        "markers", "browser: drives a headless Chromium (skipped without it, required under CI)"
    )


def _web_missing() -> str | None:
    """Why the web tests cannot run here, or ``None``."""
    for module in WEB_MODULES:
        if importlib.util.find_spec(module) is None:
            return f"the web extra is not installed (no {module}): pip install -e '.[web]'"
    return None


def chromium_paths() -> tuple[str, str] | None:
    """The Chromium browser and its WebDriver (``chromedriver``), or ``None``."""
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if browser is None or driver is None:
        return None
    return browser, driver


def _require(variable: str, reason: str | None) -> None:
    """Skip with ``reason``, or fail when ``variable`` is ``1``; pass when ``reason`` is None."""
    if reason is None:
        return
    if os.environ.get(variable) == "1":
        pytest.fail(f"{variable}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _web_parts(request: pytest.FixtureRequest) -> None:
    """Skip without the web extra (or a browser, for ``browser`` tests); fail if required."""
    _require("ASYNCTORCHX_REQUIRE_WEB", _web_missing())
    if request.node.get_closest_marker("browser") is not None:
        missing = None if chromium_paths() else f"no chromium/chromedriver: {BROWSER_HINT}"
        _require("ASYNCTORCHX_REQUIRE_BROWSER", missing)


# ---------------------------------------------------------------------- a real server


class Server(NamedTuple):
    """The example service served by uvicorn in a process of its own.

    Args:
        url: where it listens, ``http://127.0.0.1:<port>``.
        process: the uvicorn process.
        log: uvicorn's output (stdout and stderr).
    """

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self, timeout: float = 60) -> int:
        """Shut the server down as Ctrl-C does (SIGINT); return its exit code.

        Args:
            timeout: seconds to wait for the process to end.
        """
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"uvicorn did not stop:\n{self.log.read_text()}") from None


@contextlib.contextmanager
def serve(tmp_path: Path) -> Iterator[Server]:
    """Run ``uvicorn examples.web.app:app`` on an ephemeral port of 127.0.0.1.

    The listening socket is bound here and handed to uvicorn (``--fd``), so a client
    may connect at once: its connection waits in the socket's backlog until the
    application's startup (the runner entered) is complete. No waiting on a log line.

    The server's working directory is ``tmp_path``, so the ``local_cwd`` jobs run there.

    Args:
        tmp_path: the server's working directory, where its output goes (``uvicorn.log``).
    """
    log = tmp_path / "uvicorn.log"
    with socket.socket() as listener, log.open("wb") as output:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        fd = listener.fileno()
        uvicorn = ["uvicorn", "examples.web.app:app", "--app-dir", str(REPO), "--fd", str(fd)]
        process = subprocess.Popen(
            [sys.executable, "-m", *uvicorn],
            cwd=tmp_path,
            pass_fds=[fd],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    server = Server(url, process, log)
    try:
        yield server
    finally:
        server.stop()


class Proxy(NamedTuple):
    """A proxy in front of a server that drops its open connections on demand.

    Args:
        url: where it listens, ``http://127.0.0.1:<port>``.
        process: the proxy's process (tests/examples/cutting_proxy.py).
    """

    url: str
    process: subprocess.Popen[bytes]

    def cut(self) -> None:
        """Drop every connection open through the proxy, as a network failure would."""
        self.process.send_signal(signal.SIGUSR1)


@contextlib.contextmanager
def cutting_proxy(server: Server) -> Iterator[Proxy]:
    """Run tests/examples/cutting_proxy.py in front of ``server`` on an ephemeral port.

    Args:
        server: the server it forwards to.
    """
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        fd = listener.fileno()
        target_port = server.url.rsplit(":", 1)[1]
        script = Path(__file__).with_name("cutting_proxy.py")
        process = subprocess.Popen(
            [sys.executable, str(script), str(fd), target_port], pass_fds=[fd]
        )
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        yield Proxy(url, process)
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(30)


# ---------------------------------------------------------------------- Server-Sent Events


class Event(NamedTuple):
    """One Server-Sent Event: its ``event:`` type, ``id:`` and decoded ``data:``."""

    type: str
    id: str
    data: dict[str, Any]


def parse_events(lines: Iterable[str]) -> Iterator[Event]:
    """The events of a ``text/event-stream``, line by line (comments and pings skipped).

    Args:
        lines: the stream's lines, without their line ends.
    """
    fields: dict[str, list[str]] = {}
    for line in lines:
        if line == "":
            if "data" in fields:
                data = json.loads("\n".join(fields["data"]))
                yield Event(fields.get("event", ["message"])[-1], fields.get("id", [""])[-1], data)
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields.setdefault(name, []).append(value.removeprefix(" "))


def job_script(*lines: str) -> list[str]:
    """A ``command`` running ``python -u -c`` over ``lines`` (joined with newlines).

    Args:
        lines: the Python program, one statement a line.
    """
    return [sys.executable, "-u", "-c", "\n".join(lines)]
