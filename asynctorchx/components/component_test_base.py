"""``ComponentTestCase`` for testing components (``torchx.components.component_test_base``)."""

from __future__ import annotations

import contextlib
import io
import os
import unittest
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import anyio

from asynctorchx.specs.api import AppDef, AppStatus
from asynctorchx.specs.builders import create_args_parser
from asynctorchx.specs.finder import get_component

__all__ = ["ComponentTestCase"]


class ComponentTestCase(unittest.TestCase):
    """A test case with helpers that check a component and run it (TorchX's names)."""

    def validate(self, module: ModuleType, function_name: str) -> None:
        """Check ``module.function_name`` as ``asynctorchx run path.py:function_name --help`` would.

        Args:
            module: the module defining the component (with a ``__file__``).
            function_name: the component function's name.

        Raises:
            AssertionError: ``module`` has no file, or ``--help`` did not exit.
            ComponentValidationException: the component is not valid.
            ComponentNotFoundException: ``module`` has no function ``function_name``.
        """
        path = getattr(module, "__file__", None)
        if not path:
            raise self.failureException(f"module {module.__name__!r} has no __file__")
        component = get_component(f"{os.path.abspath(path)}:{function_name}")
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                create_args_parser(component.fn).parse_args(["--help"])
        except SystemExit:
            return
        raise self.failureException(f"`{function_name} --help` did not exit")

    def run_component(
        self,
        component: Callable[..., AppDef],
        args: Mapping[str, Any] | None = None,
        scheduler_params: Mapping[str, Any] | None = None,
        scheduler: str = "local_cwd",
        interval: float = 0.1,
        timeout: float | None = None,
    ) -> AppStatus | None:
        """Run ``component(**args)`` on ``scheduler`` and wait for it; runs its own event loop.

        Args:
            component: the component function.
            args: its keyword arguments.
            scheduler_params: keyword arguments of the scheduler factory.
            scheduler: the scheduler's name.
            interval: unused (the wait is event-driven); kept for TorchX's signature.
            timeout: seconds to wait at most (``None``: until the end).

        Returns:
            The status at the end, or when ``timeout`` expired.
        """
        del interval
        from asynctorchx.runner import get_runner

        async def run() -> AppStatus | None:
            app = component(**dict(args or {}))
            async with get_runner(component_defaults={}, **dict(scheduler_params or {})) as runner:
                handle = await runner.run(app, scheduler)
                with anyio.move_on_after(timeout):
                    return await runner.wait(handle)
                return await runner.status(handle)

        return anyio.run(run)
