"""A share fetch whose connection died drops its own session, so no poll may harvest its task:
kemu.client marks the failure seen instead of leaving asyncio to report "Task exception was
never retrieved" (seen in the eos-crash runs when kemu was killed mid-fetch)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from kemu.client.cluster import RetriableError
from kemu.client.share_types import note_unharvested_failure


async def failing_fetch() -> None:
    raise RetriableError("connection closed")


async def unreported_errors(mark: bool) -> list[dict[str, Any]]:
    reported: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: reported.append(context))
    task = loop.create_task(failing_fetch())
    if mark:
        task.add_done_callback(note_unharvested_failure)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    del task  # the session that held it is gone
    gc.collect()
    return reported


async def test_a_fetch_nobody_harvests_is_not_reported_as_never_retrieved() -> None:
    assert await unreported_errors(mark=False)  # what asyncio does without the callback
    assert await unreported_errors(mark=True) == []


async def test_a_poll_that_harvests_the_fetch_still_gets_its_exception() -> None:
    task = asyncio.get_running_loop().create_task(failing_fetch())
    task.add_done_callback(note_unharvested_failure)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    with pytest.raises(RetriableError):
        task.result()
