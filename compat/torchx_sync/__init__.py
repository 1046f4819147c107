"""A thin synchronous face over asynctorchx, for running TorchX's own (synchronous) tests.

TorchX's ``Scheduler`` and ``Runner`` methods are plain functions; ours are coroutines and
our objects are entered with ``async with``. The ported tests import the schedulers and the
runner from the modules of this package instead (``torchx_sync.runner``,
``torchx_sync.local_scheduler``, ...). Each mirrors the asynctorchx module of the same
name, with every scheduler/runner factory replaced by one that returns a :class:`SyncProxy`:
the real object, entered on one event loop that lives for the whole test process (an anyio
blocking portal), whose methods block until their coroutine is done, and whose async
iterators are plain iterators.

Not part of asynctorchx: a measurement aid only (see ``compat/README.md``).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, NoReturn

from anyio.from_thread import BlockingPortal, start_blocking_portal

__all__ = ["SyncProxy", "mirror", "portal", "sync_factory"]

_portal_cm: AbstractContextManager[BlockingPortal] | None = None
_portal: BlockingPortal | None = None


def portal() -> BlockingPortal:
    """The process's one event loop (started on first use, stopped at exit)."""
    global _portal_cm, _portal
    if _portal is None:
        _portal_cm = start_blocking_portal()
        _portal = _portal_cm.__enter__()
        # before the interpreter joins the portal's (non-daemon) thread, not after
        threading._register_atexit(_stop_portal)  # type: ignore[attr-defined]
    return _portal


def _stop_portal() -> None:
    global _portal_cm, _portal
    if _portal_cm is not None and _portal is not None:
        cm, running, _portal_cm, _portal = _portal_cm, _portal, None, None
        # a test that did not close its scheduler or runner: close it now (cancelled)
        running.call(running.stop, True)  # cancel_remaining=True
        cm.__exit__(None, None, None)


def _unwrap(value: Any) -> Any:
    """The asynctorchx object behind a proxy or a synchronous factory."""
    if isinstance(value, SyncProxy):
        return object.__getattribute__(value, "_target")
    wrapped = getattr(value, "__sync_wrapped__", None)
    if wrapped is not None:
        return wrapped
    if isinstance(value, dict):
        return {key: _unwrap(item) for key, item in value.items()}
    return value


class _SyncIterator(Iterator[Any]):
    def __init__(self, iterator: AsyncIterator[Any]) -> None:
        self._iterator = iterator

    def __iter__(self) -> _SyncIterator:
        return self

    def __next__(self) -> Any:
        done = object()

        async def step() -> Any:
            try:
                return await self._iterator.__anext__()
            except StopAsyncIteration:
                return done

        item = portal().call(step)
        if item is done:
            raise StopIteration
        return item


def _to_sync(value: Any) -> Any:
    if hasattr(value, "__anext__"):
        return _SyncIterator(value)
    return value


