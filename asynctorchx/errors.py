"""Every exception that asynctorchx raises on purpose; every message names the bad value
and the fix. The hierarchy::

    AsyncTorchXError
    ├── InvalidRunConfigException (ValueError): a run config against the runopts
    │   ├── InvalidLogDirError: local_cwd/local_dir log_dir
    │   ├── InvalidJobDirError: job_dir of a directory workspace
    │   └── SlurmSubmitError: an sbatch option refused (also a SlurmCommandError)
    │       └── SlurmSubmitLimitError: a submit limit no job of the user can free
    ├── SchedulerUnavailableError (RuntimeError)
    │   ├── SchedulerUnreachableError: the engine does not answer now (wait goes on)
    │   │   ├── DockerEngineUnreachableError
    │   │   ├── KubernetesUnreachableError
    │   │   └── SlurmControllerUnreachableError (also a SlurmCommandError)
    │   ├── SlurmNotInstalledError
    │   ├── KubernetesConfigError
    │   ├── VolcanoNotInstalledError
    │   └── JobSetNotInstalledError
    ├── SchedulerRequestError (RuntimeError): the backend refused the request
    │   ├── DockerEngineError
    │   ├── KubernetesApiError
    │   │   └── InvalidJobSpecError (ValueError)
    │   └── SlurmCommandError
    │       ├── SlurmControllerUnreachableError
    │       └── SlurmSubmitError
    │           └── SlurmSubmitLimitError
    ├── SchedulerClosedError (RuntimeError)
    ├── WorkspaceBuildError (RuntimeError)
    ├── UnknownAppException
    ├── UnknownSchedulerException (ValueError)
    ├── MalformedAppHandleException (ValueError)
    ├── SessionMismatchException (ValueError)
    ├── InvalidAppIdException (ValueError)
    ├── InvalidNameException (ValueError)
    ├── InvalidAppDefException (ValueError)
    ├── InvalidResourceError (TypeError, ValueError)
    ├── InvalidCursorError (ValueError)
    ├── ComponentNotFoundException (LookupError)
    ├── ComponentValidationException (ValueError)
    │   ├── ComponentUsageError: a wrong component command line
    │   └── ScriptNotFoundError (FileNotFoundError)
    ├── ConfigError (ValueError)
    │   ├── ConfigFileNotFoundError (FileNotFoundError)
    │   └── ConfigFileEncodingError
    ├── MountOptionError (KeyError, ValueError)
    ├── UnknownNamedResourceException (KeyError)
    ├── EntryPointNotFoundError (KeyError)
    ├── UnknownDeviceError (ValueError)
    ├── UnsafeLogPathError (PermissionError)
    ├── OpenFileLimitError (OSError)
    ├── LogsRemovedError (FileNotFoundError)
    ├── ReplicaLaunchError (OSError)
    ├── AppGroupFailed
    ├── AppGroupStopTimeout (TimeoutError)
    ├── TrialKeyError (ValueError): a journaled group's trial key missing, repeated or changed
    ├── JournalCorruptError (ValueError)
    ├── JournalUnsafeError (PermissionError)
    └── JournalLockedError (RuntimeError)

Names are TorchX's where it has one. A backend's errors are imported from its package on
first use, so importing this module imports no backend.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from asynctorchx._error_bases import (
    AsyncTorchXError,
    InvalidRunConfigException,
    SchedulerRequestError,
    SchedulerUnavailableError,
    SchedulerUnreachableError,
)

if TYPE_CHECKING:
    from asynctorchx.schedulers.docker._errors import (
        DockerEngineError,
        DockerEngineUnreachableError,
    )
    from asynctorchx.schedulers.kubernetes._errors import (
        InvalidJobSpecError,
        JobSetNotInstalledError,
        KubernetesApiError,
        KubernetesConfigError,
        KubernetesUnreachableError,
        VolcanoNotInstalledError,
    )
    from asynctorchx.schedulers.local._errors import (
        InvalidLogDirError,
        LogsRemovedError,
        OpenFileLimitError,
        ReplicaLaunchError,
    )
    from asynctorchx.schedulers.slurm._errors import (
        SlurmCommandError,
        SlurmControllerUnreachableError,
        SlurmNotInstalledError,
        SlurmSubmitError,
        SlurmSubmitLimitError,
    )
    from asynctorchx.specs.api import AppStatus


def __getattr__(name: str) -> type[AsyncTorchXError]:
    """Import a backend's error (one in ``__all__``) from the backend's package on first use."""
    if name in __all__:
        for backend in ("docker", "kubernetes", "local", "slurm"):
            module = vars(importlib.import_module(f"asynctorchx.schedulers.{backend}._errors"))
            if name in module:
                found: type[AsyncTorchXError] = module[name]
                return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _ReadableKeyError(KeyError):
    """A ``KeyError`` whose ``str`` is its message (a plain ``KeyError`` quotes it)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class MalformedAppHandleException(AsyncTorchXError, ValueError):
    """An app handle is not of the form ``{scheduler}://{session_name}/{app_id}``."""

    def __init__(self, app_handle: str) -> None:
        super().__init__(
            f"{app_handle!r} is not a valid app handle: expected"
            " `{scheduler}://{session_name}/{app_id}`, e.g. `local_cwd://torchx/echo-x1y2z3`"
        )
        self.app_handle = app_handle


