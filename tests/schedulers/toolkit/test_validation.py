"""The checks every backend makes on what it is given, before building a request."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from asynctorchx.errors import InvalidAppDefException, InvalidRunConfigException
from asynctorchx.schedulers import get_scheduler_factories
from asynctorchx.schedulers.toolkit import validate_app, validate_stop_timeout
from asynctorchx.specs.api import AppDef, Resource, Role


@pytest.mark.parametrize("seconds", [0, 0.5, 10, 3600.0])
def test_a_finite_grace_period_of_zero_or_more_is_kept_as_float(seconds: float) -> None:
    assert validate_stop_timeout(seconds) == float(seconds)
    assert isinstance(validate_stop_timeout(seconds), float)


@pytest.mark.parametrize("seconds", [math.nan, math.inf, -math.inf, -0.5, "10", True, None])
def test_a_grace_period_that_cannot_be_waited_is_refused(seconds: object) -> None:
    with pytest.raises(InvalidRunConfigException, match="finite number of seconds") as caught:
        validate_stop_timeout(seconds)
    assert caught.value.cfg_key == "stop_timeout"
    assert repr(seconds) in str(caught.value)


# --------------------------------------------------------------------------- environments


BAD_ENVS: list[tuple[dict[Any, Any], str]] = [
    ({"A=B": "x"}, "'A=B'"),  # Docker would read A = "B=x"; execve cannot carry it
    ({"": "x"}, "''"),
    ({"A\0B": "x"}, "NUL"),
    ({"A": "x\0y"}, "NUL"),
    ({"A": 1}, "not a string"),
]

BAD_RESOURCES: list[tuple[Resource, str]] = [
    (Resource(cpu=1, gpu=0, memMB=-5), "memMB=-5"),
    (Resource(cpu=-2, gpu=0, memMB=64), "cpu=-2"),
    (Resource(cpu=1, gpu=-1.5, memMB=64), "gpu=-1.5"),  # type: ignore[arg-type]
    (Resource(cpu=math.nan, gpu=0, memMB=64), "cpu=nan"),  # type: ignore[arg-type]
]


def _app(env: dict[Any, Any] | None = None, resource: Resource | None = None) -> AppDef:
    role = Role("worker", "img", entrypoint="true", env=env or {})
    if resource is not None:
        role.resource = resource
    return AppDef("app", [role])


@pytest.mark.parametrize(("env", "named"), BAD_ENVS)
def test_validate_app_refuses_an_env_no_process_can_carry(env: dict[Any, Any], named: str) -> None:
    with pytest.raises(InvalidAppDefException, match=named) as caught:
        validate_app(_app(env=env))
    assert "role 'worker' env" in str(caught.value)
    assert "fix the name or value" in str(caught.value)


@pytest.mark.parametrize(("resource", "named"), BAD_RESOURCES)
def test_validate_app_refuses_a_negative_or_non_numeric_resource(
    resource: Resource, named: str
) -> None:
    with pytest.raises(InvalidAppDefException, match=named) as caught:
        validate_app(_app(resource=resource))
    assert "-1 for no limit" in str(caught.value)


def test_validate_app_accepts_unset_and_zero_resources() -> None:
    validate_app(_app(env={"A": "1", "B": "x=y"}, resource=Resource(cpu=-1, gpu=-1, memMB=-1)))
    validate_app(_app(resource=Resource(cpu=0, gpu=0, memMB=0)))
    validate_app(_app(resource=Resource(cpu=0.5, gpu=1, memMB=1024)))


# every backend refuses them the same way, at dry run, before anything is built
BACKENDS = ["local_cwd", "local_dir", "local_docker", "slurm"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("env", "named"), BAD_ENVS[:3])
def test_every_backend_refuses_a_bad_env_at_dry_run(
    backend: str, env: dict[Any, Any], named: str, tmp_path: Path
) -> None:
    scheduler = get_scheduler_factories()[backend]("sess")
    with pytest.raises(InvalidAppDefException, match=named):
        scheduler.submit_dryrun(_image_app(tmp_path, env=env), {})


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_refuses_a_negative_resource_at_dry_run(backend: str, tmp_path: Path) -> None:
    scheduler = get_scheduler_factories()[backend]("sess")
    bad = Resource(cpu=1, gpu=0, memMB=-5)
    with pytest.raises(InvalidAppDefException, match="memMB=-5"):
        scheduler.submit_dryrun(_image_app(tmp_path, resource=bad), {})


def _image_app(
    image: Path, env: dict[Any, Any] | None = None, resource: Resource | None = None
) -> AppDef:
    """An app every backend can dry-run but for ``env``/``resource`` (local_dir needs
    an existing absolute image directory)."""
    app = _app(env=env, resource=resource)
    app.roles[0].image = str(image)
    return app
