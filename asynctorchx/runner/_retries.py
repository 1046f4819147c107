"""A group's retry policy: which ends are retried, from which budget, after what backoff."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import NamedTuple

from asynctorchx.specs.api import AppState, EndCause

#: The final states that stop a ``fail_fast`` group and that ``retries`` retries.
FAILING_STATES = frozenset({AppState.FAILED, AppState.UNKNOWN})
#: The causes of a failure that ``preemption_retries`` retries: the cluster's, not the trial's.
PREEMPTION_CAUSES = frozenset({EndCause.PREEMPTED, EndCause.EVICTED, EndCause.NODE_LOST})


class Backoff(NamedTuple):
    """A group's ``retry_backoff``: the bounds of the wait before a retry, in seconds."""

    shortest: float
    longest: float


def retry_delay(
    retry: int, backoff: Backoff, uniform: Callable[[float, float], float] = random.uniform
) -> float:
    """Seconds before retry ``retry`` (0: the first), uniform up to ``shortest * 2 ** (retry + 1)``
    so that apps that failed together are not submitted again together."""
    return uniform(
        backoff.shortest, min(backoff.longest, backoff.shortest * 2 ** min(retry + 1, 64))
    )


def is_count(value: object, least: int) -> bool:
    """``value`` is an int (not a bool) of at least ``least``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def backoff_of(value: object, name: str = "retry_backoff") -> Backoff:
    """The backoff ``name`` checked: ``0 <= shortest <= longest``, finite seconds."""
    numbers = list(value) if isinstance(value, (tuple, list)) else []
    if len(numbers) != 2 or not all(
        isinstance(number, (int, float))
        and not isinstance(number, bool)
        and math.isfinite(number)
        and number >= 0
        for number in numbers
    ):
        raise ValueError(
            f"{name}={value!r}: give two finite numbers of seconds"
            " (shortest, longest), e.g. (10.0, 600.0)"
        )
    if numbers[0] > numbers[1]:
        raise ValueError(f"{name}={value!r}: the shortest wait comes first, e.g. (10.0, 600.0)")
    return Backoff(float(numbers[0]), float(numbers[1]))
