"""``local_docker``'s public names at TorchX's import path (``docker_scheduler``)."""

from __future__ import annotations

from asynctorchx.schedulers.docker._engine import has_docker
from asynctorchx.schedulers.docker._options import NETWORK, DockerOpts, Opts
from asynctorchx.schedulers.docker._request import (
    LABEL_APP_DEF,
    LABEL_APP_ID,
    LABEL_CANCELLED_AT,
    LABEL_REPLICA_ID,
    LABEL_ROLE_NAME,
    LABEL_VERSION,
    RANK0_ENV,
    DockerContainer,
    DockerJob,
    container_name,
)
from asynctorchx.schedulers.docker._scheduler import (
    DEFAULT_GRACE_S,
    DEFAULT_STOP_TIMEOUT,
    DockerScheduler,
    create_scheduler,
)
from asynctorchx.schedulers.ids import make_unique as make_unique

__all__ = [
    "DEFAULT_GRACE_S",
    "DEFAULT_STOP_TIMEOUT",
    "LABEL_APP_DEF",
    "LABEL_APP_ID",
    "LABEL_CANCELLED_AT",
    "LABEL_REPLICA_ID",
    "LABEL_ROLE_NAME",
    "LABEL_VERSION",
    "NETWORK",
    "RANK0_ENV",
    "DockerContainer",
    "DockerJob",
    "DockerOpts",
    "DockerScheduler",
    "Opts",
    "container_name",
    "create_scheduler",
    "has_docker",
    "make_unique",
]
