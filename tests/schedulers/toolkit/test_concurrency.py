"""The toolkit's ``race``: the first value back, the losers cancelled, an error as itself."""

from __future__ import annotations

import anyio
import pytest

from asynctorchx.schedulers.toolkit import race


async def test_race_returns_the_first_value_and_cancels_the_others() -> None:
    cancelled: list[str] = []

    async def never() -> str:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.append("never")
        return "never"

    async def soon() -> str:
        await anyio.sleep(0)
        return "soon"

    assert await race([never, soon, never]) == "soon"
    assert cancelled == ["never", "never"]


async def test_race_raises_a_calls_error_as_itself() -> None:
    async def fails() -> None:
        raise KeyError("the call's own error")

    with pytest.raises(KeyError, match="the call's own error"):
        await race([anyio.sleep_forever, fails])


async def test_race_of_no_call_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one call"):
        await race([])
