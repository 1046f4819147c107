"""The import paths a TorchX user writes keep working, and give the same objects.

``specs/api.py`` and ``runner/api.py`` re-export names defined in private modules; a
port from TorchX changes ``torchx`` to ``asynctorchx`` in ``from torchx.specs import X``,
``from torchx.specs.api import X``, ``from torchx.runner import X`` and
``from torchx.runner.api import X``. Both faces of a package must give the one object:
the cattrs hooks of :mod:`asynctorchx.specs.converter` are registered on the class
objects, and ``isinstance`` checks across modules rely on it.
"""

from __future__ import annotations

import importlib

import pytest

import asynctorchx.runner
import asynctorchx.runner.api
import asynctorchx.specs
import asynctorchx.specs.api
from asynctorchx.specs.converter import from_json, to_json

# The public names of TorchX 0.7.0's torchx.specs.api that asynctorchx has
# (TorchX's UnknownAppException and UnknownSchedulerException live in asynctorchx.errors
# and are re-exported by asynctorchx.specs only).
TORCHX_SPECS_API_NAMES = [
    "ALL",
    "AppDef",
    "AppDryRunInfo",
    "AppHandle",
    "AppState",
    "AppStatus",
    "AppStatusError",
    "BindMount",
    "CfgVal",
    "DeviceMount",
    "InvalidRunConfigException",
    "MISSING",
    "MalformedAppHandleException",
    "MountType",
    "NONE",
    "NULL_RESOURCE",
    "ParsedAppHandle",
    "ReplicaState",
    "ReplicaStatus",
    "Resource",
    "RetryPolicy",
    "Role",
    "RoleStatus",
    "VolumeMount",
    "get_type_name",
    "is_terminal",
    "macros",
    "parse_app_handle",
    "runopt",
    "runopts",
]

# The public names of TorchX 0.7.0's torchx.specs that torchx.specs.api also defines
# (the others, such as named_resources and materialize_appdef, come from elsewhere).
TORCHX_SPECS_NAMES_FROM_API = [
    *(name for name in TORCHX_SPECS_API_NAMES if name not in ("AppStatusError", "ParsedAppHandle")),
    "make_app_handle",
    "parse_mounts",
]

# The public names of TorchX 0.7.0's torchx.runner.api that asynctorchx has (the
# tracker names come from torchx.tracker.api there, asynctorchx.tracker.api here).
TORCHX_RUNNER_API_NAMES = [
    "ENV_TORCHX_JOB_ID",
    "ENV_TORCHX_PARENT_RUN_ID",
    "ENV_TORCHX_TRACKERS",
    "Runner",
    "get_configured_trackers",
    "get_runner",
    "tracker_config_env_var_name",
]

# torchx.runner exports Runner and get_runner (asynctorchx.runner adds LogLine, the events).
RUNNER_NAMES = ["Runner", "get_runner"]


def _import(module: str, name: str) -> object:
    """``from module import name``, as a user's module does it.

    Raises:
        AttributeError: ``module`` has no ``name``.
    """
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("name", TORCHX_SPECS_API_NAMES)
def test_torchx_specs_api_names_import_from_specs_api(name: str) -> None:
    # in __all__: `from asynctorchx.specs.api import name` passes mypy --strict too
    assert name in asynctorchx.specs.api.__all__
    assert hasattr(asynctorchx.specs.api, name)


@pytest.mark.parametrize("name", TORCHX_SPECS_NAMES_FROM_API)
def test_specs_and_specs_api_give_the_same_object(name: str) -> None:
    assert name in asynctorchx.specs.__all__
    assert _import("asynctorchx.specs", name) is _import("asynctorchx.specs.api", name)


@pytest.mark.parametrize("name", TORCHX_RUNNER_API_NAMES)
def test_torchx_runner_api_names_import_from_runner_api(name: str) -> None:
    # in __all__: `from asynctorchx.runner.api import name` passes mypy --strict too
    assert name in asynctorchx.runner.api.__all__
    assert hasattr(asynctorchx.runner.api, name)


def test_the_runner_logs_under_its_public_module_name_as_torchx_does() -> None:
    # TorchX's Runner logs as `torchx.runner.api`: a ported logging configuration names it
    assert asynctorchx.runner.api.logger.name == "asynctorchx.runner.api"


@pytest.mark.parametrize("name", RUNNER_NAMES)
def test_runner_and_runner_api_give_the_same_object(name: str) -> None:
    assert name in asynctorchx.runner.__all__
    assert _import("asynctorchx.runner", name) is _import("asynctorchx.runner.api", name)


def test_a_role_encoded_from_one_face_decodes_as_the_other_faces_class() -> None:
    # The converter's hooks (enums by name, mounts as a tagged union) were registered
    # on the classes specs.api gives; a Role built from asynctorchx.specs uses them.
    role = asynctorchx.specs.Role(
        "trainer",
        "image",
        retry_policy=asynctorchx.specs.RetryPolicy.REPLICA,
        mounts=[asynctorchx.specs.BindMount("/data", "/data", read_only=True)],
    )
    text = to_json(role)
    assert '"REPLICA"' in text
    assert '"type": "BindMount"' in text
    decoded = from_json(text, asynctorchx.specs.api.Role)
    assert decoded == role
    assert isinstance(decoded.mounts[0], asynctorchx.specs.BindMount)