def _blocking(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` run on the portal's loop; awaited if it returns an awaitable."""

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        async def invoke() -> Any:
            result = method(
                *[_unwrap(a) for a in args], **{k: _unwrap(v) for k, v in kwargs.items()}
            )
            if inspect.isawaitable(result):
                result = await result
            return _to_sync(result)

        return portal().call(invoke)

    return call


class SyncProxy:
    """An entered asynctorchx scheduler or runner whose methods block."""

    def __init__(self, target: Any, entered: AbstractContextManager[Any] | None) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_entered", entered)

    def __getattr__(self, name: str) -> Any:
        target = object.__getattribute__(self, "_target")
        if name == "_to_popen_request" and not hasattr(target, name):
            # TorchX's private LocalScheduler method, which its tests call: the dry run's
            # request (asynctorchx keeps no such name)
            return lambda app, cfg: target._submit_dryrun(app, cfg).request
        value = getattr(target, name)
        if callable(value) and not isinstance(value, type):
            return _blocking(value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "_target"), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(object.__getattribute__(self, "_target"), name)

    def close(self) -> None:
        """Leave the ``async with`` block the object was entered in (idempotent)."""
        entered = object.__getattribute__(self, "_entered")
        if entered is not None:
            object.__setattr__(self, "_entered", None)
            entered.__exit__(None, None, None)

    def __enter__(self) -> SyncProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SyncProxy({object.__getattribute__(self, '_target')!r})"


def sync_factory(factory: Callable[..., Any]) -> Callable[..., Any]:
    """``factory`` (a scheduler/runner class or factory) returning an entered :class:`SyncProxy`."""

    @functools.wraps(factory)
    def create(*args: Any, **kwargs: Any) -> SyncProxy:
        args = tuple(_unwrap(a) for a in args)
        kwargs = {k: _unwrap(v) for k, v in kwargs.items()}

        async def build() -> Any:
            return factory(*args, **kwargs)

        target = portal().call(build)
        if hasattr(target, "__aenter__"):
            entered = portal().wrap_async_context_manager(target)
            entered.__enter__()
            return SyncProxy(target, entered)
        return SyncProxy(target, None)

    create.__sync_wrapped__ = factory  # type: ignore[attr-defined]
    return create


#: names that create a scheduler or a runner, in the mirrored modules
_FACTORIES = {
    "create_scheduler",
    "create_cwd_scheduler",
    "create_dir_scheduler",
    "get_runner",
    "Runner",
    "LocalScheduler",
    "DockerScheduler",
}


def mirror(module_name: str, namespace: dict[str, Any]) -> None:
    """Fill ``namespace`` with ``module_name``'s names, factories made synchronous."""
    module = importlib.import_module(module_name)
    # every name, not only __all__: TorchX's tests import private ones too
    for name in [n for n in vars(module) if not n.startswith("__")]:
        value = getattr(module, name)
        namespace[name] = sync_factory(value) if name in _FACTORIES else value
    if "get_scheduler_factories" in namespace:
        real = namespace["get_scheduler_factories"]

        def get_scheduler_factories(*args: Any, **kwargs: Any) -> dict[str, Any]:
            return {k: sync_factory(v) for k, v in real(*args, **kwargs).items()}

        namespace["get_scheduler_factories"] = get_scheduler_factories


class _Missing:
    """A name asynctorchx lacks: any use raises ``ImportError`` naming it."""

    def __init__(self, qualified: str, cause: Exception) -> None:
        self._qualified, self._cause = qualified, cause

    def _fail(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise ImportError(f"asynctorchx has no {self._qualified} ({self._cause})")

    __call__ = _fail

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._fail()

    def __iter__(self) -> Any:
        return self._fail()

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[Any, ...]:
        return self._fail()


def _torchx_private(qualified_name: str) -> Any:
    """TorchX's private names that TorchX's tests import and asynctorchx does not keep.

    Raises:
        KeyError: ``qualified_name`` is not one of them.
    """
    if qualified_name == "asynctorchx.specs.api._TERMINAL_STATES":
        from asynctorchx.specs._status import _TERMINAL_STATES

        return _TERMINAL_STATES
    if qualified_name == "asynctorchx.specs.builders._create_args_parser":
        from asynctorchx.specs.builders import create_args_parser

        return create_args_parser  # TorchX's tests pass the component function alone
    raise KeyError(qualified_name)


def names(module_name: str, wanted: list[str]) -> tuple[Any, ...]:
    """``from module_name import *wanted``, a placeholder for each name that is missing.

    A TorchX private name the package does not keep comes from :func:`_torchx_private`.
    """
    try:
        module: Any = importlib.import_module(module_name)
    except ImportError as error:
        return tuple(_Missing(f"{module_name}.{name}", error) for name in wanted)
    found: list[Any] = []
    for name in wanted:
        try:
            found.append(getattr(module, name))
        except AttributeError:
            try:
                found.append(_torchx_private(f"{module_name}.{name}"))
                continue
            except KeyError:
                pass
            try:
                found.append(importlib.import_module(f"{module_name}.{name}"))
            except ImportError as error:
                found.append(_Missing(f"{module_name}.{name}", error))
    return tuple(found)
