"""One app-id policy and one device table for every backend."""

from __future__ import annotations

import pytest

from asynctorchx.errors import (
    InvalidAppDefException,
    InvalidAppIdException,
    InvalidNameException,
    UnknownDeviceError,
)
from asynctorchx.schedulers.devices import get_device_mounts as torchx_path_get_device_mounts
from asynctorchx.schedulers.ids import make_unique
from asynctorchx.schedulers.toolkit import (
    get_device_mounts,
    make_app_id,
    sanitize_app_name,
    validate_app,
    validate_app_id,
    validate_name,
)
from asynctorchx.schedulers.toolkit._ids import MAX_NAME_LENGTH
from asynctorchx.specs import AppDef, DeviceMount, Role
from asynctorchx.specs.named_resources_aws import EFA_DEVICE, NEURON_DEVICE


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("trainer", "trainer"),
        ("my app/x", "my-app-x"),
        ("../../etc", "etc"),
        ("a..b", "a-b"),
        ("-lead", "lead"),
        ("", "app"),
        ("///", "app"),
        ("ünïcode", "n-code"),
    ],
)
def test_app_names_are_sanitised_into_a_usable_id_part(name: str, expected: str) -> None:
    assert sanitize_app_name(name) == expected


def test_every_generated_id_is_valid_and_unique() -> None:
    names = ["my app/x", "..", "a" * 400, "ok", "tab\there"]
    ids = [make_app_id(name) for name in names for _ in range(20)]
    assert all(validate_app_id(app_id) == app_id for app_id in ids)
    assert len(set(ids)) == len(ids)
    assert len(make_app_id("a" * 400)) == MAX_NAME_LENGTH + 11
    assert make_unique("my app/x").startswith("my-app-x-")


@pytest.mark.parametrize("bad", ["", "a/b", "../x", "..", ".hidden", "-flag", "a b", "a\n"])
def test_invalid_app_ids_raise_a_typed_error_naming_the_id(bad: str) -> None:
    with pytest.raises(InvalidAppIdException) as raised:
        validate_app_id(bad)
    assert repr(bad)[1:-1] in str(raised.value) or bad == ""


def test_efa_and_neuron_devices_become_numbered_device_files() -> None:
    mounts = get_device_mounts({EFA_DEVICE: 2, NEURON_DEVICE: 1, "/dev/fuse": 1})
    assert mounts == [
        DeviceMount("/dev/infiniband/uverbs0", "/dev/infiniband/uverbs0"),
        DeviceMount("/dev/infiniband/uverbs1", "/dev/infiniband/uverbs1"),
        DeviceMount("/dev/neuron0", "/dev/neuron0"),
        DeviceMount("/dev/fuse", "/dev/fuse"),
    ]
    assert torchx_path_get_device_mounts is get_device_mounts


def test_an_unknown_device_is_refused_with_the_known_ones_listed() -> None:
    with pytest.raises(UnknownDeviceError, match=r"'example.com/tpu'.*aws.amazon.com/neurondevice"):
        get_device_mounts({"example.com/tpu": 1})
    with pytest.raises(ValueError, match="count -1"):
        get_device_mounts({EFA_DEVICE: -1})


def _app(*roles: Role) -> AppDef:
    return AppDef("app", list(roles))


def test_role_and_session_names_that_would_leave_a_directory_are_refused() -> None:
    for bad in ["../../x", "/abs", "..", "a/b", "", "a b", "x" * 101, 7]:
        with pytest.raises(InvalidNameException) as raised:
            validate_name("role name", bad)
        assert raised.value.name == bad
        assert "role name" in str(raised.value)
    assert validate_name("session name", "my_session-1.2") == "my_session-1.2"
    with pytest.raises(InvalidNameException, match=r"'\.\./x'"):
        validate_app(_app(Role("../x", image="", entrypoint="echo")))


def test_apps_no_backend_can_run_are_refused_with_the_fix() -> None:
    echo = Role("worker", image="", entrypoint="echo")
    validate_app(_app(echo, Role("reader", image="", entrypoint="cat")))
    cases = {
        r"No roles for app: .*Did you forget to add roles": _app(),
        "two roles named 'worker'": _app(echo, Role("worker", image="", entrypoint="cat")),
        r"No entrypoint for role: w\. Did you forget": _app(Role("w", image="", entrypoint="")),
        r"Non-positive replicas for role: w\. Did you forget": _app(
            Role("w", image="", entrypoint="true", num_replicas=0)
        ),
    }
    for message, app in cases.items():
        with pytest.raises(InvalidAppDefException, match=message):
            validate_app(app)
