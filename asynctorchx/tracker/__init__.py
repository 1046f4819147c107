"""Experiment trackers, at TorchX's import path ``torchx.tracker``.

A training script records into the run the Runner started it as::

    run = app_run_from_env()
    run.add_metadata(lr=0.01)
"""

from asynctorchx.tracker.api import AppRun


def app_run_from_env() -> AppRun:
    """Return :meth:`AppRun.run_from_env() <asynctorchx.tracker.api.AppRun.run_from_env>`
    (``torchx.tracker.app_run_from_env``).

    Raises:
        Exception: whatever a tracker's factory or ``add_source`` raises.
    """
    return AppRun.run_from_env()


__all__ = ["AppRun", "app_run_from_env"]
