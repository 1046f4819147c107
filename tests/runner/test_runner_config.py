"""The .torchxconfig lookup and precedence, and the tracker settings read from it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from asynctorchx.errors import ConfigError
from asynctorchx.runner import config
from asynctorchx.specs.api import CfgVal, runopts
from asynctorchx.tracker.api import get_configured_trackers, tracker_config_env_var_name


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


def test_empty_torchxconfig_turns_config_files_off(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # set but empty: no file at all (torchx-nightly), not a fallback to $HOME and ./
    home, _ = dirs
    (home / ".torchxconfig").write_text("[local_cwd]\nlog_dir = /from_home\n")
    monkeypatch.setenv("TORCHXCONFIG", "")
    assert config.find_configs() == []
    cfg: dict[str, CfgVal] = {}
    config.apply("local_cwd", cfg, _opts())
    assert cfg == {}


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
    # `tags` has no default: dumped as `None`, read back as None (TorchX's format)
    assert cfg == {"log_dir": "/default", "retries": 0, "verbose": False, "tags": None}
    assert _opts().resolve(cfg)["tags"] is None


def test_dump_keeps_a_multi_line_help_on_one_line() -> None:
    opts = _opts()
    opts.add("mode", str, "first line\nsecond = line", required=True)
    out = io.StringIO()
    config.dump(out, {"local_cwd": opts})
    assert "mode = #FIXME:(str) first line second = line\n" in out.getvalue()
    cfg: dict[str, CfgVal] = {}
    config.load("local_cwd", io.StringIO(out.getvalue()), cfg, opts)
    assert "second" not in cfg


# ------------------------------------------------ torchx.runner.config's signatures (issue 13)


def test_torchx_apply_signature_looks_the_options_up(dirs: tuple[Path, Path]) -> None:
    _, cwd = dirs
    (cwd / ".torchxconfig").write_text("[local_cwd]\nprepend_cwd = true\nlog_dir = None\n")
    cfg: dict[str, CfgVal] = {}
    config.apply("local_cwd", cfg)  # TorchX's apply(scheduler, cfg, dirs=None)
    assert cfg == {"prepend_cwd": True, "log_dir": None}
    other: dict[str, CfgVal] = {}
    config.apply("local_cwd", other, [str(cwd)])
    assert other["prepend_cwd"] is True


def test_torchx_load_signature(caplog: pytest.LogCaptureFixture) -> None:
    cfg: dict[str, CfgVal] = {"log_dir": "/mine"}
    ini = "[local_cwd]\nlog_dir = /theirs\nprepend_cwd = true\nstale = 1\n"
    config.load("local_cwd", io.StringIO(ini), cfg)
    assert cfg == {"log_dir": "/mine", "prepend_cwd": True}
    assert "stale" in caplog.text  # an unknown key is skipped with a warning


def test_load_sections_with_a_prefix(dirs: tuple[Path, Path]) -> None:
    home, cwd = dirs
    (home / ".torchxconfig").write_text("[component:dist.ddp]\nj = 2x2\n")
    (cwd / ".torchxconfig").write_text(
        "[component:dist.ddp]\nj = 1x1\nimage = img\n[component:]\nx = 1\n[cli:run]\nc = d\n"
    )
    assert config.load_sections("component") == {"dist.ddp": {"j": "2x2", "image": "img"}}
    assert config.load_sections("component", [str(cwd)]) == {
        "dist.ddp": {"j": "1x1", "image": "img"}
    }
    assert "cli:run" in config.load_sections()  # no prefix: every section, full names


def test_default_config_dirs() -> None:
    assert config.DEFAULT_CONFIG_DIRS[0] == str(Path.home())
    assert len(config.DEFAULT_CONFIG_DIRS) == 2


def test_missing_torchxconfig_is_a_file_not_found_error(
    dirs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHXCONFIG", str(tmp_path / "nope.ini"))
    with pytest.raises(FileNotFoundError, match=r"nope\.ini"):
        config.find_configs()


def test_dump_by_scheduler_names_in_torchx_format() -> None:
    out = io.StringIO()
    config.dump(out, ["local_cwd"])
    text = out.getvalue()
    assert text.startswith("[local_cwd]\nlog_dir = None\nprepend_cwd = False\n")
    cfg: dict[str, CfgVal] = {}
    config.load("local_cwd", io.StringIO(text), cfg)
    assert cfg["prepend_cwd"] is False
    everything = io.StringIO()
    config.dump(everything)  # every registered scheduler
    assert "[local_docker]" in everything.getvalue()
    with pytest.raises(ValueError, match="nope"):
        config.dump(io.StringIO(), ["nope"])


def test_dump_formats_containers_and_required_options() -> None:
    opts = runopts()
    opts.add("queue", str, "the queue to submit to", required=True)
    opts.add("tags", list[str], "tags", default=["a", "b"])
    opts.add("labels", dict[str, str], "labels", default={"k": "v", "t": "1"})
    opts.add("empty", dict[str, str], "nothing", default={})
    out = io.StringIO()
    config.dump(out, {"s": opts})
    assert out.getvalue() == (
        "[s]\nqueue = #FIXME:(str) the queue to submit to\ntags = a;b\nlabels = k:v;t:1\n"
        "empty = None\n\n"
    )
    only = io.StringIO()
    config.dump(only, {"s": opts}, required_only=True)
    assert only.getvalue() == "[s]\nqueue = #FIXME:(str) the queue to submit to\n\n"
    cfg: dict[str, CfgVal] = {}
    config.load("s", io.StringIO(out.getvalue().replace("#FIXME", "q #")), cfg, opts)
    assert cfg["tags"] == ["a", "b"]
    assert cfg["labels"] == {"k": "v", "t": "1"}


def test_the_files_read_are_logged_at_info(
    dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    home, cwd = dirs
    (home / ".torchxconfig").write_text("[local_cwd]\nlog_dir = /h\n")
    (cwd / ".torchxconfig").write_text("[local_cwd]\nlog_dir = /c\n")
    with caplog.at_level("INFO", logger="asynctorchx.runner.config"):
        config.load_sections()
    read = [r.getMessage() for r in caplog.records if r.levelname == "INFO"]
    assert read == [
        f"loaded configs from {home / '.torchxconfig'}",
        f"loaded configs from {cwd / '.torchxconfig'}",
    ]


def test_unknown_sections_and_cli_keys_are_warned_about(
    dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    _, cwd = dirs
    (cwd / ".torchxconfig").write_text(
        "[local_cwdd]\nlog_dir = /x\n"  # a typo'd scheduler
        "[cli:run]\nschedular = local_cwd\ncomponent = utils.echo\n"
        "[cli:other]\nanything = 1\n[component:utils.echo]\nmsg = hi\n"
        "[local_cwd]\nlog_dir = /y\n[torchx:tracker]\nfsspec =\n[tracker:fsspec]\nconfig = /c\n"
    )
    config.warn_unknown(config.load_sections(), ["local_cwd"], {"cli:run": ("component",)})
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("section [local_cwdd] of the .torchxconfig is ignored")
    assert warnings[1].startswith("`schedular` in section [cli:run] of the .torchxconfig")


def test_a_file_that_is_not_utf8_names_itself_and_the_fix(dirs: tuple[Path, Path]) -> None:
    from asynctorchx.errors import ConfigFileEncodingError

    _, cwd = dirs
    (cwd / ".torchxconfig").write_bytes(b"[local_cwd]\nlog_dir = /caf\xe9\n")
    with pytest.raises(ConfigFileEncodingError) as raised:
        config.load_sections()
    assert isinstance(raised.value, ConfigError)
    assert raised.value.path == str(cwd / ".torchxconfig")
    assert str(cwd / ".torchxconfig") in str(raised.value)
    assert "byte 0xe9" in str(raised.value)
    assert "save it as UTF-8" in str(raised.value)