class UnknownAppException(AsyncTorchXError):
    """The app handle names an app that the scheduler does not know (or no longer keeps)."""

    def __init__(self, app_handle: str) -> None:
        super().__init__(
            f"unknown app {app_handle!r}: it was never submitted, or its scheduler no"
            " longer keeps it; `asynctorchx list -s <scheduler>` shows the apps it knows"
        )
        self.app_handle = app_handle


class UnknownSchedulerException(AsyncTorchXError, ValueError):
    """No scheduler is registered under the given name."""

    def __init__(self, scheduler: str, valid: Iterable[str] = ()) -> None:
        choices = ", ".join(sorted(valid))
        hint = f": choose one of {choices}" if choices else ""
        super().__init__(f"unknown scheduler {scheduler!r}{hint}")
        self.scheduler = scheduler


class SessionMismatchException(AsyncTorchXError, ValueError):
    """An app handle belongs to another runner session than the one asked to act on it."""

    def __init__(self, app_handle: str, handle_session: str, runner_session: str) -> None:
        super().__init__(
            f"app handle {app_handle!r} belongs to session {handle_session!r}, but this"
            f" runner's session is {runner_session!r}: use `get_runner({handle_session!r})`"
        )
        self.app_handle = app_handle


class InvalidAppIdException(AsyncTorchXError, ValueError):
    """An app id that is empty, holds a path separator or is ``..``; refused before any use."""

    def __init__(self, app_id: str) -> None:
        super().__init__(
            f"{app_id!r} is not a valid app id: an app id is a non-empty name of letters,"
            " digits, '-', '_' and '.', with no path separator and not '.' or '..'"
        )
        self.app_id = app_id


class InvalidNameException(AsyncTorchXError, ValueError):
    """A role or session name that cannot become a path part and a handle part."""

    def __init__(self, kind: str, name: object) -> None:
        super().__init__(
            f"{kind} {name!r} is not a valid name: use 1 to 100 letters, digits, '_', '.'"
            " and '-', not starting with '.' or '-' and without '..'"
        )
        self.kind = kind
        self.name = name


class InvalidAppDefException(AsyncTorchXError, ValueError):
    """An ``AppDef`` no scheduler can run: no role, two roles of one name, no replica."""


class ComponentNotFoundException(AsyncTorchXError, LookupError):
    """A component name resolves neither to a builtin, an entry point nor a file function."""


class ComponentValidationException(AsyncTorchXError, ValueError):
    """A component function breaks the component rules (see ``specs.file_linter``)."""


class ComponentUsageError(ComponentValidationException):
    """A wrong component command line or argument (``specs.builders.materialize_appdef``).

    Where TorchX's argparse prints and exits 2, this is raised, printing nothing; the CLI
    prints it and exits 2.

    Args:
        message: the error, naming the argument.
        usage: the component's usage text (``usage: ...``).
    """

    def __init__(self, message: str, usage: str = "") -> None:
        super().__init__(message)
        self.usage = usage


class ScriptNotFoundError(ComponentValidationException, FileNotFoundError):
    """A component's ``--script`` names no file where the replicas look; raised at dry run
    before anything is built or submitted (TorchX issue 405)."""

    def __init__(self, component: str, script: str, root: str, fix: str) -> None:
        super().__init__(
            f"{component} --script {script!r}: no such file in {root}, where the replicas"
            f" will look for it; {fix}"
        )
        self.component = component
        self.script = script
        self.root = root


class ConfigError(AsyncTorchXError, ValueError):
    """A ``.torchxconfig`` file is missing, unreadable or has a bad value."""


class ConfigFileNotFoundError(ConfigError, FileNotFoundError):
    """``$TORCHXCONFIG`` names no file (a ``FileNotFoundError``, as in ``torchx.runner.config``)."""


