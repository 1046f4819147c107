"""The code of each CLI command (imported only when a command runs; see :mod:`.main`)."""

from __future__ import annotations

import argparse
import re
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import anyio
import attrs

from asynctorchx.errors import ComponentValidationException, UnknownAppException
from asynctorchx.runner import config
from asynctorchx.runner.api import LogLine, Runner, get_runner
from asynctorchx.schedulers import SchedulerFactory, get_default_scheduler_name
from asynctorchx.specs.api import AppDef, AppDryRunInfo, AppState, CfgVal, runopts

#: seconds `run` waits for an interrupted app to end before closing the runner
_CANCEL_BOUND_S = 60.0


class UsageError(Exception):
    """A command line that parses but makes no sense; exits 2 like argparse errors."""


def dispatch(args: argparse.Namespace) -> int:
    """Run the command named by ``args.command`` and return its exit code.

    Raises:
        Exception: whatever the command raised; :func:`asynctorchx.cli.main.run_cli`
            prints it as one line and exits 1.
    """
    sync_commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "runopts": _runopts,
        "builtins": _builtins,
        "configure": _configure,
    }
    async_commands: dict[str, Callable[[argparse.Namespace], Awaitable[int]]] = {
        "run": _run,
        "status": _status,
        "describe": _describe,
        "log": _log,
        "cancel": _cancel,
        "delete": _delete,
        "list": _list,
    }
    try:
        if args.command in sync_commands:
            return sync_commands[args.command](args)
        command = async_commands[args.command]

        async def entry() -> int:
            return await command(args)

        return anyio.run(entry)
    except UsageError as exc:
        print(f"asynctorchx {args.command}: error: {exc}", file=sys.stderr)
        return 2


def to_json(obj: object, **dumps_kwargs: object) -> str:
    """Encode ``obj`` with the project's cattrs converter (imported only when needed)."""
    from asynctorchx.specs.converter import to_json as encode

    return encode(obj, **dumps_kwargs)


def _print_line(line: LogLine) -> None:
    text = line.line if line.line.endswith("\n") else line.line + "\n"
    sys.stdout.write(f"{line.role}/{line.replica_id} {text}")
    sys.stdout.flush()


# --------------------------------------------------------------------------- run


#: Signals that make `run` cancel its app: Ctrl-C, `kill`, and the terminal closing
#: (replicas run in their own sessions, so a hangup never reaches them by itself).
_CANCEL_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _cancel_signals() -> list[signal.Signals]:
    """Return the :data:`_CANCEL_SIGNALS` this process does not ignore.

    A signal ignored at startup stays ignored, as Python does for SIGINT: ``nohup``
    (SIGHUP) and a shell's background job (SIGINT) ask for the app to survive them.
    """
    return [signum for signum in _CANCEL_SIGNALS if signal.getsignal(signum) != signal.SIG_IGN]


def _note(text: str) -> None:
    """Print a status line on stderr; a closed terminal (after SIGHUP) must not stop us."""
    with suppress(OSError):
        print(text, file=sys.stderr, flush=True)


class _Interrupt:
    """What the signal listener of ``run`` shares with the command.

    The first SIGINT, SIGTERM or SIGHUP cancels :attr:`scope` (the submit, stream and wait of
    the app); later ones only say that the app is still being cancelled.
    """

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.received = False


async def _listen(signals: AsyncIterator[signal.Signals], interrupt: _Interrupt) -> None:
    async for _ in signals:
        if not interrupt.received:
            interrupt.received = True
            interrupt.scope.cancel()
        else:
            _note(
                "asynctorchx: still cancelling the app; replicas that ignore SIGTERM get"
                " SIGKILL after `stop_timeout` seconds"
            )


@asynccontextmanager
async def _interruptible() -> AsyncIterator[_Interrupt]:
    """Handle SIGINT, SIGTERM and SIGHUP for the whole block, cleanup included.

    One signal receiver stays installed until the block (and so the runner inside it)
    is left: a second Ctrl-C while the app is being cancelled is absorbed instead of
    raising ``KeyboardInterrupt`` into the event loop, which would abandon the cleanup
    and leave replicas running.
    """
    interrupt = _Interrupt()
    body_error: BaseException | None = None
    with anyio.open_signal_receiver(*_cancel_signals()) as signals:
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(_listen, signals, interrupt)
            try:
                yield interrupt
            except BaseException as exc:
                # re-raised outside the task group: the caller sees it as itself
                body_error = exc
            finally:
                task_group.cancel_scope.cancel()
    if body_error is not None:
        raise body_error


