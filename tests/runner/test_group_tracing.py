"""Lifecycle traces of app groups (the ``otel`` extra), read with the SDK's in-memory exporter.

The tracer provider is the SDK's, put in place of OpenTelemetry's global one for each
test only (as OpenTelemetry's own test utilities reset it), so no other test is traced.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from asynctorchx.errors import AppGroupFailed
from asynctorchx.runner import Runner, get_runner
from asynctorchx.schedulers import get_scheduler_factories
from asynctorchx.specs import AppState, parse_app_handle
from tests.isolation import isolate_from_user_config
from tests.runner.group_apps import LIMIT, sh_app
from tests.schedulers.kubernetes.conftest import IMAGE as KUBERNETES_IMAGE
from tests.schedulers.kubernetes.conftest import connected

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def spans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The finished spans of this test (an SDK provider in place of the global one)."""
    isolate_from_user_config(tmp_path, monkeypatch)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    yield exporter
    provider.shutdown()


def _by_name(finished: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [span for span in finished if span.name == name]


async def test_each_app_is_a_span_of_the_group_from_submit_to_its_end(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    waits = f"echo started; while [ ! -e {go} ]; do sleep 0.05; done"
    async with get_runner() as runner:
        with anyio.fail_after(LIMIT):
            async with runner.group() as group:
                ok = await group.run(sh_app("ok", waits, num_replicas=2), "local_cwd")
                bad = await group.run(sh_app("bad", "exit 3"), "local_cwd")
                with trace.get_tracer("test").start_as_current_span("the block's own"):
                    pass
                async for status in runner.watch(ok):
                    if status.state == AppState.RUNNING:  # seen running: now let it end
                        go.touch()
    finished = spans.get_finished_spans()
    (group_span,) = _by_name(finished, "asynctorchx.group")
    apps = {
        dict(span.attributes or {})["asynctorchx.app.handle"]: span
        for span in _by_name(finished, "asynctorchx.app")
    }
    assert set(apps) == {ok, bad}
    for span in (*apps.values(), *_by_name(finished, "the block's own")):
        assert span.parent is not None
        assert span.parent.span_id == group_span.context.span_id

    succeeded = apps[ok]
    assert [event.name for event in succeeded.events] == ["submitted", "running", "succeeded"]
    assert dict(succeeded.attributes or {}) == {
        "asynctorchx.scheduler": "local_cwd",
        "asynctorchx.app.name": "ok",
        "asynctorchx.app.roles": ("r",),
        "asynctorchx.app.replicas": 2,
        "asynctorchx.app.id": ok.rpartition("/")[2],
        "asynctorchx.app.handle": ok,
        "asynctorchx.app.state": "SUCCEEDED",
        "asynctorchx.app.exit_code": 0,
    }
    assert succeeded.status.status_code == StatusCode.UNSET

    failed = apps[bad]
    names = [event.name for event in failed.events]
    assert (names[0], names[-1]) == ("submitted", "failed")
    assert failed.attributes is not None
    assert failed.attributes["asynctorchx.app.state"] == "FAILED"
    assert failed.attributes["asynctorchx.app.exit_code"] == 3
    assert failed.status.status_code == StatusCode.ERROR
    assert group_span.status.status_code == StatusCode.UNSET  # no fail_fast: not an error


async def test_an_apps_wait_in_the_queue_is_a_span_from_submitted_to_started(
    spans: InMemorySpanExporter,
) -> None:
    async with get_runner() as runner:
        with anyio.fail_after(LIMIT):
            async with runner.group() as group:
                handle = await group.run(sh_app("ok", "true"), "local_cwd")
            status = await runner.status(handle)
    assert status is not None
    assert status.submitted is not None
    assert status.started is not None
    finished = spans.get_finished_spans()
    (app,) = _by_name(finished, "asynctorchx.app")
    (wait,) = _by_name(finished, "asynctorchx.app.queue_wait")
    assert wait.parent is not None
    assert wait.parent.span_id == app.context.span_id
    assert (wait.start_time, wait.end_time) == (
        round(status.submitted.timestamp() * 1e9),
        round(status.started.timestamp() * 1e9),
    )
    assert dict(wait.attributes or {}) == {}  # local apps do not wait for a reason


async def test_a_failed_fail_fast_group_is_an_error_span(spans: InMemorySpanExporter) -> None:
    async with get_runner() as runner:
        group = runner.group(fail_fast=True)

        async def block() -> None:
            async with group:
                await group.run(sh_app("sleeper", "exec sleep 600"), "local_cwd")
                await group.run(sh_app("bad", "exit 3"), "local_cwd")
                await anyio.sleep_forever()

        with pytest.raises(AppGroupFailed), anyio.fail_after(LIMIT):
            await block()
    finished = spans.get_finished_spans()
    (group_span,) = _by_name(finished, "asynctorchx.group")
    assert group_span.status.status_code == StatusCode.ERROR
    states = {
        span.attributes["asynctorchx.app.name"]: span.attributes["asynctorchx.app.state"]  # type: ignore[index]
        for span in _by_name(finished, "asynctorchx.app")
    }
    assert states == {"sleeper": "CANCELLED", "bad": "FAILED"}


async def test_a_refused_submit_ends_its_span_with_the_error(
    spans: InMemorySpanExporter,
) -> None:
    async with get_runner() as runner:
        group = runner.group()

        async def block() -> None:
            async with group:
                await group.run(sh_app("bad", "true"), "local_cwd", {"log_dir": "/proc/none"})

        with pytest.raises(ValueError, match="log_dir"):
            await block()
    assert group.handles == []
    finished = spans.get_finished_spans()
    (refused,) = _by_name(finished, "asynctorchx.app")  # ended, not leaked
    assert refused.status.status_code == StatusCode.ERROR
    assert [event.name for event in refused.events] == ["exception"]
    (group_span,) = _by_name(finished, "asynctorchx.group")
    assert group_span.status.status_code == StatusCode.ERROR
    assert [event.name for event in group_span.events] == ["exception"]


NO_OPENTELEMETRY = textwrap.dedent(
    """
    import sys

    import asynctorchx.runner
    imported = sorted(name for name in sys.modules if name.startswith("opentelemetry"))
    assert imported == [], imported

    class Absent:  # as if the otel extra were not installed
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "opentelemetry":
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None

    sys.meta_path.insert(0, Absent())

    import anyio
    from asynctorchx.runner import get_runner
    from tests.runner.group_apps import sh_app

    async def main():
        async with get_runner() as runner, runner.group() as group:
            await group.run(sh_app("plain", "exit 0"), "local_cwd")
        (status,) = (await group.wait()).values()
        print(status.state.name)

    anyio.run(main)
    imported = sorted(name for name in sys.modules if name.startswith("opentelemetry"))
    assert imported == [], imported
    """
)


def test_without_the_extra_nothing_of_opentelemetry_is_imported(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", NO_OPENTELEMETRY],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "SUCCEEDED\n"


async def test_a_kubernetes_app_span_has_an_event_per_state(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    async with connected(tmp_path) as (cluster, observer):
        params = {"kubeconfig": cluster.kubeconfig}
        async with Runner("torchx", get_scheduler_factories(), scheduler_params=params) as runner:
            app = sh_app("traced", "exit 3", image=KUBERNETES_IMAGE)
            with anyio.fail_after(LIMIT):
                async with runner.group() as group:
                    handle = await group.run(app, "kubernetes", {"queue": "default"})
                    app_id = parse_app_handle(handle).app_id
                    for state in (AppState.PENDING, AppState.RUNNING):
                        async for status in runner.watch(handle):  # the test's own view
                            if status.state == state:
                                break
                        await anyio.wait_all_tasks_blocked()  # the group's follower saw it too
                        if state == AppState.PENDING:
                            await cluster.start(app_id, "r-0")  # on a bare cluster; a real pod runs
                        else:
                            await cluster.finish(app_id, "r-0", 3)
            await observer.delete(app_id)
    (span,) = _by_name(spans.get_finished_spans(), "asynctorchx.app")
    names = [event.name for event in span.events]
    if cluster.fake is not None:  # a real cluster may go through a state between two looks
        assert names == ["submitted", "pending", "running", "failed"]
    assert (names[0], names[-1]) == ("submitted", "failed")
    assert span.attributes is not None
    assert span.attributes["asynctorchx.scheduler"] == "kubernetes"
    assert span.attributes["asynctorchx.app.exit_code"] == 3