class MountOptionError(AsyncTorchXError, _ReadableKeyError, ValueError):
    """A mount (:func:`asynctorchx.specs.parse_mounts`) misses a key or has an unknown one; a
    ``KeyError`` as TorchX raises, a ``ValueError`` as other bad mounts."""


class UnknownDeviceError(AsyncTorchXError, ValueError):
    """A ``Resource.devices`` name neither in ``toolkit.DEVICES`` nor a ``/dev/`` path."""


class SchedulerClosedError(AsyncTorchXError, RuntimeError):
    """A method was called on a scheduler (or runner, or app group) after ``close()``."""


class WorkspaceBuildError(AsyncTorchXError, RuntimeError):
    """Building a workspace image failed; the message holds the build log."""


class UnknownNamedResourceException(AsyncTorchXError, _ReadableKeyError):
    """No named resource of that name; a ``KeyError`` so that ``named_resources`` is a mapping."""

    def __init__(self, name: str, close_matches: Iterable[str], known: Iterable[str]) -> None:
        close = list(close_matches)
        if len(close) > 1 and all(match.lower() == name.lower() for match in close):
            hint = (
                f"It matches more than one registered named resource, ignoring case:"
                f" {sorted(close)}. Use one of those names exactly."
            )
        elif close:
            hint = "Did you mean " + " or ".join(f"`{match}`" for match in close) + "?"
        else:
            hint = f"Registered named resources: {sorted(known)}"
        super().__init__(
            f"No named resource found for `{name}`. {hint} Register your own under the entry"
            " point group `asynctorchx.named_resources`, or in"
            " `asynctorchx.specs._named_resource_factories`."
        )
        self.name = name


class UnsafeLogPathError(AsyncTorchXError, PermissionError):
    """A log path another local user could redirect (a symlink, not ours, world-writable);
    raised at submit with nothing started, and by readers."""

    def __init__(self, path: str, reason: str, fix: str) -> None:
        super().__init__(f"log path {path!r} {reason}: {fix}")
        self.path = path


class InvalidCursorError(AsyncTorchXError, ValueError):
    """A cursor ``Runner.events`` did not make for this app's stream (a web service: HTTP 400)."""

    def __init__(self, cursor: str, app_handle: str, reason: str) -> None:
        shown = cursor if len(cursor) <= 80 else f"{cursor[:77]}..."
        super().__init__(
            f"cursor {shown!r} cannot resume the events of {app_handle!r}: {reason}; pass"
            " the cursor of an event of this app's stream (an SSE client's Last-Event-ID),"
            " or None to start from the beginning"
        )
        self.cursor = cursor
        self.app_handle = app_handle
        self.reason = reason


class InvalidJobDirError(InvalidRunConfigException):
    """Run option ``job_dir`` cannot receive a directory workspace (missing, a file, not
    empty); raised at dry run."""

    def __init__(self, job_dir: str | None, reason: str, fix: str) -> None:
        name = "no job_dir" if job_dir is None else f"job_dir {job_dir!r}"
        super().__init__(f"{name}: {reason}; {fix}", "job_dir")
        self.job_dir = job_dir


class ConfigFileEncodingError(ConfigError):
    """A ``.torchxconfig`` file is not valid UTF-8 (the encoding TorchX reads it in)."""

    def __init__(self, path: str, exc: UnicodeDecodeError) -> None:
        bad = exc.object[exc.start : exc.start + 1].hex()
        super().__init__(
            f"config file {path!r} is not valid UTF-8 (byte 0x{bad} at offset {exc.start}):"
            f" save it as UTF-8, e.g. `iconv -f latin1 -t utf-8 {path} > fixed && mv fixed"
            f" {path}`, or remove it"
        )
        self.path = path


class InvalidResourceError(AsyncTorchXError, TypeError, ValueError):
    """A :class:`~asynctorchx.specs.Resource` field set to a value of the wrong type."""

    def __init__(self, field: str, value: object, fix: str) -> None:
        super().__init__(f"Resource {field}={value!r} ({type(value).__name__}): {fix}")
        self.field = field
        self.value = value


class EntryPointNotFoundError(AsyncTorchXError, _ReadableKeyError):
    """No entry point of that name in its group (a ``KeyError``, as ``torchx.util.entrypoints``)."""

    def __init__(self, group: str, name: str, installed: Iterable[str]) -> None:
        names = ", ".join(sorted(installed)) or "none"
        super().__init__(
            f"no entry point {name!r} in group {group!r} (it has: {names}): register it"
            f' under [project.entry-points."{group}"] and reinstall the package'
        )
        self.group = group
        self.name = name


