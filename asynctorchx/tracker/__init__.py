"""Experiment trackers, at TorchX's import path ``torchx.tracker``."""

from asynctorchx.tracker.api import AppRun


def app_run_from_env() -> AppRun:
    """Return the run the Runner started this process as (``torchx.tracker.app_run_from_env``).

    Raises:
        Exception: whatever a tracker's factory or ``add_source`` raises.
    """
    return AppRun.run_from_env()


__all__ = ["AppRun", "app_run_from_env"]
