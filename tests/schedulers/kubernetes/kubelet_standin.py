"""A STAND-IN for the kubelet's ``/containerLogs`` endpoint (see :mod:`.bare_cluster`):
:class:`KubeletStandIn` on 127.0.0.1 (HTTPS, self-signed), registered as the Node
``asynctorchx-standin``; the real API server proxies ``pods/{name}/log`` to it, with
``follow``, ``timestamps`` and ``sinceTime`` as it forwards them."""

from __future__ import annotations

import contextlib
import ssl
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import anyio.abc
import h11
from anyio.streams.tls import TLSListener

from tests.schedulers.kubernetes.fake_apiserver import _Notifier, _parse_time, _timestamp


def _self_signed() -> ssl.SSLContext:
    with tempfile.TemporaryDirectory() as directory:
        key, cert = Path(directory, "key.pem"), Path(directory, "cert.pem")
        command = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        command += ["-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)]
        subprocess.run(command, check=True, capture_output=True)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
    return context


class KubeletStandIn:
    """A STAND-IN for a kubelet's log endpoint: ``GET /containerLogs/{ns}/{pod}/{container}``.

    Logs are what the test writes (:meth:`write`); a follow ends when :meth:`end` is called.
    A container the test wrote nothing to by name has the pod's log (written without one).
    """

    def __init__(self) -> None:
        self.logs: dict[tuple[str, str, str | None], list[tuple[int, str]]] = {}
        self.ended: set[tuple[str, str]] = set()
        self.changed = _Notifier()
        self.port = 0
        self.requests: list[str] = []
        self._streams: list[anyio.CancelScope] = []

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[KubeletStandIn]:
        """Serve HTTPS on 127.0.0.1 (a free port) until the block ends.

        The API server speaks only HTTPS to kubelets and, without
        ``--kubelet-certificate-authority``, takes any certificate: a self-signed one
        made with ``openssl`` serves.
        """
        tcp = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = tcp.extra(anyio.abc.SocketAttribute.local_port)
        listener = TLSListener(tcp, _self_signed(), standard_compatible=False)
        async with listener, anyio.create_task_group() as task_group:
            task_group.start_soon(listener.serve, self._connection, task_group)
            try:
                yield self
            finally:
                task_group.cancel_scope.cancel()

    def write(
        self,
        namespace: str,
        pod: str,
        *lines: str,
        same_time: bool = False,
        container: str | None = None,
    ) -> None:
        """Append lines to a pod's log, or to one ``container``'s (``same_time``: all at
        the last line's time)."""
        log = self.logs.setdefault((namespace, pod, container), [])
        stamp = (
            log[-1][0] if same_time and log else max(time.time_ns(), log[-1][0] + 1 if log else 0)
        )
        for line in lines:
            log.append((stamp, line if line.endswith("\n") else line + "\n"))
            if not same_time:
                stamp += 1000
        self.changed.notify()

    async def wait_for_requests(self, count: int) -> None:
        """Wait until ``count`` log requests came in so far."""
        while True:
            changed = self.changed.event
            if len(self.requests) >= count:
                return
            await changed.wait()

    def end(self, namespace: str, pod: str) -> None:
        """The container ended: follows of its log end after the last line."""
        self.ended.add((namespace, pod))
        self.changed.notify()

    async def _connection(self, stream: anyio.abc.ByteStream) -> None:
        with contextlib.suppress(
            anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream
        ):
            async with stream:
                await self._serve(stream)

    async def _serve(self, stream: anyio.abc.ByteStream) -> None:
        connection = h11.Connection(h11.SERVER)
        request: h11.Request | None = None
        while request is None:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                connection.receive_data(await stream.receive())
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.ConnectionClosed):
                return
        target = urllib.parse.urlsplit(request.target.decode())
        self.requests.append(request.target.decode())
        self.changed.notify()
        query = {key: values[-1] for key, values in urllib.parse.parse_qs(target.query).items()}
        parts = target.path.strip("/").split("/")
        if len(parts) != 4 or parts[0] != "containerLogs":
            await stream.send(
                connection.send(h11.Response(status_code=404, headers=[("content-length", "0")]))
            )
            await stream.send(connection.send(h11.EndOfMessage()))
            return
        key = (parts[1], parts[2])
        named = (parts[1], parts[2], parts[3])
        log_key = named if named in self.logs else (parts[1], parts[2], None)
        headers = [("content-type", "text/plain"), ("transfer-encoding", "chunked")]
        await stream.send(connection.send(h11.Response(status_code=200, headers=headers)))
        since = _parse_time(query["sinceTime"]) if "sinceTime" in query else None
        stamps = query.get("timestamps") in ("true", "1")
        follow = query.get("follow") in ("true", "1")
        sent = 0
        with anyio.CancelScope() as scope:
            self._streams.append(scope)
            try:
                while True:
                    changed = self.changed.event
                    # lines written while these are sent are sent at the next turn
                    new = self.logs.get(log_key, [])[sent:]
                    sent += len(new)
                    for ns, line in new:
                        if since is None or ns >= since:
                            prefix = (_timestamp(ns) + " ") if stamps else ""
                            await stream.send(
                                connection.send(h11.Data(data=(prefix + line).encode()))
                            )
                    if not follow or key in self.ended:
                        await stream.send(connection.send(h11.EndOfMessage()))
                        return
                    await changed.wait()
            finally:
                self._streams.remove(scope)
