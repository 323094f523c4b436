"""A stopping broker cancels and awaits its share-partition timers and the lock expiries they
started, for live and for retired (dropped) actors: nothing is left pending when the event loop
closes, so asyncio never reports "Task was destroyed but it is pending!"."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from kemu.broker.server import KemuServer, ServerOptions
from kemu.broker.share.manager import share_partitions
from kemu.cluster.clock import RealClock
from kemu.config.definitions import BrokerConfig
from kemu.testing.plugin import free_port_block
from tests.unit.broker.handlers.test_share_fetch import (
    GROUP,
    Harness,
    acquired,
    open_session,
    share_fetch,
)


def pending_tasks() -> list[asyncio.Task[Any]]:
    current = asyncio.current_task()
    return [task for task in asyncio.all_tasks() if task is not current and not task.done()]


async def test_stopping_cancels_and_awaits_lock_timers_and_expiries() -> None:
    reported: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: reported.append(context))
    before = set(pending_tasks())
    server = KemuServer(ServerOptions(brokers=1, port=free_port_block(1), config=BrokerConfig()))
    kemu = Harness(server, [1_000_000])
    # timers read the same fixed time as the handlers: the locks expire 30 s from now
    server.runtime.clock = RealClock(lambda: kemu.now[0])
    server.runtime.clock_ms = server.runtime.clock.now_ms
    await server.start()
    server.cluster.create_topic("t", 2, 1)
    tid = kemu.topic_id("t")
    client = await kemu.leader_client("t", 0)
    await open_session(kemu, client)  # loads partition 0 at its log end
    await client.call(share_fetch(tid, {1: []}, epoch=1))  # and partition 1
    kemu.produce("t", 0, 2)
    kemu.produce("t", 1, 2)
    response = await client.call(share_fetch(tid, {}, epoch=2))  # the session's two partitions
    assert acquired(response, 0) == acquired(response, 1) == [(0, 1, 1)]
    manager = share_partitions(server.runtime)
    dropped, live = manager.existing(GROUP, tid, 0), manager.existing(GROUP, tid, 1)
    assert dropped is not None and live is not None
    assert dropped._timer is not None and live._timer is not None  # lock timers armed
    dropped._on_timer()  # its timer fired just before the stop: an expiry not yet run
    manager.forget_group(GROUP)  # and the manager dropped it (retired, no longer in actors)
    assert manager.existing(GROUP, tid, 0) is None
    assert dropped._tasks  # pending
    client.writer.close()

    await server.close()

    assert set(pending_tasks()) <= before
    assert not dropped._tasks and not live._tasks
    assert dropped._timer is None and live._timer is None
    del dropped, live, manager
    gc.collect()
    await asyncio.sleep(0)
    assert reported == []
    loop.set_exception_handler(None)