class AppGroupFailed(AsyncTorchXError):
    """An app of a ``fail_fast`` group ended ``FAILED`` or ``UNKNOWN``; raised once the others,
    cancelled, are terminal or past ``stop_timeout`` (``stragglers``)."""

    def __init__(
        self,
        failed: str,
        statuses: Mapping[str, AppStatus],
        stragglers: Iterable[str] = (),
    ) -> None:
        state = statuses[failed].state.name
        left = list(stragglers)
        message = (
            f"app {failed!r} ended {state}, so the group cancelled its other apps:"
            f" `error.statuses` holds every app's final status, `asynctorchx log {failed}`"
            " shows why it failed"
        )
        if left:
            message += f"; still not terminal after the stop timeout: {', '.join(left)}"
        super().__init__(message)
        self.failed = failed
        self.statuses = dict(statuses)
        self.stragglers = left


class AppGroupStopTimeout(AsyncTorchXError, TimeoutError):
    """Apps of a group not terminal ``stop_timeout`` seconds after being cancelled; logged
    instead while another exception leaves the group."""

    def __init__(self, stragglers: Iterable[str], stop_timeout: float) -> None:
        left = list(stragglers)
        super().__init__(
            f"{len(left)} app(s) of the group were still not terminal {stop_timeout:g} s"
            f" after being cancelled: {', '.join(left)}. Check them with `asynctorchx"
            " status <handle>` and cancel them with `asynctorchx cancel <handle>`, or give"
            " the group a longer `stop_timeout`"
        )
        self.stragglers = left
        self.stop_timeout = stop_timeout


class TrialKeyError(AsyncTorchXError, ValueError):
    """A journaled group's ``run`` without a ``key``, with a key already run in the group, or
    with a key the journal records for another app, scheduler or cfg (``changed``)."""

    def __init__(self, key: str | None, journal: str, changed: Iterable[str] = ()) -> None:
        parts = list(changed)
        if key is None:
            message = (
                f"a group with journal {journal!r} names each trial: pass"
                ' `key=` (a string unique in the group, e.g. key=f"lr={lr}")'
            )
        elif parts:
            message = (
                f"trial {key!r} differs from the one journal {journal!r} records, in its"
                f" {', '.join(parts)}: run it under a new key, or start a new journal"
            )
        else:
            message = (
                f"trial key {key!r} was already run in this group: give each trial its own key"
            )
        super().__init__(message)
        self.key = key
        self.changed = parts


class JournalCorruptError(AsyncTorchXError, ValueError):
    """A full line of a group's journal is not a record (a torn last line is not an error)."""

    def __init__(self, path: str, line: int) -> None:
        super().__init__(
            f"journal {path!r}: line {line} is not a journal record; fix or remove that line"
            f" (`sed -n {line}p {path}` shows it), or start a new journal"
        )
        self.path = path
        self.line = line


class JournalUnsafeError(AsyncTorchXError, PermissionError):
    """A group's journal is another user's, or its group or other users may write it."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"journal {path!r} may be written by other users (or is not yours), so its trials"
            f" cannot be trusted: `chmod 600 {path}` if it is yours, else use another path"
        )
        self.path = path


class JournalLockedError(AsyncTorchXError, RuntimeError):
    """Another driver holds the group's journal."""

    def __init__(self, path: str, pid: int | None) -> None:
        holder = "another process" if pid is None else f"process {pid}"
        super().__init__(
            f"journal {path!r} is held by {holder}, a driver of the same sweep: wait for it to"
            " end (or stop it), or give this group another journal"
        )
        self.path = path
        self.pid = pid


__all__ = [  # the errors imported (a backend's on first use), then every one defined here
    "AsyncTorchXError",
    "DockerEngineError",
    "DockerEngineUnreachableError",
    "InvalidJobSpecError",
    "InvalidLogDirError",
    "InvalidRunConfigException",
    "JobSetNotInstalledError",
    "KubernetesApiError",
    "KubernetesConfigError",
    "KubernetesUnreachableError",
    "LogsRemovedError",
    "OpenFileLimitError",
    "ReplicaLaunchError",
    "SchedulerRequestError",
    "SchedulerUnavailableError",
    "SchedulerUnreachableError",
    "SlurmCommandError",
    "SlurmControllerUnreachableError",
    "SlurmNotInstalledError",
    "SlurmSubmitError",
    "SlurmSubmitLimitError",
    "VolcanoNotInstalledError",
]
__all__ += [
    name
    for name, value in globals().items()
    if isinstance(value, type) and value.__module__ == __name__ and not name.startswith("_")
]
