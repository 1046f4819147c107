"""``run --tee_logs``, ``run --json`` and ``run --stdin`` (TorchX's flags after 0.7.0)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from asynctorchx.cli.main import run_cli
from asynctorchx.schedulers import SchedulerFactory
from tests.isolation import isolate_from_user_config
from tests.runner.fake_scheduler import FakeScheduler, create_class_opts

LIMIT = 60  # seconds: a safety bound, never a timing guess


@pytest.fixture
def remote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Register `remote`, a fake scheduler whose apps outlive the CLI process."""
    isolate_from_user_config(tmp_path, monkeypatch)
    factories: dict[str, SchedulerFactory] = {"remote": create_class_opts}
    monkeypatch.setattr("asynctorchx.schedulers.get_scheduler_factories", lambda: factories)
    FakeScheduler.created.clear()
    yield
    FakeScheduler.created.clear()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.chdir(tmp_path)
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("TORCHX")}
    clean["HOME"] = str(home)
    return clean


def cli(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "asynctorchx", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )


def test_tee_logs_waits_and_streams_an_app_that_outlives_run(
    remote: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["run", "-s", "remote", "--tee_logs", "utils.echo"]) == 0
    out, err = capsys.readouterr()
    (handle,) = out.splitlines()
    assert f"echo/0 ran {handle.rsplit('/', 1)[-1]}" in err.splitlines()
    assert "finished: SUCCEEDED" in err


def test_tee_logs_prefixes_every_replica(env: dict[str, str]) -> None:
    out = cli(env, "run", "--tee_logs", "utils.echo", "--msg", "teed", "--num_replicas", "2")
    assert out.returncode == 0, out.stderr
    assert sorted(line for line in out.stderr.splitlines() if "teed" in line) == [
        "echo/0 teed",
        "echo/1 teed",
    ]


def test_json_prints_the_handle_then_the_final_status(
    remote: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["run", "-s", "remote", "--json", "utils.echo"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    handle = json.loads(lines[0])["app_handle"]
    assert handle.startswith("remote://torchx/echo-")

    assert run_cli(["run", "-s", "remote", "--json", "--log", "utils.echo"]) == 0
    out, err = capsys.readouterr()
    first, last = (json.loads(line) for line in out.splitlines())  # logs went to stderr
    assert last["app_handle"] == first["app_handle"]
    assert last["status"]["state"] == "SUCCEEDED"
    assert "echo/0 ran " in err


def test_json_dryrun_is_one_object(remote: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["run", "-s", "remote", "--json", "--dryrun", "utils.echo", "--msg", "x"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    printed = json.loads(line)
    assert printed["scheduler"] == "remote"
    assert printed["app"]["roles"][0]["args"] == ["x"]
    assert printed["app"]["roles"][0]["base_image"] is None  # no <NONE> placeholder
    assert isinstance(printed["request"], str)


def test_stdin_runs_torchx_json(env: dict[str, str], tmp_path: Path) -> None:
    logs = tmp_path / "stdin-logs"
    request = {
        "component_name": "utils.echo",
        "scheduler": "local_cwd",
        "scheduler_args": {"log_dir": str(logs)},
        "component_args": {"msg": "from stdin"},
    }
    out = cli(env, "run", "--stdin", stdin=json.dumps(request))
    assert out.returncode == 0, out.stderr
    assert "echo/0 from stdin" in out.stderr.splitlines()
    assert logs.is_dir()

    as_argv = {"component_name": "utils.echo", "component_args_str": ["--msg", "argv"]}
    out = cli(env, "run", "--stdin", "--json", stdin=json.dumps({**as_argv, "dryrun": True}))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["app"]["roles"][0]["args"] == ["argv"]


@pytest.mark.parametrize(
    ("flags", "stdin", "says"),
    [
        (["--wait"], '{"component_name": "utils.echo"}', "--stdin takes everything"),
        ([], '{"component_name": "utils.echo", "bogus": 1}', "unknown field(s) bogus"),
        ([], '{"scheduler": "local_cwd"}', '"component_name" is required'),
        ([], '{"component_name": "utils.echo", "wait": "yes"}', "'wait' must be bool"),
        ([], "not json", "not JSON"),
        ([], "[1]", "expected a JSON object"),
    ],
)
def test_stdin_rejects_a_bad_request(
    remote: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    stdin: str,
    says: str,
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    assert run_cli(["run", "--stdin", *flags]) == 2
    err = capsys.readouterr().err
    assert says in err
    assert err.count("\n") == 1
    assert not FakeScheduler.created


def _run_on_a_terminal(env: dict[str, str], *args: str) -> str:
    """Run the CLI with its stderr (where `run` prints the logs) on a pseudo-terminal;
    return what it printed there."""
    import pty

    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "asynctorchx", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=LIMIT,
            check=False,
        )
        assert done.returncode == 0, done.stdout
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode().replace("\r\n", "\n")
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)


def test_prefixes_have_one_colour_per_replica_on_a_terminal(env: dict[str, str]) -> None:
    env.pop("NO_COLOR", None)
    env["TERM"] = "xterm"
    command = ("run", "utils.echo", "--msg", "hue", "--num_replicas", "2")
    lines = [line for line in _run_on_a_terminal(env, *command).splitlines() if "hue" in line]
    colours = {line.split("m", 1)[0] for line in lines}
    assert sorted(line.split("\033[0m ", 1)[1] for line in lines) == ["hue", "hue"]
    assert all(line.startswith("\033[") for line in lines)
    assert len(colours) == 2  # replica 0 and replica 1 differ

    env["NO_COLOR"] = "1"
    plain = _run_on_a_terminal(env, *command)
    assert sorted(line for line in plain.splitlines() if "hue" in line) == [
        "echo/0 hue",
        "echo/1 hue",
    ]


def test_a_reader_that_goes_away_ends_the_command_quietly(
    env: dict[str, str], tmp_path: Path
) -> None:
    ran = cli(env, "run", "-cfg", f"log_dir={tmp_path / 'logs'}", "utils.sh", "seq", "200000")
    assert ran.returncode == 0, ran.stderr
    handle = ran.stdout.splitlines()[0]
    with subprocess.Popen(
        [sys.executable, "-m", "asynctorchx", "log", handle],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as log:  # as `asynctorchx log ... | head -1`
        assert log.stdout is not None
        assert log.stderr is not None
        assert log.stdout.readline() == "sh/0 1\n"
        log.stdout.close()
        err = log.stderr.read()
        assert log.wait(LIMIT) == 1
    assert err == ""


def test_a_broken_stdout_in_process_leaves_no_descriptor_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class GoneReader(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError

    monkeypatch.setattr(sys, "stdout", GoneReader())
    before = sorted(os.listdir("/proc/self/fd"))
    assert run_cli(["builtins"]) == 1  # quietly, as when the reader of a pipe went away
    assert sorted(os.listdir("/proc/self/fd")) == before
