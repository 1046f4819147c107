"""What ``run`` runs: from its flags (and ``[cli:run]``), or from a JSON object on stdin.

``run --stdin`` takes the fields of TorchX's ``torchx.cli.cmd_run.TorchXRunArgs``;
``scheduler`` and ``scheduler_args`` default as on the command line.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import IO, Any

import attrs

from asynctorchx.cli._output import UsageError
from asynctorchx.schedulers import get_default_scheduler_name

#: The keys of the ``[cli:run]`` section that ``run`` reads (defaults of its flags).
CLI_RUN_KEYS = ("component", "scheduler", "scheduler_args", "workspace", "parent_run_id")


@attrs.frozen
class RunSettings:
    """What ``run`` runs; ``workspace`` ``None``: the default, ``""``: build nothing."""

    scheduler: str
    component: str
    component_args: list[str]
    workspace: str | None
    scheduler_args: str
    parent_run_id: str | None
    scheduler_args_json: str | None = None
    component_config: Mapping[str, Any] = attrs.field(factory=dict)
    dryrun: bool = False
    wait: bool = False
    log: bool = False
    tee_logs: bool = False


def from_flags(args: argparse.Namespace, defaults: Mapping[str, str]) -> RunSettings:
    """Combine ``run``'s flags with the ``[cli:run]`` section ``defaults`` (flags win)."""
    component = args.component or defaults.get("component")
    if not component:
        raise UsageError(
            "no component given: name one, e.g. `asynctorchx run utils.echo --msg hi`"
            " (`asynctorchx builtins` lists them)"
        )
    component_args = list(args.component_args)
    if component_args[:1] == ["--"]:
        component_args = component_args[1:]

    def flag_or_default(flag: str | None, key: str) -> str | None:
        return flag if flag is not None else defaults.get(key)

    return RunSettings(
        scheduler=args.scheduler or defaults.get("scheduler") or get_default_scheduler_name(),
        component=component,
        component_args=component_args,
        workspace=flag_or_default(args.workspace, "workspace"),
        scheduler_args=flag_or_default(args.scheduler_args, "scheduler_args") or "",
        parent_run_id=flag_or_default(args.parent_run_id, "parent_run_id"),
        dryrun=args.dryrun,
        wait=args.wait,
        log=args.log,
        tee_logs=args.tee_logs,
    )


_FIELDS: dict[str, tuple[type, ...]] = {
    "component_name": (str,),
    "scheduler": (str,),
    "scheduler_args": (dict,),
    "component_args": (dict,),
    "component_args_str": (list,),
    "dryrun": (bool,),
    "wait": (bool,),
    "log": (bool,),
    "tee_logs": (bool,),
    "workspace": (str, type(None)),
    "parent_run_id": (str, type(None)),
}

#: ``run`` flags allowed next to ``--stdin`` (they say how to print, not what to run).
_ALLOWED_WITH_STDIN = frozenset({"stdin", "json", "command", "log_level"})


def _check_no_flags(args: argparse.Namespace) -> None:
    """Refuse every ``run`` flag but ``--stdin`` and ``--json`` (TorchX's rule)."""
    given = [
        name
        for name, value in vars(args).items()
        if name not in _ALLOWED_WITH_STDIN and value not in (None, False, [])
    ]
    if given:
        raise UsageError(
            f"--stdin takes everything from the JSON on stdin; drop {', '.join(sorted(given))}"
            " from the command line (put them in the JSON)"
        )


def _read_object(stdin: IO[str]) -> dict[str, Any]:
    """Read one JSON object from ``stdin`` and check its fields' names and types."""
    try:
        data = json.load(stdin)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"--stdin: the input is not JSON ({exc}); send one object such as"
            ' {"component_name": "utils.echo", "component_args": {"msg": "hi"}}'
        ) from None
    if not isinstance(data, dict):
        raise UsageError(f"--stdin: expected a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise UsageError(
            f"--stdin: unknown field(s) {', '.join(unknown)}; the fields are {', '.join(_FIELDS)}"
        )
    for name, value in data.items():
        if not isinstance(value, _FIELDS[name]):
            kinds = " or ".join("null" if t is type(None) else t.__name__ for t in _FIELDS[name])
            raise UsageError(f"--stdin: field {name!r} must be {kinds}, got {value!r}")
    if not data.get("component_name"):
        raise UsageError('--stdin: the field "component_name" is required, e.g. "utils.echo"')
    args_str = data.get("component_args_str", [])
    if not all(isinstance(arg, str) for arg in args_str):
        raise UsageError("--stdin: 'component_args_str' must be a list of strings")
    return data


def from_stdin(
    args: argparse.Namespace, stdin: IO[str], defaults: Mapping[str, str]
) -> RunSettings:
    """Read what to run from the JSON object on ``stdin``."""
    _check_no_flags(args)
    data = _read_object(stdin)
    workspace = data.get("workspace", "")
    return RunSettings(
        scheduler=data.get("scheduler")
        or defaults.get("scheduler")
        or get_default_scheduler_name(),
        component=data["component_name"],
        component_args=list(data.get("component_args_str", [])),
        workspace=None if workspace == "" else (workspace or ""),
        scheduler_args="",
        parent_run_id=data.get("parent_run_id"),
        scheduler_args_json=json.dumps(data.get("scheduler_args", {})),
        component_config=data.get("component_args", {}),
        dryrun=data.get("dryrun", False),
        wait=data.get("wait", False),
        log=data.get("log", False),
        tee_logs=data.get("tee_logs", False),
    )


__all__ = ["CLI_RUN_KEYS", "RunSettings", "from_flags", "from_stdin"]
