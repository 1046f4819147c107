"""The local_cwd / local_dir scheduler against real processes.

Nothing here sleeps to guess at timing: a test that needs a replica to reach a point
reads the line the replica prints there (``log_iter(should_tail=True)``), and a
replica that must wait is released by a file the test creates.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from asynctorchx.errors import (
    InvalidAppIdException,
    ReplicaLaunchError,
    SchedulerClosedError,
    UnknownAppException,
)
from asynctorchx.schedulers.api import Stream
from asynctorchx.schedulers.local_scheduler import (
    LocalDirectoryImageProvider,
    LocalScheduler,
    PopenRequest,
    create_cwd_scheduler,
    create_dir_scheduler,
)
from asynctorchx.specs.api import AppDef, AppState, RetryPolicy, Role
from tests.processes import alive

LIMIT = 30  # seconds: a deadline for a hung test, never a guess at timing


def sh_app(*scripts: str, name: str = "app", role: str = "worker", **role_kwargs: object) -> AppDef:
    """An app with one role whose replica ``k`` runs ``sh -c scripts[k]``.

    The replica id is passed as ``$1`` (through the ``${replica_id}`` macro).
    """
    if len(scripts) == 1:
        args = ["-c", scripts[0], "sh", "${replica_id}"]
    else:
        cases = " ".join(f"{k}) {script} ;;" for k, script in enumerate(scripts))
        args = ["-c", f'case "$1" in {cases} esac', "sh", "${replica_id}"]
    return AppDef(
        name,
        [
            Role(
                role, "unused", entrypoint="sh", args=args, num_replicas=len(scripts), **role_kwargs
            )
        ],  # type: ignore[arg-type]
    )


async def first_line(scheduler: LocalScheduler, app_id: str, role: str, k: int = 0) -> str:
    async for line in scheduler.log_iter(app_id, role, k, should_tail=True):
        return line
    raise AssertionError("the replica printed nothing")


async def lines(
    scheduler: LocalScheduler, app_id: str, role: str, k: int = 0, **kw: object
) -> list[str]:
    return [line async for line in scheduler.log_iter(app_id, role, k, **kw)]  # type: ignore[arg-type]


# --------------------------------------------------------------------------- running


async def test_app_of_several_roles_succeeds_with_each_replicas_output(tmp_path: Path) -> None:
    app = AppDef(
        "multi",
        [
            Role(
                "trainer",
                "x",
                entrypoint="sh",
                args=["-c", "echo trainer $0", "${replica_id}"],
                num_replicas=3,
            ),
            Role(
                "reader", "x", entrypoint="echo", args=["reader", "${replica_id}"], num_replicas=2
            ),
        ],
    )
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(app, {"log_dir": str(tmp_path)})
        with anyio.fail_after(LIMIT):
            response = await scheduler.wait(app_id)
        assert response is not None
        assert response.state == AppState.SUCCEEDED
        assert [role.name for role in response.roles] == ["trainer", "reader"]
        statuses = {status.role: status.replicas for status in response.roles_statuses}
        assert [r.exit_code for r in statuses["trainer"]] == [0, 0, 0]
        for k in range(3):
            assert await lines(scheduler, app_id, "trainer", k) == [f"trainer {k}\n"]
            log = tmp_path / "test" / app_id / "trainer" / str(k) / "stdout.log"
            assert log.read_text() == f"trainer {k}\n"
        for k in range(2):
            assert await lines(scheduler, app_id, "reader", k) == [f"reader {k}\n"]
        assert response.ui_url == f"file://{tmp_path / 'test' / app_id}"


async def test_failing_replica_fails_the_app_with_its_exit_code() -> None:
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app("exit 0", "echo boom >&2; exit 7"), {})
        with anyio.fail_after(LIMIT):
            response = await scheduler.wait(app_id)
        assert response is not None
        assert response.state == AppState.FAILED
        replicas = response.roles_statuses[0].replicas
        assert [(r.state, r.exit_code) for r in replicas] == [
            (AppState.SUCCEEDED, 0),
            (AppState.FAILED, 7),
        ]
        assert await lines(scheduler, app_id, "worker", 1, streams=Stream.STDERR) == ["boom\n"]


async def test_wait_does_not_block_the_event_loop(tmp_path: Path) -> None:
    go = tmp_path / "go"
    script = f"echo ready; while [ ! -e {go} ]; do sleep 0.01; done"
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app(script), {})
        results = []

        async def waiter() -> None:
            results.append(await scheduler.wait(app_id))

        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(waiter)
                # this task runs while `wait` is pending; it is what lets the app end
                assert await first_line(scheduler, app_id, "worker") == "ready\n"
                assert results == []
                go.touch()
        assert results[0] is not None
        assert results[0].state == AppState.SUCCEEDED


async def test_environment_and_macros_per_replica(tmp_path: Path) -> None:
    role = Role(
        "r",
        "x",
        entrypoint="sh",
        args=[
            "-c",
            'echo "$0 $TORCHX_RANK0_HOST $ROLE_ENV $TORCHX_JOB_ID"',
            "${app_id}/${replica_id}",
        ],
        env={"ROLE_ENV": "rank-${replica_id}"},
        num_replicas=2,
    )
    async with create_cwd_scheduler("sess") as scheduler:
        app_id = await scheduler.submit(AppDef("env", [role]), {})
        await scheduler.wait(app_id)
        for k in range(2):
            assert await lines(scheduler, app_id, "r", k) == [
                f"{app_id}/{k} localhost rank-{k} local_cwd://sess/{app_id}\n"
            ]


async def test_dryrun_request_is_readable_and_starts_nothing() -> None:
    scheduler = create_cwd_scheduler("test")
    info = scheduler.submit_dryrun(sh_app("echo hi"), {"log_dir": "/tmp/somewhere"})
    request = info.request
    assert isinstance(request, PopenRequest)
    assert request.role_params["worker"][0].args == ["sh", "-c", "echo hi", "sh", "0"]
    text = str(info)
    assert request.app_id in text
    assert "sh -c 'echo hi' sh 0" in text
    assert not Path("/tmp/somewhere", "test", request.app_id).exists()
    await scheduler.close()


async def test_schedule_outside_async_with_is_refused() -> None:
    scheduler = create_cwd_scheduler("test")
    with pytest.raises(SchedulerClosedError, match="async with"):
        await scheduler.submit(sh_app("true"), {})
    await scheduler.close()


async def test_entrypoint_that_does_not_exist_raises_and_starts_nothing() -> None:
    app = AppDef(
        "bad",
        [
            Role("ok", "x", entrypoint="sleep", args=["600"]),
            Role("bad", "x", entrypoint="/no/such/program-asynctorchx"),
        ],
    )
    async with create_cwd_scheduler("test") as scheduler:
        with pytest.raises(ReplicaLaunchError, match="replica bad/0 could not start"):
            await scheduler.submit(app, {})
        assert await scheduler.list() == []


async def test_invalid_app_id_is_refused() -> None:
    async with create_cwd_scheduler("test") as scheduler:
        for bad in ("../etc", "a/b", "..", ""):
            with pytest.raises(InvalidAppIdException):
                await scheduler.describe(bad)
            with pytest.raises(InvalidAppIdException):
                scheduler.log_iter(bad, "worker")
        assert await scheduler.describe("never-submitted") is None
        assert await scheduler.wait("never-submitted") is None
        with pytest.raises(UnknownAppException):
            scheduler.log_iter("never-submitted", "worker")


async def test_local_dir_image_must_be_an_existing_absolute_directory(tmp_path: Path) -> None:
    provider = LocalDirectoryImageProvider({})
    with pytest.raises(ValueError, match="absolute"):
        provider.fetch("relative/dir")
    with pytest.raises(ValueError, match="existing directory"):
        provider.fetch(str(tmp_path / "missing"))
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\necho in $(pwd)\n")
    script.chmod(0o755)
    role = Role("r", str(tmp_path), entrypoint="run.sh")
    async with create_dir_scheduler("test") as scheduler:
        app_id = await scheduler.submit(AppDef("dir", [role]), {})
        await scheduler.wait(app_id)
        assert await lines(scheduler, app_id, "r") == [f"in {tmp_path}\n"]


async def test_cache_size_forgets_the_oldest_finished_app() -> None:
    running = "echo ready; exec sleep 600"
    async with create_cwd_scheduler("test", cache_size=2) as scheduler:
        first = await scheduler.submit(sh_app("true"), {})
        await scheduler.wait(first)
        second = await scheduler.submit(sh_app(running), {"stop_timeout": 0.1})
        third = await scheduler.submit(sh_app(running), {"stop_timeout": 0.1})
        fourth = await scheduler.submit(sh_app(running), {"stop_timeout": 0.1})  # never refused
        for app_id in (second, third, fourth):
            await scheduler.cancel(app_id)
            await scheduler.wait(app_id)
        assert await scheduler.describe(first) is None  # the first finished is forgotten
        assert {app.app_id for app in await scheduler.list()} == {third, fourth}


async def test_an_exception_in_the_body_propagates_as_raised() -> None:
    async def body() -> None:
        async with create_cwd_scheduler("test") as scheduler:
            await scheduler.submit(sh_app("echo ready; exec sleep 600"), {"stop_timeout": 0.1})
            raise KeyError("mine")

    with pytest.raises(KeyError, match="mine"):
        await body()


# --------------------------------------------------------------------------- cancel, close


async def test_cancel_kills_a_tree_whose_child_ignores_sigterm() -> None:
    child = "trap '' TERM; echo child $$$$; while :; do sleep 1; done"  # macros: $$$$ -> $$
    script = f'sh -c "{child}" & wait'
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app(script), {"stop_timeout": 0.5})
        with anyio.fail_after(LIMIT):
            pid = int((await first_line(scheduler, app_id, "worker")).split()[1])
            assert alive(pid)
            await scheduler.cancel(app_id)
            response = await scheduler.wait(app_id)
        assert response is not None
        assert response.state == AppState.CANCELLED
        assert not alive(pid)
        await scheduler.cancel(app_id)  # idempotent
        assert (await scheduler.describe(app_id)).state == AppState.CANCELLED  # type: ignore[union-attr]


async def test_cancel_of_a_finished_app_changes_nothing() -> None:
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app("true"), {})
        await scheduler.wait(app_id)
        await scheduler.cancel(app_id)
        assert (await scheduler.describe(app_id)).state == AppState.SUCCEEDED  # type: ignore[union-attr]


async def test_closing_the_scheduler_terminates_running_replicas() -> None:
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app("echo up $$$$; exec sleep 600"), {"stop_timeout": 1})
        pid = int((await first_line(scheduler, app_id, "worker")).split()[1])
    assert not alive(pid)
    assert (await scheduler.describe(app_id)).state == AppState.CANCELLED  # type: ignore[union-attr]


async def test_cancelling_the_block_around_the_scheduler_terminates_gracefully(
    tmp_path: Path,
) -> None:
    # The replica records the SIGTERM it gets: a cancelled block must still end the
    # replicas as close() does (SIGTERM first), and must not hang waiting for them.
    termed = tmp_path / "termed"
    script = f"trap 'echo term > {termed}; exit 0' TERM; echo up $$$$; while :; do sleep 0.01; done"
    with anyio.CancelScope() as outer:
        async with create_cwd_scheduler("test") as scheduler:
            app_id = await scheduler.submit(sh_app(script), {"stop_timeout": LIMIT})
            pid = int((await first_line(scheduler, app_id, "worker")).split()[1])
            outer.cancel()
            await anyio.sleep_forever()
    assert outer.cancelled_caught
    assert not alive(pid)
    assert termed.read_text() == "term\n"
    assert (await scheduler.describe(app_id)).state == AppState.CANCELLED  # type: ignore[union-attr]


@pytest.mark.usefixtures("no_records")
async def test_temporary_log_dir_is_removed_on_close() -> None:
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app("echo hi"), {})
        response = await scheduler.wait(app_id)
        assert response is not None
        assert response.ui_url is not None
        log_dir = Path(response.ui_url.removeprefix("file://"))
        assert (log_dir / "worker" / "0" / "combined.log").read_text() == "hi\n"
    assert not log_dir.exists()


async def test_cancelling_a_waiting_task_leaves_the_app_running(tmp_path: Path) -> None:
    go = tmp_path / "go"
    script = f"echo ready; while [ ! -e {go} ]; do sleep 0.01; done; echo finished"
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app(script), {})
        await first_line(scheduler, app_id, "worker")
        with anyio.move_on_after(0) as scope:
            await scheduler.wait(app_id)
        assert scope.cancelled_caught
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(first_line, scheduler, app_id, "worker")
            task_group.cancel_scope.cancel()
        assert (await scheduler.describe(app_id)).state == AppState.RUNNING  # type: ignore[union-attr]
        go.touch()
        with anyio.fail_after(LIMIT):
            response = await scheduler.wait(app_id)
        assert response is not None
        assert response.state == AppState.SUCCEEDED
        assert await lines(scheduler, app_id, "worker") == ["ready\n", "finished\n"]


HOST = textwrap.dedent(
    """
    import anyio, sys
    from asynctorchx.runner import terminate_on_signals
    from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
    from asynctorchx.specs.api import AppDef, Role

    async def main():
        # the program owns the signals and asks for the replicas' cleanup explicitly
        async with create_cwd_scheduler("host") as scheduler, terminate_on_signals(scheduler):
            script = "sh -c 'echo child $$$$; exec sleep 600' & echo leader $$$$; wait"
            role = Role("r", "x", entrypoint="sh", args=["-c", script], num_replicas=2)
            app = AppDef("host", [role])
            app_id = await scheduler.submit(app, {"stop_timeout": 2})
            for k in range(2):
                seen = 0
                async for line in scheduler.log_iter(app_id, "r", k, should_tail=True):
                    print(line, end="", flush=True)
                    seen += 1
                    if seen == 2:
                        break
            print("ready", flush=True)
            await scheduler.wait(app_id)

    anyio.run(main)
    """
)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_signal_to_the_host_process_leaves_no_replica(signum: int) -> None:
    with anyio.fail_after(LIMIT):
        process = await anyio.open_process([sys.executable, "-c", HOST], stderr=subprocess.DEVNULL)
        assert process.stdout is not None
        output = b""
        async for chunk in process.stdout:
            output += chunk
            if output.endswith(b"ready\n"):
                break
        pids = [int(line.split()[1]) for line in output.decode().splitlines() if line != "ready"]
        assert len(pids) == 4
        assert all(alive(pid) for pid in pids)
        process.send_signal(signum)
        await process.wait()
        await process.aclose()
    assert [pid for pid in pids if alive(pid)] == []


# --------------------------------------------------------------------------- retries


async def test_replica_retry_policy_restarts_only_the_failed_replica(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    failed = tmp_path / "failed"
    fail_once = f"echo 1 >> {runs}-$1; if [ -e {failed} ]; then exit 0; fi; touch {failed}; exit 3"
    app = sh_app(f"echo 0 >> {runs}-$1", fail_once, max_retries=2, retry_policy=RetryPolicy.REPLICA)
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(app, {})
        with anyio.fail_after(LIMIT):
            response = await scheduler.wait(app_id)
        assert response is not None
        assert response.state == AppState.SUCCEEDED
        assert response.num_restarts == 1
        assert Path(f"{runs}-0").read_text() == "0\n"
        assert Path(f"{runs}-1").read_text() == "1\n1\n"


async def test_application_retry_policy_restarts_every_replica(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    go = tmp_path / "failed"
    # replica 0 waits for replica 1's first failure, so the restart must terminate it
    wait_or_end = f"echo 0 >> {runs}-$1; while [ ! -e {go} ]; do sleep 0.01; done"
    fail_once = f"echo 1 >> {runs}-$1; if [ -e {go} ]; then exit 0; fi; touch {go}; exit 3"
    app = sh_app(wait_or_end, fail_once, max_retries=1, retry_policy=RetryPolicy.APPLICATION)
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(app, {"stop_timeout": 5})
        with anyio.fail_after(LIMIT):
            response = await scheduler.wait(app_id)
        assert response is not None
        assert response.state == AppState.SUCCEEDED
        assert response.num_restarts == 1
        assert Path(f"{runs}-0").read_text() == "0\n0\n"
        assert Path(f"{runs}-1").read_text() == "1\n1\n"


async def test_retries_run_out_and_the_app_fails() -> None:
    app = sh_app("echo try; exit 4", max_retries=2, retry_policy=RetryPolicy.REPLICA)
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(app, {})
        response = await scheduler.wait(app_id)
        assert response is not None
        assert response.state == AppState.FAILED
        assert response.num_restarts == 2
        assert response.roles_statuses[0].replicas[0].exit_code == 4
        assert await lines(scheduler, app_id, "worker") == ["try\n"] * 3  # each attempt kept


# --------------------------------------------------------------------------- logs


async def test_log_iter_streams_regex_and_tail() -> None:
    script = "echo out1; echo err1 >&2; echo out2; echo err2 >&2"
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app(script), {})
        followed = await lines(scheduler, app_id, "worker", should_tail=True)
        assert sorted(followed) == ["err1\n", "err2\n", "out1\n", "out2\n"]
        assert await lines(scheduler, app_id, "worker", streams=Stream.STDOUT) == [
            "out1\n",
            "out2\n",
        ]
        assert await lines(scheduler, app_id, "worker", streams=Stream.STDERR) == [
            "err1\n",
            "err2\n",
        ]
        assert sorted(await lines(scheduler, app_id, "worker", regex="2$")) == ["err2\n", "out2\n"]
        assert await lines(scheduler, app_id, "worker", regex="^out") == ["out1\n", "out2\n"]
        with pytest.raises(ValueError, match="no role"):
            scheduler.log_iter(app_id, "nope")
        with pytest.raises(ValueError, match=r"replicas 0\.\.0"):
            scheduler.log_iter(app_id, "worker", 1)


async def test_log_iter_without_tail_returns_what_is_there_now(tmp_path: Path) -> None:
    go = tmp_path / "go"
    script = f"echo first; while [ ! -e {go} ]; do sleep 0.01; done; echo second"
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app(script), {})
        assert await first_line(scheduler, app_id, "worker") == "first\n"
        with anyio.fail_after(LIMIT):  # returns at once although the app still runs
            assert await lines(scheduler, app_id, "worker") == ["first\n"]
        go.touch()
        with anyio.fail_after(LIMIT):
            assert await lines(scheduler, app_id, "worker", should_tail=True) == [
                "first\n",
                "second\n",
            ]


async def test_log_iter_since_and_until(tmp_path: Path) -> None:
    go = tmp_path / "go"
    script = f"echo before; while [ ! -e {go} ]; do sleep 0.01; done; echo after"
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app(script), {})
        await first_line(scheduler, app_id, "worker")
        middle = datetime.now()
        go.touch()
        await scheduler.wait(app_id)
        assert await lines(scheduler, app_id, "worker", since=middle) == ["after\n"]
        assert await lines(scheduler, app_id, "worker", until=middle) == ["before\n"]
        assert await lines(scheduler, app_id, "worker", streams=Stream.STDOUT, since=middle) == [
            "after\n"
        ]


async def test_awkward_output_comes_through_whole() -> None:
    megabyte_line = "x" * (1 << 20)
    script = (
        "printf 'progress 1\\rprogress 2\\rdone\\n';"
        " printf 'bad \\377\\376 bytes\\n';"
        " head -c 1048576 /dev/zero | tr '\\0' x; echo;"
        " printf 'no newline at the end'"
    )
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app(script), {})
        got = await lines(scheduler, app_id, "worker", should_tail=True)
    assert got == [
        "progress 1\rprogress 2\rdone\n",
        "bad \ufffd\ufffd bytes\n",
        megabyte_line + "\n",
        "no newline at the end",
    ]


async def test_no_line_is_lost_in_200_runs_of_echo() -> None:
    async with create_cwd_scheduler("test", cache_size=1000) as scheduler:
        for run in range(200):
            app = AppDef("echo", [Role("echo", "x", entrypoint="echo", args=[f"line {run}"])])
            app_id = await scheduler.submit(app, {})
            await scheduler.wait(app_id)
            assert await lines(scheduler, app_id, "echo") == [f"line {run}\n"], run


async def test_followers_of_every_replica_see_every_line() -> None:
    script = 'i=0; while [ $i -lt 2000 ]; do echo "$1 $i"; i=$((i+1)); done'
    app = sh_app(script, script, script, script)
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(app, {})
        results: dict[int, list[str]] = {}

        async def follow(k: int) -> None:
            results[k] = await lines(scheduler, app_id, "worker", k, should_tail=True)

        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as task_group:
                for k in range(4):
                    task_group.start_soon(follow, k)
        for k in range(4):
            assert results[k] == [f"{k} {i}\n" for i in range(2000)]


def test_scheduler_module_does_not_import_aiodocker() -> None:
    code = (
        "import asynctorchx.schedulers.local_scheduler, asynctorchx.runner, sys;"
        " print('aiodocker' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_wait_for_state_change_returns_at_the_next_state(tmp_path: Path) -> None:
    go = tmp_path / "go"
    script = f"echo ready; while [ ! -e {go} ]; do sleep 0.01; done"
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app(script), {})
        changed = await scheduler.wait_for_state_change(app_id, AppState.SUBMITTED)
        assert changed is not None
        assert changed.state == AppState.RUNNING  # already past SUBMITTED: at once
        with pytest.raises(TimeoutError):
            await scheduler.wait_for_state_change(app_id, AppState.RUNNING, timeout=0)
        go.touch()
        with anyio.fail_after(LIMIT):
            changed = await scheduler.wait_for_state_change(app_id, AppState.RUNNING)
        assert changed is not None
        assert changed.state == AppState.SUCCEEDED


async def test_structured_error_msg_is_the_earliest_error_file() -> None:
    def error(timestamp: int) -> str:
        return (
            f'printf \'{{"message": {{"message": "boom at {timestamp}",'
            f' "extraInfo": {{"timestamp": "{timestamp}"}}}}}}\' > "$TORCHELASTIC_ERROR_FILE";'
            " exit 1"
        )

    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app(error(200), error(100), "exit 0"), {})
        response = await scheduler.wait(app_id)
        assert response is not None
        assert response.state == AppState.FAILED
        assert "boom at 100" in response.structured_error_msg
        replicas = response.roles_statuses[0].replicas
        assert "boom at 200" in replicas[0].structured_error_msg
        assert replicas[2].structured_error_msg == "<NONE>"


async def test_follower_of_a_replica_that_prints_late_or_never(tmp_path: Path) -> None:
    go = tmp_path / "go"
    late = f"while [ ! -e {go} ]; do sleep 0.01; done; echo late"
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app(late, "true"), {})
        assert await lines(scheduler, app_id, "worker", 0) == []  # nothing yet, no file yet
        got: list[str] = []

        async def follow() -> None:
            got.extend(await lines(scheduler, app_id, "worker", 0, should_tail=True))

        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(follow)
                await anyio.lowlevel.checkpoint()
                go.touch()
            assert got == ["late\n"]
            assert await lines(scheduler, app_id, "worker", 1, should_tail=True) == []


def test_runs_under_trio_too() -> None:
    async def main() -> list[str]:
        async with create_cwd_scheduler("test") as scheduler:
            app_id = await scheduler.submit(sh_app("echo under trio"), {})
            response = await scheduler.wait(app_id)
            assert response is not None
            assert response.state == AppState.SUCCEEDED
            return await lines(scheduler, app_id, "worker", should_tail=True)

    assert anyio.run(main, backend="trio") == ["under trio\n"]


async def test_the_rest_of_the_group_is_killed_when_the_replica_exits() -> None:
    # a child left in the replica's group (not a daemon: no setsid) dies with its main
    # process, as a container's processes die with its PID 1
    script = "sleep 600 >/dev/null 2>&1 & echo child $$!"  # macros: $$! -> $!
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(sh_app(script), {})
        with anyio.fail_after(LIMIT):
            response = await scheduler.wait(app_id)
            pid = int((await first_line(scheduler, app_id, "worker")).split()[1])
        assert response is not None
        assert response.state == AppState.SUCCEEDED
        assert not alive(pid)
