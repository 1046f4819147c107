"""A TCP proxy that drops every open connection on SIGUSR1: a network outage on demand.

Run as ``python cutting_proxy.py LISTEN_FD TARGET_PORT``: it accepts connections on the
listening socket ``LISTEN_FD`` (inherited, already bound) and forwards each one to
``127.0.0.1:TARGET_PORT``. On SIGUSR1 it aborts every connection it holds (both
sides), as a network failure would; new connections are forwarded as before. The
browser tests put it between Chromium and the service, so that an ``EventSource``
loses its connection while its job runs and reconnects by itself. SIGINT stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()


async def main(listen_fd: int, target_port: int) -> None:
    open_writers: set[asyncio.StreamWriter] = set()

    async def forward(
        client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target_port)
        writers = {client_writer, server_writer}
        open_writers.update(writers)
        try:
            await asyncio.gather(
                _pipe(client_reader, server_writer), _pipe(server_reader, client_writer)
            )
        finally:
            open_writers.difference_update(writers)

    def cut() -> None:
        for writer in list(open_writers):
            writer.transport.abort()

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, cut)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGINT, stop.set)
    listener = socket.socket(fileno=listen_fd)
    async with await asyncio.start_server(forward, sock=listener):
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
