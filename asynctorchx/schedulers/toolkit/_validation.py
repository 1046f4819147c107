"""One check of an ``AppDef`` for every backend, so an app valid on one is valid on all."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from asynctorchx.errors import (
    InvalidAppDefException,
    InvalidNameException,
    InvalidRunConfigException,
)
from asynctorchx.schedulers.toolkit._ids import MAX_NAME_LENGTH, is_safe_name
from asynctorchx.specs.api import MISSING, AppDef, Role


def validate_name(kind: str, name: object) -> str:
    """Return ``name`` if a valid ``kind`` (role or session) name: a safe name of 1 to 100 chars.

    Raises:
        InvalidNameException: ``name`` breaks the rule.
    """
    if not is_safe_name(name) or len(name) > MAX_NAME_LENGTH:
        raise InvalidNameException(kind, name)
    return name


def validate_app(app: AppDef) -> None:
    """Check that ``app`` can be run by any backend (TorchX's ``Runner.dryrun`` checks and more).

    Raises:
        InvalidAppDefException: no role, two roles of one name, no replica or entrypoint,
            or a bad env (:func:`check_env`) or resource (:func:`check_resource`).
        InvalidNameException: a role name is not valid (see :func:`validate_name`).
    """
    if not app.roles:
        raise InvalidAppDefException(
            f"No roles for app: {app.name}. Did you forget to add roles to AppDef?"
        )
    seen: set[str] = set()
    for role in app.roles:
        validate_name("role name", role.name)
        if role.name in seen:
            raise InvalidAppDefException(
                f"app {app.name!r} has two roles named {role.name!r}: give each role its own name"
            )
        seen.add(role.name)
        if not role.entrypoint or role.entrypoint == MISSING:
            raise InvalidAppDefException(
                f"No entrypoint for role: {role.name}."
                " Did you forget to call role.runs(entrypoint, args, env)?"
            )
        if role.num_replicas < 1:
            raise InvalidAppDefException(
                f"Non-positive replicas for role: {role.name}."
                " Did you forget to set role.num_replicas?"
            )
        check_env(role.env, f"role {role.name!r} env")
        check_resource(role)


def check_resource(role: Role) -> None:
    """Refuse a ``memMB``, ``cpu`` or ``gpu`` that is not a number, NaN, or negative but ``-1``.

    Raises:
        InvalidAppDefException: the role, the field, its value and the fix.
    """
    resource = role.resource
    for field, value in (("memMB", resource.memMB), ("cpu", resource.cpu), ("gpu", resource.gpu)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidAppDefException(
                f"role {role.name!r} has Resource.{field}={value!r}, not a number: give a"
                " number (memMB in MB), or -1 for no limit"
            )
        if value != -1 and not value >= 0:  # NaN too
            raise InvalidAppDefException(
                f"role {role.name!r} has Resource.{field}={value!r}: use 0 or more, or -1"
                " for no limit (another negative value would silently set no limit)"
            )


def validate_stop_timeout(
    seconds: object, where: str = "run option stop_timeout", cfg_key: str | None = "stop_timeout"
) -> float:
    """Return ``seconds`` (before SIGKILL) as a float; infinity would let a cancel hang.

    Raises:
        InvalidRunConfigException: ``seconds`` is not a finite number of 0 or more.
    """
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not math.isfinite(seconds)
        or seconds < 0
    ):
        raise InvalidRunConfigException(
            f"{where} is {seconds!r}: give a finite number of seconds, 0 or more, between"
            f" SIGTERM and SIGKILL (e.g. {where.rsplit(' ', 1)[-1]}=10)",
            cfg_key,
        )
    return float(seconds)


def check_env(env: Mapping[Any, Any], where: str, cfg_key: str | None = None) -> dict[str, str]:
    """Return ``env`` as ``dict[str, str]`` if POSIX and Docker's ``KEY=VALUE`` can carry it.

    Raises:
        InvalidRunConfigException: ``cfg_key`` is given and an entry is bad.
        InvalidAppDefException: otherwise, an entry is bad.
    """
    for key, value in env.items():
        problem = None
        if not isinstance(key, str) or not key:
            problem = f"key {key!r} is not a non-empty string"
        elif "=" in key or "\0" in key:
            problem = f"key {key!r} holds '=' or a NUL byte, which no environment can carry"
        elif not isinstance(value, str):
            problem = (
                f"{key!r} has the value {value!r} ({type(value).__name__}), not a string:"
                f" write {str(value)!r}"
            )
        elif "\0" in value:
            problem = f"the value of {key!r} holds a NUL byte, which no environment can carry"
        if problem is not None:
            message = f"{where}: {problem}; fix the name or value"
            if cfg_key is not None:
                raise InvalidRunConfigException(message, cfg_key)
            raise InvalidAppDefException(message)
    return dict(env)
