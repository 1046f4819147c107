"""The handlers events are recorded through (torchx-nightly's ``torchx.runner.events.handlers``).

``console`` and ``null`` are built in; an event-handler plugin of the same name wins.
"""

from __future__ import annotations

import logging

from asynctorchx.plugins import PluginType, registry

_log_handlers: dict[str, logging.Handler] = {
    "console": logging.StreamHandler(),
    "null": logging.NullHandler(),
}


def get_logging_handler(destination: str = "null") -> logging.Handler:
    """Return the handler that records events for ``destination`` (a plugin's made anew).

    Args:
        destination: the plugin's name, ``console`` or ``null``.

    Raises:
        KeyError: no plugin and no built-in handler has that name.
    """
    factory = registry().get(PluginType.EVENT_HANDLER).get(destination)
    if factory is None:
        return _log_handlers[destination]
    handler: logging.Handler = factory()
    return handler
