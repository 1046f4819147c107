"""The ``asynctorchx`` CLI run as a subprocess, as a user runs it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from asynctorchx import __version__
from tests.schedulers.slurm.conftest import SlurmCluster, slurm_cluster

LIMIT = 60  # seconds: a safety bound, never a timing guess
__all__ = ["slurm_cluster"]  # the fixture, for the slurm case
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A clean environment: HOME and cwd in tmp_path, no TORCHX_* variables."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(tmp_path)
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("TORCHX")}
    clean["HOME"] = str(home)
    clean["PYTHONUNBUFFERED"] = "1"
    return clean


def cli(
    env: dict[str, str], *args: str, timeout: float = LIMIT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "asynctorchx", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def as_in_a_terminal(*args: str, ignored: tuple[signal.Signals, ...] = ()) -> list[str]:
    """The command line of ``python -m asynctorchx ARGS`` with the signal dispositions of a
    terminal (SIGINT raises KeyboardInterrupt, SIGTERM and SIGHUP kill), whatever the test
    runner inherited (a background job ignores SIGINT), except ``ignored`` (``nohup``)."""
    code = (
        "import runpy, signal, sys\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
        "signal.signal(signal.SIGHUP, signal.SIG_DFL)\n"
        f"for signum in {[int(s) for s in ignored]}:\n"
        "    signal.signal(signum, signal.SIG_IGN)\n"
        "sys.argv = ['asynctorchx', *sys.argv[1:]]\n"
        "runpy.run_module('asynctorchx', run_name='__main__')\n"
    )
    return [sys.executable, "-c", code, *args]


def test_version_and_help(env: dict[str, str]) -> None:
    out = cli(env, "--version")
    assert out.returncode == 0
    assert __version__ in out.stdout
    helped = cli(env, "--help")
    assert helped.returncode == 0
    for command in ("run", "status", "describe", "log", "cancel", "list", "runopts", "builtins"):
        assert command in helped.stdout


def test_run_echo_prints_the_message_and_exits_0(env: dict[str, str]) -> None:
    out = cli(env, "run", "-s", "local_cwd", "utils.echo", "--msg", "hello from cli")
    assert out.returncode == 0, out.stderr
    handle = out.stdout.splitlines()[0]
    assert handle.startswith("local_cwd://torchx/")
    assert any(
        line.endswith(" hello from cli") and "/0 " in line for line in out.stderr.splitlines()
    )
    assert "SUCCEEDED" in out.stderr


def test_failing_sh_exits_1(env: dict[str, str]) -> None:
    out = cli(env, "run", "utils.sh", "sh", "-c", "echo failing; exit 7")
    assert out.returncode == 1
    assert "failing" in out.stderr
    assert "FAILED" in out.stderr
    assert "Traceback" not in out.stderr


def test_dryrun_prints_the_request_and_starts_nothing(env: dict[str, str], tmp_path: Path) -> None:
    marker = tmp_path / "started"
    out = cli(env, "run", "--dryrun", "utils.sh", "touch", str(marker))
    assert out.returncode == 0, out.stderr
    assert "=== SCHEDULER REQUEST ===" in out.stdout
    assert str(marker) in out.stdout
    assert not marker.exists()


def test_scheduler_args_and_config_reach_the_run(env: dict[str, str], tmp_path: Path) -> None:
    logs = tmp_path / "logs-from-config"
    (tmp_path / ".torchxconfig").write_text(
        f"[local_cwd]\nlog_dir = {logs}\n[component:utils.echo]\nmsg = configured\n"
    )
    out = cli(env, "run", "utils.echo")
    assert out.returncode == 0, out.stderr
    assert any(line.endswith(" configured") for line in out.stderr.splitlines())
    assert logs.is_dir()
    flagged = tmp_path / "logs-from-flag"
    out = cli(env, "run", "-cfg", f"log_dir={flagged}", "utils.echo")
    assert out.returncode == 0, out.stderr
    assert flagged.is_dir()


def test_cli_run_section_gives_run_flag_defaults(env: dict[str, str], tmp_path: Path) -> None:
    logs = tmp_path / "logs-from-cli-section"
    (tmp_path / ".torchxconfig").write_text(
        "[cli:run]\n"
        "component = utils.sh\n"
        f"scheduler_args = log_dir={logs}\n"
        "parent_run_id = parent-from-config\n"
    )
    out = cli(env, "run", "--dryrun")
    assert out.returncode == 0, out.stderr
    assert str(logs) in out.stdout  # -cfg from [cli:run]
    assert "TORCHX_PARENT_RUN_ID=parent-from-config" in out.stdout
    flagged = cli(env, "run", "--dryrun", "--parent_run_id", "from-flag", "utils.echo")
    assert flagged.returncode == 0, flagged.stderr
    assert "TORCHX_PARENT_RUN_ID=from-flag" in flagged.stdout


def test_bad_component_name_is_one_clear_line(env: dict[str, str]) -> None:
    out = cli(env, "run", "utils.no_such_component")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "utils.no_such_component" in lines[0]
    assert "Traceback" not in out.stderr


def test_component_help_and_bad_component_argument(env: dict[str, str]) -> None:
    helped = cli(env, "run", "utils.echo", "--help")
    assert helped.returncode == 0
    assert "--msg" in helped.stdout
    assert "Traceback" not in helped.stderr
    bad = cli(env, "run", "utils.echo", "--no-such-arg", "x")
    assert bad.returncode == 2  # a usage error, as argparse's own
    assert bad.stderr.count("\n") == 1, bad.stderr
    assert "--no-such-arg" in bad.stderr
    bad_type = cli(env, "run", "utils.echo", "--num_replicas", "two")
    assert bad_type.returncode == 2
    assert "num_replicas" in bad_type.stderr


def test_bad_flag_is_a_usage_error(env: dict[str, str]) -> None:
    out = cli(env, "status", "--no-such-flag", "x")
    assert out.returncode == 2
    assert "--no-such-flag" in out.stderr
    assert "Traceback" not in out.stderr


def test_unknown_scheduler_and_malformed_handle_are_one_line(env: dict[str, str]) -> None:
    out = cli(env, "run", "-s", "nope", "utils.echo")
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1
    assert "'nope'" in out.stderr
    assert "local_cwd" in out.stderr
    out = cli(env, "status", "garbage")
    assert out.returncode == 2
    assert "garbage" in out.stderr
    assert "Traceback" not in out.stderr


def test_debug_log_level_shows_the_traceback(env: dict[str, str]) -> None:
    out = cli(env, "--log_level", "DEBUG", "status", "garbage")
    assert out.returncode == 2
    assert "Traceback" in out.stderr


def test_status_describe_cancel_of_unknown_local_app(env: dict[str, str]) -> None:
    for command in ("status", "describe", "cancel"):
        out = cli(env, command, "local_cwd://torchx/not-here")
        assert out.returncode == 1, out.stderr
        assert out.stderr.count("\n") == 1, out.stderr
        assert f"asynctorchx {command}: error: app 'local_cwd://torchx/not-here' not found" in (
            out.stderr
        )
    out = cli(env, "status", "--json", "local_cwd://torchx/not-here")
    assert out.returncode == 1
    assert out.stdout == ""
    assert "not-here" in out.stderr


def test_log_of_unknown_app_says_so(env: dict[str, str]) -> None:
    for identifier in ("local_cwd://torchx/not-here", "local_cwd://torchx/not-here/echo"):
        out = cli(env, "log", identifier)
        assert out.returncode == 1, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1, out.stderr
        assert "unknown app 'local_cwd://torchx/not-here'" in lines[0]


def test_runopts_of_unknown_scheduler_is_one_line(env: dict[str, str]) -> None:
    out = cli(env, "runopts", "nope")
    assert out.returncode == 2
    assert out.stdout == ""
    assert "'nope'" in out.stderr
    assert "local_cwd" in out.stderr


def test_list_json_and_table(env: dict[str, str]) -> None:
    out = cli(env, "list", "-s", "local_cwd", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []
    table = cli(env, "list", "-s", "local_cwd")
    assert table.returncode == 0
    assert "APP HANDLE" in table.stdout


def test_builtins_and_print(env: dict[str, str]) -> None:
    out = cli(env, "builtins")
    assert out.returncode == 0, out.stderr
    for name in ("utils.echo", "utils.sh", "dist.ddp"):
        assert name in out.stdout
    printed = cli(env, "builtins", "--print", "utils.echo")
    assert printed.returncode == 0
    assert "def echo" in printed.stdout


def test_runopts(env: dict[str, str]) -> None:
    out = cli(env, "runopts", "local_cwd")
    assert out.returncode == 0, out.stderr
    assert "log_dir" in out.stdout
    assert "prepend_cwd" in out.stdout
    every = cli(env, "runopts")
    assert "local_cwd:" in every.stdout
    assert "local_docker:" in every.stdout


def test_configure_writes_a_loadable_config(env: dict[str, str], tmp_path: Path) -> None:
    out = cli(env, "configure", "-s", "local_cwd", "--all")
    assert out.returncode == 0, out.stderr
    text = (tmp_path / ".torchxconfig").read_text()
    assert "[local_cwd]" in text
    assert cli(env, "run", "utils.echo", "--msg", "ok").returncode == 0
    again = cli(env, "configure")
    assert again.returncode == 1
    assert "exists" in again.stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
async def test_a_stop_signal_cancels_the_app_and_leaves_no_replica(
    env: dict[str, str], signum: signal.Signals
) -> None:
    # SIGHUP: the terminal closed; the replica, in its own session, would never see it
    script = "echo ready $$$$; exec sleep 600"  # `$$$$`: macros turn `$$` into `$`
    proc = await anyio.open_process(
        as_in_a_terminal("run", "utils.sh", "sh", "-c", script), env=env
    )
    pid = None
    async with proc:
        assert proc.stderr is not None
        buffered = b""
        with anyio.fail_after(LIMIT):
            async for chunk in proc.stderr:
                buffered += chunk
                ready = [ln for ln in buffered.decode().splitlines() if " ready " in ln]
                if ready:
                    pid = int(ready[0].split()[-1])
                    break
            assert pid is not None
            assert _alive(pid)
            proc.send_signal(signum)
            code = await proc.wait()
    assert code == -signum  # died of it: a shell's $? is 128 + signum
    assert not _alive(pid)


async def test_an_ignored_sighup_stays_ignored_as_under_nohup(
    env: dict[str, str], tmp_path: Path
) -> None:
    # a replica that runs until the file `go` exists, then succeeds
    script = "echo ready; while [ ! -e go ]; do sleep 0.05; done"
    command = as_in_a_terminal("run", "utils.sh", "sh", "-c", script, ignored=(signal.SIGHUP,))
    proc = await anyio.open_process(command, env=env)
    with anyio.fail_after(LIMIT):
        async with proc:
            assert proc.stderr is not None
            await _read_until(proc.stderr, " ready")
            proc.send_signal(signal.SIGHUP)
            (tmp_path / "go").touch()
            code = await proc.wait()
    assert code == 0  # SUCCEEDED: the hangup did not cancel the app


async def _read_until(stream: anyio.abc.ByteReceiveStream, needle: str) -> str:
    """Read ``stream`` until a line containing ``needle`` arrives; return that line."""
    buffered = b""
    async for chunk in stream:
        buffered += chunk
        for line in buffered.decode().splitlines():
            if needle in line:
                return line
    raise AssertionError(f"the stream ended without {needle!r}: {buffered.decode()}")


async def test_cancel_says_it_is_requested_at_once_then_the_end_state(
    env: dict[str, str], tmp_path: Path
) -> None:
    # The replica takes SIGTERM (then ignores it: the fifo has one reader) and ends only
    # once the file `go` exists: `cancel` must say that the cancel is requested while the
    # app still runs, then wait for its end.
    fifo = tmp_path / "got-term"
    os.mkfifo(fifo)
    script = tmp_path / "graceful.sh"
    script.write_text(
        f"trap 'trap \"\" TERM; echo term > {fifo}' TERM\necho ready\n"
        "while [ ! -e go ]; do sleep 0.05; done\n"
    )
    command = ["run", "-cfg", "stop_timeout=600", "utils.sh", "bash", str(script)]
    with anyio.fail_after(LIMIT):
        async with await anyio.open_process(as_in_a_terminal(*command), env=env) as run:
            assert run.stdout is not None
            assert run.stderr is not None
            handle = (await _read_until(run.stdout, "://")).strip()
            await _read_until(run.stderr, " ready")
            cancel = await anyio.open_process(as_in_a_terminal("cancel", handle), env=env)
            async with cancel:
                assert cancel.stderr is not None
                await _read_until(cancel.stderr, f"cancel requested for {handle}")
                await anyio.to_thread.run_sync(fifo.read_text, abandon_on_cancel=True)
                assert cancel.returncode is None  # still waiting: the app has not ended
                (tmp_path / "go").touch()
                ended = await _read_until(cancel.stderr, "ended:")
                assert await cancel.wait() == 0
            assert ended.endswith(f"{handle} ended: CANCELLED")
            assert await run.wait() == 1


async def test_second_sigint_during_cancel_still_leaves_no_replica(
    env: dict[str, str], tmp_path: Path
) -> None:
    # The replica outlives SIGTERM, so only the SIGKILL sent `stop_timeout` seconds later
    # ends it. A second Ctrl-C in that time used to raise KeyboardInterrupt into the idle
    # event loop, which abandoned the cleanup: the CLI hung and the replica was orphaned.
    fifo = tmp_path / "got-term"
    os.mkfifo(fifo)
    script = tmp_path / "stubborn.sh"
    script.write_text(
        f"trap 'echo term > {fifo}' TERM\necho ready $$\nwhile true; do sleep 0.1; done\n"
    )
    command = ["run", "-cfg", "stop_timeout=2", "utils.sh", "bash", str(script)]
    proc = await anyio.open_process(as_in_a_terminal(*command), env=env)
    # the bound encloses `async with proc`: when it expires, leaving the block kills the CLI
    with anyio.fail_after(LIMIT):
        async with proc:
            assert proc.stderr is not None
            pid = int((await _read_until(proc.stderr, " ready ")).split()[-1])
            assert _alive(pid)
            proc.send_signal(signal.SIGINT)
            # the replica got SIGTERM: the CLI now awaits its end (idle until SIGKILL)
            await anyio.to_thread.run_sync(fifo.read_text, abandon_on_cancel=True)
            proc.send_signal(signal.SIGINT)
            code = await proc.wait()
    assert code == -signal.SIGINT
    assert not _alive(pid)


@pytest.mark.torch
def test_ddp_example_trains_with_two_processes(env: dict[str, str], tmp_path: Path) -> None:
    # dist.ddp runs `python -m torch.distributed.run`: as in an activated venv, `python`
    # must be this interpreter
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    checkpoint = tmp_path / "ckpt.pt"
    out = cli(
        env,
        "run",
        "-s",
        "local_cwd",
        "dist.ddp",
        "-j",
        "1x2",
        "--script",
        str(EXAMPLES / "ddp_train.py"),
        "--",
        "--steps",
        "200",
        "--checkpoint",
        str(checkpoint),
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "step 200/200 loss" in out.stderr
    assert checkpoint.is_file()
    import torch

    saved = torch.load(checkpoint)
    assert saved["world_size"] == 2
    assert saved["loss"] < 0.1


def test_config_files_read_and_unknown_keys_are_reported(
    env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / ".torchxconfig").write_text("[cli:run]\nschedular = local_cwd\n")
    out = cli(env, "--log_level", "INFO", "run", "--dryrun", "utils.echo")
    assert out.returncode == 0, out.stderr
    assert f"loaded configs from {tmp_path / '.torchxconfig'}" in out.stderr
    assert "`schedular` in section [cli:run] of the .torchxconfig is ignored" in out.stderr
    (tmp_path / ".torchxconfig").write_bytes(b"[local_cwd]\nlog_dir = /caf\xe9\n")
    bad = cli(env, "run", "--dryrun", "utils.echo")
    assert bad.returncode == 1
    assert bad.stderr.count("\n") == 1
    assert f"config file '{tmp_path / '.torchxconfig'}' is not valid UTF-8" in bad.stderr


def test_a_finished_runs_logs_stay_readable_where_its_url_points(
    env: dict[str, str], tmp_path: Path
) -> None:
    # issue 44: `log` printed nothing once `run` had removed its temporary directory
    import tempfile

    env.pop("ASYNCTORCHX_STATE_DIR", None)  # the records of HOME, private to the test
    env.pop("XDG_STATE_HOME", None)
    before = set(Path(tempfile.gettempdir()).glob("asynctorchx-failed-*"))
    for command, code in (("echo kept-line", 0), ("echo failed-line; exit 3", 1)):
        out = cli(env, "run", "utils.sh", "sh", "-c", command)
        assert out.returncode == code, out.stderr
        handle = out.stdout.strip()
        log = cli(env, "log", handle)
        assert log.returncode == 0, log.stderr
        assert log.stdout == f"sh/0 {command.split(';')[0].removeprefix('echo ')}\n"
        status = cli(env, "status", handle)
        (url,) = [line for line in status.stdout.splitlines() if "UI URL:" in line]
        kept = Path(url.split("file://", 1)[1])
        records = Path(env["HOME"]) / ".local" / "state" / "asynctorchx" / "local_cwd"
        assert kept.parent.parent == records / "logs"
        assert (kept / "sh" / "0" / "combined.log").is_file()
        assert (kept.stat().st_mode & 0o777) == 0o700
    # a log_dir the user chose is where the logs go; nothing is copied to the temp dir
    chosen = tmp_path / "chosen"
    failed = cli(env, "run", "-cfg", f"log_dir={chosen}", "utils.sh", "sh", "-c", "exit 3")
    assert failed.returncode == 1
    assert f"UI URL: file://{chosen}/" in failed.stderr
    assert set(Path(tempfile.gettempdir()).glob("asynctorchx-failed-*")) == before


def test_log_of_an_app_whose_chosen_log_dir_was_removed_says_so_and_fails(
    env: dict[str, str], tmp_path: Path
) -> None:
    # issue 44: `log` printed nothing and exited 0 once the logs were gone
    import shutil

    chosen = tmp_path / "chosen"
    out = cli(env, "run", "-cfg", f"log_dir={chosen}", "utils.echo", "--msg", "hi")
    assert out.returncode == 0, out.stderr
    handle = out.stdout.strip()
    shutil.rmtree(chosen)
    log = cli(env, "log", handle)
    assert log.returncode == 1
    assert log.stdout == ""
    assert f"were removed from '{chosen}/" in log.stderr
    assert "leave the run option log_dir unset" in log.stderr


def test_a_repeated_run_flag_or_component_argument_is_a_usage_error(env: dict[str, str]) -> None:
    # TorchX refuses both rather than keep the last value silently
    for args in (
        ("-cfg", "log_dir=/a", "-cfg", "log_dir=/b", "utils.echo"),
        ("utils.echo", "--msg", "a", "--msg=b"),
    ):
        out = cli(env, "run", "--dryrun", *args)
        assert out.returncode == 2, out.stdout
        assert "given more than once" in out.stderr
    # a command's own repeated flags are the command's business
    grep = cli(env, "run", "--dryrun", "utils.sh", "grep", "-e", "a", "-e", "b")
    assert grep.returncode == 0, grep.stderr


def test_status_shows_when_the_app_was_submitted_started_and_ended(env: dict[str, str]) -> None:
    from datetime import datetime

    out = cli(env, "run", "utils.sh", "sh", "-c", "true")
    assert out.returncode == 0, out.stderr
    handle = out.stdout.strip()
    status = cli(env, "status", handle)
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    # below TorchX's layout, whose last line is its UI URL
    below = lines[next(i for i, line in enumerate(lines) if "UI URL:" in line) + 1 :]
    labels = [line.strip().split(": ", 1)[0] for line in below]
    assert labels == ["Cause", "Submitted", "Started", "Ended"]
    at = [datetime.fromisoformat(line.split(": ", 1)[1]) for line in below[1:]]
    assert all(when.tzinfo is not None for when in at)
    assert at[0] <= at[1] <= at[2]
    data = json.loads(cli(env, "status", "--json", handle).stdout)
    assert data["pending_reason"] is None
    exact = [datetime.fromisoformat(data[key]) for key in ("submitted", "started", "ended")]
    assert [when.replace(microsecond=0) for when in exact] == at  # status prints whole seconds


def test_status_says_why_a_slurm_job_waits(
    env: dict[str, str], tmp_path: Path, slurm_cluster: SlurmCluster
) -> None:
    del slurm_cluster
    held = subprocess.run(
        ["sbatch", "--parsable", "--begin=now+60", f"--chdir={tmp_path}", "--wrap", "true"],
        capture_output=True,
        text=True,
        check=True,
    )
    job_id = held.stdout.strip().split(";")[0]
    try:
        status = cli(env, "status", f"slurm://torchx/{job_id}")
        assert status.returncode == 0, status.stderr
        assert "    State: PENDING" in status.stdout
        assert "    Pending reason: BeginTime" in status.stdout.splitlines()
        assert "    Started:" not in status.stdout
        data = json.loads(cli(env, "status", "--json", f"slurm://torchx/{job_id}").stdout)
        assert (data["pending_reason"], data["started"]) == ("BeginTime", None)
    finally:
        subprocess.run(["scancel", job_id], check=False)
