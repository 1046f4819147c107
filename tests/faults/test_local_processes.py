"""Fault cases of the local schedulers against real processes: the host dies or is
signalled, replicas leave daemons behind. Each case counts the processes left.

A host program runs in a subprocess and prints the pids of what its replicas started;
the test then hurts the host and awaits each of those processes' end through a pid file
descriptor (no sleep guesses at timing; ``LIMIT`` is only a deadline for a hang).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.processes import alive, await_end, killed_on_exit

LIMIT = 30  # seconds

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux process semantics")


async def host_pids(process: anyio.abc.Process) -> list[int]:
    """Read ``pid N`` lines from the host until its ``ready`` line; return the pids."""
    assert process.stdout is not None
    output = b""
    async for chunk in process.stdout:
        output += chunk
        if output.endswith(b"ready\n"):
            break
    return [int(line.split()[1]) for line in output.decode().splitlines() if line != "ready"]


async def expect_all_end(pids: list[int]) -> None:
    """Await the end of every pid (killing the survivors when the deadline passes)."""
    try:
        with anyio.fail_after(LIMIT):
            for pid in pids:
                await await_end(pid)
    finally:
        survivors = [pid for pid in pids if alive(pid)]
        for pid in survivors:
            os.kill(pid, signal.SIGKILL)
    assert survivors == []


SIGKILLED_HOST = textwrap.dedent(
    """
    import anyio
    from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
    from asynctorchx.specs.api import AppDef, Role

    async def main():
        async with create_cwd_scheduler("host") as scheduler:
            role = Role("r", "x", entrypoint="sh", args=["-c", "echo pid $$$$; exec sleep 600"],
                        num_replicas=3)
            app_id = await scheduler.submit(AppDef("host", [role]), {})
            for k in range(3):
                async for line in scheduler.log_iter(app_id, "r", k, should_tail=True):
                    print(line, end="", flush=True)
                    break
            print("ready", flush=True)
            await scheduler.wait(app_id)

    anyio.run(main)
    """
)


async def test_replicas_end_when_the_host_is_sigkilled(tmp_path: Path) -> None:
    # nothing in the host runs on SIGKILL: the kernel must end the replicas. Nothing
    # removes the host's temporary log directory either, so it goes under tmp_path.
    async with await anyio.open_process(
        [sys.executable, "-c", SIGKILLED_HOST],
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    ) as process:
        with anyio.fail_after(LIMIT):
            pids = await host_pids(process)
        assert len(pids) == 3
        assert all(alive(pid) for pid in pids)
        process.kill()
        await process.wait()
    await expect_all_end(pids)


# --------------------------------------------------------------------------- daemons


#: A replica that starts a daemon by a double fork (``setsid`` in a child that exits):
#: the daemon prints its pid, then, unless ``keep_pipe`` is set, lets go of the
#: replica's output pipes. The replica's main process prints its own pid, waits until
#: the daemon printed (it creates the file ``ready``), then runs ``main``.
def daemon_script(
    ready: Path, keep_pipe: bool = False, main: str = "exec sleep 600", replicas: int = 1
) -> str:
    redirect = "" if keep_pipe else " >/dev/null 2>&1"
    daemon = f"echo daemon $$$$; touch {ready}.$$1; exec sleep 600{redirect}"
    wait = f"while [ ! -e {ready}.$1 ]; do sleep 0.01; done"
    return f"(setsid sh -c '{daemon}' sh $1 &); echo main $$$$; {wait}; {main}"


def daemon_app(script: str, replicas: int = 1) -> Any:
    from asynctorchx.specs.api import AppDef, Role

    role = Role(
        "r", "x", entrypoint="sh", args=["-c", script, "sh", "${replica_id}"], num_replicas=replicas
    )
    return AppDef("daemons", [role])


def gone(pid: int) -> bool:
    """True once ``pid`` is neither alive nor a zombie (it was reaped)."""
    return not os.path.exists(f"/proc/{pid}")


async def pids_of(scheduler: Any, app_id: str, k: int = 0, count: int = 2) -> dict[str, int]:
    """The ``daemon``/``main`` pids replica ``k`` printed (the first ``count`` lines)."""
    found: dict[str, int] = {}
    async for line in scheduler.log_iter(app_id, "r", k, should_tail=True):
        name, pid = line.split()
        found[name] = int(pid)
        if len(found) == count:
            break
    return found


async def test_cancel_ends_a_daemon_that_left_the_group_and_reaps_it(tmp_path: Path) -> None:
    from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
    from asynctorchx.specs.api import AppState

    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(
            daemon_app(daemon_script(tmp_path / "ready"), 2), {"stop_timeout": 1}
        )
        with anyio.fail_after(LIMIT):
            pids = [await pids_of(scheduler, app_id, k) for k in range(2)]
            daemons = [found["daemon"] for found in pids]
            assert all(alive(pid) for pid in daemons)
            try:
                await scheduler.cancel(app_id)
                response = await scheduler.wait(app_id)
            finally:
                await expect_all_end(daemons)
        assert response is not None
        assert response.state == AppState.CANCELLED
        assert [pid for pid in daemons if not gone(pid)] == []  # reaped: no zombie


async def test_wait_is_not_held_by_a_daemon_keeping_the_output_pipe(tmp_path: Path) -> None:
    # the replica exits at once; its daemon keeps stdout open: wait must not take the
    # drain timeout (5 s) and the daemon must be gone
    from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
    from asynctorchx.specs.api import AppState

    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(
            daemon_app(daemon_script(tmp_path / "ready", True, "exit 0")), {}
        )
        with anyio.fail_after(3):
            response = await scheduler.wait(app_id)
        with anyio.fail_after(LIMIT):
            pids = await pids_of(scheduler, app_id)
        await expect_all_end([pids["daemon"]])
        assert response is not None
        assert response.state == AppState.SUCCEEDED
        assert gone(pids["daemon"])


async def run_and_raise(pids: dict[str, int], tmp_path: Path) -> None:
    """Run a daemonizing app through a Runner, record its pids, then raise in the block."""
    from asynctorchx.runner import get_runner

    async with get_runner(handle_signals=False) as runner:
        handle = await runner.run(
            daemon_app(daemon_script(tmp_path / "ready")), scheduler="local_cwd"
        )
        with anyio.fail_after(LIMIT):
            async for line in runner.log_lines(handle, "r", k=0, should_tail=True):
                name, pid = line.split()
                pids[name] = int(pid)
                if len(pids) == 2:
                    break
        raise RuntimeError("boom")


async def test_an_exception_in_the_runner_block_ends_the_daemons(tmp_path: Path) -> None:
    pids: dict[str, int] = {}
    with pytest.raises(RuntimeError, match="boom"):
        await run_and_raise(pids, tmp_path)
    await expect_all_end(list(pids.values()))
    assert gone(pids["daemon"])


async def test_the_program_keeps_the_exit_status_of_its_own_children(tmp_path: Path) -> None:
    # this process is a subreaper now: the sweeps must never reap what other code started
    from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler

    own = subprocess.Popen(["sh", "-c", "read x; exit 7"], stdin=subprocess.PIPE)
    async with create_cwd_scheduler("test") as scheduler:
        app_id = await scheduler.submit(
            daemon_app(daemon_script(tmp_path / "ready", main="exit 0")), {}
        )
        with anyio.fail_after(LIMIT):
            await scheduler.wait(app_id)
            pids = await pids_of(scheduler, app_id)
    await expect_all_end([pids["daemon"]])
    assert own.stdin is not None
    own.stdin.close()
    assert own.wait(timeout=LIMIT) == 7


SIGNALLED_HOST = textwrap.dedent(
    """
    import anyio
    from asynctorchx.runner import get_runner
    from asynctorchx.specs.api import AppDef, Role

    SCRIPT = {script!r}

    async def main():
        async with get_runner(handle_signals=True) as runner:
            args = ["-c", SCRIPT, "sh", "${{replica_id}}"]
            role = Role("r", "x", entrypoint="sh", args=args, num_replicas=2)
            handle = await runner.run(AppDef("host", [role]), "local_cwd", {{"stop_timeout": 2}})
            for k in range(2):
                seen = 0
                async for line in runner.log_lines(handle, "r", k=k, should_tail=True):
                    print("pid", line.split()[1], flush=True)
                    seen += 1
                    if seen == 2:
                        break
            print("ready", flush=True)
            await runner.wait(handle)

    anyio.run(main)
    """
)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
async def test_a_signalled_host_leaves_no_daemon(signum: int, tmp_path: Path) -> None:
    host = SIGNALLED_HOST.format(script=daemon_script(tmp_path / "ready"))
    async with await anyio.open_process(
        [sys.executable, "-c", host], stderr=subprocess.DEVNULL
    ) as process:
        with anyio.fail_after(LIMIT):
            pids = await host_pids(process)
        assert len(pids) == 4
        assert all(alive(pid) for pid in pids)
        process.send_signal(signum)
        with anyio.fail_after(LIMIT):
            await process.wait()
    await expect_all_end(pids)


# --------------------------------------------------------------------------- the watchdog

#: A host of ``replicas`` replicas of ``script`` under ``backend``: it prints the first
#: ``lines`` lines of each replica's output, then ``watchdog <pid>``, ``children <pids>``
#: (its own children, read from /proc) and ``ready``, and waits for the app.
WATCHED_HOST = textwrap.dedent(
    """
    import os
    import anyio
    from asynctorchx.schedulers.local import _parent_death
    from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
    from asynctorchx.specs.api import AppDef, Role

    def children():
        tasks = f"/proc/{{os.getpid()}}/task"
        found = []
        for task in os.listdir(tasks):
            with open(f"{{tasks}}/{{task}}/children") as listed:
                found.extend(listed.read().split())
        return found

    async def main():
        async with create_cwd_scheduler("host") as scheduler:
            role = Role("r", "x", entrypoint="sh", args=["-c", {script!r}],
                        num_replicas={replicas})
            app_id = await scheduler.submit(AppDef("host", [role]), {{}})
            for k in range({replicas}):
                seen = 0
                async for line in scheduler.log_iter(app_id, "r", k, should_tail=True):
                    print(line, end="", flush=True)
                    seen += 1
                    if seen == {lines}:
                        break
            print("watchdog", _parent_death.watchdog_pid(), flush=True)
            print("children", *children(), flush=True)
            print("ready", flush=True)
            await scheduler.wait(app_id)

    anyio.run(main, backend={backend!r})
    """
)


async def host_report(process: anyio.abc.Process, last: str = "ready") -> dict[str, list[int]]:
    """Read the host's ``name <ints>`` lines until the line ``last``; ints by name."""
    assert process.stdout is not None
    output = b""
    async for chunk in process.stdout:
        output += chunk
        if output.endswith(f"{last}\n".encode()):
            break
    report: dict[str, list[int]] = {}
    for line in output.decode().splitlines():
        name, *values = line.split()
        report.setdefault(name, []).extend(int(value) for value in values if value.isdigit())
    return report


