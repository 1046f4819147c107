"""Helpers shared by the package, at TorchX's ``torchx.util`` import paths.

:mod:`asynctorchx.util.entrypoints` loads entry points (``load``, ``load_group``), as
``torchx.util.entrypoints``; the component finder reads its group through it.
:mod:`asynctorchx.util.session` holds the session id every replica gets, as
``torchx.util.session``.
"""
