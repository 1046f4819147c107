"""What the local schedulers run: the dry-run request, image providers and run options."""

from __future__ import annotations

import abc
import logging
import os
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

import attrs

from asynctorchx.errors import InvalidAppDefException
from asynctorchx.schedulers._structured import StructuredOpts
from asynctorchx.schedulers.toolkit import validate_stop_timeout
from asynctorchx.specs.api import AppDef, CfgVal, RetryPolicy, Role, macros

logger = logging.getLogger(__name__)

#: The variable that ``auto_set_cuda_visible_devices`` sets (TorchX's constant name).
ENV_CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"

#: Seconds between SIGTERM and SIGKILL when an app is cancelled or the scheduler closes.
DEFAULT_STOP_TIMEOUT = 10.0


@attrs.define
class ReplicaParam:
    """How one replica is started; TorchX's ``local_scheduler.ReplicaParam`` plus ``combined``.

    Args:
        args: ``[entrypoint, *args]`` as passed to the process (an argv list, never a shell).
        env: the variables set on top of this process's environment.
        stdout: path of ``stdout.log``.
        stderr: path of ``stderr.log``.
        combined: path of ``combined.log`` (both streams, whole lines, in arrival order).
        cwd: the working directory (the image root), or None for this process's.
    """

    args: list[str]
    env: dict[str, str]
    stdout: str | None = None
    stderr: str | None = None
    combined: str | None = None
    cwd: str | None = None


@attrs.define
class PopenRequest:
    """The dry-run request: a process per replica; TorchX's ``local_scheduler.PopenRequest``.

    Args:
        app_id: the app's id.
        log_dir: the app's log directory, ``<log_dir>/<session>/<app_id>``.
        role_params: per role name, one :class:`ReplicaParam` per replica.
        role_log_dirs: per role name, each replica's log directory.
        max_retries: per role name, how many restarts it may have.
        retry_policies: per role name, what a failure restarts.
        stop_timeout: seconds between SIGTERM and SIGKILL to each replica's group on cancel.
    """

    app_id: str
    log_dir: str
    role_params: dict[str, list[ReplicaParam]]
    role_log_dirs: dict[str, list[str]]
    max_retries: dict[str, int] = attrs.field(factory=dict)
    retry_policies: dict[str, RetryPolicy] = attrs.field(factory=dict)
    stop_timeout: float = DEFAULT_STOP_TIMEOUT

    def __str__(self) -> str:
        lines = [f"app_id: {self.app_id}", f"log_dir: {self.log_dir}"]
        for role_name, params in self.role_params.items():
            retries = self.max_retries.get(role_name, 0)
            policy = self.retry_policies.get(role_name, RetryPolicy.APPLICATION)
            lines.append(f"role {role_name}: {len(params)} replica(s), max_retries={retries}")
            if retries:
                lines[-1] += f" ({policy.value})"
            for replica_id, param in enumerate(params):
                lines.append(f"  [{replica_id}] {shlex.join(param.args)}")
                lines.append(f"      cwd: {param.cwd or os.getcwd()}")
                for key, value in sorted(param.env.items()):
                    lines.append(f"      env: {key}={value}")
                lines.append(f"      logs: {os.path.dirname(param.combined or '')}")
        return "\n".join(lines)


