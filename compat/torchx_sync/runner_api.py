"""``asynctorchx.runner.api`` with synchronous scheduler/runner factories (see the package)."""

from torchx_sync import mirror

mirror("asynctorchx.runner.api", globals())
