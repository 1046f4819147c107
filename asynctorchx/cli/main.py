"""``asynctorchx``: the command line (TorchX's ``torchx`` commands and flags).

Only the parser: a command's code is imported when it runs (benchmark 6's ``ours`` rows).
Exit codes: 0 success; 1 an error or an app that did not succeed; 2 a usage error; a signal
(SIGINT, SIGTERM, SIGHUP) cancels the app, then the process dies of it (a shell's 128 + n).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import signal
import sys
from collections.abc import Sequence
from datetime import timedelta

from asynctorchx import __version__

#: how the README says to serve the documentation site from a checkout
DOCS_COMMAND = "pip install -e '.[docs]' && mkdocs serve"
DOCS_URL = "http://127.0.0.1:8000/"

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class _Once(argparse.Action):
    """Store a flag's value, refusing the flag given twice (TorchX's ``ArgOnceAction``,
    ``torchx.cli.argparse_util``): a repeated ``-cfg`` would otherwise drop the first."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[object] | None,
        option_string: str | None = None,
    ) -> None:
        if getattr(namespace, self.dest) is not None:  # the default is None
            parser.error(f"{'/'.join(self.option_strings)} given more than once")
        setattr(namespace, self.dest, values)


def _add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run a component on a scheduler",
        description="Run a component: `asynctorchx run -s local_cwd utils.echo --msg hi`."
        " Everything after the component name is passed to the component untouched."
        " stdout gets the app handle alone (as `torchx run`); the app's logs and every"
        " progress message go to stderr."
        " An app that lives in this process (local_cwd, local_dir) is followed until it"
        " ends; without a `log_dir` run option its logs are kept beside its record, where"
        " `asynctorchx log` reads them and the status's UI URL points.",
    )
    p.add_argument(
        "-s",
        "--scheduler",
        action=_Once,
        help="scheduler to run on (default: local_cwd)",
    )
    p.add_argument(
        "-cfg",
        "--scheduler_args",
        action=_Once,
        help="scheduler run options, `key1=v1,key2=v2` (see `asynctorchx runopts`)",
    )
    p.add_argument("--dryrun", action="store_true", help="print the request, start nothing")
    p.add_argument("--wait", action="store_true", help="wait for the app to finish")
    p.add_argument("--log", action="store_true", help="stream the app's logs (implies --wait)")
    p.add_argument(
        "--workspace",
        action=_Once,
        help="a directory to build into the image of role 0 (default: the current"
        " directory, when the scheduler builds workspaces, e.g. local_docker; '' builds"
        " nothing)",
    )
    p.add_argument("--parent_run_id", action=_Once, help="tracker parent run id")
    p.add_argument(
        "--tee_logs",
        action="store_true",
        help="stream the logs of every replica, each line prefixed `role/replica`, while"
        " waiting (implies --log; TorchX's flag)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='print JSON Lines on stdout: {"app_handle": ...} once submitted, then'
        ' {"app_handle": ..., "status": {...}} if run waits (logs stay on stderr);'
        ' with --dryrun one {"scheduler", "app", "request"} object',
    )
    p.add_argument(
        "--stdin",
        action="store_true",
        help="read what to run from one JSON object on stdin, with the fields of TorchX's"
        " `torchx run --stdin`: component_name (required), scheduler, scheduler_args"
        " (object), component_args (object) or component_args_str (list), dryrun, wait,"
        " log, tee_logs, workspace, parent_run_id; no other flag but --json",
    )
    p.add_argument("component", nargs="?", help="e.g. utils.echo, file.py:fn")
    p.add_argument("component_args", nargs=argparse.REMAINDER, help="the component's args")