def _materialize(
    component: str, component_args: list[str], defaults: Mapping[str, str] | None
) -> AppDef:
    """Build the component's app: its function runs once, its parser is built once.

    Only when that fails are the parser and the arguments checked again, to tell a
    usage error (exit 2) from a bad component or config (exit 1).

    Raises:
        UsageError: an argument is missing, unknown or does not parse.
        ComponentNotFoundException: no such component.
        ComponentValidationException: the component, or a ``[component:<name>]``
            default, is not valid; or the function did not return an ``AppDef``.
        SystemExit: ``--help`` was given (argparse prints the help and exits 0).
    """
    from asynctorchx.specs.builders import create_args_parser, materialize_appdef, parse_args
    from asynctorchx.specs.finder import get_component

    fn = get_component(component).fn
    try:
        return materialize_appdef(fn, component_args, defaults)
    except ComponentValidationException as exc:
        create_args_parser(fn, defaults)  # a bad component or config: exit 1
        try:
            parse_args(fn, component_args, defaults)
        except ComponentValidationException as usage:  # a missing, unknown or bad argument
            raise UsageError(str(usage)) from usage
        raise exc  # the function ran and failed (or returned no AppDef): exit 1


@attrs.frozen
class _RunSettings:
    """What ``run`` runs: its flags, else the ``[cli:run]`` defaults of the config."""

    scheduler: str
    component: str
    component_args: list[str]
    workspace: str | None
    scheduler_args: str
    parent_run_id: str | None


def _run_settings(args: argparse.Namespace, defaults: Mapping[str, str]) -> _RunSettings:
    """Combine ``run``'s flags with the ``[cli:run]`` section ``defaults`` (flags win).

    Raises:
        UsageError: no component is named by either.
    """
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

    return _RunSettings(
        scheduler=args.scheduler or defaults.get("scheduler") or get_default_scheduler_name(),
        component=component,
        component_args=component_args,
        workspace=flag_or_default(args.workspace, "workspace"),
        scheduler_args=flag_or_default(args.scheduler_args, "scheduler_args") or "",
        parent_run_id=flag_or_default(args.parent_run_id, "parent_run_id"),
    )


def _print_dryrun(info: AppDryRunInfo[object]) -> None:
    print("=== APPLICATION ===")
    print(to_json(info.app, indent=2))
    print("=== SCHEDULER REQUEST ===")
    print(info)


async def _follow(runner: Runner, handle: str, tail: bool) -> int:
    """Wait for the app (printing its logs when ``tail``); return 0 if it succeeded, else 1."""
    print(f"asynctorchx: waiting for {handle} (Ctrl-C cancels it)", file=sys.stderr)
    if tail:
        async with runner.log_stream(handle, should_tail=True) as lines:
            async for line in lines:
                _print_line(line)
    status = await runner.wait(handle)
    state = status.state if status is not None else AppState.UNKNOWN
    print(f"asynctorchx: {handle} finished: {state.name}", file=sys.stderr)
    if status is not None and status.state != AppState.SUCCEEDED:
        print(status.format(), file=sys.stderr)
    return 0 if state == AppState.SUCCEEDED else 1


async def _run(args: argparse.Namespace) -> int:
    sections = config.load_sections()  # the one read of the .torchxconfig files
    run = _run_settings(args, config.get_configs("cli", "run", sections=sections))

    # Build the app before any scheduler starts: `--help` and bad component arguments
    # end here (argparse's exit) rather than inside the runner's task group.
    component_defaults = config.get_component_defaults(sections=sections).get(run.component)
    app = _materialize(run.component, run.component_args, component_defaults)

    # The signal receiver is installed before anything is submitted and removed only
    # after the runner has closed its schedulers (which terminates local replicas).
    async with (
        _interruptible() as interrupt,
        get_runner(config_sections=sections, handle_signals=False) as runner,
    ):
        handle: str | None = None
        with interrupt.scope:
            opts = runner.scheduler_run_opts(run.scheduler)
            cfg: dict[str, CfgVal] = opts.cfg_from_str(run.scheduler_args)
            config.apply(run.scheduler, cfg, opts, sections=sections)
            submit = (app, run.scheduler, cfg, run.workspace, run.parent_run_id)
            if args.dryrun:
                _print_dryrun(await runner.dryrun(*submit))
                return 0
            handle = await runner.run(*submit)
            print(handle, flush=True)
            # apps that end with this process (local ones, local_docker's cancel_on_close):
            # stay, follow their logs and wait by default
            in_process = runner.scheduler_class(run.scheduler).apps_live_in_process
            in_process = in_process or cfg.get("cancel_on_close") is True
            if not (in_process or args.wait or args.log):
                return 0
            return await _follow(runner, handle, tail=in_process or args.log)

        # Only reached when a signal cancelled the scope above.
        _note("asynctorchx: interrupted, cancelling the app")
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_BOUND_S):
            if handle is not None:
                await runner.cancel(handle)
                status = await runner.wait(handle)
                if status is not None:
                    _note(f"asynctorchx: {handle} {status.state.name}")
        # leaving the runner closes its schedulers: what still runs is terminated
        return 1


