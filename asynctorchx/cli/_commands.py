"""The code of each CLI command but ``run`` (imported only when a command runs)."""

from __future__ import annotations

import argparse
import fnmatch
import json
import logging
import re
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import anyio

from asynctorchx import schedulers
from asynctorchx.cli._output import UsageError, note, print_line, to_json_with_nulls
from asynctorchx.cli._run import run as _run
from asynctorchx.errors import (
    ComponentNotFoundException,
    InvalidRunConfigException,
    MalformedAppHandleException,
    UnknownAppException,
    UnknownSchedulerException,
)
from asynctorchx.runner import config
from asynctorchx.runner.api import Runner, get_runner
from asynctorchx.schedulers import get_default_scheduler_name
from asynctorchx.specs.api import AppStatus, runopts


def dispatch(args: argparse.Namespace) -> int:
    """Run the command named by ``args.command`` and return its exit code."""
    sync_commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "runopts": _runopts,
        "builtins": _builtins,
        "configure": _configure,
        "tracker": _tracker,
        "journal": _journal,
    }
    async_commands: dict[str, Callable[[argparse.Namespace], Awaitable[int]]] = {
        "run": _run,
        "status": _status,
        "describe": _status,
        "log": _log,
        "cancel": _cancel,
        "delete": _delete,
        "list": _list,
    }
    try:
        if args.command in sync_commands:
            return sync_commands[args.command](args)
        return anyio.run(async_commands[args.command], args)
    except _USAGE_ERRORS as exc:
        logging.getLogger("asynctorchx.cli").debug("usage error", exc_info=True)
        print(f"asynctorchx {args.command}: error: {exc}", file=sys.stderr)
        return 2


#: what the command line itself got wrong: exit 2, as argparse's own errors
_USAGE_ERRORS = (
    UsageError,
    ComponentNotFoundException,
    UnknownSchedulerException,
    InvalidRunConfigException,
    MalformedAppHandleException,
)


def _not_found(command: str, app_handle: str, runner: Runner) -> int:
    """Print that ``app_handle`` is unknown (and where to look) on one line; return 1."""
    scheduler = app_handle.split("://", 1)[0]
    if runner.scheduler_capabilities(scheduler).apps_live_in_process:
        hint = (
            f"not among this user's running or recorded {scheduler} apps; an app ends"
            " with the `asynctorchx run` that started it, and its record is kept 7 days"
        )
    else:
        hint = f"`asynctorchx list -s {scheduler}` lists the apps it knows"
    print(f"asynctorchx {command}: error: app {app_handle!r} not found ({hint})", file=sys.stderr)
    return 1


async def _status(args: argparse.Namespace) -> int:
    """``status`` and ``describe``: print the app's status, or the app itself."""
    async with get_runner(handle_signals=False) as runner:
        describe = args.command == "describe"
        found = await (runner.describe if describe else runner.status)(args.app_handle)
    if found is None:
        return _not_found(args.command, args.app_handle, runner)
    if isinstance(found, AppStatus):
        roles = [r for r in args.roles.split(",") if r] or None
        text = json.dumps(found.to_json(roles), indent=2) if args.json else found.format(roles)
        if not args.json:  # below TorchX's layout, which has none of these
            text = text.rstrip() + "".join(f"\n    {line}" for line in _why_and_when(found))
        print(text)
    else:
        print(to_json_with_nulls(found))
    return 0


def _why_and_when(status: AppStatus) -> list[str]:
    """``Cause:``, ``Pending reason:`` and the times (this host's zone) that ``status`` has."""
    times = {"Submitted": status.submitted, "Started": status.started, "Ended": status.ended}
    lines = [f"Cause: {status.cause}"] if status.cause is not None else []
    if status.pending_reason is not None:
        lines.append(f"Pending reason: {status.pending_reason}")
    return lines + [
        f"{label}: {at.astimezone().isoformat(timespec='seconds')}"
        for label, at in times.items()
        if at is not None
    ]


