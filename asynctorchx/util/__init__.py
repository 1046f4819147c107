"""Helpers shared by the package, at TorchX's ``torchx.util`` import paths."""
