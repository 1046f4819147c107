"""The :class:`register` decorator and the named-resource share helpers
(torchx-nightly's ``torchx.plugins._registration``).
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
    """Each power-of-two share of ``resource``'s GPUs, suffixed by its GPU count.

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
    return _halvings(gpus, 1)


def halve_mem_down_to(*, minGiB: int) -> Callable[[Resource], dict[float, str]]:  # noqa: N803
    """A ``fractionals`` function: memory halved while at least ``minGiB``, suffixed by GiB.

    Args:
        minGiB: the smallest share's memory, in GiB (TorchX's keyword).

    The returned function raises ``ValueError`` when halving would leave a fraction of a GiB.
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
        return _halvings(gib, minGiB)

    return shares_of


def _halvings(whole: int, least: int) -> dict[float, str]:
    """``{share: whole * share}`` for the shares 1, 1/2, 1/4... while that is ``least`` or more."""
    shares: dict[float, str] = {}
    share = WHOLE
    while (part := int(whole * share)) >= least:
        shares[share] = str(part)
        share /= 2
    return shares


class register:
    """Decorator tagging a function as a plugin of a kind (TorchX's ``torchx.plugins.register``).

    The function is returned unchanged, tagged with ``_plugin_type`` and ``_plugin_name``.

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
        """Register a factory of an event :class:`logging.Handler` for a destination."""
        return cls(PluginType.EVENT_HANDLER, name)

    @classmethod
    def named_resource(
        cls,
        name: str | None = None,
        aliases: list[str] | None = None,
        fractionals: Fractionals | None = None,
    ) -> _NamedResource:
        """Register a named-resource factory, its resources tagged with its name.

        Args:
            name: the name; default: the function's ``__name__``.
            aliases: more names for the same factory (no fractional variants).
            fractionals: ``{share: suffix}`` or a function to it; adds ``{name}_{suffix}``.
        """
        return _NamedResource(name, aliases or [], fractionals)


class _NamedResource(register):
    """:meth:`register.named_resource`'s decorator: aliases and shares become module
    attributes and ``NAMED_RESOURCES`` entries, as TorchX's."""

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
            table[plugin_name] = register(PluginType.NAMED_RESOURCE, plugin_name)(factory)
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
        shares = self._fractionals or {}
        for share, suffix in (shares if isinstance(shares, dict) else shares(fn())).items():
            share_name = f"{name}_{suffix}"
            add(share_name, lambda s=share, n=share_name: tagged(n, s != WHOLE, s), attribute=True)
        factory.__qualname__ = fn.__qualname__
        return factory