# --------------------------------------------------------------------------- inspect


def _not_found(command: str, app_handle: str, runner: Runner) -> int:
    """Print that ``app_handle`` is unknown (and where to look) on one line; return 1.

    ``runner`` knows the handle's scheduler (it just answered for it).
    """
    scheduler = app_handle.split("://", 1)[0]
    if runner.scheduler_class(scheduler).apps_live_in_process:
        hint = f"{scheduler} apps live only in the `asynctorchx run` that started them"
    else:
        hint = f"`asynctorchx list -s {scheduler}` lists the apps it knows"
    print(f"asynctorchx {command}: error: app {app_handle!r} not found ({hint})", file=sys.stderr)
    return 1


async def _status(args: argparse.Namespace) -> int:
    async with get_runner(handle_signals=False) as runner:
        status = await runner.status(args.app_handle)
    if status is None:
        return _not_found("status", args.app_handle, runner)
    if args.json:
        print(to_json(status, indent=2))
    else:
        roles = [r for r in args.roles.split(",") if r] or None
        print(status.format(roles))
    return 0


async def _describe(args: argparse.Namespace) -> int:
    async with get_runner(handle_signals=False) as runner:
        app = await runner.describe(args.app_handle)
    if app is None:
        return _not_found("describe", args.app_handle, runner)
    print(to_json(app, indent=2))
    return 0


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
                _print_line(line)
    return 0


async def _cancel(args: argparse.Namespace) -> int:
    async with get_runner(handle_signals=False) as runner:
        # Runner.cancel is a no-op for an unknown app (TorchX); the command says so
        if await runner.status(args.app_handle) is None:
            return _not_found("cancel", args.app_handle, runner)
        await runner.cancel(args.app_handle)
    print(f"asynctorchx: cancel requested for {args.app_handle}", file=sys.stderr)
    return 0


async def _delete(args: argparse.Namespace) -> int:
    async with get_runner(handle_signals=False) as runner:
        known = await runner.status(args.app_handle) is not None
        await runner.delete(args.app_handle)  # also what an unknown app left (idempotent)
    if not known:
        return _not_found("delete", args.app_handle, runner)
    print(f"asynctorchx: deleted {args.app_handle}", file=sys.stderr)
    return 0


async def _list(args: argparse.Namespace) -> int:
    scheduler = args.scheduler or get_default_scheduler_name()
    async with get_runner(handle_signals=False) as runner:
        apps = await runner.list(scheduler)
    if args.json:
        print(to_json(apps, indent=2))
        return 0
    from tabulate import tabulate

    rows = [[app.app_handle, app.state.name] for app in apps]
    print(tabulate(rows, headers=["APP HANDLE", "APP STATUS"]))
    return 0


# --------------------------------------------------------------------------- sync commands


def _scheduler_run_opts(names: list[str] | None) -> dict[str, runopts]:
    """Return the run options of ``names`` (default: every scheduler), in that order.

    The runner is entered so that a scheduler made only to read its options (a factory
    that does not name its class) is closed; the built-ins create none.

    Raises:
        UnknownSchedulerException: a name is not registered (before anything is printed).
    """

    async def read() -> dict[str, runopts]:
        async with Runner("torchx", _factories()) as runner:
            return {
                name: runner.scheduler_run_opts(name)
                for name in names or runner.scheduler_backends()
            }

    return anyio.run(read)


def _runopts(args: argparse.Namespace) -> int:
    for name, opts in _scheduler_run_opts([args.scheduler] if args.scheduler else None).items():
        print(f"{name}:")
        print(opts)
    return 0


def _factories() -> dict[str, SchedulerFactory]:
    from asynctorchx.schedulers import get_scheduler_factories

    return dict(get_scheduler_factories())


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


def _configure(args: argparse.Namespace) -> int:
    target = Path(config.CONFIG_FILE)
    if target.exists():
        print(
            f"asynctorchx configure: error: {target.resolve()} exists; edit it, or move it"
            " away to write a new one",
            file=sys.stderr,
        )
        return 1
    opts = _scheduler_run_opts(args.schedulers.split(",") if args.schedulers else None)
    with open(target, "w", encoding="utf-8") as f:
        config.dump(f, opts, required_only=not args.all)
    print(f"wrote {target.resolve()}")
    return 0


__all__ = ["UsageError", "dispatch"]
