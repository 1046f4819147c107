"""The local schedulers are importable where TorchX users and the registry look for them."""

from __future__ import annotations

import importlib
import inspect
import typing

import pytest

from asynctorchx.schedulers import get_scheduler_factories, local_scheduler


@pytest.mark.parametrize("backend", ["local", "docker", "slurm", "kubernetes"])
def test_a_backends_names_have_one_import_path_torchxs(backend: str) -> None:
    # torchx.schedulers.<backend>_scheduler is where TorchX code imports these names from;
    # the subpackage is the implementation and exports nothing of its own
    face = importlib.import_module(f"asynctorchx.schedulers.{backend}_scheduler")
    package = importlib.import_module(f"asynctorchx.schedulers.{backend}")
    assert face.__all__
    assert all(hasattr(face, name) for name in face.__all__)
    assert not [name for name in vars(package) if not name.startswith("_")]


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
    assert isinstance(created, local_scheduler.LocalScheduler)
    assert created.backend == name
    assert created.session_name == "session"
    registered = get_scheduler_factories()[name]("session")
    assert isinstance(registered, local_scheduler.LocalScheduler)
    assert registered.backend == name


def test_create_scheduler_has_torchx_signature_and_defaults() -> None:
    # torchx.schedulers.local_scheduler.create_scheduler(session_name, cache_size=100,
    # extra_paths=None, image_provider_class=CWDImageProvider, **kwargs)
    parameters = inspect.signature(local_scheduler.create_scheduler).parameters
    assert [(name, p.kind, p.default) for name, p in parameters.items()] == [
        ("session_name", inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.empty),
        ("cache_size", inspect.Parameter.POSITIONAL_OR_KEYWORD, 100),
        ("extra_paths", inspect.Parameter.POSITIONAL_OR_KEYWORD, None),
        (
            "image_provider_class",
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            local_scheduler.CWDImageProvider,
        ),
        ("kwargs", inspect.Parameter.VAR_KEYWORD, inspect.Parameter.empty),
    ]
    cwd = local_scheduler.create_scheduler("session", 5, ["/opt/bin"], unknown_parameter=1)
    assert (cwd.backend, cwd.session_name) == ("local_cwd", "session")
    directory = local_scheduler.create_scheduler(
        "session", image_provider_class=local_scheduler.LocalDirectoryImageProvider
    )
    assert directory.backend == "local_dir"
    with pytest.raises(ValueError, match="cache_size"):
        local_scheduler.create_scheduler("session", cache_size=0)


def test_local_opts_is_torchx_typed_dict_of_the_run_options() -> None:
    opts: local_scheduler.LocalOpts = {"log_dir": "/tmp/logs", "prepend_cwd": True}
    assert opts["prepend_cwd"] is True
    hints = typing.get_type_hints(local_scheduler.LocalOpts)
    assert set(hints) == {name for name, _ in local_scheduler.create_scheduler("s").run_opts()}
    assert hints["log_dir"] is str
    assert local_scheduler.LocalOpts.__total__ is False
