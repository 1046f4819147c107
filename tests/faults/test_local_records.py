"""Fault cases of local apps seen from another process of the user, through their records.

A host program (the supervisor) runs an app in a subprocess through the Runner and
prints its handle; this test process, or the CLI, or a process of another user, then
looks at the app. Nothing here sleeps to guess at timing: lines are awaited, processes'
ends are awaited through pid file descriptors, and a signal that must not be sent is
checked in the target's pending set (it blocks the signal), where ``kill`` puts it
before returning. ``LIMIT`` is only a deadline for a hang.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import anyio.abc
import attrs
import pytest

from asynctorchx.runner import get_runner
from asynctorchx.schedulers.local._app_views import list_recorded_apps, read_recorded_app
from asynctorchx.schedulers.local._process_identity import ProcessIdentity
from asynctorchx.schedulers.local._records import (
    INDEX_NAME,
    AppRecord,
    ReplicaRecord,
    read_index,
    read_record,
    records_directory,
    write_record,
)
from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
from asynctorchx.specs.api import AppState, is_terminal
from tests.processes import await_end, killed_on_exit

LIMIT = 30  # seconds

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux process semantics")

#: The supervisor: runs one app (argv: replica shell script, number of replicas), prints
#: its handle, then its final state once it ended.
HOST = textwrap.dedent(
    """
    import sys
    import anyio
    from asynctorchx.runner import get_runner
    from asynctorchx.specs.api import AppDef, Role

    async def main():
        async with get_runner() as runner:
            role = Role("worker", "x", entrypoint="sh", args=["-c", sys.argv[1]],
                        num_replicas=int(sys.argv[2]))
            handle = await runner.run(AppDef("rec", [role]), "local_cwd", {"stop_timeout": 5})
            print(handle, flush=True)
            status = await runner.wait(handle)
            print(status.state.name, flush=True)

    anyio.run(main)
    """
)


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The state directory of this test and of every process it starts."""
    directory = tmp_path / "state"
    monkeypatch.setenv("ASYNCTORCHX_STATE_DIR", str(directory))
    return directory


@contextlib.asynccontextmanager
async def host(
    tmp_path: Path, script: str, replicas: int = 1
) -> AsyncIterator[tuple[anyio.abc.Process, str]]:
    """Start the supervisor with ``script``; yield it and the handle it printed."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # a SIGKILLed host leaves its logs here
    command = [sys.executable, "-c", HOST, script, str(replicas)]
    async with await anyio.open_process(command, env=env, stderr=subprocess.DEVNULL) as process:
        try:
            with anyio.fail_after(LIMIT):
                handle = (await next_line(process)).strip()
            assert handle.startswith("local_cwd://torchx/"), handle
            yield process, handle
        finally:
            if process.returncode is None:
                process.kill()


async def next_line(process: anyio.abc.Process) -> str:
    """The next line the host prints."""
    assert process.stdout is not None
    data = b""
    while not data.endswith(b"\n"):
        chunk = await process.stdout.receive(1)
        data += chunk
    return data.decode()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``asynctorchx ARGS`` in another process (the state directory is inherited)."""
    return subprocess.run(
        [sys.executable, "-m", "asynctorchx", *args],
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )


async def test_another_process_follows_lists_and_cancels(tmp_path: Path, state: Path) -> None:
    script = "echo line one; echo line two; exec sleep 600"
    async with host(tmp_path, script, replicas=2) as (process, handle):
        app_id = handle.rsplit("/", 1)[1]
        async with get_runner() as runner:  # this process: another scheduler, no memory of it
            status = await runner.status(handle)
            assert status is not None
            assert status.state == AppState.RUNNING
            assert [app.app_handle for app in await runner.list("local_cwd")] == [handle]
            followed: list[str] = []
            with anyio.fail_after(LIMIT):
                async with runner.log_stream(handle, should_tail=True) as lines:
                    async for line in lines:
                        followed.append(line.line.rstrip("\n"))
                        if len(followed) == 4:  # both replicas printed: cancel them
                            await runner.cancel(handle)
                    # the stream ends by itself once the app is recorded CANCELLED
                final = await runner.wait(handle)
            assert sorted(followed) == ["line one", "line one", "line two", "line two"]
            assert final is not None
            assert final.state == AppState.CANCELLED
            pids = [replica.pid for replica in _record(state, app_id).replicas]
        with anyio.fail_after(LIMIT):
            assert (await next_line(process)).strip() == "CANCELLED"  # the supervisor agrees
            for pid in pids:
                assert pid is not None
                await await_end(pid)


