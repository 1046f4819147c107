"""Named resources: ``named_resources["gpu.small"]`` instead of raw cpu/gpu/memMB figures.

The registry merges, later winning on a name clash:

1. the generic set (``cpu.*``, ``gpu.*``, :mod:`.named_resources_generic`);
2. the AWS table (``aws_*``, :mod:`.named_resources_aws`);
3. the entry point group ``asynctorchx.named_resources`` of every installed
   distribution, each entry a zero-argument function returning a :class:`Resource`::

       [project.entry-points."asynctorchx.named_resources"]
       gpu_x_2 = "my_pkg.resources:gpu_x_2"

plus ``NULL`` and ``MISSING``, both :data:`NULL_RESOURCE` (as TorchX 0.7.0,
``torchx.specs.get_named_resources``). Entry points are read once, on first use, and
each one is loaded only when its name is looked up, so a broken plugin breaks only
its own names. Every lookup returns a fresh copy: changing it changes no one else's.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Iterator, Mapping
from importlib import metadata

from asynctorchx.errors import UnknownNamedResourceException
from asynctorchx.specs.api import NULL_RESOURCE, Resource
from asynctorchx.specs.named_resources_aws import NAMED_RESOURCES as AWS_NAMED_RESOURCES
from asynctorchx.specs.named_resources_generic import (
    NAMED_RESOURCES as GENERIC_NAMED_RESOURCES,
)

#: The entry point group searched for user-registered named resources.
ENTRY_POINT_GROUP: str = "asynctorchx.named_resources"


def _null() -> Resource:
    return Resource.copy(NULL_RESOURCE)


def _entry_point_factory(entry_point: metadata.EntryPoint) -> Callable[[], Resource]:
    def make() -> Resource:
        factory = entry_point.load()
        resource = factory()
        if not isinstance(resource, Resource):
            raise TypeError(
                f"named resource {entry_point.name!r} ({entry_point.value}) returned"
                f" {resource!r}, not a Resource: make the function return a Resource"
            )
        return resource

    return make


@functools.lru_cache(maxsize=1)
def _factories() -> dict[str, Callable[[], Resource]]:
    factories: dict[str, Callable[[], Resource]] = {
        **GENERIC_NAMED_RESOURCES,
        **AWS_NAMED_RESOURCES,
    }
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        factories[entry_point.name] = _entry_point_factory(entry_point)
    factories["NULL"] = _null
    factories["MISSING"] = _null
    return factories


def reload() -> None:
    """Forget the cached registry so the next lookup reads the entry points again.

    Useful after installing a plugin in a running process (and in tests).
    """
    _factories.cache_clear()


class NamedResources(Mapping[str, Resource]):
    """The read-only mapping behind :data:`named_resources`.

    ``named_resources[name]`` builds a fresh :class:`Resource`; iteration yields the
    registered names (TorchX cannot iterate; we can, so ``list(named_resources)`` works).
    """

    def __getitem__(self, name: str) -> Resource:
        """Return a fresh :class:`Resource` for ``name``.

        Raises:
            UnknownNamedResourceException: (a ``KeyError``) no resource has that name;
                the message names the closest registered names.
        """
        factories = _factories()
        factory = factories.get(name)
        if factory is None:
            close = difflib.get_close_matches(name, factories.keys(), n=3)
            raise UnknownNamedResourceException(name, close, factories.keys())
        return factory()

    def __contains__(self, name: object) -> bool:
        return name in _factories()

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(_factories()))

    def __len__(self) -> int:
        return len(_factories())

    def __repr__(self) -> str:
        return f"NamedResources({len(self)} names)"


#: Every registered named resource: ``named_resources["aws_p3.2xlarge"]``.
named_resources: NamedResources = NamedResources()


def get_named_resources(res: str) -> Resource:
    """Return a fresh :class:`Resource` registered under the name ``res``.

    Args:
        res: a registered name, e.g. ``"gpu.small"``, ``"aws_t3.medium"`` or one
            registered under the entry point group ``asynctorchx.named_resources``.

    Raises:
        UnknownNamedResourceException: (a ``KeyError``) ``res`` is not registered; the
            message suggests the closest names.
    """
    return named_resources[res]


def resource(
    cpu: int | None = None,
    gpu: int | None = None,
    memMB: int | None = None,  # noqa: N803 (TorchX name)
    h: str | None = None,
) -> Resource:
    """Build a :class:`Resource` from raw figures or from a named resource ``h``.

    As ``torchx.specs.resource``: a non-empty ``h`` wins over ``cpu``, ``gpu`` and
    ``memMB``; otherwise a figure left ``None`` (or 0) takes the default
    ``cpu=2``, ``gpu=0``, ``memMB=1024``.

    Args:
        cpu: logical CPU cores.
        gpu: GPUs.
        memMB: memory in MB.
        h: a registered named resource.

    Raises:
        UnknownNamedResourceException: ``h`` is not registered.
    """
    if h:
        return get_named_resources(h)
    return Resource(cpu=cpu or 2, gpu=gpu or 0, memMB=memMB or 1024)
