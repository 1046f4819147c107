"""Every exception that asynctorchx raises, in one place.

The names are TorchX's where TorchX has one (``InvalidRunConfigException``,
``MalformedAppHandleException``, ``UnknownAppException``,
``UnknownSchedulerException``, ``ComponentNotFoundException``,
``ComponentValidationException``); :mod:`asynctorchx.specs` re-exports them under
the same names so code written against ``torchx.specs`` ports by changing the import.

Every message names the bad value and says how to fix it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from asynctorchx.specs.api import AppStatus


class AsyncTorchXError(Exception):
    """Base class of every error raised on purpose by asynctorchx."""


class _ReadableKeyError(KeyError):
    """A ``KeyError`` whose ``str`` is its message (a plain ``KeyError`` quotes it)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class InvalidRunConfigException(AsyncTorchXError, ValueError):
    """A scheduler run config (``cfg``) does not match the scheduler's ``runopts``.

    Raised by :meth:`asynctorchx.specs.runopts.resolve` for a missing required key,
    a value of the wrong type or an unknown key. The message names the key, its
    expected type and the keys the scheduler accepts.

    Args:
        message: what is wrong and how to fix it.
        cfg_key: the offending key, when there is one.
        cfg: the run config that was being resolved (TorchX passes it as the third
            argument, so code raising TorchX's exception ports unchanged).
    """

    def __init__(
        self, message: str, cfg_key: str | None = None, cfg: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.cfg_key = cfg_key
        self.cfg = cfg


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
    """No scheduler is registered under the given name.

    Args:
        scheduler: the name that was asked for.
        valid: the registered names, listed in the message as the choices; may be left
            out, as TorchX code builds this exception from the name alone.
    """

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
    """An app id that is not a valid id (empty, a path separator, ``..``).

    Such an id is refused before it is used to build a path or a container name.
    """

    def __init__(self, app_id: str) -> None:
        super().__init__(
            f"{app_id!r} is not a valid app id: an app id is a non-empty name of letters,"
            " digits, '-', '_' and '.', with no path separator and not '.' or '..'"
        )
        self.app_id = app_id


class InvalidNameException(AsyncTorchXError, ValueError):
    """A role or session name that cannot be used: it becomes a path part and a handle part.

    Args:
        kind: what the name names (``role name``, ``session name``).
        name: the refused value.
    """

    def __init__(self, kind: str, name: object) -> None:
        super().__init__(
            f"{kind} {name!r} is not a valid name: use 1 to 100 letters, digits, '_', '.'"
            " and '-', not starting with '.' or '-' and without '..'"
        )
        self.kind = kind
        self.name = name


class InvalidAppDefException(AsyncTorchXError, ValueError):
    """An ``AppDef`` no scheduler can run: no role, two roles of one name, no replica.

    The message names the app, the role and the fix.
    """


class ComponentNotFoundException(AsyncTorchXError, LookupError):
    """A component name resolves neither to a builtin, an entry point nor a file function."""


class ComponentValidationException(AsyncTorchXError, ValueError):
    """A component function breaks the component rules (see ``specs.file_linter``)."""


class ScriptNotFoundError(ComponentValidationException, FileNotFoundError):
    """A component's ``--script`` names no file where the replicas will look for it.

    Raised by ``Runner.dryrun_component`` (so by ``run`` and ``--dryrun``) before any
    workspace is built or anything is submitted (TorchX issue 405).

    Args:
        component: the component's name, e.g. ``dist.ddp``.
        script: the ``--script`` value.
        root: the directory the replicas resolve it in (the workspace or their working
            directory).
        fix: how to fix it.
    """

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
    """``$TORCHXCONFIG`` names no file: a ``FileNotFoundError`` as in
    ``torchx.runner.config``, and a :class:`ConfigError`; the message says what is
    missing and how to fix it."""


class MountOptionError(AsyncTorchXError, _ReadableKeyError, ValueError):
    """A mount description (:func:`asynctorchx.specs.parse_mounts`) misses a key or has an
    unknown one.

    A ``KeyError``, as ``torchx.specs.parse_mounts`` raises for these (code written
    for TorchX catches that), and a ``ValueError``, as for every other bad mount.
    ``str(error)`` is the message itself.
    """


class UnknownDeviceError(AsyncTorchXError, ValueError):
    """A ``Resource.devices`` name that has no known host device file.

    Raised by :func:`asynctorchx.schedulers.toolkit.get_device_mounts` (and so at a
    ``local_docker`` dry run) for a name that is neither in its device table (EFA,
    Neuron) nor a ``/dev/`` path; the message lists the known names. TorchX's
    ``torchx.schedulers.devices`` only warns and drops it. A ``ValueError``.
    """


class SchedulerUnavailableError(AsyncTorchXError, RuntimeError):
    """A scheduler cannot be used here (no Docker engine, unsupported event loop)."""


class SchedulerClosedError(AsyncTorchXError, RuntimeError):
    """A method was called on a scheduler (or runner, or app group) after ``close()``."""


class WorkspaceBuildError(AsyncTorchXError, RuntimeError):
    """Building a workspace image failed; the message holds the build log."""


class UnknownNamedResourceException(AsyncTorchXError, _ReadableKeyError):
    """No named resource is registered under the given name (``named_resources[name]``).

    A ``KeyError`` so that ``named_resources`` behaves as a mapping; unlike a plain
    ``KeyError`` its ``str`` is the readable message, which names the closest
    registered names (found with :mod:`difflib`).
    """

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
        # TorchX's sentences first (``torchx.specs._NamedResourcesLibrary``), then how to
        # add one
        super().__init__(
            f"No named resource found for `{name}`. {hint} Register your own under the entry"
            " point group `asynctorchx.named_resources`, or in"
            " `asynctorchx.specs._named_resource_factories`."
        )
        self.name = name


class DockerEngineError(AsyncTorchXError, RuntimeError):
    """The Docker engine answered a request of ``local_docker`` with an HTTP error (4xx/5xx).

    Raised instead of ``aiodocker.DockerError``, which never leaves the scheduler; as
    ``httpx.HTTPStatusError`` does, it keeps the status and what the engine said, so a
    caller can tell e.g. a missing container (404) from a conflict (409).

    Args:
        status: the HTTP status the engine answered (Docker Engine API).
        message: the engine's message (or ours, saying how to fix it).
        request: the request, as ``METHOD path`` (e.g. ``POST containers/create``).
    """

    def __init__(self, status: int, message: str, request: str = "") -> None:
        where = f" to {request}" if request else ""
        super().__init__(f"the Docker engine answered {status}{where}: {message}")
        self.status = status
        self.message = message
        self.request = request


class SlurmNotInstalledError(SchedulerUnavailableError):
    """A Slurm client command (``sbatch``, ``squeue``...) is not on ``PATH``.

    Args:
        command: the command that was not found.
    """

    def __init__(self, command: str) -> None:
        super().__init__(
            f"Slurm's client tools are not installed: {command!r} is not on PATH. Install"
            " them (Debian: `apt-get install slurm-client`) or run on a Slurm login node;"
            " `bash scripts/slurm-cluster.sh start` starts a local cluster"
        )
        self.command = command


class SlurmCommandError(AsyncTorchXError, RuntimeError):
    """A Slurm command failed; the message carries Slurm's own error text.

    Args:
        argv: the command that failed.
        returncode: its exit status.
        stderr: what it wrote to stderr (Slurm's message).
    """

    def __init__(self, argv: list[str], returncode: int, stderr: str) -> None:
        super().__init__(
            f"`{' '.join(argv)}` failed with exit status {returncode}: {stderr.strip()}"
        )
        self.argv = argv
        self.returncode = returncode
        self.stderr = stderr


class SlurmSubmitError(SlurmCommandError, InvalidRunConfigException):
    """``sbatch`` refused a job because of one of its options (partition, time, ...).

    Both a :class:`SlurmCommandError` (Slurm's message, the command) and an
    :class:`InvalidRunConfigException` whose ``cfg_key`` names the run option (or the
    resource field) Slurm refused.

    Args:
        argv: the ``sbatch`` command.
        returncode: its exit status.
        stderr: Slurm's message.
        option: the run option or resource that Slurm refused (``partition``, ``time``,
            ``constraint``, ``memMB``...).
        value: the option's value in the job, when known: Slurm's message does not
            always name it (``Invalid qos specification``).
    """

    def __init__(
        self, argv: list[str], returncode: int, stderr: str, option: str, value: str | None = None
    ) -> None:
        SlurmCommandError.__init__(self, argv, returncode, stderr)
        refused = f"{option}={value!r}" if value is not None else repr(option)
        message = (
            f"Slurm refused {refused} of this job: {stderr.strip()} (`{' '.join(argv)}`"
            f" exited with {returncode}); fix {option!r} and submit again"
        )
        self.args = (message,)
        self.cfg_key: str | None = option
        self.cfg = None


class OpenFileLimitError(AsyncTorchXError, OSError):
    """A local app could not start: this process ran out of file descriptors.

    Each replica of ``local_cwd``/``local_dir`` needs two pipes (its stdout and stderr)
    and, while it writes, its log files. When they cannot be created the submit fails
    whole: the replicas of the app already started are stopped, nothing of it runs.
    An ``OSError`` whose ``errno`` is the one the system gave (``EMFILE`` or ``ENFILE``).

    Args:
        errno_value: the system's error number, ``errno.EMFILE`` or ``errno.ENFILE``.
        app_id: the app that could not start.
        detail: the system's message.
    """

    def __init__(self, errno_value: int, app_id: str, detail: str) -> None:
        super().__init__(
            errno_value,
            f"could not start the replicas of {app_id!r}: {detail} (the open-file limit,"
            " `ulimit -n`, is too low for this many replicas: raise the soft and hard"
            " RLIMIT_NOFILE of this process, or run fewer replicas at once); nothing of"
            " the app was left running",
        )
        self.app_id = app_id


class ReplicaLaunchError(AsyncTorchXError, OSError):
    """A replica of ``local_cwd``/``local_dir`` could not start its entrypoint.

    Raised by ``submit`` (``schedule``) when a replica of the app's first attempt cannot
    be started: the entrypoint is not on the replica's ``PATH`` (nor, on ``local_dir``,
    in the image directory), the file is not executable, or the kernel cannot run it.
    The replicas of the app already started are stopped: nothing of it runs. TorchX lets
    ``subprocess``'s ``FileNotFoundError`` / ``OSError`` through; this is an ``OSError``
    with the same ``errno`` and ``filename``, whose message names the replica, what was
    looked at and the fix.

    Args:
        errno_value: the system's error number (``ENOENT``, ``EACCES``, ``ENOEXEC``...).
        role: the replica's role.
        replica_id: the replica's index in its role.
        entrypoint: the program the role names (as the process was given it).
        reason: what is wrong, naming what was looked at (the ``PATH``, the directory).
        fix: how to fix it.
    """

    def __init__(
        self, errno_value: int, role: str, replica_id: int, entrypoint: str, reason: str, fix: str
    ) -> None:
        super().__init__(
            errno_value,
            f"replica {role}/{replica_id} could not start {entrypoint!r}: {reason}; {fix}",
            entrypoint,
        )
        self.role = role
        self.replica_id = replica_id
        self.entrypoint = entrypoint

    def __str__(self) -> str:
        return str(self.strerror)


class KubernetesConfigError(SchedulerUnavailableError):
    """No usable kubeconfig: the ``kubernetes`` scheduler does not know which cluster to use.

    Args:
        detail: what is missing or wrong (the file, the context), from the kubeconfig loader.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(
            f"no usable Kubernetes configuration: {detail}. Point KUBECONFIG (or the"
            " scheduler's `kubeconfig` parameter) at a kubeconfig file, or run inside a pod"
            " with a service account"
        )
        self.detail = detail


class KubernetesUnreachableError(SchedulerUnavailableError):
    """The Kubernetes API server of the kubeconfig does not answer.

    Args:
        server: the API server's URL.
        detail: the connection error.
    """

    def __init__(self, server: str, detail: str) -> None:
        super().__init__(
            f"the Kubernetes API server {server} does not answer ({detail}): check that the"
            " cluster is up and that the kubeconfig's current context points at it"
        )
        self.server = server
        self.detail = detail


class KubernetesApiError(AsyncTorchXError, RuntimeError):
    """The Kubernetes API server refused a request; carries the server's own message.

    As :class:`DockerEngineError` does for the Docker engine, it keeps the HTTP status,
    the API's ``Status.reason`` (``NotFound``, ``AlreadyExists``, ``Invalid``...) and
    message, so a caller can tell a missing object from a rejected manifest.

    Args:
        status: the HTTP status code (Kubernetes API conventions).
        reason: the ``Status.reason`` the server gave, or ``""``.
        message: the server's message (an admission webhook's denial, a validation error).
        request: the request, as ``METHOD path``.
        causes: ``(field, message)`` of each field the server named
            (``Status.details.causes``), e.g. ``("metadata.name", "Invalid value: ...")``.
    """

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        request: str = "",
        causes: tuple[tuple[str, str], ...] = (),
    ) -> None:
        where = f" to {request}" if request else ""
        why = f" {reason}" if reason else ""
        super().__init__(f"the Kubernetes API server answered {status}{why}{where}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.request = request
        self.causes = causes

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields the server named (``spec.tasks[0].name``); empty when it named none."""
        return tuple(field for field, _ in self.causes if field)


