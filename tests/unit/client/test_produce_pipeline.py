"""PartitionPipeline: the order of one partition's pipelined produce batches (sans network)."""

from __future__ import annotations

import asyncio

import pytest

from kemu.client import KafkaError
from kemu.client.produce_pipeline import IdempotentPipeline, PartitionPipeline, PendingBatch
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


# --- IdempotentPipeline: a producer without transactions (KIP-360) -----------------------------


async def test_an_epoch_bump_waits_for_the_wire_and_renumbers_from_zero_in_order() -> None:
    pipeline = IdempotentPipeline(max_in_flight=5, producer_id=7, epoch=0)
    first = pipeline.add_under(2, 7, 0)
    pipeline.mark_written(first)
    pipeline.acknowledged(first)
    second, third, fourth = (pipeline.add_under(n, 7, 0) for n in (3, 1, 2))
    for batch in (second, third, fourth):
        pipeline.mark_written(batch)
    assert pipeline.follows_acknowledged(second.sequence)
    pipeline.bump_wanted = True  # the leader answered the second OUT_OF_ORDER: a real gap
    pipeline.mark_failed(second)
    assert not await turn_taken(pipeline, second)  # the third and fourth are still out
    pipeline.mark_failed(third)
    pipeline.mark_failed(fourth)
    assert not await turn_taken(pipeline, third)
    assert await turn_taken(pipeline, second)
    pipeline.renumber(7, 1)
    assert [(b.sequence, b.renumbered) for b in (second, third, fourth)] == [
        (0, True),
        (3, True),
        (4, True),
    ]
    assert (pipeline.epoch, pipeline.next_sequence, pipeline.last_acknowledged) == (1, 6, -1)
    pipeline.mark_written(second)
    assert not await turn_taken(pipeline, third)  # failed: retried once it leads
    pipeline.acknowledged(second)
    assert await turn_taken(pipeline, third)
    assert pipeline.add_under(1, 7, 1).sequence == 6


async def test_a_batch_failed_for_good_leaves_the_ones_behind_it_and_resolves_or_bumps() -> None:
    pipeline = IdempotentPipeline(max_in_flight=5, producer_id=7, epoch=0)
    first, second = pipeline.add_under(1, 7, 0), pipeline.add_under(1, 7, 0)
    pipeline.mark_written(first)
    pipeline.mark_written(second)
    pipeline.give_up(first, KafkaError(ErrorCode.request_timed_out, "gave up"))
    assert pipeline.unresolved and not pipeline.bump_wanted  # the second is still out
    assert await turn_taken(pipeline, second)  # not failed with it, as a transaction's would be
    pipeline.acknowledged(second)  # the leader had the first too: nothing missing
    assert not pipeline.unresolved and not pipeline.bump_wanted
    third = pipeline.add_under(1, 7, 0)
    pipeline.mark_written(third)
    pipeline.give_up(third, KafkaError(ErrorCode.request_timed_out, "gave up"))
    assert pipeline.bump_wanted  # the last sequence taken was never acknowledged
    later = pipeline.add_under(1, 7, 0)
    assert await turn_taken(pipeline, later)  # it leads and bumps before it goes


def test_an_idle_partition_moves_to_the_producers_new_epoch_from_zero() -> None:
    pipeline = IdempotentPipeline(max_in_flight=5, producer_id=7, epoch=0)
    busy = pipeline.add_under(4, 7, 0)
    assert pipeline.add_under(1, 7, 2).sequence == 4  # its batches are out: the old epoch goes on
    assert pipeline.epoch == 0
    pipeline.acknowledged(busy)
    pipeline.acknowledged(pipeline.unacknowledged[0])
    moved = pipeline.add_under(1, 7, 2)
    assert (moved.sequence, pipeline.epoch) == (0, 2)