def host_process(
    command: list[str], **kwargs: Any
) -> contextlib.AbstractAsyncContextManager[anyio.abc.Process]:
    """The host's process, SIGKILLed on the way out if it still runs (a failed check)."""
    return killed_on_exit(command, stderr=subprocess.DEVNULL, **kwargs)


@contextlib.asynccontextmanager
async def watched_host(
    tmp_path: Path, script: str, replicas: int, lines: int = 1, backend: str = "asyncio"
) -> AsyncIterator[tuple[anyio.abc.Process, dict[str, list[int]]]]:
    """A :data:`WATCHED_HOST` started, with its report up to ``ready``."""
    host = WATCHED_HOST.format(script=script, replicas=replicas, lines=lines, backend=backend)
    command = [sys.executable, "-c", host]
    async with host_process(command, env={**os.environ, "TMPDIR": str(tmp_path)}) as process:
        with anyio.fail_after(LIMIT):
            report = await host_report(process)
        yield process, report


async def test_a_replicas_child_in_its_group_ends_when_the_host_is_sigkilled(
    tmp_path: Path,
) -> None:
    # each replica prints its pid and that of a child left in its process group
    script = "echo pid $$$$; sleep 600 & echo pid $$!; wait"
    async with watched_host(tmp_path, script, replicas=2, lines=2) as (process, report):
        pids = report["pid"]
        assert len(pids) == 4
        assert all(alive(pid) for pid in pids)
        process.kill()
        await process.wait()
    await expect_all_end(pids)


