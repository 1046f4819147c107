"""``asynctorchx.schedulers.docker_scheduler``, its factories synchronous (see the package)."""

from torchx_sync import mirror

mirror("asynctorchx.schedulers.docker_scheduler", globals())