class ImageProvider(abc.ABC):
    """Turns a role's image into a directory on this host; TorchX's ``ImageProvider``.

    Args:
        cfg: the resolved run config.
    """

    def __init__(self, cfg: Mapping[str, CfgVal]) -> None:
        self.cfg = cfg

    @abc.abstractmethod
    def fetch(self, image: str) -> str:
        """Return the directory that ``image`` is on this host (its image root)."""

    def fetch_role(self, role: Role) -> str:
        """Return the image root for ``role`` (``fetch(role.image)``); may update the role."""
        return self.fetch(role.image)

    def get_cwd(self, image: str) -> str | None:
        """Return the replicas' working directory for image root ``image`` (default: itself), also
        put on their ``PATH``; None for this process's, with nothing added to ``PATH``."""
        return image

    def get_entrypoint(self, img_root: str, role: Role) -> str:
        """Return the program to run for ``role`` (default: ``role.entrypoint`` as is)."""
        return role.entrypoint

    def get_replica_param(
        self,
        img_root: str,
        role: Role,
        stdout: str | None = None,
        stderr: str | None = None,
        combined: str | None = None,
    ) -> ReplicaParam:
        """Return the :class:`ReplicaParam` of one replica of ``role`` (macros already applied)."""
        return ReplicaParam(
            args=[self.get_entrypoint(img_root, role), *role.args],
            env=dict(role.env),
            stdout=stdout,
            stderr=stderr,
            combined=combined,
            cwd=self.get_cwd(img_root),
        )


class CWDImageProvider(ImageProvider):
    """``local_cwd``: ignores the image name; the image root is the current directory."""

    def fetch(self, image: str) -> str:
        """Return ``os.getcwd()`` whatever ``image`` is."""
        return os.getcwd()

    def get_cwd(self, image: str) -> str | None:
        """Return ``os.getcwd()`` whatever ``image`` is (TorchX's ``CWDImageProvider.get_cwd``)."""
        return os.getcwd()


class LocalDirectoryImageProvider(ImageProvider):
    """``local_dir``: the image name is an absolute path to an existing directory."""

    def fetch(self, image: str) -> str:
        """Return ``image`` itself.

        Raises:
            InvalidAppDefException: ``image`` is not an absolute path to an existing
                directory (a ``ValueError``, as TorchX raises).
        """
        if not os.path.isabs(image):
            raise InvalidAppDefException(
                f"image {image!r} is not an absolute path: the local_dir scheduler runs a role"
                " in the directory its image names; give an absolute path, or use local_cwd"
            )
        if not os.path.isdir(image):
            raise InvalidAppDefException(
                f"image {image!r} is not an existing directory: create it, or fix the path"
            )
        return image

    def get_entrypoint(self, img_root: str, role: Role) -> str:
        """``img_root/entrypoint`` if that file exists, else ``entrypoint`` (TorchX's rule)."""
        candidate = os.path.join(img_root, role.entrypoint)  # an absolute entrypoint: itself
        return candidate if os.path.exists(candidate) else role.entrypoint


@dataclass
class Opts(StructuredOpts):
    """The run options: torchx-nightly's ``local_scheduler.Opts``, plus ``stop_timeout``."""

    log_dir: str | None = None
    """dir to write stdout/stderr log files of replicas"""

    prepend_cwd: bool = False
    """if set, prepends CWD to replica's PATH env var making any binaries in CWD take
    precedence over those in PATH"""

    auto_set_cuda_visible_devices: bool = False
    """sets the `CUDA_AVAILABLE_DEVICES` for roles that request GPU resources. Each role
    replica will be assigned one GPU. Does nothing if the device count is less than
    replicas."""

    stop_timeout: float = DEFAULT_STOP_TIMEOUT
    """grace period in seconds between SIGTERM and SIGKILL to each replica's process
    group when the app is cancelled or the scheduler closes"""


class LocalOpts(TypedDict, total=False):
    """TorchX 0.7.0's ``local_scheduler.LocalOpts``: :class:`Opts`'s options as a ``TypedDict``."""

    log_dir: str
    prepend_cwd: bool | None
    auto_set_cuda_visible_devices: bool | None
    stop_timeout: float


@attrs.frozen
class RequestContext:
    """What a :class:`PopenRequest` is built from besides the app and the run config."""

    app_id: str
    app_log_dir: str
    job_id: str
    image_provider: ImageProvider
    extra_paths: Sequence[str] = ()
    cuda_device_count: Callable[[], int] | None = None


