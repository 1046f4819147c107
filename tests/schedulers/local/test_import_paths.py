"""The local schedulers are importable where TorchX users and the registry look for them."""

from __future__ import annotations

import importlib

import pytest

from asynctorchx.schedulers import get_scheduler_factories, local, local_scheduler


def test_torchx_module_path_reexports_the_package() -> None:
    # torchx.schedulers.local_scheduler is where TorchX code imports these names from
    assert local_scheduler.__all__ == local.__all__
    for name in local.__all__:
        assert getattr(local_scheduler, name) is getattr(local, name)


@pytest.mark.parametrize(
    ("name", "target"),
    [
        ("local_cwd", "asynctorchx.schedulers.local_scheduler:create_cwd_scheduler"),
        ("local_dir", "asynctorchx.schedulers.local_scheduler:create_dir_scheduler"),
    ],
)
def test_registry_targets_create_the_local_schedulers(name: str, target: str) -> None:
    module_name, _, attribute = target.partition(":")
    factory = getattr(importlib.import_module(module_name), attribute)
    created = factory("session")
    assert isinstance(created, local.LocalScheduler)
    assert created.backend == name
    assert created.session_name == "session"
    registered = get_scheduler_factories()[name]("session")
    assert isinstance(registered, local.LocalScheduler)
    assert registered.backend == name
