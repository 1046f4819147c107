"""``local_docker`` container names, which are also the replicas' hostnames.

TorchX 0.7.0's ``torchx.schedulers.docker_scheduler`` names a replica
``{app_id[-30:]}-{role[:30]}-{replica_id}``. Kept for short names; bounded here to a DNS
label's 63 characters for any replica id (Linux refuses a hostname over 64 characters, so
such a container does not start), and distinct for roles sharing their first 30
characters (else the engine refuses the second container: the name is taken).
"""

from __future__ import annotations

import re

from asynctorchx.schedulers.docker_scheduler import (
    DockerJob,
    DockerScheduler,
    container_name,
)
from asynctorchx.specs.api import AppDef, Role

#: An RFC 1123 label, plus the ``_`` and ``.`` that role names may hold (Docker takes them).
HOSTNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


def _job(app_name: str, *roles: Role) -> DockerJob:
    """``local_docker``'s dry-run request for an app of ``roles``."""
    job: DockerJob = DockerScheduler("t").submit_dryrun(AppDef(app_name, list(roles)), {}).request
    return job


def test_short_names_are_torchx_names() -> None:
    assert container_name("app-0123456789", "trainer", 3) == "app-0123456789-trainer-3"
    job = _job("test", Role("trainer", "img", entrypoint="e"))
    assert job.containers[0].name == f"{job.app_id}-trainer-0"


def test_a_100_character_role_has_valid_hostnames_for_any_replica() -> None:
    role = Role("r" * 100, "img", entrypoint="e", num_replicas=101)
    job = _job("an_application_named_at_length", role)  # an app id over 30 characters
    names = [container.name for container in job.containers]
    assert all(HOSTNAME.fullmatch(name) for name in names), names
    assert len(set(names)) == 101
    assert {len(names[0]), len(names[10]), len(names[100])} == {63}
    suffix = job.app_id[-10:]  # the app id's random part: apps stay distinct
    assert all(suffix in name for name in names)
    for container in job.containers:
        assert container.config["Hostname"] == container.kwargs["hostname"] == container.name
        assert container.kwargs["environment"]["TORCHX_RANK0_HOST"] == names[0]


def test_roles_sharing_their_first_30_characters_get_distinct_names() -> None:
    first = Role("x" * 30 + "_first", "img", entrypoint="e")
    second = Role("x" * 30 + "_second", "img", entrypoint="e")
    names = [container.name for container in _job("a", first, second).containers]
    assert names[0] != names[1]
    assert all(HOSTNAME.fullmatch(name) for name in names)
