"""The watchdog that ties replicas to their host: its protocol, a fork, a restart."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import anyio.abc
import pytest

from asynctorchx.schedulers.toolkit import _lifeline
from tests.processes import alive, await_end, killed_on_exit

LIMIT = 30  # seconds

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux process semantics")


async def read_until_ready(host: anyio.abc.Process) -> bytes:
    """What ``host`` printed up to and including its ``ready`` line."""
    assert host.stdout is not None
    output = b""
    with anyio.fail_after(LIMIT):
        async for chunk in host.stdout:
            output += chunk
            if output.endswith(b"ready\n"):
                break
    return output


#: A host that ties one ``sleep`` to its watchdog, then forks a child that holds on
#: (it reads its stdin), or kills its watchdog and ties a second ``sleep``; it prints
#: the ``pid`` of each ``sleep``, then ``ready``.
HOST = textwrap.dedent(
    """
    import os, subprocess
    from asynctorchx.schedulers.local import _parent_death

    def tied():
        process = subprocess.Popen(["sleep", "600"], start_new_session=True)
        _parent_death.tie(process.pid)
        print("pid", process.pid, flush=True)

    tied()
    if {case!r} == "fork":
        if os.fork() == 0:
            os.read(0, 1)  # until the test lets go
            os._exit(0)
    else:
        first = _parent_death.watchdog_pid()
        os.kill(first, 9)
        os.waitpid(first, 0)
        tied()  # finds the pipe broken: a new watchdog gets both groups
        assert _parent_death.watchdog_pid() not in (None, first)
    print("ready", flush=True)
    os.read(0, 1)
    """
)


@pytest.mark.parametrize("case", ["fork", "restart"])
async def test_the_replicas_of_a_sigkilled_host_end(case: str) -> None:
    # "fork": a child forked from the host does not keep the watchdog waiting;
    # "restart": a watchdog killed while its host lives is replaced, told every group
    host = await anyio.open_process(
        [sys.executable, "-c", HOST.format(case=case)],
        stdin=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    async with host:
        output = await read_until_ready(host)
        pids = [int(line.split()[1]) for line in output.decode().splitlines()[:-1]]
        assert len(pids) == (1 if case == "fork" else 2)
        host.kill()
        await host.wait()
        try:
            with anyio.fail_after(LIMIT):
                for pid in pids:
                    await await_end(pid)
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        # the forked child, still alive, reads the host's stdin: closing it ends it


#: A host that ties one ``sleep``, then ties and unties 20,000 groups that cannot exist
#: (above Linux's largest pid) in one burst, faster than the watchdog reads: ~180 KB of
#: lines, more than a default pipe holds; it prints the ``sleep``'s pid, how many
#: warnings the watchdog's module logged, then ``ready``.
BURST_HOST = textwrap.dedent(
    """
    import logging, os, subprocess
    from asynctorchx.schedulers.local import _parent_death

    warnings = []
    handler = logging.Handler()
    handler.emit = warnings.append
    logging.getLogger("asynctorchx.schedulers.toolkit._lifeline").addHandler(handler)
    process = subprocess.Popen(["sleep", "600"], start_new_session=True)
    _parent_death.tie(process.pid)
    for pgid in range(2**22 + 1, 2**22 + 20_001):
        _parent_death.tie(pgid)
        _parent_death.untie(pgid)
    print("pid", process.pid, flush=True)
    print("warnings", len(warnings), flush=True)
    print("ready", flush=True)
    os.read(0, 1)
    """
)


async def test_a_burst_of_starts_is_tied_whole() -> None:
    # the watchdog reads at most every READ_INTERVAL: its pipe holds a burst meanwhile
    host = await anyio.open_process(
        [sys.executable, "-c", BURST_HOST], stdin=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    async with host:
        output = await read_until_ready(host)
        lines = output.decode().splitlines()
        pid = int(lines[0].split()[1])
        host.kill()
        await host.wait()
        try:
            with anyio.fail_after(LIMIT):
                await await_end(pid)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert lines[1] == "warnings 0"


# ---------------------------------------------------------------------- daemons

#: Replicas that leave a process outside their process group, which prints
#: ``daemon <pid>`` and creates the file ``started``: "setsid" (a daemon's double
#: fork), "setpgid" (a group of its own in the replica's session), "env -i" (setsid,
#: and none of the replica's environment: the documented limit).
DAEMONS = {
    "setsid": "(setsid sh -c 'echo daemon $$; : > started; exec sleep 600 >/dev/null 2>&1' &)",
    "setpgid": (
        f"{sys.executable} -c 'import os, time; os.setpgid(0, 0);"
        ' print("daemon", os.getpid(), flush=True); open("started", "w").close();'
        " time.sleep(600)' &"
    ),
    "env -i": (
        "(setsid env -i sh -c 'echo daemon $$; : > started; exec sleep 600 >/dev/null 2>&1' &)"
    ),
}


def daemon_script(tmp_path: Path, case: str) -> Path:
    """The replica's script: start the daemon, wait until it started, print, sleep."""
    script = tmp_path / "daemon.sh"
    script.write_text(
        f"{DAEMONS[case]}\n"
        "while [ ! -e started ]; do sleep 0.01; done\n"
        "echo main $$\n"
        "exec sleep 600\n"
    )
    return script


