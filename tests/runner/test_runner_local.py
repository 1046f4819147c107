"""The async Runner against the real ``local_cwd`` scheduler (real processes)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from asynctorchx.errors import (
    MalformedAppHandleException,
    SchedulerClosedError,
    SessionMismatchException,
    UnknownAppException,
    UnknownSchedulerException,
)
from asynctorchx.runner import LogLine, Runner, get_runner
from asynctorchx.schedulers import get_scheduler_factories
from asynctorchx.specs.api import AppDef, AppState, Role, macros
from tests.isolation import isolate_from_user_config

SCHED = "local_cwd"
LIMIT = 30  # seconds: a safety bound, never a timing guess


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user .torchxconfig, no TORCHX_* from the outer environment."""
    isolate_from_user_config(tmp_path, monkeypatch)


def _sh(script: str, name: str = "sh", replicas: int = 1) -> AppDef:
    role = Role(name=name, image=".", entrypoint="sh", args=["-c", script], num_replicas=replicas)
    return AppDef(name=name, roles=[role])


# A replica that prints a ready line with its pid, then waits for the file `go`.
# Args go through macro substitution (string.Template, as in TorchX): `$$$$` reaches sh as `$$`.
WAIT_FOR_GO = "echo ready $$$$; while [ ! -e go ]; do sleep 0.05; done; echo done"


async def _first_line(runner: Runner, handle: str, role: str = "sh") -> str:
    async for line in runner.log_lines(handle, role, 0, should_tail=True):
        return line
    raise AssertionError("the replica printed nothing")


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def test_run_wait_status_describe_list_and_logs() -> None:
    async with get_runner() as runner:
        app = _sh("echo hello; echo world >&2")
        handle = await runner.run(app, SCHED)
        assert handle.startswith(f"{SCHED}://torchx/")
        with anyio.fail_after(LIMIT):
            final = await runner.wait(handle, wait_interval=0.1)
        assert final is not None
        assert final.state == AppState.SUCCEEDED
        status = await runner.status(handle)
        assert status is not None
        assert status.state == AppState.SUCCEEDED
        described = await runner.describe(handle)
        assert described is not None  # schedule recorded the submitted AppDef
        assert described.roles[0].entrypoint == app.roles[0].entrypoint
        listed = {a.app_handle: a.state for a in await runner.list(SCHED)}
        assert listed[handle] == AppState.SUCCEEDED
        lines = [line async for line in runner.log_lines(handle, "sh", 0)]
        assert "hello\n" in lines
        assert "world\n" in lines
        matching = [line async for line in runner.log_lines(handle, "sh", 0, regex="wor")]
        assert matching == ["world\n"]
        assert runner.name() == "torchx"
        assert runner.scheduler_backends()[0] == SCHED
        assert "log_dir" in runner.scheduler_run_opts(SCHED)


async def test_failed_app_ends_failed() -> None:
    async with get_runner() as runner:
        handle = await runner.run(_sh("exit 3"), SCHED)
        with anyio.fail_after(LIMIT):
            final = await runner.wait(handle)
        assert final is not None
        assert final.state == AppState.FAILED


async def test_env_injection_reaches_replicas(monkeypatch: pytest.MonkeyPatch) -> None:
    (Path.cwd() / ".torchxconfig").write_text(
        "[torchx:tracker]\nfsspec =\n[tracker:fsspec]\nconfig = /tmp/trk\n"
    )
    monkeypatch.setenv("TORCHX_PARENT_RUN_ID", "parent-from-env")
    async with get_runner() as runner:
        app = _sh(
            'echo "job=$TORCHX_JOB_ID parent=$TORCHX_PARENT_RUN_ID'
            ' trackers=$TORCHX_TRACKERS cfg=$TORCHX_TRACKER_FSSPEC_CONFIG"'
        )
        info = await runner.dryrun(app, SCHED, parent_run_id="ignored-arg")
        assert info.app is not None
        env = info.app.roles[0].env
        assert env["TORCHX_JOB_ID"] == f"{SCHED}://torchx/{macros.app_id}"
        assert env["TORCHX_PARENT_RUN_ID"] == "parent-from-env"
        assert env["TORCHX_TRACKERS"] == "fsspec"
        assert env["TORCHX_TRACKER_FSSPEC_CONFIG"] == "/tmp/trk"
        handle = await runner.schedule(info)
        with anyio.fail_after(LIMIT):
            await runner.wait(handle)
        lines = [line async for line in runner.log_lines(handle, "sh")]
        assert lines == [f"job={handle} parent=parent-from-env trackers=fsspec cfg=/tmp/trk\n"]