class InvalidJobSpecError(KubernetesApiError, ValueError):
    """The API server refused the job in the dry run before creating it: nothing was made.

    The ``kubernetes`` scheduler's run option ``validate_spec`` (torchx-nightly's, on by
    default) sends the manifest with ``dryRun=All`` first; a ``400`` or ``422`` answer is
    this error, its :attr:`fields` the fields the server named. torchx-nightly raises a
    ``ValueError`` (``Invalid job spec``), which this is too.
    """


class VolcanoNotInstalledError(SchedulerUnavailableError):
    """The cluster has no Volcano ``batch.volcano.sh/v1alpha1`` ``Job`` resource (CRD).

    Args:
        server: the API server's URL.
    """

    def __init__(self, server: str) -> None:
        super().__init__(
            f"Volcano is not installed on the cluster at {server}: the API has no"
            " batch.volcano.sh/v1alpha1 jobs. Install it (see https://volcano.sh/en/docs/"
            "installation/, e.g. `kubectl apply -f https://raw.githubusercontent.com/"
            "volcano-sh/volcano/master/installer/volcano-development.yaml`)"
        )
        self.server = server


class JobSetNotInstalledError(SchedulerUnavailableError):
    """The cluster has no ``jobset.x-k8s.io/v1alpha2`` ``JobSet`` resource (run option
    ``job_api=jobset``).

    Args:
        server: the API server's URL.
    """

    def __init__(self, server: str) -> None:
        super().__init__(
            f"JobSet is not installed on the cluster at {server}: the API has no"
            " jobset.x-k8s.io/v1alpha2 jobsets. Install it (see"
            " https://jobset.sigs.k8s.io/docs/installation/), or use the run option"
            " job_api=volcano"
        )
        self.server = server


