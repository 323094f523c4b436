"""kemu.client's reader after OFFSET_OUT_OF_RANGE: Kafka 4.4.0 answers it with offsets of -1
(found by make conformance-diff), so the reader asks ListOffsets for the log start instead of
reading one from the Fetch answer. No broker: the wire calls are stand-ins."""

from __future__ import annotations

from typing import Any

import pytest

from kemu.client import Consumer
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode

FETCH, LIST_OFFSETS = 1, 2


async def test_out_of_range_moves_to_the_log_start_from_list_offsets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reader = Consumer("127.0.0.1:1")
    reader.positions[("t", 0)] = 99
    calls: list[int] = []
    fetch_module = wire.response_module(FETCH, 12)
    offsets_module = wire.response_module(LIST_OFFSETS, 7)

    async def version(api_key: int, wanted: int, node_id: int | None = None) -> int:
        return wanted

    async def call(node: int, api_key: int, version: int, **fields: Any) -> Any:
        calls.append(api_key)
        if api_key == FETCH:
            partition = wire.build(
                fetch_module.PartitionData,
                partition_index=0,
                error_code=ErrorCode.offset_out_of_range,
                high_watermark=-1,
                last_stable_offset=-1,
                log_start_offset=-1,
            )
            topic = wire.build(
                fetch_module.FetchableTopicResponse, topic="t", partitions=(partition,)
            )
            return wire.build(wire.response_schema(FETCH, 12), responses=(topic,))
        partition = wire.build(
            offsets_module.ListOffsetsPartitionResponse, partition_index=0, offset=5
        )
        topic = wire.build(
            offsets_module.ListOffsetsTopicResponse, name="t", partitions=(partition,)
        )
        return wire.build(wire.response_schema(LIST_OFFSETS, 7), topics=(topic,))

    monkeypatch.setattr(reader.cluster, "version", version)
    monkeypatch.setattr(reader.cluster, "call", call)
    assert await reader._fetch(1, [("t", 0)], 0) == []
    assert reader.positions[("t", 0)] == 5
    assert calls == [FETCH, LIST_OFFSETS]
