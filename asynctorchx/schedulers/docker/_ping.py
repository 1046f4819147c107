"""``has_docker()``: whether ``local_docker`` can be used here (TorchX's import path).

TorchX's ``torchx.schedulers.docker_scheduler.has_docker`` is a plain function that is
true when the ``docker`` client library is installed and ``docker.from_env()`` reaches
the engine; tests and tools call it to skip Docker work. Here it is true when aiodocker
is installed and the engine answers the Docker Engine API's ``GET /_ping`` with ``OK``.

It is synchronous, as TorchX's, and blocks for at most ``timeout`` seconds: call it
before starting an event loop, or through ``anyio.to_thread.run_sync`` from one.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import urllib.parse

#: The engine's socket when neither ``docker_host`` nor ``DOCKER_HOST`` says otherwise.
DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"

_PING = b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n"


def _connect(docker_host: str, timeout: float) -> socket.socket | None:
    """A socket connected to the engine at ``docker_host``; None for a scheme we do not
    ping (``ssh://``, or TLS, which needs the client's certificates)."""
    url = urllib.parse.urlparse(docker_host)
    if url.scheme == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(url.path)
        except BaseException:
            sock.close()
            raise
        return sock
    if url.scheme in ("tcp", "http") and url.hostname and not os.environ.get("DOCKER_TLS_VERIFY"):
        return socket.create_connection((url.hostname, url.port or 2375), timeout=timeout)
    return None


def has_docker(docker_host: str | None = None, timeout: float = 2.0) -> bool:
    """Return True if a Docker engine answers and ``local_docker`` can use it.

    TorchX's ``torchx.schedulers.docker_scheduler.has_docker``.

    Args:
        docker_host: the engine's URL (``unix://...`` or ``tcp://host:port``); None:
            ``DOCKER_HOST``, else :data:`DEFAULT_DOCKER_HOST`.
        timeout: the most seconds to wait for the engine's answer.

    Returns:
        False when aiodocker is not installed, the engine does not answer ``OK`` to
        ``GET /_ping`` within ``timeout``, or ``docker_host`` is a kind of URL this check
        cannot reach (``ssh://``, TLS); True otherwise. Never raises.
    """
    if importlib.util.find_spec("aiodocker") is None:
        return False
    host = docker_host or os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST
    try:
        sock = _connect(host, timeout)
        if sock is None:
            return False
        with sock:
            sock.sendall(_PING)
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
                if len(answer) > 65536:
                    break
    except (OSError, ValueError):
        return False
    status, _, body = answer.partition(b"\r\n")
    return status.split(b" ")[1:2] == [b"200"] and body.rstrip().endswith(b"OK")
