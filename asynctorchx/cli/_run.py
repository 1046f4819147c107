"""The ``run`` command: build the component's app, submit it, follow it, cancel on signals."""

from __future__ import annotations

import argparse
import inspect
import itertools
import os
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
import attrs

from asynctorchx import schedulers
from asynctorchx.cli._output import (
    UsageError,
    note,
    print_json_line,
    print_line,
    unstructure_with_nulls,
)
from asynctorchx.cli._run_settings import CLI_RUN_KEYS, RunSettings, from_flags, from_stdin
from asynctorchx.cli._status_line import status_line
from asynctorchx.errors import ComponentUsageError, ComponentValidationException
from asynctorchx.runner import _script_check, config
from asynctorchx.runner.api import Runner, get_runner
from asynctorchx.schedulers.api import Capabilities
from asynctorchx.schedulers.toolkit import background_tasks
from asynctorchx.specs.api import AppDef, AppDryRunInfo, AppState, CfgVal
from asynctorchx.specs.metadata_keys import TORCHX_CONTEXT_NAME

#: seconds `run` waits for an interrupted app to end before closing the runner
_CANCEL_BOUND_S = 60.0

#: Signals that make `run` cancel its app; replicas run in their own sessions, so a
#: hangup never reaches them by itself.
_CANCEL_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@attrs.define
class _Interrupt:
    """The scope the first signal cancels, and that signal."""

    scope: anyio.CancelScope = attrs.field(factory=anyio.CancelScope)
    signum: signal.Signals | None = None


async def _listen(signals: AsyncIterator[signal.Signals], interrupt: _Interrupt) -> None:
    """Cancel the scope at the first signal; at the next ones say the app is being cancelled."""
    async for signum in signals:
        if interrupt.signum is None:
            interrupt.signum = signum
            interrupt.scope.cancel()
        else:
            note(
                "asynctorchx: still cancelling the app; replicas that ignore SIGTERM get"
                " SIGKILL after `stop_timeout` seconds"
            )


@asynccontextmanager
async def _interruptible() -> AsyncIterator[_Interrupt]:
    """Yield the interrupt the first signal sets; kept to the end, so a second Ctrl-C
    during the cleanup cannot abandon it."""
    interrupt = _Interrupt()
    # a signal ignored is not listened to: `nohup` asks for the app to survive SIGHUP
    listened = [signum for signum in _CANCEL_SIGNALS if signal.getsignal(signum) != signal.SIG_IGN]
    with anyio.open_signal_receiver(*listened) as signals:
        async with background_tasks() as task_group:
            task_group.start_soon(_listen, signals, interrupt)
            yield interrupt


def _repeated_options(fn: Callable[..., object], component_args: list[str]) -> list[str]:
    """The function's own options given more than once before ``--`` (TorchX refuses them)."""
    names = inspect.signature(fn).parameters
    flags = {f"--{name}" for name in names} | {f"-{name}" for name in names if len(name) == 1}
    before_dashes = itertools.takewhile(lambda arg: arg != "--", component_args)
    counts = Counter(flag for arg in before_dashes if (flag := arg.split("=", 1)[0]) in flags)
    return sorted(flag for flag, count in counts.items() if count > 1)


def _materialize(
    fn: Callable[..., AppDef],
    component_args: list[str],
    defaults: Mapping[str, str] | None,
    values: Mapping[str, Any],
) -> AppDef:
    """Build the component's app; on failure, parse again to tell a usage error (exit 2)
    from a bad component or config (exit 1)."""
    from asynctorchx.specs.builders import create_args_parser, materialize_appdef, parse_args

    repeated = _repeated_options(fn, component_args)
    if repeated:
        raise UsageError(
            f"{', '.join(repeated)} given more than once: give each component argument once"
        )
    try:
        return materialize_appdef(fn, component_args, defaults, values)
    except ComponentValidationException as exc:
        create_args_parser(fn, defaults)  # a bad component or config: exit 1
        try:
            parse_args(fn, component_args, defaults, values)
        except ComponentUsageError as usage:  # a missing or unknown argument
            raise UsageError(f"{usage} (`--help` lists the arguments)") from usage
        except ComponentValidationException as usage:  # a bad argument
            raise UsageError(str(usage)) from usage
        raise exc  # the function ran and failed (or returned no AppDef): exit 1


def _print_dryrun(info: AppDryRunInfo[object], as_json: bool) -> None:
    from asynctorchx.specs.converter import to_json

    if as_json:
        request = {"scheduler": info.scheduler, "app": unstructure_with_nulls(info.app)}
        print_json_line({**request, "request": str(info)})
        return
    print("=== APPLICATION ===")
    print(to_json(info.app, indent=2))
    print("=== SCHEDULER REQUEST ===")
    print(info)