class UnsafeLogPathError(AsyncTorchXError, PermissionError):
    """A log directory or log file is not safe to write to or read from.

    Raised by the local schedulers at submit (nothing is started then) and by the log
    readers: a directory on the way to the logs is a symbolic link, is owned by another
    user or is writable by every user, or a log file is a symbolic link or a file this
    user did not create. Such a path lets another local user redirect a replica's output
    into a file of theirs choosing (TorchX's ``torchx.schedulers.local_scheduler`` opens
    log files by path and follows links). A ``PermissionError``, hence an ``OSError``.

    Args:
        path: the offending path.
        reason: what is wrong with it.
        fix: how to fix it.
    """

    def __init__(self, path: str, reason: str, fix: str) -> None:
        super().__init__(f"log path {path!r} {reason}: {fix}")
        self.path = path


class InvalidCursorError(AsyncTorchXError, ValueError):
    """A cursor given to ``Runner.events`` cannot resume that app's event stream.

    The cursor was not made by ``Runner.events`` (malformed, cut or edited), was made by
    the stream of another app, or names a log stream the app does not have. A web
    service answers it with HTTP 400. A ``ValueError``.

    Args:
        cursor: the offending cursor (shown cut to 80 characters in the message).
        app_handle: the app whose stream it was given for.
        reason: what is wrong with it.
    """

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


