"""Termination signals are owned explicitly, and ownership survives any order of closing.

Each case runs a host Python process that starts replicas (each prints its pid and
sleeps), then signals the host and checks that no replica is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

LIMIT = 60


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


PRELUDE = textwrap.dedent(
    """
    import anyio, signal
    from asynctorchx.runner import get_runner
    from asynctorchx.specs import AppDef, Role

    SLEEPER = AppDef("sleeper", [Role("r", "", entrypoint="sh",
                     args=["-c", "echo pid $$$$; exec sleep 600"])])

    async def start(runner):
        handle = await runner.run(SLEEPER, "local_cwd", {"stop_timeout": 2})
        async for line in runner.log_lines(handle, "r", 0, should_tail=True):
            print(line, end="", flush=True)
            break
        return handle
    """
)

TWO_RUNNERS = PRELUDE + textwrap.dedent(
    """
    async def main():
        started, left = [], anyio.Event()
        both_started = anyio.Event()

        async def own(leaves, *, task_status):
            async with get_runner() as runner:
                task_status.started()  # entered: the first one hosts the signal receiver
                await start(runner)
                started.append(runner)
                if len(started) == 2:
                    both_started.set()
                await both_started.wait()
                if not leaves:
                    await anyio.sleep_forever()
            left.set()

        async with anyio.create_task_group() as task_group:
            await task_group.start(own, {first_leaves})
            await task_group.start(own, not {first_leaves})
            await left.wait()  # one runner left: its replica ended, the other's runs
            print("ready", flush=True)
            await anyio.sleep_forever()

    anyio.run(main)
    """
)

NO_OWNER = PRELUDE + textwrap.dedent(
    """
    async def main():
        async with get_runner(handle_signals=False) as runner:
            await start(runner)
            assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_DFL
            print("ready", flush=True)
            await anyio.sleep(600)

    anyio.run(main)
    """
)


async def host(script: str) -> tuple[anyio.abc.Process, list[int]]:
    process = await anyio.open_process([sys.executable, "-c", script], stderr=subprocess.PIPE)
    assert process.stdout is not None
    output = b""
    async for chunk in process.stdout:
        output += chunk
        if output.endswith(b"ready\n"):
            break
    pids = [int(line.split()[1]) for line in output.decode().splitlines() if line != "ready"]
    return process, pids


@pytest.mark.parametrize("first_leaves", [True, False])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
async def test_the_remaining_runner_still_ends_its_replicas_on_a_signal(
    first_leaves: bool, signum: int
) -> None:
    with anyio.fail_after(LIMIT):
        process, pids = await host(TWO_RUNNERS.replace("{first_leaves}", str(first_leaves)))
        assert len(pids) == 2
        assert len([pid for pid in pids if alive(pid)]) == 1  # the left runner's ended
        process.send_signal(signum)
        returncode = await process.wait()
        await process.aclose()
    assert [pid for pid in pids if alive(pid)] == []
    assert returncode == -signum  # the host died of the signal, as without a handler


async def test_a_program_that_owns_its_signals_keeps_their_handlers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the killed host cannot remove its log dir
    with anyio.fail_after(LIMIT):
        process, pids = await host(NO_OWNER)
        assert len(pids) == 1
        process.send_signal(signal.SIGTERM)  # default action: nobody cleans up
        assert await process.wait() == -signal.SIGTERM
        await process.aclose()
    assert alive(pids[0])
    os.kill(pids[0], signal.SIGKILL)


UNDER_NOHUP = PRELUDE + textwrap.dedent(
    """
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # what `nohup` does before exec

    async def main():
        async with get_runner() as runner:
            await start(runner)
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN  # still ignored
            print("ready", flush=True)
            await anyio.sleep_forever()

    anyio.run(main)
    """
)


async def test_under_nohup_sigterm_still_ends_the_replicas_and_sighup_stays_ignored() -> None:
    with anyio.fail_after(LIMIT):
        process, pids = await host(UNDER_NOHUP)
        assert len(pids) == 1
        process.send_signal(signal.SIGHUP)  # ignored: the host and its replica go on
        assert alive(pids[0])
        process.send_signal(signal.SIGTERM)
        returncode = await process.wait()
        await process.aclose()
    assert returncode == -signal.SIGTERM
    assert not alive(pids[0])


async def test_an_error_of_the_block_comes_out_of_terminate_on_signals_as_itself() -> None:
    from asynctorchx.runner import terminate_on_signals

    class Closeable:
        async def close(self) -> None:
            pass

    with pytest.raises(KeyError, match="the block's own"):
        async with terminate_on_signals(Closeable()):
            raise KeyError("the block's own")
