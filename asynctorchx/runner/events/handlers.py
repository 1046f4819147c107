"""The handlers events are recorded through (torchx-nightly's ``torchx.runner.events.handlers``).

A destination names a :class:`logging.Handler`: ``console`` (a
:class:`logging.StreamHandler` on stderr) and ``null`` (a :class:`logging.NullHandler`)
are built in; an event-handler plugin (``@register.event_handler`` in
``asynctorchx_plugins.event_handlers``, or the entry point group
``asynctorchx.event_handlers``) of the same name wins over them, so a deployment sends
events to its own sink without patching this module.
"""

from __future__ import annotations

import logging

from asynctorchx.plugins import PluginType, registry

_log_handlers: dict[str, logging.Handler] = {
    "console": logging.StreamHandler(),
    "null": logging.NullHandler(),
}


def get_logging_handler(destination: str = "null") -> logging.Handler:
    """Return the handler that records events for ``destination``.

    A plugin's factory is called at each call (TorchX's choice); a built-in handler is
    the same object each time.

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