async def _follow(runner: Runner, handle: str, tail: bool, as_json: bool) -> int:
    """Wait for the app, its logs on stderr when ``tail`` (as ``torchx.cli.cmd_run``, so
    that stdout holds the handle alone); 0 if it succeeded, else 1."""
    note(f"asynctorchx: waiting for {handle} (Ctrl-C cancels it)")
    async with status_line(runner, handle) as line_of_status:
        if tail:
            async with runner.log_stream(handle, should_tail=True) as lines:
                async for line in lines:
                    line_of_status.hide()
                    print_line(line, sys.stderr)
        status = await runner.wait(handle)
    state = status.state if status is not None else AppState.UNKNOWN
    note(f"asynctorchx: {handle} finished: {state.name}")
    if as_json:
        print_json_line(
            {"app_handle": handle, "status": status.to_json() if status is not None else None}
        )
    if status is not None and status.state != AppState.SUCCEEDED:
        note(status.format())
    return 0 if state == AppState.SUCCEEDED else 1


def _workspace(run: RunSettings, caps: Capabilities) -> str | None:
    """``--workspace`` (``""``: none), else the current directory where workspaces build
    (``torchx.cli.cmd_run``)."""
    if run.workspace is not None:
        return run.workspace or None
    return os.getcwd() if caps.workspace is not None else None


class _BuildNotes:
    """Says on stderr when the workspace builds of ``app`` start (entered around the dry run)
    and, from the dry run's copy of the app, what they gave (:meth:`finish`)."""

    def __init__(
        self, app: AppDef, workspace: str | None, caps: Capabilities, cfg: Mapping[str, CfgVal]
    ) -> None:
        self._built = [
            index
            for index, role in enumerate(app.roles)
            if role.workspace is not None or (index == 0 and workspace)
        ]
        self._copied = caps.workspace == "directory"
        self._shown = bool(self._built) and caps.workspace is not None
        self._shown &= not (self._copied and not cfg.get("job_dir"))
        names = ", ".join(app.roles[index].name for index in self._built)
        where = f" {workspace}" if workspace else ""
        self._start = (
            f"asynctorchx: copying workspace{where} into job_dir {cfg.get('job_dir')}..."
            if self._copied
            else f"asynctorchx: building workspace{where} into the image of role {names}..."
        )
        self._started = 0.0

    async def __aenter__(self) -> None:
        if self._shown:
            note(self._start)
        self._started = anyio.current_time()

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    def finish(self, app: AppDef) -> None:
        if not self._shown:
            return
        images = ", ".join(f"{app.roles[i].name}: {app.roles[i].image}" for i in self._built)
        done = "copied" if self._copied else "built"
        seconds = anyio.current_time() - self._started
        note(f"asynctorchx: {done} workspace in {seconds:.1f}s ({images})")


async def run(args: argparse.Namespace) -> int:
    # as TorchX's `torchx run`: replicas that inherit this environment see it
    os.environ.setdefault(TORCHX_CONTEXT_NAME, "cli_run")
    sections = config.load_sections()
    known = list(schedulers.get_scheduler_factories())
    config.warn_unknown(sections, known, {"cli:run": CLI_RUN_KEYS})
    defaults = config.get_configs("cli", "run", sections=sections)
    run = from_stdin(args, sys.stdin, defaults) if args.stdin else from_flags(args, defaults)

    # before any scheduler starts: argparse's exit must not happen in the runner's task group
    from asynctorchx.specs.finder import get_component

    fn = get_component(run.component).fn
    component_defaults = config.get_component_defaults(sections=sections).get(run.component)
    app = _materialize(fn, run.component_args, component_defaults, run.component_config)
    script = _script_check.script_to_check(
        fn, run.component_args, component_defaults, run.component_config
    )

    async with (
        _interruptible() as interrupt,
        get_runner(config_sections=sections, handle_signals=False) as runner,
    ):
        handle: str | None = None
        with interrupt.scope:
            opts = runner.scheduler_run_opts(run.scheduler)
            cfg: dict[str, CfgVal] = opts.cfg_from_str(run.scheduler_args)
            if run.scheduler_args_json is not None:
                cfg.update(opts.cfg_from_json_repr(run.scheduler_args_json))
            config.apply(run.scheduler, cfg, opts, sections=sections)
            caps = runner.scheduler_capabilities(run.scheduler)
            workspace = _workspace(run, caps)
            notes = _BuildNotes(app, workspace, caps, cfg)
            info = await runner._dryrun_checked(
                run.component,
                script,
                app,
                run.scheduler,
                cfg,
                workspace,
                run.parent_run_id,
                notes,
            )
            notes.finish(info.app or app)
            if run.dryrun:
                _print_dryrun(info, args.json)
                return 0
            handle = await runner.schedule(info)
            if args.json:
                print_json_line({"app_handle": handle})
            else:
                print(handle, flush=True)
            # an app that ends with this process is followed by default
            tie = caps.ends_with_runner_opt
            in_process = caps.apps_live_in_process or (tie is not None and cfg.get(tie) is True)
            tail = in_process or run.log or run.tee_logs
            if not (tail or run.wait):
                return 0
            return await _follow(runner, handle, tail, args.json)

        note("asynctorchx: interrupted, cancelling the app")
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_BOUND_S):
            if handle is not None:
                await runner.cancel(handle)
                status = await runner.wait(handle)
                if status is not None:
                    note(f"asynctorchx: {handle} {status.state.name}")
        return 128 + (interrupt.signum or signal.SIGINT)  # a shell's code for that signal


__all__ = ["run"]