async def test_one_watchdog_however_many_replicas(tmp_path: Path) -> None:
    script = "echo pid $$$$; exec sleep 600"
    async with watched_host(tmp_path, script, 5) as (process, report):
        pids, watchdog = report["pid"], report["watchdog"]
        assert len(pids) == 5
        assert len(watchdog) == 1
        # the host's children: its replicas and one more, the watchdog
        assert set(report["children"]) - set(pids) == set(watchdog)
        # in a session of its own: its host's terminal and group signals miss it
        assert os.getsid(watchdog[0]) == watchdog[0]
        process.kill()
        await process.wait()
    await expect_all_end([*pids, *watchdog])


async def test_replicas_end_when_a_trio_host_is_sigkilled(tmp_path: Path) -> None:
    pytest.importorskip("trio")
    script = "echo pid $$$$; exec sleep 600"
    async with watched_host(tmp_path, script, 3, backend="trio") as (process, report):
        pids = report["pid"]
        assert len(pids) == 3
        assert all(alive(pid) for pid in pids)
        process.kill()
        await process.wait()
    await expect_all_end([*pids, *report["watchdog"]])


async def test_the_watchdog_exits_with_a_host_that_exits_normally(tmp_path: Path) -> None:
    # the replica runs until the test writes to `go`: a replica that ended before it was
    # tied would leave the host without a watchdog to report
    go = tmp_path / "go"
    os.mkfifo(go)
    async with watched_host(tmp_path, f"echo pid $$$$; read line < {go}", 1) as (
        process,
        report,
    ):
        [watchdog] = report["watchdog"]
        with anyio.fail_after(LIMIT):
            await anyio.to_thread.run_sync(go.write_text, "go\n")
            assert await process.wait() == 0
    await expect_all_end([watchdog])