class InvalidLogDirError(InvalidRunConfigException):
    """The ``log_dir`` run option of ``local_cwd``/``local_dir`` cannot hold an app's logs.

    Raised at dry run (nothing is created) when the directory, or the first existing one
    above it, is a file or not writable by this user, or when a part of a log path is
    longer than the file system allows; and at submit when creating the directories fails
    all the same (the directories this submit created are removed, nothing is started).
    TorchX's ``torchx.schedulers.local_scheduler`` lets the ``OSError`` of ``os.makedirs``
    through. An :class:`InvalidRunConfigException` whose ``cfg_key`` is ``log_dir``.

    Args:
        log_dir: the offending directory (the option's value, or the path below it that
            failed).
        reason: what is wrong with it.
        fix: how to fix it.
    """

    def __init__(self, log_dir: str, reason: str, fix: str) -> None:
        super().__init__(f"log_dir {log_dir!r} cannot hold the logs: {reason}; {fix}", "log_dir")
        self.log_dir = log_dir


class InvalidJobDirError(InvalidRunConfigException):
    """``slurm``'s ``job_dir`` run option cannot receive the workspace.

    Raised at dry run, before anything is copied or submitted, by the directory
    workspace (:class:`asynctorchx.workspace.dir_workspace.DirWorkspaceMixin`, TorchX's
    ``torchx.workspace.dir_workspace``): when a workspace other than the current
    directory is given without ``job_dir`` (the job would run in the current directory,
    without the workspace's files), or when ``job_dir`` is a file, a directory that is
    not empty, or cannot be created. TorchX skips the copy silently without ``job_dir``,
    and lets ``os.mkdir``'s ``FileExistsError`` through. An
    :class:`InvalidRunConfigException` whose ``cfg_key`` is ``job_dir``.

    Args:
        job_dir: the option's value, or ``None`` when it was not given.
        reason: what is wrong.
        fix: how to fix it.
    """

    def __init__(self, job_dir: str | None, reason: str, fix: str) -> None:
        name = "no job_dir" if job_dir is None else f"job_dir {job_dir!r}"
        super().__init__(f"{name}: {reason}; {fix}", "job_dir")
        self.job_dir = job_dir


