"""asynctorchx: TorchX rebuilt asyncio-native.

Describe an app with :mod:`asynctorchx.specs`, run it through an async
:class:`~asynctorchx.runner.Runner` (``async with get_runner() as runner``) on a
scheduler from :mod:`asynctorchx.schedulers`.

:data:`IMAGE` is the builtin components' default image, as ``torchx.IMAGE``.
"""

from __future__ import annotations

from asynctorchx.components import IMAGE

__version__ = "0.1.0"

__all__ = ["IMAGE", "__version__"]
