"""The builtin components (``torchx.components``): ``asynctorchx builtins`` lists them."""

from __future__ import annotations

#: The default image of the builtins: TorchX 0.7.0's (``torchx.IMAGE``). Ignored by
#: ``local_cwd``; ``local_docker`` pulls it.
IMAGE: str = "ghcr.io/pytorch/torchx:0.7.0"

__all__ = ["IMAGE"]
