"""Named resources: ``resource(h="gpu.small")`` (``torchx.specs``).

Later wins: generic, AWS, ``$TORCHX_CUSTOM_NAMED_RESOURCES``, plugins; loaded on first use.
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, MutableMapping

import attrs

from asynctorchx.errors import UnknownNamedResourceException
from asynctorchx.specs._app import _null_resource
from asynctorchx.specs.api import Resource, resource_tags
from asynctorchx.specs.named_resources_aws import NAMED_RESOURCES as AWS_NAMED_RESOURCES
from asynctorchx.specs.named_resources_generic import (
    NAMED_RESOURCES as GENERIC_NAMED_RESOURCES,
)

#: The variable naming a module whose ``NAMED_RESOURCES`` are registered (torchx-nightly's).
ENV_CUSTOM_NAMED_RESOURCES: str = "TORCHX_CUSTOM_NAMED_RESOURCES"
#: The entry point group searched for user-registered named resources.
ENTRY_POINT_GROUP: str = "asynctorchx.named_resources"


def _checked(name: str, factory: Callable[[], Resource]) -> Callable[[], Resource]:
    def make() -> Resource:
        resource = factory()
        if not isinstance(resource, Resource):
            where = f"{getattr(factory, '__module__', '?')}.{getattr(factory, '__qualname__', '?')}"
            raise TypeError(
                f"named resource {name!r} ({where}) returned {resource!r}, not a Resource:"
                " make the function return a Resource"
            )
        return resource

    return make


def _custom() -> Mapping[str, Callable[[], Resource]]:
    name = os.environ.get(ENV_CUSTOM_NAMED_RESOURCES)
    if not name:
        return {}
    fix = f"set {ENV_CUSTOM_NAMED_RESOURCES} to an importable module, or unset it"
    try:
        module = importlib.import_module(name)
    except ImportError as e:
        raise ImportError(f"{ENV_CUSTOM_NAMED_RESOURCES}={name!r}: {e}; {fix}") from e
    custom: Mapping[str, Callable[[], Resource]] | None = getattr(module, "NAMED_RESOURCES", None)
    if custom is None:
        raise ImportError(
            f"{ENV_CUSTOM_NAMED_RESOURCES}={name!r}: the module has no NAMED_RESOURCES;"
            " give it a dict of name -> function returning a Resource"
        )
    return custom


def _load() -> dict[str, Callable[[], Resource]]:
    # imported here: most programs never look a name up
    from asynctorchx.plugins import PluginType, registry

    plugins = registry().get(PluginType.NAMED_RESOURCE)
    factories = {**GENERIC_NAMED_RESOURCES, **AWS_NAMED_RESOURCES, **_custom()}
    factories.update((name, _checked(name, factory)) for name, factory in plugins.items())
    return {**factories, "NULL": _null_resource, "MISSING": _null_resource}


class NamedResourceFactories(MutableMapping[str, Callable[[], Resource]]):
    """The registry: name -> zero-argument function returning a :class:`Resource`."""

    def __init__(self) -> None:
        self._loaded: dict[str, Callable[[], Resource]] | None = None

    def _data(self) -> dict[str, Callable[[], Resource]]:
        if self._loaded is None:
            self._loaded = _load()
        return self._loaded

    def forget(self) -> None:
        """Drop every entry, added ones too; the next use loads the registry again."""
        self._loaded = None

    def __getitem__(self, name: str) -> Callable[[], Resource]:
        return self._data()[name]

    def __setitem__(self, name: str, factory: Callable[[], Resource]) -> None:
        self._data()[name] = factory

    def __delitem__(self, name: str) -> None:
        del self._data()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data())

    def __len__(self) -> int:
        return len(self._data())

    def __repr__(self) -> str:
        return f"NamedResourceFactories({len(self)} names)"


#: The registry behind :data:`named_resources` (TorchX's name).
_named_resource_factories: NamedResourceFactories = NamedResourceFactories()


def _registry() -> Mapping[str, Callable[[], Resource]]:
    """The registry as ``asynctorchx.specs`` holds it now (tests patch it there)."""
    from asynctorchx import specs

    return specs._named_resource_factories


def reload() -> None:
    """Forget the registry and the plugins; the next lookup finds them again."""
    from asynctorchx.plugins import registry

    _named_resource_factories.forget()
    registry().clear()


def _lookup(name: str) -> Resource:
    """A fresh :class:`Resource` for ``name`` (exact, else any case), tagged with its name."""
    factories = _registry()
    found = name
    if name not in factories:
        folded = [known for known in factories if known.lower() == name.lower()]
        if len(folded) != 1:
            import difflib

            known = list(factories.keys())
            close = folded or difflib.get_close_matches(name, known, n=3)
            raise UnknownNamedResourceException(name, close, known)
        found = folded[0]
    resource = factories[found]()
    if found in ("NULL", "MISSING") or resource_tags.RESOURCE_NAME in resource.tags:
        return resource
    return attrs.evolve(resource, tags={**resource.tags, resource_tags.RESOURCE_NAME: found})


class NamedResources(Mapping[str, Resource]):
    """The read-only mapping behind :data:`named_resources`; names match in any case."""

    def __getitem__(self, name: str) -> Resource:
        """Return a fresh :class:`Resource` for ``name``; deprecated for ``resource(h=name)``.

        Raises:
            UnknownNamedResourceException: no resource has that name.
        """
        warnings.warn(
            "`named_resources[name]` is deprecated, use `resource(h=name)` instead",
            FutureWarning,
            stacklevel=2,
        )
        return _lookup(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and any(k.lower() == name.lower() for k in _registry())

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(_registry()))

    def __len__(self) -> int:
        return len(_registry())

    def __repr__(self) -> str:
        return f"NamedResources({len(self)} names)"


_NamedResourcesLibrary = NamedResources


#: Every registered named resource, by name (look one up with ``resource(h=name)``).
named_resources: NamedResources = NamedResources()


def get_named_resources(res: str) -> Resource:
    """Return a fresh :class:`Resource` registered as ``res``; deprecated for ``resource(h=res)``.

    Raises:
        UnknownNamedResourceException: ``res`` is not registered.
    """
    warnings.warn(
        "`get_named_resources()` is deprecated, use `resource(h=name)` instead",
        FutureWarning,
        stacklevel=2,
    )
    return _lookup(res)


def resource(
    cpu: int | None = None,
    gpu: int | None = None,
    memMB: int | None = None,  # noqa: N803 (TorchX name)
    h: str | None = None,
) -> Resource:
    """Build a :class:`Resource` from figures or a named resource (``torchx.specs.resource``).

    Args:
        cpu: logical CPU cores (``None`` or 0: 2).
        gpu: GPUs (``None``: 0).
        memMB: memory in MB (``None`` or 0: 1024).
        h: a registered named resource; wins over the figures.

    Raises:
        UnknownNamedResourceException: ``h`` is not registered.
    """
    if h:
        return _lookup(h)
    return Resource(cpu=cpu or 2, gpu=gpu or 0, memMB=memMB or 1024)
