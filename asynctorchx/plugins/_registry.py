"""Plugin discovery (torchx-nightly's ``torchx.plugins``): namespace packages
``asynctorchx_plugins.<group>`` and entry points ``asynctorchx.<group>`` (which win a name).
"""

from __future__ import annotations

import enum
import functools
import importlib
import logging
import os
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from asynctorchx.util.entrypoints import entry_points

logger = logging.getLogger(__name__)

#: The variable choosing where plugins are looked for (a :class:`PluginSource` as a number).
SOURCE_ENV = "TORCHX_PLUGINS_SOURCE"


class PluginType(str, enum.Enum):
    """What a plugin provides; each value is its entry point group (TorchX's ``torchx.*``)."""

    SCHEDULER = "asynctorchx.schedulers"
    NAMED_RESOURCE = "asynctorchx.named_resources"
    TRACKER = "asynctorchx.tracker"
    EVENT_HANDLER = "asynctorchx.event_handlers"

    @property
    def namespace(self) -> str:
        """The namespace package searched for this kind: ``asynctorchx_plugins.schedulers``."""
        return f"asynctorchx_plugins.{self.value.removeprefix('asynctorchx.')}"


class PluginSource(enum.IntFlag):
    """Where plugins are looked for; :data:`SOURCE_ENV` holds the number (``0``-``3``)."""

    NONE = 0
    NAMESPACE_PKG = enum.auto()
    ENTRYPOINT = enum.auto()


@dataclass(frozen=True)
class RegistrationError:
    """A plugin that discovery skipped, or shadowed, and why.

    Args:
        module: the module it was found in (or failed to import).
        error: what went wrong.
        name: the plugin's name (``None``: the whole module failed).
        plugin_type: the lower-case :class:`PluginType` name the plugin has.
    """

    module: str
    error: str
    name: str | None = None
    plugin_type: str | None = None


