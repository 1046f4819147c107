"""``DockerContainer.kwargs``: the dry run in docker-py's ``containers.run`` keywords.

TorchX 0.7.0's ``torchx.schedulers.docker_scheduler`` dry run holds, per replica, the
keywords of ``client.containers.run(image, command, **kwargs)``; code written for it
reads ``info.request.containers[0].kwargs[...]``. These tests read what such code reads
(no engine needed): each value must be the one the create body (``config``) sends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from asynctorchx.schedulers.docker_scheduler import DockerContainer, DockerJob, DockerScheduler
from asynctorchx.specs.api import (
    AppDef,
    BindMount,
    CfgVal,
    DeviceMount,
    Resource,
    Role,
    VolumeMount,
)


def _dryrun(role: Role, cfg: dict[str, CfgVal] | None = None) -> DockerContainer:
    """Replica 0 of a one-role app ``role``, as ``local_docker``'s dry run requests it."""
    job: DockerJob = DockerScheduler("t").submit_dryrun(AppDef("kw", [role]), cfg or {}).request
    return job.containers[0]


def _role(**kwargs: Any) -> Role:
    """A role running ``echo hi`` in ``img``, with ``kwargs`` as further fields."""
    return Role("trainer", "img", entrypoint="echo", args=["hi"], **kwargs)


def test_environment_is_a_dict_of_the_options_the_role_and_rank0(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KW_COPIED", "from-host")
    cfg: dict[str, CfgVal] = {"copy_env": ["KW_COP*"], "env": {"OPT": "a=b", "FOO": "lost"}}
    container = _dryrun(_role(env={"FOO": "bar"}), cfg)
    assert container.kwargs["environment"] == {
        "KW_COPIED": "from-host",
        "OPT": "a=b",  # a value may hold "="
        "FOO": "bar",  # the role's own wins over the run options
        "TORCHX_RANK0_HOST": container.name,
        "TORCHX_IMAGE": container.image,  # torchx-nightly's addition
    }


def test_mounts_are_docker_py_mounts_with_an_absolute_bind_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    mounts = [
        BindMount(src_path="data", dst_path="/data", read_only=True),
        VolumeMount(src="cache", dst_path="/cache"),
    ]
    kwargs = _dryrun(_role(mounts=mounts)).kwargs
    # each equals docker.types.Mount(target, source, type, read_only) (a dict)
    assert kwargs["mounts"] == [
        {"Target": "/data", "Source": str(tmp_path / "data"), "Type": "bind", "ReadOnly": True},
        {"Target": "/cache", "Source": "cache", "Type": "volume", "ReadOnly": False},
    ]
    assert kwargs["devices"] == []


def test_devices_are_host_container_permissions_resource_devices_first() -> None:
    role = _role(
        mounts=[
            DeviceMount(src_path="/dev/fuse", dst_path="/dev/fuse", permissions="rw"),
            DeviceMount(src_path="/dev/a:b", dst_path="/dev/ab"),  # ":" needs docker-py's dict
        ],
        resource=Resource(cpu=1, gpu=0, memMB=64, devices={"vpc.amazonaws.com/efa": 1}),
    )
    assert _dryrun(role).kwargs["devices"] == [
        "/dev/infiniband/uverbs0:/dev/infiniband/uverbs0:rwm",
        "/dev/fuse:/dev/fuse:rw",
        {"PathOnHost": "/dev/a:b", "PathInContainer": "/dev/ab", "CgroupPermissions": "rwm"},
    ]


def test_gpus_are_one_docker_py_device_request_for_compute_and_utility() -> None:
    with_gpus = _dryrun(_role(resource=Resource(cpu=1, gpu=2, memMB=64))).kwargs
    # equal to docker.types.DeviceRequest(count=2, capabilities=[["compute", "utility"]])
    assert with_gpus["device_requests"] == [
        {
            "Driver": "",
            "Count": 2,
            "DeviceIDs": [],
            "Capabilities": [["compute", "utility"]],
            "Options": {},
        }
    ]
    assert "device_requests" not in _dryrun(_role(resource=Resource(1, 0, 64))).kwargs


def test_privileged_is_always_there_and_follows_the_run_option() -> None:
    assert _dryrun(_role()).kwargs["privileged"] is False
    assert _dryrun(_role(), {"privileged": True}).kwargs["privileged"] is True


def test_resources_are_memory_in_mib_nano_cpus_and_retries() -> None:
    role = _role(resource=Resource(cpu=1.5, gpu=0, memMB=3000), max_retries=2)
    kwargs = _dryrun(role).kwargs
    assert kwargs["mem_limit"] == kwargs["shm_size"] == "3000m"  # docker-py: 3000 MiB
    assert kwargs["nano_cpus"] == 1_500_000_000
    assert kwargs["restart_policy"] == {"Name": "on-failure", "MaximumRetryCount": 2}
    unset = _dryrun(_role()).kwargs  # Role's default resource: nothing asked, no limit
    assert not {"mem_limit", "shm_size", "nano_cpus", "restart_policy"} & set(unset)


def test_names_labels_network_and_ports_exposed_but_not_published() -> None:
    container = _dryrun(_role(port_map={"tb": 6006}))
    kwargs = container.kwargs
    assert kwargs["name"] == kwargs["hostname"] == container.name
    assert kwargs["labels"]["torchx.pytorch.org/role-name"] == "trainer"
    assert kwargs["labels"]["torchx.pytorch.org/replica-id"] == "0"
    assert kwargs["network"] == "torchx"
    assert kwargs["networking_config"] == {"torchx": {"Aliases": [container.name]}}
    assert kwargs["ports"] == {"6006/tcp": []}  # no host binding: nothing is published
    assert kwargs["init"] is True


def test_command_runs_as_given_whatever_the_image_entrypoint() -> None:
    container = _dryrun(_role())
    assert container.command == ["echo", "hi"]
    assert container.kwargs["entrypoint"] == []


def test_kwargs_is_read_only_and_follows_the_config() -> None:
    container = _dryrun(_role(resource=Resource(cpu=1, gpu=0, memMB=64)))
    with pytest.raises(TypeError):
        container.kwargs["privileged"] = True  # type: ignore[index]
    container.kwargs["environment"]["LOST"] = "x"  # a copy: the request is unchanged
    assert "LOST" not in container.kwargs["environment"]
    container.config["HostConfig"]["Memory"] = 1000  # not whole MiB: bytes
    assert container.kwargs["mem_limit"] == 1000