def build_popen_request(
    app: AppDef, cfg: Mapping[str, CfgVal], context: RequestContext
) -> PopenRequest:
    """Build the request that runs every replica of ``app`` (the local schedulers' dry run)."""
    timeout = cfg.get("stop_timeout")
    request = PopenRequest(
        app_id=context.app_id,
        log_dir=context.app_log_dir,
        role_params={},
        role_log_dirs={},
        stop_timeout=validate_stop_timeout(DEFAULT_STOP_TIMEOUT if timeout is None else timeout),
    )
    gpu_assignments = cuda_visible_devices(app, cfg, context.cuda_device_count)
    for role in app.roles:
        img_root = context.image_provider.fetch_role(role)
        params: list[ReplicaParam] = []
        log_dirs: list[str] = []
        for replica_id in range(role.num_replicas):
            replica_log_dir = os.path.join(context.app_log_dir, role.name, str(replica_id))
            values = macros.Values(
                img_root=img_root,
                app_id=context.app_id,
                replica_id=str(replica_id),
                rank0_env="TORCHX_RANK0_HOST",
            )
            param = context.image_provider.get_replica_param(
                img_root,
                values.apply(role),
                stdout=os.path.join(replica_log_dir, "stdout.log"),
                stderr=os.path.join(replica_log_dir, "stderr.log"),
                combined=os.path.join(replica_log_dir, "combined.log"),
            )
            # TorchX's replica variables the role does not set, and PATH with the extra paths
            env = param.env
            if "PYTHONUNBUFFERED" not in env and "PYTHONUNBUFFERED" not in os.environ:
                env["PYTHONUNBUFFERED"] = "x"  # replicas' output arrives as it is printed
            env["TORCHX_RANK0_HOST"] = "localhost"
            env.setdefault("TORCHX_JOB_ID", context.job_id)
            env.setdefault("TORCHELASTIC_ERROR_FILE", os.path.join(replica_log_dir, "error.json"))
            env.setdefault(
                "PET_LOG_DIR", os.path.join(context.app_log_dir, "torchelastic", role.name)
            )
            front = [*context.extra_paths, env.get("PATH")]
            if param.cwd:
                front.insert(0 if cfg.get("prepend_cwd") else len(front), param.cwd)
            parts = (*front, os.environ.get("PATH"))
            env["PATH"] = os.pathsep.join(part.strip(os.pathsep) for part in parts if part)
            devices = gpu_assignments.get((role.name, replica_id))
            if devices is not None:
                env[ENV_CUDA_VISIBLE_DEVICES] = devices
            params.append(param)
            log_dirs.append(replica_log_dir)
        request.role_params[role.name] = params
        request.role_log_dirs[role.name] = log_dirs
        request.max_retries[role.name] = role.max_retries
        request.retry_policies[role.name] = role.retry_policy
    return request


def cuda_visible_devices(
    app: AppDef, cfg: Mapping[str, CfgVal], device_count: Callable[[], int] | None = None
) -> dict[tuple[str, int], str]:
    """TorchX's ``auto_set_cuda_visible_devices``: one disjoint GPU range per replica."""
    if not cfg.get("auto_set_cuda_visible_devices"):
        return {}
    wanted = sum(role.resource.gpu * role.num_replicas for role in app.roles)
    if wanted == 0:
        return {}
    available = (device_count or gpu_count)()
    if available < wanted:
        logger.warning(
            "auto_set_cuda_visible_devices: the app asks for %d GPUs but this host has %d;"
            " CUDA_VISIBLE_DEVICES is left unset",
            wanted,
            available,
        )
        return {}
    assignments: dict[tuple[str, int], str] = {}
    next_device = 0
    for role in app.roles:
        for replica_id in range(role.num_replicas if role.resource.gpu else 0):
            devices = range(next_device, next_device + role.resource.gpu)
            assignments[(role.name, replica_id)] = ",".join(str(d) for d in devices)
            next_device += role.resource.gpu
    return assignments


def gpu_count() -> int:
    """How many GPUs ``nvidia-smi -L`` lists (0 when it is missing or fails)."""
    try:
        listing = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in listing.stdout.splitlines() if line.startswith("GPU "))
