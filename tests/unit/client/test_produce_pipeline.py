"""PartitionPipeline: the order of one partition's pipelined produce batches (sans network)."""

from __future__ import annotations

import asyncio

import pytest

from kemu.client import KafkaError
from kemu.client.produce_pipeline import PartitionPipeline, PendingBatch
from kemu.protocol.errors import ErrorCode


async def turn_taken(pipeline: PartitionPipeline, batch: PendingBatch) -> bool:
    waiting = asyncio.ensure_future(pipeline.wait_turn(batch))
    for _ in range(3):
        await asyncio.sleep(0)
    if waiting.done():
        waiting.result()
        return True
    waiting.cancel()
    return False


async def test_batches_go_out_in_sequence_order_within_the_limit() -> None:
    pipeline = PartitionPipeline(max_in_flight=2)
    first, second, third = pipeline.add(3), pipeline.add(2), pipeline.add(1)
    assert [b.sequence for b in (first, second, third)] == [0, 3, 5]
    assert not await turn_taken(pipeline, second)  # the first is not on the wire yet
    assert await turn_taken(pipeline, first)
    pipeline.mark_written(first)
    assert await turn_taken(pipeline, second)
    pipeline.mark_written(second)
    assert not await turn_taken(pipeline, third)  # two in flight already
    pipeline.acknowledged(first)
    assert await turn_taken(pipeline, third)


async def test_after_a_failure_a_batch_is_retried_only_once_it_leads() -> None:
    pipeline = PartitionPipeline(max_in_flight=5)
    first, second, third = pipeline.add(1), pipeline.add(1), pipeline.add(1)
    for batch in (first, second):
        pipeline.mark_written(batch)
    pipeline.mark_failed(first)  # e.g. the connection was lost
    pipeline.mark_failed(second)  # OUT_OF_ORDER behind it, or the same lost connection
    assert not await turn_taken(pipeline, third)  # the ones before it must go again first
    assert not await turn_taken(pipeline, second)
    assert await turn_taken(pipeline, first)
    pipeline.mark_written(first)
    assert not await turn_taken(pipeline, second)  # waits for the first's answer
    pipeline.acknowledged(first)
    assert await turn_taken(pipeline, second)
    pipeline.mark_written(second)
    assert await turn_taken(pipeline, third)


async def test_a_batch_failed_for_good_fails_those_behind_it_and_its_sequence_is_reused() -> None:
    pipeline = PartitionPipeline(max_in_flight=5)
    first, second, third = pipeline.add(2), pipeline.add(2), pipeline.add(2)
    pipeline.mark_written(first)
    pipeline.acknowledged(first)
    pipeline.give_up(second, KafkaError(ErrorCode.request_timed_out, "gave up"))
    later = pipeline.add(1)  # sent while the gap is open: cannot be appended either
    for batch in (third, later):
        with pytest.raises(KafkaError, match="failed"):
            await pipeline.wait_turn(batch)
    assert pipeline.add(1).sequence == 2  # the partition goes on from the failed batch