async def test_the_cli_sees_the_app_and_its_end(tmp_path: Path, state: Path) -> None:
    go = tmp_path / "go"
    script = f"echo hello from the replica; while [ ! -e {go} ]; do sleep 0.05; done; exit 3"
    async with host(tmp_path, script) as (process, handle):
        running = await anyio.to_thread.run_sync(cli, "status", handle)
        assert running.returncode == 0, running.stderr
        assert "RUNNING" in running.stdout
        command = [sys.executable, "-m", "asynctorchx", "log", "-t", handle]
        async with await anyio.open_process(command, stderr=subprocess.DEVNULL) as follower:
            with anyio.fail_after(LIMIT):
                assert "hello from the replica" in await next_line(follower)
                go.touch()  # the replica ends: `log -t` ends by itself
                assert await follower.wait() == 0
                assert (await next_line(process)).strip() == "FAILED"
                await process.wait()
    # the supervisor is gone: its record is the app's final state
    ended = await anyio.to_thread.run_sync(cli, "status", handle)
    assert ended.returncode == 0, ended.stderr
    assert "FAILED" in ended.stdout
    async with get_runner() as runner:
        status = await runner.status(handle)
        assert status is not None
        assert status.state == AppState.FAILED
        assert status.roles[0].replicas[0].exit_code == 3
        # its supervisor ended: the app is still listed, with its final state
        listed = await runner.list("local_cwd")
        assert [(app.app_handle, app.state) for app in listed] == [(handle, AppState.FAILED)]


async def test_a_sigkilled_supervisor_is_reported(tmp_path: Path, state: Path) -> None:
    async with (
        host(tmp_path, "echo started; exec sleep 600") as (process, handle),
        get_runner() as runner,
    ):
        status = await runner.status(handle)
        assert status is not None
        assert status.state == AppState.RUNNING
        lines = runner.log_lines(handle, "worker", 0, should_tail=True)
        with anyio.fail_after(LIMIT):
            assert await lines.__anext__() == "started\n"
            process.kill()  # SIGKILL: nothing in the supervisor records anything
            await process.wait()
            # the follower is woken by the supervisor's death and ends
            assert [line async for line in lines] == []
        status = await runner.status(handle)
    assert status is not None
    assert status.state == AppState.FAILED
    assert "died" in status.msg
    assert "SIGKILL" in status.msg
    assert {replica.state for role in status.roles for replica in role.replicas} == {
        AppState.FAILED
    }
    out = await anyio.to_thread.run_sync(cli, "status", handle)
    assert out.returncode == 0, out.stderr
    assert "FAILED" in out.stdout


# --------------------------------------------------------------------------- identity


#: A process that blocks SIGTERM: a SIGTERM sent to it stays pending (visible in
#: /proc/<pid>/status) instead of ending it, so "was it signalled" is read, not awaited.
BLOCKER = (
    "import signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM});"
    " print('ready', flush=True); sys.stdin.read()"
)


def sigterm_pending(pid: int) -> bool:
    """Whether SIGTERM is pending for the process ``pid`` (sent to it or to its group)."""
    with open(f"/proc/{pid}/status") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    pending = int(fields["ShdPnd"], 16) | int(fields["SigPnd"], 16)
    return bool(pending & (1 << (signal.SIGTERM - 1)))


def fake_record(app_id: str, replica: ProcessIdentity, supervisor: ProcessIdentity) -> AppRecord:
    """A RUNNING record whose one replica is ``replica`` (its own process group)."""
    return AppRecord(
        app_id=app_id,
        backend="local_cwd",
        session="torchx",
        uid=os.geteuid(),
        state=AppState.RUNNING,
        log_dir="/nonexistent",
        supervisor=supervisor,
        replicas=[
            ReplicaRecord(
                "worker",
                0,
                AppState.RUNNING,
                "/nonexistent/worker/0",
                pid=replica.pid,
                pgid=replica.pid,
                process=replica,
            )
        ],
    )


