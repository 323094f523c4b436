"""ShareFetch with MaxBytes 0 fetches nothing, as Kafka 4.4.0 (issue 15): its
PartitionMaxBytesStrategy throws on it and each partition held gets UNKNOWN_SERVER_ERROR."""

from __future__ import annotations

from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_share_fetch import (
    ACCEPT,
    Harness,
    acquired,
    kemu,
    open_session,
    partition_data,
    share_fetch,
)

__all__ = ["kemu"]  # the fixture


async def test_max_bytes_zero_fetches_nothing(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    client = await kemu.leader_client("t", 0)
    await open_session(kemu, client)
    kemu.produce("t", 0, 3)
    response = await client.call(share_fetch(tid, {0: []}, epoch=1, max_bytes=0))
    assert response.error_code == ErrorCode.none
    data = partition_data(response, 0)
    assert data.error_code == ErrorCode.unknown_server_error
    assert data.error_message == "Requested max bytes must be greater than 0"
    assert not data.records and acquired(response) == []
    # nothing was acquired: a fetch with room gets every record
    assert acquired(await client.call(share_fetch(tid, {0: []}, epoch=2))) == [(0, 2, 1)]


async def test_max_bytes_zero_still_applies_acknowledgements(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    client = await kemu.leader_client("t", 0)
    await open_session(kemu, client)
    kemu.produce("t", 0, 2)
    assert acquired(await client.call(share_fetch(tid, {0: []}, epoch=1))) == [(0, 1, 1)]
    kemu.produce("t", 0, 2)
    response = await client.call(share_fetch(tid, {0: [(0, 1, [ACCEPT])]}, epoch=2, max_bytes=0))
    data = partition_data(response, 0)
    assert data.acknowledge_error_code == ErrorCode.none
    assert data.error_code == ErrorCode.unknown_server_error
    assert acquired(response) == []