async def test_validation_messages() -> None:
    async with get_runner() as runner:
        with pytest.raises(ValueError, match=r"No roles for app: empty\. Did you forget"):
            await runner.dryrun(AppDef(name="empty"), SCHED)
        no_entry = AppDef(name="a", roles=[Role(name="trainer", image=".", entrypoint="")])
        with pytest.raises(ValueError, match=r"No entrypoint for role: trainer\."):
            await runner.dryrun(no_entry, SCHED)
        zero = AppDef(
            name="a", roles=[Role(name="trainer", image=".", entrypoint="x", num_replicas=0)]
        )
        with pytest.raises(ValueError, match=r"Non-positive replicas for role: trainer\."):
            await runner.dryrun(zero, SCHED)


async def test_unknown_handles_get_typed_errors() -> None:
    async with get_runner() as runner:
        with pytest.raises(MalformedAppHandleException, match="not-a-handle"):
            await runner.status("not-a-handle")
        with pytest.raises(UnknownSchedulerException, match=r"'nope'.*local_cwd"):
            await runner.status("nope://torchx/app-1")
        with pytest.raises(UnknownSchedulerException, match="local_cwd"):
            await runner.run(_sh("true"), "nope")
        with pytest.raises(SessionMismatchException, match="other"):
            await runner.cancel(f"{SCHED}://other/app-1")
        unknown = f"{SCHED}://torchx/never-submitted"
        assert await runner.status(unknown) is None
        assert await runner.wait(unknown) is None
        assert await runner.describe(unknown) is None
        await runner.cancel(unknown)  # a no-op
        with pytest.raises(UnknownAppException, match="never-submitted"):
            async for _ in runner.log_lines(unknown, "sh"):
                pass


async def test_runner_must_be_entered_and_close_is_idempotent() -> None:
    runner = get_runner()
    with pytest.raises(SchedulerClosedError, match="async with get_runner"):
        await runner.run(_sh("true"), SCHED)
    async with runner:
        await runner.list(SCHED)  # opens the scheduler
        await runner.close()
        await runner.close()
        with pytest.raises(SchedulerClosedError):
            await runner.run(_sh("true"), SCHED)


async def test_a_runner_is_entered_once_and_not_again_after_it_closed() -> None:
    runner = get_runner()
    async with runner:
        with pytest.raises(RuntimeError, match="already been entered"):
            async with runner:
                pass
        await runner.list(SCHED)  # the refused entry left the runner open
    with pytest.raises(SchedulerClosedError, match="create a new one"):
        async with runner:
            pass


async def test_watch_yields_running_then_succeeded() -> None:
    async with get_runner() as runner:
        handle = await runner.run(_sh(WAIT_FOR_GO), SCHED)
        states: list[AppState] = []
        with anyio.fail_after(LIMIT):
            async for status in runner.watch(handle):
                states.append(status.state)
                if status.state == AppState.RUNNING:
                    Path("go").touch()
        assert states[-2:] == [AppState.RUNNING, AppState.SUCCEEDED]
        assert AppState.SUCCEEDED not in states[:-1]


async def test_cancel_ends_cancelled_and_stop_warns() -> None:
    async with get_runner() as runner:
        handle = await runner.run(_sh(WAIT_FOR_GO), SCHED)
        with anyio.fail_after(LIMIT):
            line = await _first_line(runner, handle)
            pid = int(line.split()[1])
            await runner.cancel(handle)
            final = await runner.wait(handle)
        assert final is not None
        assert final.state == AppState.CANCELLED
        assert not _alive(pid)

        other = await runner.run(_sh(WAIT_FOR_GO), SCHED)
        with pytest.warns(PendingDeprecationWarning):
            await runner.stop(other)
        with anyio.fail_after(LIMIT):
            stopped = await runner.wait(other)
        assert stopped is not None
        assert stopped.state == AppState.CANCELLED


async def test_leaving_by_exception_kills_running_replicas() -> None:
    pids: list[int] = []

    async def body() -> None:
        async with get_runner() as runner:
            handle = await runner.run(_sh(WAIT_FOR_GO, replicas=2), SCHED)
            with anyio.fail_after(LIMIT):
                async with runner.log_stream(handle, should_tail=True) as lines:
                    async for line in lines:
                        pids.append(int(line.line.split()[1]))
                        if len(pids) == 2:
                            break
            assert all(_alive(pid) for pid in pids)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await body()
    assert len(pids) == 2
    assert not any(_alive(pid) for pid in pids)


async def test_leaving_by_cancellation_kills_running_replicas() -> None:
    # The cancelled scope encloses the runner: its schedulers' own tasks must still see
    # the replicas exit, or closing waits forever (it used to hang here).
    pids: list[int] = []
    with anyio.fail_after(LIMIT):
        with anyio.CancelScope() as scope:
            async with get_runner() as runner:
                handle = await runner.run(_sh(WAIT_FOR_GO, replicas=2), SCHED)
                async with runner.log_stream(handle, should_tail=True) as lines:
                    async for line in lines:
                        pids.append(int(line.line.split()[1]))
                        if len(pids) == 2:
                            scope.cancel()
                            await anyio.sleep_forever()  # ended by the cancellation
    assert scope.cancelled_caught
    assert len(pids) == 2
    assert not any(_alive(pid) for pid in pids)


