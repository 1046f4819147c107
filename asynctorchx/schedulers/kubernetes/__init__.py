"""``kubernetes``: an app as a Volcano ``Job`` or a ``JobSet``, over lightkube; the public
names are in :mod:`asynctorchx.schedulers.kubernetes_scheduler` (TorchX's import path)."""
