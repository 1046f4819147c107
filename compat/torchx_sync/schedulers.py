"""``asynctorchx.schedulers`` with synchronous scheduler/runner factories (see the package)."""

from torchx_sync import mirror

mirror("asynctorchx.schedulers", globals())