#: A host that runs 2 replicas through ``get_runner(handle_signals=True)`` and, once
#: they ended (its cleanup done), prints whether its watchdog still runs.
SIGNALLED_WATCHED_HOST = textwrap.dedent(
    """
    import os
    import anyio
    from asynctorchx.runner import get_runner
    from asynctorchx.schedulers.local import _parent_death
    from asynctorchx.specs.api import AppDef, Role

    reported = []

    def report():  # once the apps ended: after a SIGTERM, the runner then ends the host
        if not reported:
            reported.append(True)
            running = os.waitpid(_parent_death.watchdog_pid(), os.WNOHANG) == (0, 0)
            print("running", int(running), flush=True)
            print("done", flush=True)

    async def main():
        try:
            async with get_runner(handle_signals=True) as runner:
                role = Role("r", "x", entrypoint="sh", args=["-c", "echo pid $$$$; exec sleep 600"],
                            num_replicas=2)
                handle = await runner.run(AppDef("host", [role]), "local_cwd", {})
                for k in range(2):
                    async for line in runner.log_lines(handle, "r", k=k, should_tail=True):
                        print(line, end="", flush=True)
                        break
                print("watchdog", _parent_death.watchdog_pid(), flush=True)
                print("ready", flush=True)
                await runner.wait(handle)
                report()
        finally:
            report()

    anyio.run(main)
    """
)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_a_signal_to_the_hosts_group_leaves_the_watchdog_to_the_host(
    signum: int, tmp_path: Path
) -> None:
    # what a terminal's Ctrl-C does: the signal reaches the host's whole process group
    command = [sys.executable, "-c", SIGNALLED_WATCHED_HOST]
    async with host_process(command, start_new_session=True) as process:
        with anyio.fail_after(LIMIT):
            report = await host_report(process)
        pids, [watchdog] = report["pid"], report["watchdog"]
        assert len(pids) == 2
        assert os.getsid(watchdog) == watchdog  # not in the host's group
        os.killpg(process.pid, signum)
        with anyio.fail_after(LIMIT):
            after = await host_report(process, last="done")
            await process.wait()
    assert after["running"] == [1]  # the watchdog outlived the host's cleanup
    await expect_all_end([*pids, watchdog])