_LOG_ID = re.compile(r"^(?P<sched>[^:/\s]+)://(?P<session>[^/]*)/(?P<app>[^/]+)(?P<rest>/.*)?$")


async def _log(args: argparse.Namespace) -> int:
    match = _LOG_ID.match(args.identifier)
    if match is None:
        raise UsageError(
            f"{args.identifier!r} is not a log identifier: use"
            " SCHED://[SESSION]/APP[/ROLE[/REPLICA_IDS]], e.g. local_docker://torchx/echo-x1/echo/0"
        )
    parts = [p for p in (match["rest"] or "").split("/") if p]
    from asynctorchx.schedulers.api import Stream

    streams = Stream(args.streams) if args.streams else None
    async with get_runner(handle_signals=False) as runner:
        handle = f"{match['sched']}://{match['session'] or runner.name()}/{match['app']}"
        replicas: dict[str, list[int]] | None = None
        if parts:
            role = parts[0]
            if len(parts) > 1:
                try:
                    ids = [int(i) for i in parts[1].split(",") if i]
                except ValueError:
                    raise UsageError(
                        f"bad replica ids {parts[1]!r}: give comma-separated integers, e.g. 0,1"
                    ) from None
            else:
                app = await runner.describe(handle)
                if app is None:
                    raise UnknownAppException(handle)
                known = {r.name: r.num_replicas for r in app.roles}
                if role not in known:
                    raise UsageError(
                        f"no role {role!r} in {handle}: choose one of"
                        f" {', '.join(sorted(known)) or '(none known)'}"
                    )
                ids = list(range(known[role]))
            replicas = {role: ids}
        async with runner.log_stream(
            handle, replicas, regex=args.regex, should_tail=args.tail, streams=streams
        ) as lines:
            async for line in lines:
                print_line(line)
    return 0


async def _cancel(args: argparse.Namespace) -> int:
    """Cancel the app, saying so at once (it may take the grace period), then print its end."""
    async with get_runner(handle_signals=False) as runner:
        # Runner.cancel is a no-op for an unknown app (TorchX); the command says so
        if await runner.status(args.app_handle) is None:
            return _not_found("cancel", args.app_handle, runner)
        note(f"asynctorchx: cancel requested for {args.app_handle}")
        await runner.cancel(args.app_handle)
        if args.no_wait:
            return 0
        status = await runner.wait(args.app_handle)
    state = status.state.name if status is not None else "UNKNOWN"
    note(f"asynctorchx: {args.app_handle} ended: {state}")
    return 0


async def _delete(args: argparse.Namespace) -> int:
    async with get_runner(handle_signals=False) as runner:
        known = await runner.status(args.app_handle) is not None
        await runner.delete(args.app_handle)  # also what an unknown app left
    if not known:
        return _not_found("delete", args.app_handle, runner)
    print(f"asynctorchx: deleted {args.app_handle}", file=sys.stderr)
    return 0


async def _list(args: argparse.Namespace) -> int:
    # flags win over the [cli:list] section (`scheduler`, `scheduler_args`), as for run
    sections = config.load_sections()
    known = list(schedulers.get_scheduler_factories())
    config.warn_unknown(sections, known, {"cli:list": ("scheduler", "scheduler_args")})
    defaults = config.get_configs("cli", "list", sections=sections)
    scheduler = args.scheduler or defaults.get("scheduler") or get_default_scheduler_name()
    scheduler_args = (
        args.scheduler_args if args.scheduler_args is not None else defaults.get("scheduler_args")
    )
    async with get_runner(config_sections=sections, handle_signals=False) as runner:
        cfg = runner.cfg_from_str(scheduler, scheduler_args) if scheduler_args else None
        apps = await runner.list(scheduler, cfg)
    if args.state:
        wanted = set().union(*args.state)
        apps = [app for app in apps if app.state.name in wanted]
    if args.name is not None:
        glob = args.name if any(c in args.name for c in "*?[") else f"*{args.name}*"
        apps = [app for app in apps if fnmatch.fnmatchcase(app.name, glob)]
    if args.since is not None:
        oldest = datetime.now(UTC) - args.since
        apps = [app for app in apps if app.submitted is not None and app.submitted >= oldest]
    hidden = 0 if args.all else max(0, len(apps) - max(0, args.limit))
    apps = apps[: len(apps) - hidden]
    if hidden:
        print(f"asynctorchx: {hidden} more; --all lists every app", file=sys.stderr)
    if args.json:
        print(to_json_with_nulls(apps))
        return 0
    from tabulate import tabulate

    def local(when: datetime | None) -> str:
        return "-" if when is None else f"{when.astimezone():%Y-%m-%d %H:%M:%S}"

    rows = [
        [app.app_handle, app.name, app.state.name, local(app.submitted), local(app.ended)]
        for app in apps
    ]
    headers = ["APP HANDLE", "APP NAME", "APP STATUS", "SUBMITTED", "ENDED"]
    # every column is text: no cell is parsed as a number (benchmark 4's cli_list_s row)
    print(tabulate(rows, headers=headers, disable_numparse=True))
    return 0