def _add_tracker(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "tracker",
        help="query the experiment tracker (TorchX's `torchx tracker`)",
        description="Query the first tracker configured ([torchx:tracker] in .torchxconfig,"
        " or $TORCHX_TRACKERS): `tracker list jobs|metadata|artifacts|lineage`. A tracker"
        " is a `torchx.tracker` entry point or a `module:factory` path, as in TorchX.",
    )
    kinds = p.add_subparsers(dest="tracker_command", metavar="list", required=True)
    listing = kinds.add_parser("list", help="list jobs, metadata, artifacts or lineage")
    what = listing.add_subparsers(dest="tracker_list", metavar="WHAT", required=True)
    jobs = what.add_parser("jobs", help="the job run ids")
    jobs.add_argument("--parent-run-id", help="only the jobs of this parent run")
    metadata = what.add_parser("metadata", help="a job's metadata")
    metadata.add_argument("RUN_ID", help="the job's run id (its app handle)")
    artifacts = what.add_parser("artifacts", help="a job's artifacts")
    artifacts.add_argument("--artifact", help="only the artifact of this name")
    artifacts.add_argument("RUN_ID", help="the job's run id (its app handle)")
    lineage = what.add_parser("lineage", help="a job's sources and descendants")
    only = lineage.add_mutually_exclusive_group()
    only.add_argument("--sources-only", action="store_true", help="only the sources")
    only.add_argument("--descendants-only", action="store_true", help="only the descendants")
    lineage.add_argument("--artifact", help="only sources of this artifact")
    lineage.add_argument("RUN_ID", help="the job's run id (its app handle)")


