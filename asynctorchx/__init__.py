"""asynctorchx: TorchX rebuilt asyncio-native.

Describe an app with :mod:`asynctorchx.specs`, run it through an async
:class:`~asynctorchx.runner.Runner` (``async with get_runner() as runner``) on a
scheduler from :mod:`asynctorchx.schedulers`.
"""

from __future__ import annotations

__version__ = "0.1.0"
