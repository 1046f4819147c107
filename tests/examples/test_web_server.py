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
