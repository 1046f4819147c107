"""The ``env`` run option of ``local_docker`` as TorchX 0.7.0 reads it (no engine needed).

TorchX's ``env`` is ``Dict[str, str]``, written ``-cfg env=FOO:1,BAR:2`` or
``env=FOO:1;BAR:2`` (``torchx.specs.api.runopts.cfg_from_str``); our earlier forms
(``env=FOO=1;BAR=2`` on a command line, a ``KEY=VALUE`` list from Python) keep working.
"""

from __future__ import annotations

import pytest

from asynctorchx.errors import InvalidRunConfigException
from asynctorchx.runner import config
from asynctorchx.schedulers.docker_scheduler import DockerScheduler
from asynctorchx.specs.api import AppDef, CfgVal, Role, get_type_name


def _env_of(cfg: dict[str, CfgVal]) -> dict[str, str]:
    """The environment of replica 0 after a dry run with ``cfg`` (less TorchX's own)."""
    sched = DockerScheduler("t")
    app = AppDef("x", [Role("r", "img", entrypoint="true", env={"ROLE": "r"})])
    body = sched.submit_dryrun(app, cfg).request.containers[0].config
    pairs = dict(item.split("=", 1) for item in body["Env"])
    pairs.pop("TORCHX_RANK0_HOST")
    assert pairs.pop("TORCHX_IMAGE") == "img"
    return pairs


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("env=FOO:1,BAR:2", {"FOO": "1", "BAR": "2"}),  # TorchX's forms
        ("env=FOO:1;BAR:2", {"FOO": "1", "BAR": "2"}),
        ("env=URL:http://h:1/p,E:", {"URL": "http://h:1/p", "E": ""}),
        ("env=FOO=1;BAR=2", {"FOO": "1", "BAR": "2"}),  # the form our help showed
        ("env=FOO=1,BAR=x=y", {"FOO": "1", "BAR": "x=y"}),
        ("env=FOO:1,BAR:2;privileged=true", {"FOO": "1", "BAR": "2"}),
    ],
)
def test_env_option_parses_as_torchx_and_as_before(text: str, expected: dict[str, str]) -> None:
    opts = DockerScheduler("test").run_opts()
    env_type = get_type_name(opts.get("env").opt_type)  # type: ignore[union-attr]
    assert env_type.lower().removeprefix("typing.") == "dict[str, str]"  # TorchX's env type
    cfg = opts.cfg_from_str(text)
    assert cfg["env"] == expected
    assert cfg.get("privileged", False) is ("privileged" in text)
    assert _env_of(cfg) == {**expected, "ROLE": "r"}


def test_env_option_from_python_as_a_dict_or_the_earlier_list() -> None:
    assert _env_of({"env": {"A": "1", "ROLE": "loses"}}) == {"A": "1", "ROLE": "r"}
    assert _env_of({"env": ["A=1", "B=x=y"]}) == {"A": "1", "B": "x=y", "ROLE": "r"}


@pytest.mark.parametrize(
    ("cfg", "named"),
    [
        ({"env": {"A=B": "x"}}, "'A=B'"),
        ({"env": {"": "x"}}, "''"),
        ({"env": {"A": "x\0y"}}, "NUL"),
        ({"env": ["NOPE"]}, "'NOPE'"),
    ],
)
def test_env_option_refuses_what_no_environment_can_carry(
    cfg: dict[str, CfgVal], named: str
) -> None:
    with pytest.raises(InvalidRunConfigException, match=named) as caught:
        _env_of(cfg)
    assert caught.value.cfg_key == "env"


def test_env_option_item_without_a_separator_is_named() -> None:
    opts = DockerScheduler("test").run_opts()
    with pytest.raises(InvalidRunConfigException, match="'NOPE' is not KEY:VALUE"):
        opts.cfg_from_str("env=NOPE")


def test_env_option_from_a_torchxconfig_section() -> None:
    opts = DockerScheduler("test").run_opts()
    cfg: dict[str, CfgVal] = {}
    sections = {"local_docker": {"env": "FOO:1,BAR:2"}}
    config.apply("local_docker", cfg, opts, sections=sections)
    assert cfg == {"env": {"FOO": "1", "BAR": "2"}}
