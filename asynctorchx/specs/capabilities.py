"""Typed keys into :attr:`Resource.capabilities` (``torchx.specs.capabilities``)."""

from __future__ import annotations

from typing import Generic, TypeVar, overload

import attrs

from asynctorchx.specs._resource import Resource

V = TypeVar("V")


@attrs.frozen
class CapabilityKey(Generic[V]):
    """The entry ``f"{namespace}.{name}"`` of :attr:`Resource.capabilities`, of type ``type``.

    Example::

        EFA = CapabilityKey("aws", "efa_enabled", bool)
        EFA.set(resource, True)  # resource.capabilities["aws.efa_enabled"] = True
        EFA.get(resource, default=False)

    Args:
        namespace: the group the capability belongs to, e.g. a cloud or a scheduler name.
        name: the capability's name within the namespace.
        type: the type every stored value must have.
    """

    namespace: str
    name: str
    type: type[V]

    @property
    def key(self) -> str:
        """The entry's key in ``capabilities``: ``"<namespace>.<name>"``."""
        return f"{self.namespace}.{self.name}"

    def set(self, resource: Resource, value: V) -> None:
        """Store ``value`` as this capability of ``resource`` (in place)."""
        resource.capabilities[self.key] = value

    @overload
    def get(self, resource: Resource) -> V | None: ...

    @overload
    def get(self, resource: Resource, default: V) -> V: ...

    def get(self, resource: Resource, default: V | None = None) -> V | None:
        """Return this capability of ``resource``, or ``default`` when it has none.

        Raises:
            TypeError: the stored value is not a ``type``; a ``bool`` is not accepted
                for an ``int`` key, though ``bool`` subclasses ``int``.
        """
        if self.key not in resource.capabilities:
            return default
        value = resource.capabilities[self.key]
        if not isinstance(value, self.type) or (self.type is int and isinstance(value, bool)):
            raise TypeError(
                f"capability {self.key!r} holds {value!r} ({type(value).__name__}), not a"
                f" {self.type.__name__}: store it with CapabilityKey.set"
            )
        return value
