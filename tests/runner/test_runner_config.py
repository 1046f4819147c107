"""The .torchxconfig lookup and precedence, and the tracker settings read from it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from asynctorchx.errors import ConfigError
from asynctorchx.runner import config
from asynctorchx.runner.tracker import get_configured_trackers, tracker_config_env_var_name
from asynctorchx.specs.api import CfgVal, runopts


def _opts() -> runopts:
    opts = runopts()
    opts.add("log_dir", str, "where logs go", default="/default")
    opts.add("retries", int, "how often", default=0)
    opts.add("verbose", bool, "chatty", default=False)
    opts.add("tags", list[str], "labels", default=None)
    return opts


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    home = tmp_path / "home"
    cwd = tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("TORCHXCONFIG", raising=False)
    return home, cwd


def test_home_beats_cwd_and_cli_beats_both(dirs: tuple[Path, Path]) -> None:
    home, cwd = dirs
    (home / ".torchxconfig").write_text("[local_cwd]\nlog_dir = /from_home\n")
    (cwd / ".torchxconfig").write_text(
        "[local_cwd]\nlog_dir = /from_cwd\nretries = 3\nverbose = true\ntags = a,b\nbogus = 1\n"
    )
    cfg: dict[str, CfgVal] = {}
    config.apply("local_cwd", cfg, _opts())
    assert cfg == {"log_dir": "/from_home", "retries": 3, "verbose": True, "tags": ["a", "b"]}

    cli: dict[str, CfgVal] = {"log_dir": "/from_cli"}
    config.apply("local_cwd", cli, _opts())
    assert cli["log_dir"] == "/from_cli"
    assert cli["retries"] == 3


def test_torchxconfig_env_is_the_only_file(
    dirs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, _ = dirs
    (home / ".torchxconfig").write_text("[local_cwd]\nlog_dir = /from_home\nretries = 5\n")
    explicit = tmp_path / "explicit.ini"
    explicit.write_text("[local_cwd]\nlog_dir = /explicit\n")
    monkeypatch.setenv("TORCHXCONFIG", str(explicit))
    cfg: dict[str, CfgVal] = {}
    config.apply("local_cwd", cfg, _opts())
    assert cfg == {"log_dir": "/explicit"}


def test_missing_torchxconfig_file_is_an_error(
    dirs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHXCONFIG", str(tmp_path / "nope.ini"))
    with pytest.raises(ConfigError, match=r"nope\.ini"):
        config.find_configs()
    # set but empty is still set (TorchX): not a silent fallback to $HOME and ./
    home, _ = dirs
    (home / ".torchxconfig").write_text("[local_cwd]\nlog_dir = /from_home\n")
    monkeypatch.setenv("TORCHXCONFIG", "")
    with pytest.raises(ConfigError, match="TORCHXCONFIG=''"):
        config.find_configs()


def test_bad_value_names_key_and_section(dirs: tuple[Path, Path]) -> None:
    _, cwd = dirs
    (cwd / ".torchxconfig").write_text("[local_cwd]\nretries = many\n")
    with pytest.raises(ConfigError, match=r"retries.*\[local_cwd\]"):
        config.apply("local_cwd", {}, _opts())


def test_component_cli_and_tracker_sections(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, cwd = dirs
    (cwd / ".torchxconfig").write_text(
        "[component:utils.echo]\nmsg = from config\n"
        "[cli:run]\ncomponent = utils.echo\n"
        "[torchx:tracker]\nmlflow =\nfsspec =\n"
        "[tracker:fsspec]\nconfig = /tmp/tracker\n"
    )
    assert config.get_component_defaults() == {"utils.echo": {"msg": "from config"}}
    assert config.get_config("cli", "run", "component") == "utils.echo"
    assert get_configured_trackers() == {"mlflow": None, "fsspec": "/tmp/tracker"}

    monkeypatch.setenv("TORCHX_TRACKERS", "fsspec")
    monkeypatch.setenv(tracker_config_env_var_name("fsspec"), "s3://bucket")
    assert get_configured_trackers() == {"fsspec": "s3://bucket"}
    assert tracker_config_env_var_name("fsspec") == "TORCHX_TRACKER_FSSPEC_CONFIG"


def test_dump_then_load_round_trips_defaults() -> None:
    out = io.StringIO()
    config.dump(out, {"local_cwd": _opts()})
    cfg: dict[str, CfgVal] = {}
    config.load("local_cwd", io.StringIO(out.getvalue()), cfg, _opts())
    assert cfg == {"log_dir": "/default", "retries": 0, "verbose": False}


def test_dump_comments_every_line_of_a_multi_line_help() -> None:
    opts = _opts()
    opts.add("mode", str, "first line\nsecond = line", default="fast")
    out = io.StringIO()
    config.dump(out, {"local_cwd": opts})
    assert "; second = line\n" in out.getvalue()
    cfg: dict[str, CfgVal] = {}
    config.load("local_cwd", io.StringIO(out.getvalue()), cfg, opts)
    assert cfg["mode"] == "fast"
    assert "second" not in cfg
