"""The ``local_cwd`` and ``local_dir`` schedulers: replicas as processes on this host.

TorchX's ``torchx.schedulers.local_scheduler``; the public names are in
:mod:`asynctorchx.schedulers.local_scheduler`.
"""