async def test_a_batch_expired_before_it_was_ever_sent_gives_its_sequence_to_the_next() -> None:
    pipeline = IdempotentPipeline(max_in_flight=5, producer_id=7, epoch=0)
    first = pipeline.add_under(2, 7, 0)
    pipeline.mark_written(first)
    pipeline.acknowledged(first)
    expired, behind = pipeline.add_under(3, 7, 0), pipeline.add_under(1, 7, 0)
    assert (expired.sequence, behind.sequence) == (2, 5)
    # e.g. no leader answered within delivery_timeout: it never reached a broker
    pipeline.give_up(expired, KafkaError(ErrorCode.request_timed_out, "gave up"))
    assert not pipeline.unresolved and not pipeline.bump_wanted  # no epoch bump (KIP-360)
    assert (behind.sequence, pipeline.epoch) == (2, 0)  # the next batch takes its sequence
    assert await turn_taken(pipeline, behind)
    pipeline.mark_written(behind)
    pipeline.acknowledged(behind)
    assert pipeline.add_under(1, 7, 0).sequence == 3


async def test_a_batch_expired_after_an_attempt_was_written_still_asks_for_a_bump() -> None:
    pipeline = IdempotentPipeline(max_in_flight=5, producer_id=7, epoch=0)
    sent = pipeline.add_under(1, 7, 0)
    pipeline.mark_written(sent)
    pipeline.mark_failed(sent)  # its connection broke: the leader may have appended it
    pipeline.give_up(sent, KafkaError(ErrorCode.request_timed_out, "gave up"))
    assert pipeline.bump_wanted and pipeline.next_sequence == 1


async def test_until_the_leader_knows_the_producer_only_the_first_batch_is_out() -> None:
    """A leader takes any first sequence from a producer id it has no state for: had the first
    batch been refused and the second taken, the first could never follow it."""
    pipeline = IdempotentPipeline(max_in_flight=5, producer_id=7, epoch=0)
    first, second, third = (pipeline.add_under(1, 7, 0) for _ in range(3))
    assert await turn_taken(pipeline, first)
    pipeline.mark_written(first)
    assert not await turn_taken(pipeline, second)  # in flight is not enough: its answer
    pipeline.mark_failed(first)  # e.g. NOT_LEADER_OR_FOLLOWER, not appended
    assert not await turn_taken(pipeline, second)
    pipeline.mark_written(first)
    pipeline.acknowledged(first)
    assert await turn_taken(pipeline, second)
    pipeline.mark_written(second)
    assert await turn_taken(pipeline, third)  # known now: the pipeline fills
    pipeline.mark_written(third)
    for batch in (second, third):
        pipeline.acknowledged(batch)
    # A bumped epoch of a known id needs sequence 0, so it keeps pipelining; a new id does not.
    pipeline.renumber(7, 1)
    bumped = [pipeline.add_under(1, 7, 1) for _ in range(2)]
    pipeline.mark_written(bumped[0])
    assert await turn_taken(pipeline, bumped[1])
    for batch in bumped:
        pipeline.acknowledged(batch)
    renewed = [pipeline.add_under(1, 8, 0) for _ in range(2)]
    assert pipeline.producer_id == 8 and renewed[0].sequence == 0
    pipeline.mark_written(renewed[0])
    assert not await turn_taken(pipeline, renewed[1])


def test_an_out_of_order_batch_the_leader_has_passed_is_known_as_such() -> None:
    pipeline = IdempotentPipeline(max_in_flight=5, producer_id=7, epoch=0)
    assert not pipeline.precedes_acknowledged(0)  # nothing acknowledged yet
    first, second = pipeline.add_under(1, 7, 0), pipeline.add_under(2, 7, 0)
    pipeline.acknowledged(second)  # taken by a leader that did not know the producer
    assert pipeline.precedes_acknowledged(first.sequence)
    assert not pipeline.follows_acknowledged(first.sequence)
    assert not pipeline.precedes_acknowledged(pipeline.next_sequence)
