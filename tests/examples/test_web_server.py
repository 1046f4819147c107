"""The example web service served by uvicorn, with a real HTTP client (httpx).

What needs a real server: an event stream followed while its job runs, dropped and
resumed with ``Last-Event-ID``, and the server's shutdown, which must end the open
streams and then cancel the jobs still running (their processes end).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.examples.conftest import Event, job_script, parse_events, serve

if TYPE_CHECKING:
    import httpx


def _submit(client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/jobs", json=body)
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    return job


def _stream_events(response: httpx.Response) -> Iterator[Event]:
    assert response.status_code == 200, response.read()
    return parse_events(response.iter_lines())


def _gated_job(go: Path, before: int, after: int) -> list[str]:
    """A job that prints ``line 0``.. ``line {before-1}``, waits for ``go`` to exist, then
    prints the next ``after`` lines: the test decides when it goes on, no timing guessed."""
    return job_script(
        "import os, time",
        f"for i in range({before}): print(f'line {{i}}')",
        f"while not os.path.exists({str(go)!r}): time.sleep(0.05)",
        f"for i in range({before}, {before + after}): print(f'line {{i}}')",
    )


def test_a_dropped_stream_resumes_with_last_event_id_without_repeats_or_gaps(
    tmp_path: Path,
) -> None:
    import httpx

    go = tmp_path / "go"
    with serve(tmp_path) as server, httpx.Client(base_url=server.url, timeout=60) as client:
        job = _submit(client, {"command": _gated_job(go, before=3, after=3)})
        url = f"/jobs/{job['id']}/events"

        first: list[Event] = []
        with client.stream("GET", url) as response:
            for event in _stream_events(response):
                first.append(event)
                if event.type == "log" and event.data["line"] == "line 2\n":
                    break  # the client goes away while the job still runs
        assert first[-1].data["line"] == "line 2\n"
        assert "SUCCEEDED" not in [event.data.get("state") for event in first]

        go.touch()
        with client.stream("GET", url, headers={"Last-Event-ID": first[-1].id}) as response:
            rest = list(_stream_events(response))

    events = first + rest
    assert len({event.id for event in events}) == len(events)
    assert sorted(event.id for event in events) == [event.id for event in events]
    lines = [event.data["line"] for event in events if event.type == "log"]
    assert lines == [f"line {i}\n" for i in range(6)]
    assert (events[-1].type, events[-1].data["state"]) == ("state", "SUCCEEDED")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_server_shutdown_ends_the_streams_and_cancels_the_running_jobs(tmp_path: Path) -> None:
    import httpx

    forever = job_script("import os, time", "print(os.getpid())", "time.sleep(600)")
    with serve(tmp_path) as server, httpx.Client(base_url=server.url, timeout=60) as client:
        job = _submit(client, {"command": forever, "replicas": 2})
        pids: dict[int, int] = {}
        with client.stream("GET", f"/jobs/{job['id']}/events") as response:
            events = _stream_events(response)
            for event in events:
                if event.type == "log":
                    pids[event.data["replica_id"]] = int(event.data["line"])
                if len(pids) == 2:
                    break
            assert all(_alive(pid) for pid in pids.values())

            assert server.stop() == 0  # as Ctrl-C: the open stream must not hold it up
            assert list(events) == []  # the stream ended, properly: no error reading it

    log = server.log.read_text()
    assert "Application shutdown complete" in log, log
    assert "ERROR" not in log, log
    assert [pid for pid in pids.values() if _alive(pid)] == []


#: lines of each chunk of the flooding job, and the characters of each line
CHUNK_LINES, LINE_CHARS = 25, 2000


def _chunked_job(gates: Path, chunks: int) -> list[str]:
    """A job that prints ``chunks`` chunks of CHUNK_LINES lines ``"{chunk} {i} xxx..."``,
    chunk ``c`` once the file ``gates / str(c)`` exists, then ``end`` once
    ``gates / "end"`` does: each chunk is read (and is a batch of the feed) on its own."""
    return job_script(
        "import os, sys, time",
        f"for c in range({chunks}):",
        f"    while not os.path.exists(os.path.join({str(gates)!r}, str(c))): time.sleep(0.005)",
        f"    for i in range({CHUNK_LINES}): print(c, i, 'x' * {LINE_CHARS})",
        "    sys.stdout.flush()",
        f"while not os.path.exists(os.path.join({str(gates)!r}, 'end')): time.sleep(0.01)",
        "print('end')",
    )


def _chunks_to_stall_a_connection(buffer: int) -> int:
    """Chunks that cannot all be held between the server's writes and a client that
    reads nothing: the socket's send buffer (at most ``tcp_wmem``'s maximum), the
    client's receive buffer (``buffer``), uvicorn's write buffer, then the client's
    subscription buffer, one chunk a batch at least (64 batches: SUBSCRIBER_BUFFER)."""
    send_buffer = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    chunk_bytes = CHUNK_LINES * LINE_CHARS
    held = send_buffer + 2 * buffer + (64 << 10)
    return -(-held // chunk_bytes) + 64 + 16


def _lines(events: list[Event]) -> list[str]:
    return [event.data["line"] for event in events if event.type == "log"]


def test_a_client_that_stops_reading_is_cut_off_without_stalling_the_others_and_resumes(
    tmp_path: Path,
) -> None:
    import socket
    import threading

    import httpx

    # a receive buffer (fixed, not grown by the kernel) of two loopback segments: with
    # less, the server learns only from its 200 ms window probes that it may send again
    buffer = 128 << 10
    chunks = _chunks_to_stall_a_connection(buffer)
    gates = tmp_path / "gates"
    gates.mkdir()
    with serve(tmp_path) as server, httpx.Client(base_url=server.url, timeout=60) as client:
        job = _submit(client, {"command": _chunked_job(gates, chunks)})
        url = f"/jobs/{job['id']}/events"
        # the fast clients: each reads its whole stream in a thread of its own
        received: list[list[Event]] = [[] for _ in range(3)]
        whole_chunks = [0] * len(received)
        progress = threading.Condition()

        def follow(index: int) -> None:
            with (
                httpx.Client(base_url=server.url, timeout=60) as own,
                own.stream("GET", url) as response,
            ):
                for event in _stream_events(response):
                    received[index].append(event)
                    if event.type == "log" and event.data["line"].split()[1:2] == [last]:
                        with progress:
                            whole_chunks[index] += 1
                            progress.notify_all()

        last = f"{CHUNK_LINES - 1}"
        fast = [threading.Thread(target=follow, args=(index,)) for index in range(len(received))]
        # the slow client: a small receive buffer, and it reads nothing while the job runs
        small = [(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer)]
        transport = httpx.HTTPTransport(socket_options=small)
        with (
            httpx.Client(base_url=server.url, timeout=60, transport=transport) as slow,
            slow.stream("GET", url) as stalled,
        ):
            for thread in fast:
                thread.start()
            for chunk in range(chunks):
                (gates / str(chunk)).touch()
                with progress:  # the fast clients get every chunk: the slow one stalls none
                    assert progress.wait_for(lambda c=chunk: min(whole_chunks) > c, 60), (
                        f"the fast clients did not get chunk {chunk}"
                    )
            # its stream holds what was sent before it was cut off, then ends
            first = list(_stream_events(stalled))
        assert first, "the slow client received nothing"
        assert first[-1].type == "log"  # no terminal state: its stream was cut short
        assert len(_lines(first)) < chunks * CHUNK_LINES
        with client.stream("GET", url, headers={"Last-Event-ID": first[-1].id}) as response:
            rest = _stream_events(response)
            resumed = [next(rest)]
            (gates / "end").touch()
            resumed += list(rest)
        for thread in fast:
            thread.join(60)

    expected = [f"{c} {i} {'x' * LINE_CHARS}\n" for c in range(chunks) for i in range(CHUNK_LINES)]
    expected.append("end\n")
    for events in [first + resumed, *received]:
        assert _lines(events) == expected
        ids = [event.id for event in events]
        assert ids == sorted(set(ids))
        assert (events[-1].type, events[-1].data["state"]) == ("state", "SUCCEEDED")
