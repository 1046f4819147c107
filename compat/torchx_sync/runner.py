"""``asynctorchx.runner`` with synchronous scheduler/runner factories (see the package)."""

from torchx_sync import mirror

mirror("asynctorchx.runner", globals())
