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
import functools
import http.server
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

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


# ---------------------------------------------------------------------- a browser

#: a name of another site, which the browser resolves to 127.0.0.1 (as a DNS-rebinding
#: attacker's name would be), so that its pages are another origin on this machine
FOREIGN_NAME = "evil.example"
#: the flags that let Chromium run headless in a container, without reaching out
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1100,680",
    f"--host-resolver-rules=MAP {FOREIGN_NAME} 127.0.0.1",
)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    """A headless Chromium with a fresh profile, driven through chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    paths = chromium_paths()
    assert paths is not None  # the browser marker skipped the test otherwise
    options = webdriver.ChromeOptions()
    options.binary_location = paths[0]
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(paths[1]))
    try:
        yield driver
    finally:
        driver.quit()


def until(driver: WebDriver, condition: Callable[[WebDriver], Any], what: str) -> Any:
    """Wait (30 s at most) until ``condition`` holds on the page; fail saying ``what``.

    Args:
        driver: the browser.
        condition: called with ``driver``; the wait ends when it returns a true value.
        what: what is awaited, for the failure's message.
    """
    from selenium.webdriver.support.wait import WebDriverWait

    return WebDriverWait(driver, 30, poll_frequency=0.05).until(condition, f"waited for {what}")


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


@contextlib.contextmanager
def foreign_site(pages: dict[str, str], directory: Path) -> Iterator[int]:
    """Serve ``pages`` as static files on another port of 127.0.0.1: another site's origin.

    Yields the port. Browsers treat ``http://127.0.0.1:<port>`` (and
    ``http://evil.example:<port>``, see :data:`FOREIGN_NAME`) as an origin other than the
    service's, as they would a site on the Internet.

    Args:
        pages: file name to HTML.
        directory: where the files are written (created).
    """
    directory.mkdir()
    for name, html in pages.items():
        (directory / name).write_text(html)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as site:
        thread = threading.Thread(target=site.serve_forever, name="foreign site")
        thread.start()
        try:
            yield site.server_address[1]
        finally:
            site.shutdown()
            thread.join()


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