class PluginRegistry:
    """The plugins found, per kind, on first :meth:`get` of that kind and kept.

    Discovery never raises for a broken plugin: it is logged and kept in :attr:`errors`.

    Args:
        plugin_sources: where to look (default: both).
    """

    def __init__(
        self, *, plugin_sources: PluginSource = PluginSource.NAMESPACE_PKG | PluginSource.ENTRYPOINT
    ) -> None:
        self._plugin_sources = plugin_sources
        self._cache: dict[PluginType, dict[str, Callable[..., Any]]] = {}
        self._errors: list[RegistrationError] = []

    def get(self, plugin_type: PluginType) -> dict[str, Callable[..., Any]]:
        """Return name -> factory of the plugins of ``plugin_type``, found once per kind."""
        if plugin_type not in self._cache:
            self._cache[plugin_type] = self._find(plugin_type)
        return self._cache[plugin_type]

    @property
    def errors(self) -> list[RegistrationError]:
        """What the discoveries run so far skipped or shadowed (none run: ``[]``)."""
        return list(self._errors)

    def load_errors(self, plugin_type: PluginType | None = None) -> list[RegistrationError]:
        """Discover ``plugin_type`` (every kind when ``None``), then return its errors."""
        kinds = [plugin_type] if plugin_type is not None else list(PluginType)
        for kind in kinds:
            self.get(kind)
        if plugin_type is None:
            return list(self._errors)
        namespace, kind_name = plugin_type.namespace, plugin_type.name.lower()
        return [
            e
            for e in self._errors
            if e.plugin_type == kind_name or f"{e.module}.".startswith(f"{namespace}.")
        ]

    def clear(self) -> None:
        """Forget what was found, here and in :func:`registry`'s instance (a new one next)."""
        self._cache.clear()
        self._errors.clear()
        registry.cache_clear()

    def _error(self, message: str, module: str, **plugin: Any) -> None:
        logger.warning("%s: %s", module, message)
        self._errors.append(RegistrationError(module, message, **plugin))

    def _find(self, plugin_type: PluginType) -> dict[str, Callable[..., Any]]:
        found: dict[str, Callable[..., Any]] = {}
        if PluginSource.NAMESPACE_PKG in self._plugin_sources:
            self._scan_namespace(plugin_type, found)
        if PluginSource.ENTRYPOINT in self._plugin_sources:
            for entry in entry_points(plugin_type.value):
                try:
                    factory = entry.load()
                except Exception as exc:  # a broken distribution must not hide the others
                    self._error(f"{type(exc).__name__}: {exc}", entry.value)
                    continue
                if entry.name in found:
                    self._error(
                        f"registered by a {plugin_type.value!r} entry point and in the"
                        f" {plugin_type.namespace!r} namespace package: the entry point wins;"
                        " remove one",
                        getattr(found[entry.name], "__module__", plugin_type.namespace),
                        name=entry.name,
                        plugin_type=plugin_type.name.lower(),
                    )
                found[entry.name] = factory
        return found

    def _scan_namespace(
        self, plugin_type: PluginType, found: dict[str, Callable[..., Any]]
    ) -> None:
        namespace = plugin_type.namespace
        try:
            package = importlib.import_module(namespace)
        except Exception as exc:
            # a namespace (or a parent of it) not installed: no plugins, and no error
            missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
            if not (missing and f"{namespace}.".startswith(f"{missing}.")):
                self._error(f"{type(exc).__name__}: {exc}", namespace)
            return
        if hasattr(package, "__path__"):
            self._scan_package(package, plugin_type, found)

    def _scan_package(
        self, package: ModuleType, plugin_type: PluginType, found: dict[str, Callable[..., Any]]
    ) -> None:
        """Import and collect every public module under ``package``, namespace sub-packages too."""
        children = {info.name: info.ispkg for info in pkgutil.iter_modules(package.__path__)}
        for path in package.__path__:
            if Path(path).is_dir():
                for entry in sorted(Path(path).iterdir()):
                    if entry.is_dir() and entry.name not in children and any(entry.glob("*.py")):
                        children[entry.name] = True
        for child, is_package in children.items():
            if child.startswith("_"):
                continue
            qualified = f"{package.__name__}.{child}"
            try:
                module = importlib.import_module(qualified)
            except Exception as exc:  # one broken module must not hide the others
                self._error(f"{type(exc).__name__}: {exc}", qualified)
                continue
            self._collect(module, plugin_type, found)
            if is_package and hasattr(module, "__path__"):
                self._scan_package(module, plugin_type, found)

    def _collect(
        self, module: ModuleType, plugin_type: PluginType, found: dict[str, Callable[..., Any]]
    ) -> None:
        """Take the tagged functions ``module`` defines (not those it imports)."""
        name = module.__name__
        for attribute in dir(module):
            obj = getattr(module, attribute)
            kind = getattr(obj, "_plugin_type", None)
            if not callable(obj) or kind is None or getattr(obj, "__module__", None) != name:
                continue
            plugin = getattr(obj, "_plugin_name", attribute)
            if kind != plugin_type:
                self._error(
                    f"{plugin!r} is a {kind.name.lower()} but is under the"
                    f" {plugin_type.name.lower()} namespace: use"
                    f" @register.{plugin_type.name.lower()}() or move it to {kind.namespace!r}",
                    name,
                    name=plugin,
                    plugin_type=kind.name.lower(),
                )
            elif plugin in found and not _same(found[plugin], obj, plugin_type):
                self._error(
                    f"a second plugin named {plugin!r}: the first one found is kept",
                    name,
                    name=plugin,
                    plugin_type=plugin_type.name.lower(),
                )
            else:
                found.setdefault(plugin, obj)


def _same(first: Callable[..., Any], second: Callable[..., Any], kind: PluginType) -> bool:
    """Whether two plugins of one name are one: the same, or equal named resources (nightly's)."""
    if first is second:
        return True
    if kind is not PluginType.NAMED_RESOURCE:
        return False
    try:
        return bool(first() == second())
    except Exception:  # a factory that fails is never the same as another
        return False


@functools.lru_cache(maxsize=1)
def registry() -> PluginRegistry:
    """Return the process's :class:`PluginRegistry` (made on first call).

    :data:`SOURCE_ENV` (``TORCHX_PLUGINS_SOURCE``, TorchX's) chooses where it looks:
    ``0`` nowhere, ``1`` the namespace package, ``2`` the entry points, ``3`` (unset) both.

    Raises:
        ValueError: the variable is not one of ``0``-``3``.
    """
    every = PluginSource.NAMESPACE_PKG | PluginSource.ENTRYPOINT
    raw = os.environ.get(SOURCE_ENV, str(int(every)))
    if raw.strip() not in {"0", "1", "2", "3"}:
        raise ValueError(
            f"{SOURCE_ENV}={raw!r} is not a plugin source: write 0 (none), 1 (namespace"
            " package only), 2 (entry points only) or 3 (both, the default)"
        )
    return PluginRegistry(plugin_sources=PluginSource(int(raw)))