async def test_cancel_never_signals_a_recycled_pid(state: Path) -> None:
    # the victim holds the recorded pid, but started at another time: a recycled pid
    blockers = [
        await anyio.open_process(
            [sys.executable, "-c", BLOCKER],
            start_new_session=True,
            stdin=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    victim, supervisor = blockers
    try:
        for blocker in blockers:
            with anyio.fail_after(LIMIT):
                assert (await next_line(blocker)).strip() == "ready"
        real = ProcessIdentity.of(victim.pid)
        alive_supervisor = ProcessIdentity.of(supervisor.pid)
        assert real is not None
        assert alive_supervisor is not None
        recycled = ProcessIdentity(real.pid, real.start_time - 1, real.boot_id)
        directory = records_directory("local_cwd", create=True)
        assert directory is not None
        write_record(directory, fake_record("app-recycled", recycled, alive_supervisor))
        write_record(directory, fake_record("app-same", real, alive_supervisor))
        async with create_cwd_scheduler("torchx") as scheduler:
            described = await scheduler.describe("app-recycled")
            assert described is not None
            assert described.state == AppState.RUNNING
            await scheduler.cancel("app-recycled")
            assert not sigterm_pending(victim.pid)  # kill() pends the signal before returning
            assert (Path(directory) / "cancel" / "app-recycled").exists()  # asked the supervisor
            await scheduler.cancel("app-same")  # the control: the recorded process is signalled
            assert sigterm_pending(victim.pid)
    finally:
        for blocker in blockers:
            blocker.kill()
            await blocker.wait()
            await blocker.aclose()


async def test_a_waiter_sees_an_end_recorded_after_its_first_look(state: Path) -> None:
    # the end lands between the look that found the app and the watch of its waiter: the
    # waiter must look again once watching, not trust its first look
    supervisor = ProcessIdentity.of(os.getppid())  # running, and not this process
    assert supervisor is not None
    directory = records_directory("local_cwd", create=True)
    assert directory is not None
    running = fake_record("app-ends", supervisor, supervisor)
    write_record(directory, running)
    view = read_recorded_app("local_cwd", "app-ends")
    assert view is not None
    write_record(directory, attrs.evolve(running, state=AppState.SUCCEEDED))
    with anyio.fail_after(LIMIT):
        await view.wait_until(lambda described: is_terminal(described.state))
    described = view.describe()
    assert described is not None
    assert described.state == AppState.SUCCEEDED


# --------------------------------------------------------------------------- list


#: A process that runs argv[1] apps of ``true`` through its Runner, waits for each, and
#: prints their handles.
WRITER = textwrap.dedent(
    """
    import sys
    import anyio
    from asynctorchx.runner import get_runner
    from asynctorchx.specs.api import AppDef, Role

    async def main():
        async with get_runner() as runner:
            app = AppDef("many", [Role("worker", "x", entrypoint="true")])
            handles = [await runner.run(app, "local_cwd") for _ in range(int(sys.argv[1]))]
            for handle in handles:
                assert (await runner.wait(handle)).state.name == "SUCCEEDED"
            print(" ".join(handles), flush=True)

    anyio.run(main)
    """
)

#: A process that lists the local apps over and over, each time checking that the list
#: index is whole, until the file argv[1] exists; then prints its rounds and its last
#: listing (``app_id=STATE``), made after the file was seen.
LISTER = textwrap.dedent(
    """
    import json, os, sys
    from asynctorchx.schedulers.local._app_views import list_recorded_apps
    from asynctorchx.schedulers.local._records import INDEX_NAME, state_directory

    index, rounds = os.path.join(state_directory(), "local_cwd", INDEX_NAME), 0
    while True:
        last = os.path.exists(sys.argv[1])
        listed = list_recorded_apps("local_cwd", "torchx", ())
        if os.path.exists(index):
            with open(index, "rb") as file:
                json.loads(file.read())  # never half of one
        rounds += 1
        if last:
            break
    print(rounds, *sorted(f"{app.app_id}={app.state.name}" for app in listed), flush=True)
    """
)


async def test_lists_from_several_processes_while_apps_end_in_others(
    tmp_path: Path, state: Path
) -> None:
    done = tmp_path / "done"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    programs = [[WRITER, "8"]] * 3 + [[LISTER, str(done)]] * 3
    async with contextlib.AsyncExitStack() as stack:
        processes = []
        for program, arg in programs:
            command = [sys.executable, "-c", program, arg]
            processes.append(await stack.enter_async_context(killed_on_exit(command, env=env)))
        writers, listers = processes[:3], processes[3:]
        handles = []
        with anyio.fail_after(LIMIT * 4):
            for process in writers:
                handles += (await next_line(process)).split()
                assert await process.wait() == 0
            done.touch()  # every app has ended: each lister's next listing is its last
            outputs = [await next_line(process) for process in listers]
            for process in listers:
                assert await process.wait() == 0
    expected = sorted(f"{handle.rsplit('/', 1)[1]}=SUCCEEDED" for handle in handles)
    assert len(expected) == 24
    for output in outputs:
        assert output.split()[1:] == expected
    async with get_runner() as runner:  # this process: every app, from the index alone
        listed = await runner.list("local_cwd")
    assert sorted((app.app_handle, app.state) for app in listed) == sorted(
        (handle, AppState.SUCCEEDED) for handle in handles
    )
    out = await anyio.to_thread.run_sync(cli, "list", "-s", "local_cwd", "--all")
    assert out.returncode == 0, out.stderr
    assert all(handle in out.stdout for handle in handles)
    directory = state / "local_cwd"
    assert not [name for name in os.listdir(directory) if name.endswith(".tmp")]
    assert stat.S_IMODE((directory / INDEX_NAME).stat().st_mode) == 0o600
    index = read_index(str(directory))
    assert sorted(f"{app_id}={entry.state.name}" for app_id, entry in index.items()) == expected


# --------------------------------------------------------------------------- privacy


def _seen_by_nobody(app_id: str, state_dir: Path) -> list[str]:
    """Fork; in the child become ``nobody`` and say what its local scheduler's ``describe``
    and ``list`` (their reading of records, which needs no event loop) see of
    ``app_id``; return the child's words. (The interpreter lives under /root, which
    ``nobody`` cannot run, so a new process of theirs is not an option.)"""
    entry = pwd.getpwnam("nobody")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(entry.pw_gid)
            os.setuid(entry.pw_uid)
            os.environ["ASYNCTORCHX_STATE_DIR"] = str(state_dir)
            view = read_recorded_app("local_cwd", app_id)
            described = None if view is None else view.describe()
            listed = list_recorded_apps("local_cwd", "torchx", ())
            words = f"{None if described is None else described.state.name} {len(listed)}"
            os.write(write_end, words.encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        words = pipe.read().decode().split()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return words


async def as_nobody(app_id: str, state_dir: Path) -> list[str]:
    """What ``nobody`` sees of ``app_id`` with ``state_dir`` as its state directory."""
    return await anyio.to_thread.run_sync(_seen_by_nobody, app_id, state_dir)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
async def test_another_user_never_sees_the_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nobody = pwd.getpwnam("nobody").pw_uid
    shared = Path(f"/tmp/asynctorchx-records-{os.getpid()}")  # reachable by nobody
    shared.mkdir(mode=0o755)
    try:
        state = shared / "root-state"
        monkeypatch.setenv("ASYNCTORCHX_STATE_DIR", str(state))
        async with host(tmp_path, "exec sleep 600") as (_process, handle):
            app_id = handle.rsplit("/", 1)[1]
            record_file = state / "local_cwd" / f"{app_id}.json"
            # our state directory, as nobody: even opened up, the backend's is 0700
            state.chmod(0o755)
            assert await as_nobody(app_id, state) == ["None", "0"]
            # nobody's own state directory holding our record, readable: not theirs
            theirs = shared / "state"
            (theirs / "local_cwd").mkdir(parents=True, mode=0o700)
            for directory in (theirs, theirs / "local_cwd"):
                os.chown(directory, nobody, -1)
            copy = theirs / "local_cwd" / record_file.name
            shutil.copy(record_file, copy)
            copy.chmod(0o644)
            assert await as_nobody(app_id, theirs) == ["None", "0"]  # owned by root
            os.chown(copy, nobody, -1)
            assert await as_nobody(app_id, theirs) == ["None", "0"]  # uid 0 inside
            # the control: a record that is nobody's is found by nobody
            copy.write_text(copy.read_text().replace('"uid":0,', f'"uid":{nobody},'))
            assert await as_nobody(app_id, theirs) == ["RUNNING", "1"]
    finally:
        shutil.rmtree(shared, ignore_errors=True)


async def test_records_are_private_to_the_user(tmp_path: Path, state: Path) -> None:
    state.mkdir(mode=0o755)  # an existing state directory open to all is narrowed
    async with host(tmp_path, "exit 0") as (process, handle):
        with anyio.fail_after(LIMIT):
            assert (await next_line(process)).strip() == "SUCCEEDED"
            await process.wait()
    app_id = handle.rsplit("/", 1)[1]
    kept = state / "local_cwd" / "logs"  # the app's logs, kept with its record
    for directory in (state, state / "local_cwd", state / "local_cwd" / "cancel", kept):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    names = os.listdir(state / "local_cwd")
    assert sorted(names) == sorted(["cancel", "logs", f"{app_id}.json"])  # no temporary file
    record_file = state / "local_cwd" / f"{app_id}.json"
    assert stat.S_IMODE(record_file.stat().st_mode) == 0o600
    assert record_file.stat().st_uid == os.geteuid()


def _record(state: Path, app_id: str) -> AppRecord:
    record = read_record(str(state / "local_cwd" / f"{app_id}.json"))
    assert record is not None
    return record
