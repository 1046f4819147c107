"""Experiment trackers, at TorchX's import path ``torchx.tracker``.

The names live in :mod:`asynctorchx.tracker.api` (the environment variables the Runner
gives each replica, and building the configured trackers). TorchX's ``torchx.tracker``
exports only ``AppRun`` and ``app_run_from_env``, which asynctorchx does not provide.
"""
