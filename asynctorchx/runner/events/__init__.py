"""Usage events of the Runner API (TorchX's ``torchx.runner.events``): one
:class:`TorchxEvent` per call, logged as JSON at DEBUG on ``asynctorchx.runner.events``.
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from dataclasses import asdict, dataclass
from enum import Enum
from types import TracebackType

from asynctorchx.runner.events.handlers import get_logging_handler

logger = logging.getLogger("asynctorchx.runner.events")


class SourceType(str, Enum):
    """Where the event comes from (TorchX's ``torchx.runner.events.api.SourceType``)."""

    UNKNOWN = "<unknown>"
    INTERNAL = "INTERNAL"
    EXTERNAL = "EXTERNAL"


@dataclass
class TorchxEvent:
    """One Runner API call, as TorchX's ``torchx.runner.events.api.TorchxEvent``.

    Args:
        session: the app id when known, else ``""`` (as TorchX).
        scheduler: the scheduler's registered name, or ``""``.
        api: the Runner method's name.
        app_id: the app's id on its scheduler, when known.
        app_image: role 0's image, when known.
        runcfg: the run options as JSON, when given.
        raw_exception: the formatted traceback of the exception that ended the call.
        source: where the event comes from.
        cpu_time_usec: process CPU time in the call, microseconds.
        wall_time_usec: wall time in the call, microseconds.
        start_epoch_time_usec: when the call started, microseconds since the epoch.
        workspace: the workspace given to the call, when any.
    """

    session: str
    scheduler: str
    api: str
    app_id: str | None = None
    app_image: str | None = None
    runcfg: str | None = None
    raw_exception: str | None = None
    source: SourceType = SourceType.UNKNOWN
    cpu_time_usec: int | None = None
    wall_time_usec: int | None = None
    start_epoch_time_usec: int | None = None
    workspace: str | None = None

    def serialize(self) -> str:
        """Return the event as one JSON object (``source`` as its string value)."""
        return json.dumps(asdict(self))

    @staticmethod
    def deserialize(data: str | TorchxEvent) -> TorchxEvent:
        """Return the event :meth:`serialize` wrote (an event is returned as it is).

        Raises:
            json.JSONDecodeError: ``data`` is not JSON.
            TypeError: the JSON object has a key that is not a field.
        """
        if isinstance(data, TorchxEvent):
            return data
        fields = json.loads(data)
        if "source" in fields:
            try:
                fields["source"] = SourceType(fields["source"])
            except ValueError:
                del fields["source"]
        return TorchxEvent(**fields)

    def __str__(self) -> str:
        return self.serialize()


_destinations: dict[str, logging.Logger] = {}


def record(event: TorchxEvent, destination: str | None = None) -> None:
    """Log ``event`` as JSON at DEBUG, or at INFO through ``destination``'s handler only.

    As torchx-nightly's ``record``.

    Args:
        event: the event to log.
        destination: a handler's name (``console``, ``null``, an event-handler plugin's).

    Raises:
        KeyError: ``destination`` names no handler.
    """
    if destination is None:
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s", event.serialize())
        return
    if destination not in _destinations:
        handler = get_logging_handler(destination)
        handler.setLevel(logging.DEBUG)
        events_logger = logging.getLogger(f"asynctorchx-events-{destination}")
        events_logger.setLevel(logging.INFO)
        events_logger.propagate = False
        events_logger.addHandler(handler)
        _destinations[destination] = events_logger
    _destinations[destination].info("%s", event.serialize())


class log_event:  # TorchX's name and casing (torchx.runner.events.log_event)
    """Context manager that records one :class:`TorchxEvent` for the code it wraps.

    Leaving it fills in the times and any exception's traceback, then :func:`record` s
    the event; the code inside may complete :attr:`event`.

    Args:
        api: the Runner method's name.
        scheduler: the scheduler's registered name, when known.
        app_id: the app's id on its scheduler, when known.
        app_image: role 0's image, when known.
        runcfg: the run options as JSON, when given.
        workspace: the workspace given to the call, when any.
    """

    def __init__(
        self,
        api: str,
        scheduler: str | None = None,
        app_id: str | None = None,
        app_image: str | None = None,
        runcfg: str | None = None,
        workspace: str | None = None,
    ) -> None:
        self.event = TorchxEvent(
            session=app_id or "",
            scheduler=scheduler or "",
            api=api,
            app_id=app_id,
            app_image=app_image,
            runcfg=runcfg,
            workspace=workspace,
        )
        self._start_cpu_ns = 0
        self._start_wall_ns = 0

    def __enter__(self) -> log_event:
        self._start_cpu_ns = time.process_time_ns()
        self._start_wall_ns = time.perf_counter_ns()
        self.event.start_epoch_time_usec = time.time_ns() // 1000
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.event.cpu_time_usec = (time.process_time_ns() - self._start_cpu_ns) // 1000
        self.event.wall_time_usec = (time.perf_counter_ns() - self._start_wall_ns) // 1000
        if exc is not None:
            self.event.raw_exception = "".join(traceback.format_exception(exc))
        record(self.event)
