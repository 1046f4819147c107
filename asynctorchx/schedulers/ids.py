"""App ids, at TorchX's import path ``torchx.schedulers.ids``.

The policy lives in :mod:`asynctorchx.schedulers.toolkit`; :func:`make_unique` keeps
TorchX's name for "the name plus a random suffix".
"""

from asynctorchx.schedulers.toolkit import make_app_id, sanitize_app_name, validate_app_id


def make_unique(name: str) -> str:
    """Return ``{name}-{random suffix}``, the app id a backend gives an app named ``name``.

    TorchX's ``torchx.schedulers.ids.make_unique``; the name is sanitised as
    :func:`~asynctorchx.schedulers.toolkit.sanitize_app_name` says.

    Args:
        name: the app's name.
    """
    return make_app_id(name)


__all__ = ["make_app_id", "make_unique", "sanitize_app_name", "validate_app_id"]