#: A host that runs one replica of ``sh <script>`` through the API and prints its lines.
API_HOST = textwrap.dedent(
    """
    import anyio
    from asynctorchx.schedulers.local_scheduler import create_cwd_scheduler
    from asynctorchx.specs.api import AppDef, Role

    async def main():
        async with create_cwd_scheduler("host") as scheduler:
            role = Role("r", "x", entrypoint="sh", args=[{script!r}])
            app_id = await scheduler.submit(AppDef("host", [role]), {{}})
            async for line in scheduler.log_iter(app_id, "r", 0, should_tail=True):
                print(line, end="", flush=True)

    anyio.run(main)
    """
)


def _watchdog_of(host: int) -> int:
    """The pid of the watchdog among the children of ``host``."""
    tasks = Path(f"/proc/{host}/task")
    children = [int(c) for task in tasks.iterdir() for c in (task / "children").read_text().split()]
    program = _lifeline.PROGRAM.encode()
    (watchdog,) = [c for c in children if program in Path(f"/proc/{c}/cmdline").read_bytes()]
    return watchdog


async def _left_by_a_killed_host(
    command: list[str], tmp_path: Path, logs_on_stderr: bool = False
) -> list[str]:
    """Run ``command`` (in ``tmp_path``) until its replica printed ``daemon <pid>`` and
    ``main <pid>`` (on stdout, or stderr with ``logs_on_stderr``: the CLI's ``run``),
    SIGKILL it, await the end of its watchdog; return which of the two are still alive
    (and end them)."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # where a killed host leaves its logs
    pids: dict[str, int] = {}
    pipes = (subprocess.DEVNULL, subprocess.PIPE)
    out, err = pipes if logs_on_stderr else pipes[::-1]
    async with killed_on_exit(command, cwd=tmp_path, env=env, stdout=out, stderr=err) as host:
        logs = host.stderr if logs_on_stderr else host.stdout
        assert logs is not None
        output = b""
        with anyio.fail_after(LIMIT):
            async for chunk in logs:
                output += chunk
                for line in output.decode().splitlines():
                    *_, name, pid = ["", "", *line.split()]
                    if name in ("daemon", "main"):
                        pids[name] = int(pid)
                if len(pids) == 2:
                    break
        watchdog = _watchdog_of(host.pid)
        host.kill()
        await host.wait()
    try:
        with anyio.fail_after(LIMIT):
            await await_end(watchdog)  # its work is done: it kills, then awaits each end
        return [name for name, pid in pids.items() if alive(pid)]
    finally:
        for pid in pids.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with anyio.fail_after(LIMIT):
                await await_end(pid)


@pytest.mark.parametrize("case", ["setsid", "setpgid"])
async def test_no_process_of_a_replica_survives_its_sigkilled_host(
    case: str, tmp_path: Path
) -> None:
    command = [sys.executable, "-c", API_HOST.format(script=str(daemon_script(tmp_path, case)))]
    assert await _left_by_a_killed_host(command, tmp_path) == []


async def test_no_daemon_survives_a_sigkilled_cli(tmp_path: Path) -> None:
    script = daemon_script(tmp_path, "setsid")
    command = [sys.executable, "-m", "asynctorchx", "run", "-s", "local_cwd"]
    command += ["utils.sh", "sh", str(script)]
    assert await _left_by_a_killed_host(command, tmp_path, logs_on_stderr=True) == []


async def test_the_limit_a_daemon_without_the_replicas_session_and_environment(
    tmp_path: Path,
) -> None:
    # documented in _parent_death and _subreaper: nothing of the replica is left on it
    script = daemon_script(tmp_path, "env -i")
    command = [sys.executable, "-c", API_HOST.format(script=str(script))]
    assert await _left_by_a_killed_host(command, tmp_path) == ["daemon"]