class ConfigFileEncodingError(ConfigError):
    """A ``.torchxconfig`` file is not valid UTF-8 (the encoding TorchX reads it in).

    Raised by :mod:`asynctorchx.runner.config` when a file is read; the message names the
    file, the first bad byte and how to convert the file.

    Args:
        path: the file.
        exc: the decoding error.
    """

    def __init__(self, path: str, exc: UnicodeDecodeError) -> None:
        bad = exc.object[exc.start : exc.start + 1].hex()
        super().__init__(
            f"config file {path!r} is not valid UTF-8 (byte 0x{bad} at offset {exc.start}):"
            f" save it as UTF-8, e.g. `iconv -f latin1 -t utf-8 {path} > fixed && mv fixed"
            f" {path}`, or remove it"
        )
        self.path = path


class InvalidResourceError(AsyncTorchXError, TypeError, ValueError):
    """A :class:`~asynctorchx.specs.Resource` field of the wrong type.

    Raised when the resource is made (or a field is assigned): ``cpu``, ``gpu`` and
    ``memMB`` must be numbers (an ``int``, or a ``float`` where a scheduler takes
    fractions), ``capabilities`` a dict and ``devices`` a dict of device name to count.
    Only types are checked here; each scheduler checks the values it accepts.
    TorchX's ``torchx.specs.api.Resource`` (a dataclass) stores any value, so the
    mistake only shows later, as an unrelated error inside a scheduler. A ``TypeError``
    and a ``ValueError``, so code guarding either still catches it.

    Args:
        field: the field's name, e.g. ``"cpu"``.
        value: the value given.
        fix: how to write it instead.
    """

    def __init__(self, field: str, value: object, fix: str) -> None:
        super().__init__(f"Resource {field}={value!r} ({type(value).__name__}): {fix}")
        self.field = field
        self.value = value


class EntryPointNotFoundError(AsyncTorchXError, _ReadableKeyError):
    """No entry point of that name in its group (:func:`asynctorchx.util.entrypoints.load`).

    A ``KeyError``, as TorchX's ``torchx.util.entrypoints.load`` raises; ``str(error)``
    is the message itself (a plain ``KeyError`` would quote it).

    Args:
        group: the entry point group.
        name: the name looked up.
        installed: the names the group has.
    """

    def __init__(self, group: str, name: str, installed: Iterable[str]) -> None:
        names = ", ".join(sorted(installed)) or "none"
        super().__init__(
            f"no entry point {name!r} in group {group!r} (it has: {names}): register it"
            f' under [project.entry-points."{group}"] and reinstall the package'
        )
        self.group = group
        self.name = name


class AppGroupFailed(AsyncTorchXError):
    """An app of a ``fail_fast`` group ended ``FAILED`` or ``UNKNOWN``; the others were cancelled.

    Raised by ``async with runner.group(fail_fast=True) as group:`` once every app of
    the group is terminal (or the group's ``stop_timeout`` passed). The message names
    the app that failed first and its status.

    Args:
        failed: the handle of the app that failed first.
        statuses: ``{handle: final AppStatus}`` of every app of the group, in start
            order; an app still running after the stop timeout is left out (see
            ``stragglers``).
        stragglers: the handles of the apps that were not terminal ``stop_timeout``
            seconds after they were cancelled.
    """

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
    """Apps of a group were still not terminal ``stop_timeout`` seconds after being cancelled.

    Raised when leaving ``async with runner.group(...)`` by an exception or a
    cancellation (or by a ``fail_fast`` failure) cancelled the group's apps and some did
    not end in time; when another exception is already propagating it is not raised,
    the stragglers are logged instead. A ``TimeoutError``.

    Args:
        stragglers: the handles of the apps still not terminal.
        stop_timeout: the group's stop timeout (seconds).
    """

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
