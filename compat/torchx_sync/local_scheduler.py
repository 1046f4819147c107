"""``asynctorchx.schedulers.local_scheduler``, its factories synchronous (see the package)."""

from torchx_sync import mirror

mirror("asynctorchx.schedulers.local_scheduler", globals())
