"""The :class:`register` decorator, and what a named-resource plugin is written with
(torchx-nightly's ``torchx.plugins._registration``).

A named resource registered with :meth:`register.named_resource` comes with its name
tagged on every :class:`~asynctorchx.specs.Resource` it makes
(:class:`~asynctorchx.specs.resource_tags`), any aliases, and with ``fractionals``
one more factory per share of the host, ``{name}_{suffix}``::

    @register.named_resource(fractionals=powers_of_two_gpus)
    def my_gpu(fractional: float = WHOLE) -> Resource:
        return Resource(cpu=int(96 * fractional), gpu=int(8 * fractional),
                        memMB=int(1_000_000 * fractional))

registers ``my_gpu`` and ``my_gpu_8``, ``my_gpu_4``, ``my_gpu_2``, ``my_gpu_1``, each
also an attribute of the module and an entry of its ``NAMED_RESOURCES`` dict (the form
``TORCHX_CUSTOM_NAMED_RESOURCES`` reads).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

from asynctorchx.plugins._registry import PluginType
from asynctorchx.specs.api import Resource, resource_tags

F = TypeVar("F", bound=Callable[..., object])

#: A share of a host's resources (CPU, memory and GPUs) one job asks for.
WHOLE: float = 1.0
HALF: float = 0.5
QUARTER: float = 0.25
EIGHTH: float = 0.125
SIXTEENTH: float = 0.0625

#: What ``fractionals`` is: ``{share: suffix}``, or a function of the whole resource to it.
Fractionals = Callable[[Resource], dict[float, str]] | dict[float, str]


def powers_of_two_gpus(resource: Resource) -> dict[float, str]:
    """Each power-of-two share of ``resource``'s GPUs with at least one GPU, suffixed by
    its GPU count: 8 GPUs give ``{1.0: "8", 0.5: "4", 0.25: "2", 0.125: "1"}``.

    Args:
        resource: the whole host's resource.

    Raises:
        ValueError: ``resource.gpu`` is not a positive power of two.
    """
    gpus = resource.gpu
    if gpus <= 0 or gpus & (gpus - 1):
        raise ValueError(
            f"powers_of_two_gpus needs a resource whose gpu is a power of two, got gpu={gpus}"
        )
    shares: dict[float, str] = {}
    share = WHOLE
    while (count := int(gpus * share)) > 0:
        shares[share] = str(count)
        share /= 2
    return shares


def halve_mem_down_to(*, minGiB: int) -> Callable[[Resource], dict[float, str]]:  # noqa: N803
    """A ``fractionals`` function: the resource's memory halved while it is at least
    ``minGiB``, each share suffixed by its GiB: 64 GiB with ``minGiB=8`` give
    ``{1.0: "64", 0.5: "32", 0.25: "16", 0.125: "8"}``.

    Args:
        minGiB: the smallest share's memory, in GiB (TorchX's keyword).

    The returned function raises ``ValueError`` when the resource's ``memMB`` is not a
    positive number of whole GiB, or ``minGiB`` is below its GiB with every factor 2
    divided out (halving further would leave a fraction of a GiB).
    """

    def shares_of(resource: Resource) -> dict[float, str]:
        mem_mb = resource.memMB
        if mem_mb <= 0 or mem_mb % 1024:
            raise ValueError(
                f"halve_mem_down_to needs a memMB that is a positive number of GiB (1024 MB),"
                f" got memMB={mem_mb}"
            )
        gib = mem_mb // 1024
        odd = gib // (gib & -gib)
        if minGiB < odd:
            raise ValueError(
                f"halve_mem_down_to(minGiB={minGiB}): halving {gib} GiB below {odd} GiB"
                f" leaves a fraction of a GiB; use minGiB >= {odd}"
            )
        shares: dict[float, str] = {}
        share = WHOLE
        while (part := int(gib * share)) >= minGiB:
            shares[share] = str(part)
            share /= 2
        return shares

    return shares_of


class register:
    """Decorator tagging a function as a plugin of a kind (TorchX's ``torchx.plugins.register``).

    ``@register.scheduler()`` on ``def my_scheduler(session_name, **kwargs)`` in a module
    of the namespace package ``asynctorchx_plugins.schedulers`` makes it the scheduler
    ``my_scheduler``; ``register.scheduler(name="x")`` names it. The function is
    returned unchanged, with the attributes ``_plugin_type`` and ``_plugin_name`` set.

    Args:
        type: the :class:`PluginType`.
        name: the plugin's name; default: the function's ``__name__``.
    """

    def __init__(self, type: PluginType, name: str | None = None) -> None:
        self._type = type
        self._name = name

    def __call__(self, fn: F) -> F:
        fn._plugin_type = self._type  # type: ignore[attr-defined]
        fn._plugin_name = self._name or fn.__name__  # type: ignore[attr-defined]
        return fn

    @classmethod
    def scheduler(cls, name: str | None = None) -> register:
        """Register a scheduler factory, ``(session_name, **kwargs) -> Scheduler``."""
        return cls(PluginType.SCHEDULER, name)

    @classmethod
    def tracker(cls, name: str | None = None) -> register:
        """Register a tracker factory, ``(config: str | None) -> tracker``."""
        return cls(PluginType.TRACKER, name)

    @classmethod
    def event_handler(cls, name: str | None = None) -> register:
        """Register a factory of an event :class:`logging.Handler`, named after the
        destination it serves."""
        return cls(PluginType.EVENT_HANDLER, name)

    @classmethod
    def named_resource(
        cls,
        name: str | None = None,
        aliases: list[str] | None = None,
        fractionals: Fractionals | None = None,
    ) -> _NamedResource:
        """Register a named-resource factory (see the module).

        Args:
            name: the name; default: the function's ``__name__``.
            aliases: more names for the same factory (no fractional variants).
            fractionals: ``{share: suffix}``, or a function of the whole resource to it
                (:func:`powers_of_two_gpus`, :func:`halve_mem_down_to`); the function
                decorated then takes the share as its one argument.
        """
        return _NamedResource(name, aliases or [], fractionals)


class _NamedResource(register):
    """:meth:`register.named_resource`'s decorator. Decorating, as TorchX's:

    - the returned factory tags each resource with its name (and not fractional);
    - each alias, and each ``{name}_{suffix}`` share (``fn(share)``, fractional below
      :data:`WHOLE`), becomes an attribute of the module;
    - every name goes in the module's ``NAMED_RESOURCES`` dict.

    Decorating raises ``ValueError`` when a name is already in the module's
    ``NAMED_RESOURCES``, and ``AttributeError`` when an alias or a share's name is
    already an attribute of the module.
    """

    def __init__(self, name: str | None, aliases: list[str], fractionals: Fractionals | None):
        super().__init__(PluginType.NAMED_RESOURCE, name)
        self._aliases = aliases
        self._fractionals = fractionals

    def __call__(self, fn: Callable[..., Resource]) -> Callable[..., Resource]:  # type: ignore[override]
        module = sys.modules[fn.__module__]
        name = self._name or fn.__name__
        table: dict[str, Callable[..., Resource]] = module.__dict__.setdefault(
            "NAMED_RESOURCES", {}
        )

        def add(plugin_name: str, factory: Callable[..., Resource], attribute: bool) -> None:
            if plugin_name in table:
                raise ValueError(
                    f"duplicate named resource {plugin_name!r} in module {module.__name__!r}"
                )
            if attribute and hasattr(module, plugin_name):
                raise AttributeError(f"{plugin_name!r} is already defined in {module.__name__!r}")
            factory.__module__ = fn.__module__
            factory.__qualname__ = plugin_name
            factory._plugin_type = PluginType.NAMED_RESOURCE  # type: ignore[attr-defined]
            factory._plugin_name = plugin_name  # type: ignore[attr-defined]
            table[plugin_name] = factory
            if attribute:
                setattr(module, plugin_name, factory)

        def tagged(tag_name: str, fractional: bool, *args: Any, **kwargs: Any) -> Resource:
            resource = fn(*args, **kwargs)
            resource.tags[resource_tags.RESOURCE_NAME] = tag_name
            resource.tags[resource_tags.IS_FRACTIONAL] = fractional
            return resource

        def factory(*args: Any, **kwargs: Any) -> Resource:
            return tagged(name, False, *args, **kwargs)

        add(name, factory, attribute=name != fn.__name__)
        for alias in self._aliases:
            add(alias, lambda *a, **kw: factory(*a, **kw), attribute=True)
        if self._fractionals is not None:
            shares = self._fractionals
            table_of = shares if isinstance(shares, dict) else shares(fn())
            for share, suffix in table_of.items():
                share_name = f"{name}_{suffix}"
                add(
                    share_name,
                    lambda s=share, n=share_name: tagged(n, s != WHOLE, s),
                    attribute=True,
                )
        factory.__qualname__ = fn.__qualname__
        return factory
