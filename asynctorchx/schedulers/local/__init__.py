"""The ``local_cwd`` and ``local_dir`` schedulers (TorchX's ``torchx.schedulers.local_scheduler``).

The package is split by concern into private modules; this module is its public face.
"""