def build_parser() -> argparse.ArgumentParser:
    """Return the ``asynctorchx`` argument parser (one subparser per command)."""
    parser = argparse.ArgumentParser(
        prog="asynctorchx",
        description="Launch, watch, tail and cancel jobs (TorchX, async).",
        epilog=f"The documentation, API reference included: {DOCS_COMMAND}, then {DOCS_URL}",
    )
    parser.add_argument("--version", action="version", version=f"asynctorchx {__version__}")
    parser.add_argument(
        "--log_level",
        default=os.environ.get("LOGLEVEL", "WARNING"),
        type=str.upper,
        choices=_LOG_LEVELS,
        help="Python log level (default: $LOGLEVEL, else WARNING; INFO also says which"
        " .torchxconfig files were read; DEBUG also prints tracebacks of errors)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_run(sub)

    for name, helptext in (("status", "print an app's status"), ("describe", "print an app")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("app_handle", help="e.g. local_docker://torchx/echo-x1y2")
        if name == "status":
            p.add_argument("--roles", default="", help="comma-separated roles to show")
        p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser("log", help="print an app's logs")
    p.add_argument(
        "identifier",
        help="SCHED://[SESSION]/APP[/ROLE[/REPLICA_IDS]] (replica ids comma-separated)",
    )
    p.add_argument("--regex", help="only lines matching this regex")
    p.add_argument("-t", "--tail", action="store_true", help="follow until the app ends")
    p.add_argument(
        "--streams",
        choices=["stdout", "stderr", "combined"],
        help="which output (default: combined)",
    )

    p = sub.add_parser(
        "cancel",
        help="cancel an app",
        description="Cancel an app: say at once that the cancel is requested, then wait for"
        " the app to end and print its end state (TorchX's `torchx cancel` returns at"
        " once; --no-wait does).",
    )
    p.add_argument("app_handle")
    p.add_argument("--no-wait", action="store_true", help="return once the cancel is requested")

    p = sub.add_parser(
        "delete",
        help="delete an app: cancel it if it runs, then remove what its scheduler keeps",
        description="As TorchX's `torchx delete` (after TorchX 0.7.0). On local_docker"
        " every container and volume of the app is removed.",
    )
    p.add_argument("app_handle", help="e.g. local_docker://torchx/echo-x1y2")

    p = sub.add_parser(
        "list",
        help="list the apps a scheduler knows",
        description="List a scheduler's apps. `scheduler` and `scheduler_args` in the"
        " [cli:list] section of .torchxconfig give the defaults of -s and -cfg.",
    )
    p.add_argument("-s", "--scheduler", help="default: local_cwd")
    p.add_argument(
        "-cfg",
        "--scheduler_args",
        help="run options that narrow the listing, `key1=v1,key2=v2` (e.g. a namespace)",
    )
    p.add_argument(
        "--state",
        action="append",
        type=_states,
        help="only apps in these states (AppState names, comma list or repeated)",
    )
    p.add_argument("--name", help="only apps whose name matches this glob (no * ? [: a substring)")
    p.add_argument(
        "--since", type=_age, help="only apps submitted within this age: 30s, 30m, 2h, 7d, 1w"
    )
    p.add_argument("--limit", type=int, default=20, help="print the newest N apps (default: 20)")
    p.add_argument("--all", action="store_true", help="print every app (no --limit)")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser(
        "journal",
        help="show an app group's journal, one row per trial",
        description="Show a sweep's journal (`runner.group(journal=PATH)`) without running"
        " anything: each trial's key, attempts, last state (`-`: not ended), last handle and"
        " when it ended (UTC). It may be read while its driver runs.",
    )
    p.add_argument("path", help="the journal file")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser("runopts", help="print schedulers' run options")
    p.add_argument("scheduler", nargs="?")

    p = sub.add_parser("builtins", help="list the builtin components")
    p.add_argument("--print", dest="print_name", help="print a component's source")

    p = sub.add_parser(
        "configure",
        help="write a .torchxconfig with schedulers' run options",
        description="Write ./.torchxconfig with the run options of the schedulers (TorchX's"
        " `torchx configure`): required options only, unless -a. Unlike TorchX, an existing"
        " file is never overwritten (--print shows what would be written).",
    )
    p.add_argument("-s", "--schedulers", help="comma-separated (default: every scheduler)")
    p.add_argument(
        "-a", "--all", action="store_true", help="include the optional options (with defaults)"
    )
    p.add_argument(
        "--print", dest="print_config", action="store_true", help="print on stdout, write no file"
    )
    _add_tracker(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``) and exit with its code."""
    code = run_cli(argv)
    if code > 128:  # interrupted: die of the signal, so that a calling shell stops too
        signal.signal(code - 128, signal.SIG_DFL)
        os.kill(os.getpid(), code - 128)
    sys.exit(code)


def run_cli(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code (argparse usage errors exit 2 directly)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.command is None:
        parser.print_help()
        return 1
    try:
        from asynctorchx.cli import _commands  # a Ctrl-C while importing is handled too

        return _commands.dispatch(args)
    except KeyboardInterrupt:
        print("asynctorchx: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    except BrokenPipeError:
        # the reader of stdout went away (`asynctorchx describe ... | head`): stop quietly,
        # and keep Python's final flush of stdout from failing again
        _silence_stdout()
        return 1
    except Exception as exc:
        if args.log_level == "DEBUG":
            logging.getLogger("asynctorchx.cli").exception("command failed")
        print(f"asynctorchx {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 1


def _silence_stdout() -> None:
    """Point stdout at ``/dev/null`` (what the Python docs advise after ``EPIPE``)."""
    # ValueError: stdout has no file descriptor (an in-process caller)
    with contextlib.suppress(OSError, ValueError):
        stdout = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stdout)
        finally:
            os.close(devnull)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:  # from a task group
        return _one_line(exc.exceptions[0])
    # a KeyError's str quotes its message
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return " ".join((text or type(exc).__name__).split())


def _states(text: str) -> set[str]:
    """The AppState names in ``text`` (comma separated, any case); a usage error otherwise."""
    from asynctorchx.specs import AppState

    names = {part.strip().upper() for part in text.split(",") if part.strip()}
    valid = [state.name for state in AppState]
    if bad := sorted(names - set(valid)):
        raise argparse.ArgumentTypeError(
            f"unknown state {', '.join(bad)}; one of {', '.join(valid)}"
        )
    return names


_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _age(text: str) -> timedelta:
    """An age such as ``30m`` (units s, m, h, d, w); a usage error otherwise."""
    match = re.fullmatch(r"\s*([0-9]+)([smhdw])\s*", text, re.IGNORECASE)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"bad age {text!r}: a count and a unit (s, m, h, d, w), e.g. 30m, 2h or 7d"
        )
    return timedelta(seconds=int(match[1]) * _AGE_UNITS[match[2].lower()])


if __name__ == "__main__":
    main()
