"""The example web service (examples/web) through its ASGI interface, as a client sees it.

Each test runs the application's lifespan (which enters the runner) and sends requests
with httpx's ASGI transport, which hands the lifespan's state to every request as a
server does. That transport buffers whole responses, so the event streams of running
jobs are tested against a real server (test_web_server.py).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest

from tests.examples.conftest import Event, job_script, parse_events

if TYPE_CHECKING:
    import httpx

    from asynctorchx.runner import Runner

#: a job that runs until it is cancelled
FOREVER = job_script("import time", "print('started')", "time.sleep(600)")


#: what a POST or DELETE must say it sends (the guard refuses anything else)
JSON = {"Content-Type": "application/json"}


@contextlib.asynccontextmanager
async def service(
    token: str | None = None,
    client_address: str = "127.0.0.1",
    hosts: tuple[str, ...] | None = ("127.0.0.1", "localhost"),
) -> AsyncIterator[tuple[httpx.AsyncClient, Runner]]:
    """The service started (its lifespan entered), a client to it, and its runner.

    Args:
        token: the service's bearer token for clients beyond loopback (``None``: the
            environment's).
        client_address: the address the requests come from.
        hosts: the host names it answers to (``None``: the environment's).
    """
    import httpx
    from starlette.types import Receive, Scope, Send

    from examples.web.app import create_app

    app = create_app(hosts=None if hosts is None else list(hosts), token=token)
    async with app.router.lifespan_context(app) as state:

        async def with_state(scope: Scope, receive: Receive, send: Send) -> None:
            await app({**scope, "state": dict(state)}, receive, send)

        transport = httpx.ASGITransport(app=with_state, client=(client_address, 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield client, state["runner"]


async def submit(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/jobs", json=body)
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    return job


async def test_a_component_job_runs_and_is_listed_with_its_state() -> None:
    async with service() as (client, runner):
        job = await submit(client, {"component": "utils.echo", "args": ["--msg", "hi"]})
        assert job["app_handle"].startswith("local_cwd://torchx/echo-")
        assert job["app_handle"].endswith(f"/{job['id']}")
        assert job["name"] == "utils.echo"
        status = await runner.wait(job["app_handle"])
        assert status is not None
        assert status.state.name == "SUCCEEDED"

        listed = (await client.get("/jobs")).json()
        assert listed == [{**job, "state": "SUCCEEDED"}]


async def test_a_command_job_runs_as_one_role_with_its_replicas() -> None:
    async with service() as (client, runner):
        command = job_script("print('hello')")
        job = await submit(client, {"command": command, "replicas": 2, "name": "hello"})
        status = await runner.wait(job["app_handle"])
        assert status is not None
        assert status.state.name == "SUCCEEDED"
        assert [(r.role, len(r.replicas)) for r in status.roles] == [("hello", 2)]
        app = await runner.describe(job["app_handle"])
        assert app is not None
        assert app.roles[0].entrypoint == command[0]
        assert app.roles[0].args == command[1:]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"component": "utils.nope"}, "no component 'utils.nope'"),
        ({"component": "utils.echo", "args": ["--nope"]}, "unrecognized arguments: --nope"),
        ({"component": "utils.echo", "scheduler": "nope"}, "unknown scheduler 'nope'"),
        ({"component": "utils.echo", "cfg": {"bogus": 1}}, "unknown run option 'bogus'"),
        ({"component": "utils.echo", "args": "--msg hi"}, "'args' must be a list of strings"),
        ({"command": []}, "'command' must name a program"),
        ({"command": ["true"], "replicas": 0}, "'replicas' must be a whole number >= 1"),
        ({"command": ["true"], "component": "utils.echo"}, "either 'component'"),
        ({"command": ["true"], "scheduler": "local_dir"}, "is not an absolute path"),
        ({}, "either 'component'"),
        (["utils.echo"], "must be a JSON object"),
    ],
)
async def test_a_bad_job_is_answered_400_with_what_to_fix(body: Any, message: str) -> None:
    async with service() as (client, _):
        response = await client.post("/jobs", json=body)
        assert response.status_code == 400
        assert message in response.json()["error"]
        assert (await client.get("/jobs")).json() == []


async def test_a_body_that_is_not_json_is_answered_400() -> None:
    async with service() as (client, _):
        response = await client.post("/jobs", content=b"{not json", headers=JSON)
        assert response.status_code == 400
        assert response.json()["error"].startswith("the body is not JSON")


async def test_delete_cancels_a_running_job() -> None:
    async with service() as (client, runner):
        job = await submit(client, {"command": FOREVER})
        response = await client.delete(f"/jobs/{job['id']}", headers=JSON)
        assert response.status_code == 202
        assert response.json() == {"id": job["id"], "app_handle": job["app_handle"]}
        status = await runner.wait(job["app_handle"])
        assert status is not None
        assert status.state.name == "CANCELLED"
        assert (await client.get("/jobs")).json()[0]["state"] == "CANCELLED"


async def test_an_unknown_job_is_answered_404() -> None:
    async with service() as (client, _):
        response = await client.delete("/jobs/echo-nope", headers=JSON)
        assert response.status_code == 404
        assert response.json() == {"error": "no job 'echo-nope'"}


async def test_the_page_follows_the_jobs_with_event_sources() -> None:
    async with service() as (client, _):
        response = await client.get("/")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/html")
        assert "new EventSource(" in response.text
        assert 'fetch("/jobs"' in response.text


# ---------------------------------------------------------------------- the guard


@pytest.mark.parametrize(
    ("headers", "status", "message"),
    [
        ({"Content-Type": "text/plain"}, 415, "POST needs 'Content-Type: application/json'"),
        ({}, 415, "got None"),
        ({**JSON, "Origin": "http://evil.example"}, 403, "Origin 'http://evil.example'"),
        ({**JSON, "Origin": "http://127.0.0.1:8001"}, 403, "is not this service"),
        ({**JSON, "Host": "evil.example"}, 400, "Invalid host header"),
    ],
)
async def test_what_another_sites_page_can_send_starts_nothing(
    headers: dict[str, str], status: int, message: str
) -> None:
    async with service() as (client, _):
        body = json.dumps({"command": ["true"]})
        response = await client.post("/jobs", content=body, headers=headers)
        assert response.status_code == status
        assert message in response.text
        assert (await client.get("/jobs")).json() == []


async def test_the_services_own_origin_may_submit_and_cancel() -> None:
    async with service() as (client, _):
        own = {**JSON, "Origin": "http://127.0.0.1"}
        response = await client.post("/jobs", json={"command": FOREVER}, headers=own)
        assert response.status_code == 201, response.text
        cancel = await client.delete(f"/jobs/{response.json()['id']}", headers=own)
        assert cancel.status_code == 202


async def test_a_client_beyond_loopback_needs_the_token() -> None:
    async with service(client_address="192.0.2.7") as (client, _):
        response = await client.get("/jobs")
        assert response.status_code == 403
        assert "ASYNCTORCHX_WEB_TOKEN" in response.json()["error"]
    async with service(token="s3cret", client_address="192.0.2.7") as (client, _):
        for sent in ({}, {"Authorization": "Bearer wrong"}):
            response = await client.post("/jobs", json={"command": ["true"]}, headers=sent)
            assert response.status_code == 401
        assert (await client.get("/jobs", headers={"Authorization": "Bearer wrong"})).json() == {
            "error": "send 'Authorization: Bearer <token>' with the token of ASYNCTORCHX_WEB_TOKEN"
        }
        granted = {"Authorization": "Bearer s3cret"}
        response = await client.post("/jobs", json={"command": ["true"]}, headers=granted)
        assert response.status_code == 201, response.text
        assert len((await client.get("/jobs", headers=granted)).json()) == 1


async def test_the_hosts_and_the_token_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ASYNCTORCHX_WEB_HOSTS", "jobs.example, localhost")
    monkeypatch.setenv("ASYNCTORCHX_WEB_TOKEN", "s3cret")
    async with service(client_address="192.0.2.7", hosts=None) as (client, _):
        granted = {"Authorization": "Bearer s3cret"}
        assert (await client.get("/jobs", headers=granted)).status_code == 400  # 127.0.0.1
        named = {**granted, "Host": "jobs.example"}
        assert (await client.get("/jobs", headers=named)).json() == []
        assert (await client.get("/jobs", headers={"Host": "jobs.example"})).status_code == 401


# ---------------------------------------------------------------------- events


async def _events(
    client: httpx.AsyncClient, job_id: str, last_event_id: str | None = None
) -> list[Event]:
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    response = await client.get(f"/jobs/{job_id}/events", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return list(parse_events(response.text.splitlines()))


async def test_the_events_of_a_finished_job_are_its_lines_then_its_end() -> None:
    async with service() as (client, runner):
        command = job_script("import os", "for i in range(3): print(f'line {i}')")
        job = await submit(client, {"command": command, "replicas": 2, "name": "lines"})
        await runner.wait(job["app_handle"])
        events = await _events(client, job["id"])

        assert [event.data["cursor"] for event in events] == [event.id for event in events]
        assert sorted(event.id for event in events) == [event.id for event in events]
        assert (events[-1].type, events[-1].data["state"]) == ("state", "SUCCEEDED")
        for replica in (0, 1):
            lines = [
                event.data["line"]
                for event in events
                if event.type == "log" and event.data["replica_id"] == replica
            ]
            assert lines == ["line 0\n", "line 1\n", "line 2\n"]


def _what(event: Event) -> tuple[str, str, dict[str, Any]]:
    """The event without its timestamp (when its line was read, again on a resume)."""
    return event.type, event.id, {k: v for k, v in event.data.items() if k != "timestamp"}


async def test_last_event_id_resumes_right_after_that_event() -> None:
    async with service() as (client, runner):
        command = job_script("for i in range(5): print(f'line {i}')")
        job = await submit(client, {"command": command})
        await runner.wait(job["app_handle"])
        events = await _events(client, job["id"])
        for seen in range(len(events)):
            rest = await _events(client, job["id"], last_event_id=events[seen].id)
            assert [_what(event) for event in rest] == [_what(e) for e in events[seen + 1 :]]


async def test_a_cursor_the_runner_refuses_is_answered_400() -> None:
    async with service() as (client, runner):
        first = await submit(client, {"component": "utils.echo"})
        second = await submit(client, {"component": "utils.echo"})
        await runner.wait(first["app_handle"])
        await runner.wait(second["app_handle"])
        foreign = (await _events(client, first["id"]))[0].id
        for cursor in (foreign, "not-a-cursor"):
            response = await client.get(
                f"/jobs/{second['id']}/events", headers={"Last-Event-ID": cursor}
            )
            assert response.status_code == 400
            assert "cannot resume the events of" in response.json()["error"]


async def test_the_events_of_an_unknown_job_are_answered_404() -> None:
    async with service() as (client, _):
        response = await client.get("/jobs/echo-nope/events")
        assert response.status_code == 404
        assert response.json() == {"error": "no job 'echo-nope'"}
