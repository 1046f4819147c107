"""The exit codes a shell expects of ``asynctorchx run`` (``docs/cli.md``): 2 for a usage
error, 1 for an app that did not succeed (a signal's: tests/cli/test_cli_commands.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

LIMIT = 60  # seconds: a safety bound, never a timing guess


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("TORCHX")}
    env["HOME"] = str(tmp_path)
    return env


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "asynctorchx", *args],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "--bogus", "utils.echo"], "unrecognized arguments: --bogus"),
        (["run", "-s", "local_cwd", "utils.nope"], "utils.nope"),
        (["run", "-s", "nope", "utils.echo"], "unknown scheduler 'nope'"),
        (["run", "-s", "local_cwd", "-cfg", "bogus=1", "utils.echo"], "bogus"),
        (["run", "-cfg", "log_dirr=/tmp", "utils.echo"], "did you mean 'log_dir'?"),
        (["run", "-cfg", "log_dir=/proc/logs", "utils.echo"], "refuses new directories"),
        (["run", "-s", "local_cwd", "-cfg", "bogus", "utils.echo"], "bogus"),
        (["run", "-s", "local_cwd", "utils.echo", "--nope"], "--nope"),
    ],
)
def test_a_usage_error_exits_2(tmp_path: Path, args: list[str], said: str) -> None:
    done = _cli(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr


def test_an_app_that_fails_exits_1(tmp_path: Path) -> None:
    done = _cli(tmp_path, "run", "-s", "local_cwd", "utils.sh", "false")
    assert done.returncode == 1, done.stderr
    assert "FAILED" in done.stderr


def test_list_state_filter_refuses_an_unknown_state(tmp_path: Path) -> None:
    done = _cli(tmp_path, "list", "--state", "running,bogus")
    assert done.returncode == 2
    assert "BOGUS" in done.stderr
    assert "SUCCEEDED" in done.stderr


def test_list_state_filter_keeps_only_those_states(tmp_path: Path) -> None:
    assert _cli(tmp_path, "run", "-s", "local_cwd", "utils.sh", "true").returncode == 0
    listed = _cli(tmp_path, "list", "-s", "local_cwd", "--state", "failed")
    assert listed.returncode == 0
    assert "local_cwd://" not in listed.stdout
    kept = _cli(tmp_path, "list", "-s", "local_cwd", "--state", "Succeeded")
    assert "local_cwd://" in kept.stdout


def test_list_limit_says_how_many_more_and_all_lists_them(tmp_path: Path) -> None:
    for _ in range(2):
        assert _cli(tmp_path, "run", "-s", "local_cwd", "utils.sh", "true").returncode == 0
    limited = _cli(tmp_path, "list", "-s", "local_cwd", "--limit", "1")
    assert limited.stdout.count("local_cwd://") == 1
    assert "1 more" in limited.stderr
    every = _cli(tmp_path, "list", "-s", "local_cwd", "--limit", "1", "--all")
    assert every.stdout.count("local_cwd://") == 2