async def test_merged_log_stream_tags_role_and_replica() -> None:
    async with get_runner() as runner:
        app = _sh(f"echo hello {macros.replica_id}", name="greet", replicas=3)
        handle = await runner.run(app, SCHED)
        with anyio.fail_after(LIMIT):
            async with runner.log_stream(handle, should_tail=True) as lines:
                got = {line async for line in lines}
        assert got == {LogLine("greet", k, f"hello {k}\n") for k in range(3)}


async def test_cancelling_the_log_consumer_stops_the_readers() -> None:
    async with get_runner() as runner:
        handle = await runner.run(_sh(WAIT_FOR_GO, replicas=2), SCHED)
        seen: list[LogLine] = []
        with anyio.fail_after(LIMIT):
            with anyio.CancelScope() as scope:
                async with runner.log_stream(handle, should_tail=True) as lines:
                    async for line in lines:
                        seen.append(line)
                        scope.cancel()
            assert len(seen) == 1
            await runner.cancel(handle)
            final = await runner.wait(handle)
        assert final is not None
        assert final.state == AppState.CANCELLED


async def test_component_defaults_and_run_component() -> None:
    async with get_runner(component_defaults={"utils.echo": {"msg": "from defaults"}}) as runner:
        handle = await runner.run_component("utils.echo", [], SCHED)
        with anyio.fail_after(LIMIT):
            final = await runner.wait(handle)
        assert final is not None
        assert final.state == AppState.SUCCEEDED
        app = await runner.describe(handle)
        assert app is not None
        assert "from defaults" in app.roles[0].args
        role = app.roles[0].name
        assert [line async for line in runner.log_lines(handle, role)] == ["from defaults\n"]

        info = await runner.dryrun_component("utils.echo", ["--msg", "explicit"], SCHED)
        assert info._app is not None
        assert "explicit" in info._app.roles[0].args


async def test_component_defaults_come_from_torchxconfig() -> None:
    (Path.cwd() / ".torchxconfig").write_text("[component:utils.echo]\nmsg = from config\n")
    async with get_runner() as runner:
        info = await runner.dryrun_component("utils.echo", [], SCHED)
        assert info._app is not None
        assert "from config" in info._app.roles[0].args


async def test_torchx_env_vars_become_scheduler_params(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHX_TEST_PARAM", "from-env")
    monkeypatch.setenv("TORCHX_XTORCH", "kept")  # removeprefix, not strip("torchx_")
    received: dict[str, Any] = {}
    real = get_scheduler_factories()[SCHED]

    def recording_factory(session_name: str, **kwargs: Any) -> Any:
        received.update(kwargs)
        return real(session_name)

    runner = Runner("torchx", {SCHED: recording_factory}, scheduler_params={"explicit": 1})
    async with runner:
        await runner.list(SCHED)
    assert received["test_param"] == "from-env"
    assert received["xtorch"] == "kept"
    assert received["explicit"] == 1


async def test_python_role_runs_with_this_interpreter() -> None:
    role = Role(name="py", image=".", entrypoint=sys.executable, args=["-c", "print(6 * 7)"])
    async with get_runner() as runner:
        handle = await runner.run(AppDef(name="py", roles=[role]), SCHED)
        with anyio.fail_after(LIMIT):
            await runner.wait(handle)
        assert [line async for line in runner.log_lines(handle, "py")] == ["42\n"]


async def test_an_error_in_the_log_stream_block_reaches_the_caller_as_itself() -> None:
    async with get_runner() as runner:
        handle = await runner.run(_sh(WAIT_FOR_GO), SCHED)

        async def read() -> None:
            async with runner.log_stream(handle, should_tail=True) as lines:
                async for _ in lines:
                    raise KeyError("stop reading")

        with pytest.raises(KeyError, match="stop reading"):
            await read()
        await runner.cancel(handle)
        with anyio.fail_after(LIMIT):
            final = await runner.wait(handle)
        assert final is not None
        assert final.state == AppState.CANCELLED


async def _drain(runner: Runner, handle: str, replicas: dict[str, list[int]]) -> None:
    async with runner.log_stream(handle, replicas) as lines:
        async for _ in lines:
            pass


async def test_log_stream_of_an_unknown_role_or_replica_raises_value_error() -> None:
    async with get_runner() as runner:
        handle = await runner.run(_sh("echo hi"), SCHED)
        with anyio.fail_after(LIMIT):
            await runner.wait(handle)
            with pytest.raises(ValueError, match="'nope'"):
                await _drain(runner, handle, {"nope": [0]})
            with pytest.raises(ValueError, match="not 5"):
                await _drain(runner, handle, {"sh": [0, 5]})