async def _scheduler_run_opts(names: list[str] | None) -> dict[str, runopts]:
    """The run options of ``names`` (default: every scheduler); the runner closes any it made."""
    async with Runner("torchx", schedulers.get_scheduler_factories()) as runner:
        return {
            name: runner.scheduler_run_opts(name) for name in names or runner.scheduler_backends()
        }


def _runopts(args: argparse.Namespace) -> int:
    names = [args.scheduler] if args.scheduler else None
    for name, opts in anyio.run(_scheduler_run_opts, names).items():
        print(f"{name}:")
        print(opts)
    return 0


def _builtins(args: argparse.Namespace) -> int:
    from asynctorchx.specs.finder import get_component, get_components

    if args.print_name:
        import inspect

        component = get_component(args.print_name)
        print(inspect.getsource(component.fn))
        return 0
    components = get_components()
    print(f"Found {len(components)} builtin components:")
    for i, name in enumerate(sorted(components), start=1):
        print(f" {i:2d}. {name}")
    return 0


def _journal(args: argparse.Namespace) -> int:
    from asynctorchx.errors import JournalCorruptError
    from asynctorchx.runner._journal import read

    try:
        trials = read(args.path)
    except (OSError, JournalCorruptError) as exc:
        print(f"asynctorchx journal: {exc}", file=sys.stderr)
        return 1
    rows = []
    for key, history in trials.items():
        last = history.last_status
        ended = None if last is None else datetime.fromtimestamp(last.ended, UTC)
        rows.append(
            {
                "key": key,
                "attempts": len(history.attempts),
                "state": None if last is None else last.state,
                "handle": history.attempts[-1].handle if history.attempts else None,
                "ended": None if ended is None else ended.isoformat(timespec="seconds"),
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from tabulate import tabulate

    cells = [["-" if value is None else str(value) for value in row.values()] for row in rows]
    headers = ["KEY", "ATTEMPTS", "STATE", "APP HANDLE", "ENDED"]
    print(tabulate(cells, headers=headers, disable_numparse=True))
    return 0


def _tracker(args: argparse.Namespace) -> int:
    from asynctorchx.cli._tracker import tracker

    return tracker(args)


def _configure(args: argparse.Namespace) -> int:
    opts = anyio.run(_scheduler_run_opts, args.schedulers.split(",") if args.schedulers else None)
    if args.print_config:
        config.dump(sys.stdout, opts, required_only=not args.all)
        return 0
    target = Path(config.CONFIG_FILE)
    if target.exists():
        print(
            f"asynctorchx configure: error: {target.resolve()} exists; edit it, or move it"
            " away to write a new one",
            file=sys.stderr,
        )
        return 1
    with open(target, "w", encoding="utf-8") as f:
        config.dump(f, opts, required_only=not args.all)
    print(f"wrote {target.resolve()}")
    return 0


__all__ = ["UsageError", "dispatch"]
