"""One check of an ``AppDef`` before any backend builds a request from it.

Every backend turns role names into path parts (local log directories, Slurm log files)
or object names (containers, pods), so the same names must be valid everywhere: an app
that dry-runs on one backend and is refused by another is a trap. The same holds for a
role's environment (every backend starts a process with it) and its ``Resource`` (every
backend turns it into limits or a request), and for the grace period before SIGKILL.
"""

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
    """Return ``name`` if it is a valid role or session name.

    The rule is the app-id rule: 1 to 100 characters of ``[A-Za-z0-9_.-]``, not starting
    with ``.`` or ``-``, without ``..``. So a name can never leave the directory it is
    joined to, and an app handle built from it parses back.

    Args:
        kind: what is named, for the message (``role name``, ``session name``).
        name: the value to check.

    Raises:
        InvalidNameException: ``name`` breaks the rule; the message names it.
    """
    if not is_safe_name(name) or len(name) > MAX_NAME_LENGTH:
        raise InvalidNameException(kind, name)
    return name


def validate_app(app: AppDef) -> None:
    """Check that ``app`` can be run by any backend.

    Args:
        app: the app to check.

    Raises:
        InvalidAppDefException: the app has no role, two roles share a name (the second
            would silently replace the first), a role has fewer than one replica, a
            role has no entrypoint, an environment no process can carry (see
            :func:`check_env`) or a resource that is not a number, negative or NaN (see
            :func:`check_resource`).
        InvalidNameException: a role name is not valid (see :func:`validate_name`).
    """
    # TorchX's words where TorchX checks the same rule (torchx.runner.api.Runner.dryrun)
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
    """Refuse a ``memMB``, ``cpu`` or ``gpu`` that is not a number, negative, or NaN.

    ``-1`` is the ``Resource`` fields' "unset" (``NULL_RESOURCE``, as in TorchX's
    ``torchx.specs.api``) and is accepted: no limit. Any other negative value would
    silently mean no limit on Docker, and a request Slurm or Kubernetes refuse later.

    Args:
        role: the role whose ``resource`` is checked.

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
    """Return ``seconds`` as a float if it is a usable grace period before SIGKILL.

    A grace period is a finite number of seconds, 0 or more: NaN cannot be waited for
    (anyio refuses it as a deadline), infinity would let a replica that ignores SIGTERM
    hold a cancel forever, and a negative one means nothing.

    Args:
        seconds: the value to check (``stop_timeout``, in seconds).
        where: what it is, for the message.
        cfg_key: the run option it came from (the error's ``cfg_key``), or None.

    Raises:
        InvalidRunConfigException: ``seconds`` is not a finite number of 0 or more; the
            message names the value and the fix.
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
    """Check that ``env`` can become a process environment; return it as ``dict[str, str]``.

    POSIX (and Docker's ``Env`` list of ``KEY=VALUE`` strings) cannot carry a key that is
    empty or holds ``=`` (Docker turns ``{"A=B": "x"}`` into ``A`` = ``B=x``), nor a NUL
    byte in a key or value; values must be strings (as in TorchX's ``Role.env``).

    Args:
        env: the mapping to check.
        where: what it is, for the message (``role 'trainer' env``).
        cfg_key: the run option it came from, if any (then the error is an
            :class:`~asynctorchx.errors.InvalidRunConfigException`).

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
