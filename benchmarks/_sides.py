"""Per-side helpers for the benchmark drivers (lazy imports: each side runs in its own venv).

``ours_*`` need asynctorchx (our venv), ``tx_*`` need TorchX 0.7.0 (``.venv-torchx``).
A missing asynctorchx module raises :class:`_harness.Unavailable` naming it.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from typing import Any

from _harness import Unavailable, remove_at_exit


def ours_module(name: str) -> Any:
    """Import ``name`` from asynctorchx or raise :class:`Unavailable` saying it has not landed."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise Unavailable(f"{name} not importable yet: {exc}") from exc


def ours_app(name: str, entrypoint: str, args: list[str], num_replicas: int = 1) -> Any:
    """An asynctorchx ``AppDef`` with one role running ``entrypoint args`` in the cwd."""
    api = ours_module("asynctorchx.specs.api")
    role = api.Role(
        name="r", image=os.getcwd(), entrypoint=entrypoint, args=args, num_replicas=num_replicas
    )
    return api.AppDef(name=name, roles=[role])


def ours_cwd_scheduler(cache_size: int = 100) -> Any:
    """Our ``create_cwd_scheduler("bench", cache_size=...)`` (an async context manager
    hosting the replicas); ``cache_size`` is how many apps it keeps (both sides' default 100).

    The log directory is a run option: pass ``ours_cfg()`` to ``submit``.
    """
    mod = ours_module("asynctorchx.schedulers.local_scheduler")
    return mod.create_cwd_scheduler("bench", cache_size=cache_size)


def ours_cfg() -> dict[str, Any]:
    """Run options for one of our trials: a fresh ``log_dir`` (as TorchX's side gets)."""
    return {"log_dir": tmpdir()}


def tx_app(name: str, entrypoint: str, args: list[str], num_replicas: int = 1) -> Any:
    """A TorchX 0.7.0 ``AppDef`` with one role running ``entrypoint args`` in the cwd."""
    from torchx import specs

    role = specs.Role(
        name="r", image=os.getcwd(), entrypoint=entrypoint, args=args, num_replicas=num_replicas
    )
    return specs.AppDef(name=name, roles=[role])


def tx_cwd_scheduler(cache_size: int = 100) -> Any:
    """TorchX 0.7.0's ``local_cwd`` scheduler (``LocalScheduler`` with ``CWDImageProvider``),
    keeping ``cache_size`` apps (it raises ``IndexError`` past that many unfinished apps)."""
    from torchx.schedulers import local_scheduler as ls

    return ls.create_scheduler(
        "bench", cache_size=cache_size, image_provider_class=ls.CWDImageProvider
    )


def tmpdir(prefix: str = "atx-bench-") -> str:
    """A fresh temporary directory (named ``<prefix>...``) for one trial's files, removed
    when the driver exits."""
    path = tempfile.mkdtemp(prefix=prefix)
    remove_at_exit(path)
    return path
