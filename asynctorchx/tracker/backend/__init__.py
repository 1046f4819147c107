"""Tracker backends, at TorchX's import path ``torchx.tracker.backend``."""
