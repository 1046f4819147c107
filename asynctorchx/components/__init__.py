"""The builtin components (``torchx.components``)."""

from __future__ import annotations

#: The default image of the builtins: TorchX 0.7.0's (``torchx.IMAGE``).
IMAGE: str = "ghcr.io/pytorch/torchx:0.7.0"

__all__ = ["IMAGE"]
