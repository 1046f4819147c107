"""``local_docker``'s run options: TorchX's ``docker_scheduler`` and workspace ones, and ours.

``env`` reads TorchX's ``KEY:VALUE`` form and our earlier ``KEY=VALUE`` one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypedDict

from asynctorchx.errors import InvalidRunConfigException
from asynctorchx.schedulers._structured import StructuredOpts
from asynctorchx.schedulers.toolkit import check_env
from asynctorchx.specs.api import CfgVal, cfg_pairs, runopts

#: The user-defined bridge network replicas join by default (TorchX's).
NETWORK = "torchx"


class DockerOpts(TypedDict, total=False):
    """TorchX 0.7.0's ``docker_scheduler.DockerOpts``: :class:`Opts` as a ``TypedDict``."""

    copy_env: list[str] | None
    env: dict[str, str] | None
    privileged: bool
    image_repo: str | None
    quiet: bool
    network: str
    init: bool
    cancel_on_close: bool


def parse_env_text(text: str) -> dict[str, str]:
    """Parse ``env`` text: ``KEY:VALUE`` (or ``KEY=VALUE``) items split by ``,`` or ``;``."""
    env: dict[str, str] = {}
    for item in re.split(r"[,;]", text):
        if not item.strip():
            continue
        found = [i for i in (item.find(":"), item.find("=")) if i >= 0]
        if not found:
            raise InvalidRunConfigException(
                f"run option env item {item!r} is not KEY:VALUE: write e.g."
                " `-cfg env=FOO:1,BAR:2` (or `env=FOO:1;BAR:2`)",
                "env",
            )
        cut = min(found)
        env[item[:cut].strip()] = item[cut + 1 :]
    return check_env(env, "run option env", "env")


class DockerRunOpts(runopts):
    """The run options of ``local_docker``: ``env`` is read as TorchX reads it."""

    def cfg_from_str(self, cfg_str: str) -> dict[str, CfgVal]:
        """Parse ``-cfg`` text; ``env`` as :func:`parse_env_text`, the rest as runopts."""
        pairs: dict[str, str] = {}
        in_env = False
        for key, raw in cfg_pairs(cfg_str).items():
            if in_env and self.get(key) is None:
                pairs["env"] += f",{key}={raw}"
                continue
            in_env = key == "env"
            pairs[key] = raw
        cfg: dict[str, CfgVal] = {}
        for key, raw in pairs.items():
            if key == "env":
                cfg[key] = parse_env_text(raw)
            else:
                cfg.update(super().cfg_from_str(f"{key}={raw}"))
        return cfg

    def resolve(
        self, cfg: Mapping[str, CfgVal], *, ignore_unknown: bool = False
    ) -> dict[str, CfgVal]:
        """Resolve as :meth:`runopts.resolve`, with ``env`` also as a ``KEY=VALUE`` list."""
        given = dict(cfg)
        env = given.get("env")
        if isinstance(env, list) and all(isinstance(item, str) for item in env):
            given["env"] = parse_env_items(env)
        resolved = super().resolve(given, ignore_unknown=ignore_unknown)
        if isinstance(resolved.get("env"), dict):
            check_env(resolved["env"], "run option env", "env")  # type: ignore[arg-type]
        return resolved


@dataclass
class Opts(StructuredOpts):
    """``local_docker``'s run options: torchx-nightly's ``docker_scheduler.Opts`` and ours."""

    copy_env: list[str] | None = None
    """glob patterns of environment variables to copy if not set in AppDef. Ex: FOO_*"""

    env: dict[str, str] | None = None
    """environment variables for every replica, applied over copy_env's (the role's env
    wins). Ex: FOO:1,BAR:2 or FOO:1;BAR:2"""

    privileged: bool = False
    """run the containers privileged"""

    image_repo: str | None = None
    """(workspaces) repository to tag built workspace images with, as <image_repo>:<id>.
    Ex: example.com/your/container"""

    quiet: bool = False
    """(workspaces) do not log the image build's output (logged at INFO by default)"""

    network: str = NETWORK
    """user-defined bridge network the replicas join (created when missing)"""

    init: bool = True
    """run docker-init as PID 1 so the entrypoint receives stop signals"""

    cancel_on_close: bool = False
    """cancel the app when the scheduler (the runner) that started it closes: on leaving
    `async with get_runner()`, close(), SIGTERM/SIGHUP; default: the app is detached and
    outlives the process, as in TorchX"""


def run_opts() -> runopts:
    """The run options of ``local_docker``."""
    opts = DockerRunOpts()
    opts.update(Opts.as_runopts())
    return opts


def parse_env_items(items: Iterable[str]) -> dict[str, str]:
    """Parse the ``env`` run option's earlier form, a list of ``KEY=VALUE`` items."""
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidRunConfigException(
                f"run option env item {item!r} is not KEY=VALUE: write e.g."
                " env={'FOO': '1'} (or `-cfg env=FOO:1,BAR:2`)",
                "env",
            )
        env[key] = value
    return env
