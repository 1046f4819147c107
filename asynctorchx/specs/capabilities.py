"""Typed keys into :attr:`Resource.capabilities` (``torchx.specs.capabilities``)."""

from __future__ import annotations

from typing import Generic, TypeVar, overload

import attrs

from asynctorchx.specs._resource import Resource

V = TypeVar("V")


@attrs.frozen
class CapabilityKey(Generic[V]):
    """The entry ``f"{namespace}.{name}"`` of :attr:`Resource.capabilities`, of type ``type``."""

    namespace: str
    name: str
    type: type[V]

    @property
    def key(self) -> str:
        """``"<namespace>.<name>"``."""
        return f"{self.namespace}.{self.name}"

    def set(self, resource: Resource, value: V) -> None:
        """Store ``value`` as this capability of ``resource``."""
        resource.capabilities[self.key] = value

    @overload
    def get(self, resource: Resource) -> V | None: ...

    @overload
    def get(self, resource: Resource, default: V) -> V: ...

    def get(self, resource: Resource, default: V | None = None) -> V | None:
        """Return this capability of ``resource``, or ``default`` when it has none.

        Raises:
            TypeError: the stored value is not a ``type`` (a ``bool`` is no ``int``).
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
