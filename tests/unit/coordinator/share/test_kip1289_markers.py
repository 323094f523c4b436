"""KIP-1289 resolution: staged outcomes, retries (spec Q5), aborts at the limit (Q6), and the
share coordinator resolving TX_PENDING from the transaction markers in its own log — live, at
start-up, with the share partition loaded or not."""

from __future__ import annotations

import asyncio
import uuid

from kemu.broker.share.partition import SharePartitionConfig, SharePartitionCore
from kemu.broker.share.states import AckType, RecordState
from kemu.cluster.context import Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.coordinator.share.decode import LogRecord, ShareStateDecoder, log_records
from kemu.coordinator.share.persister import PersistedBatch, PersistedState, SharePartitionKey
from kemu.coordinator.share.records import (
    SHARE_UPDATE,
    ShareUpdateValue,
    StateRecordKey,
    decode_value,
    encode_value,
)
from kemu.coordinator.share.service import SHARE_STATE_TOPIC, ShareCoordinatorService
from kemu.coordinator.share.shard import ShareCoordinatorShard
from kemu.coordinator.share.txn_markers import complete_count, resolve, settle
from kemu.protocol.errors import ErrorCode
from kemu.storage.log import MemoryLog, PartitionLog
from tests.unit.share_helpers import FakeLog, ack, acquire, ranges

A, K, G, R, T = (
    RecordState.AVAILABLE,
    RecordState.ACKNOWLEDGED,
    RecordState.ARCHIVING,
    RecordState.ARCHIVED,
    RecordState.TX_PENDING,
)
GAP, ACCEPT, RELEASE, REJECT = (int(AckType.GAP), 1, 2, 3)
NOW = 1_700_000_000_000


def staged(
    first: int, last: int, pid: int, epoch: int, ack_type: int, **more: int
) -> PersistedBatch:
    return PersistedBatch(first, last, 5, 1, pid, epoch, ack_type, **more)


# --- the leader: what a stage fixes, retries and the delivery limit ---------------------------


def core_with(log_size: int = 5, **config: object) -> tuple[FakeLog, SharePartitionCore]:
    log = FakeLog()
    log.append(log_size)
    core, _ = SharePartitionCore.from_persisted(
        PersistedState(0, 0),
        SharePartitionConfig(**config),
        reset_offset=0,  # type: ignore[arg-type]
    )
    acquire(core, log, "m1", now=0)
    return log, core


def test_a_stage_persists_the_outcomes_of_commit_and_abort() -> None:
    _, core = core_with(dlq_enabled=True)
    result = core.stage("m1", 100, 1, [ack(0, 4, ACCEPT, ACCEPT, REJECT, REJECT, ACCEPT)], 10)
    assert result.error is ErrorCode.none
    outcomes = [
        (b.first_offset, b.last_offset, b.staged_commit_state, b.staged_abort_state)
        for b in result.effects.batches
    ]
    assert outcomes == [(0, 1, K, A), (2, 3, G, A), (4, 4, K, A)]


def test_an_identical_restage_is_none_and_changes_nothing() -> None:
    _, core = core_with()
    assert core.stage("m1", 100, 1, [ack(0, 4, ACCEPT)], 10).error is ErrorCode.none
    before = core.spans()
    for retry in ([ack(0, 4, ACCEPT)], [ack(0, 1, ACCEPT), ack(2, 4, ACCEPT)], [ack(1, 2, ACCEPT)]):
        again = core.stage("m1", 100, 1, retry, 11)
        assert (again.error, again.effects.batches) == (ErrorCode.none, ())
    assert core.spans() == before


def test_gaps_are_staged_with_the_records_and_a_retry_of_them_is_none() -> None:
    _, core = core_with()
    batches = [ack(0, 4, GAP, ACCEPT, GAP, REJECT, ACCEPT)]
    assert core.stage("m1", 100, 1, batches, 10).error is ErrorCode.none
    assert core.stage("m1", 100, 1, batches, 11).error is ErrorCode.none
    states = [(b.first_offset, b.staged_commit_state) for b in core.persisted_view()]
    assert states == [(0, R), (1, K), (2, R), (3, R), (4, K)]
    core.apply_marker(100, 1, commit=True, now_ms=12)
    assert core.start == 5


def test_a_different_stage_of_pending_records_is_refused() -> None:
    _, core = core_with()
    assert core.stage("m1", 100, 1, [ack(0, 4, ACCEPT)], 10).error is ErrorCode.none
    for member, pid, epoch, batches in (
        ("m1", 100, 1, [ack(0, 4, REJECT)]),  # another type
        ("m1", 100, 1, [ack(0, 4, ACCEPT, ACCEPT, REJECT, ACCEPT, ACCEPT)]),  # partly another
        ("m1", 100, 2, [ack(0, 4, ACCEPT)]),  # another epoch
        ("m1", 101, 1, [ack(0, 4, ACCEPT)]),  # another producer
        ("m2", 100, 1, [ack(0, 4, ACCEPT)]),  # another member
    ):
        refused = core.stage(member, pid, epoch, batches, 11)
        assert refused.error is ErrorCode.invalid_record_state, (member, pid, epoch, batches)
        assert refused.effects.batches == ()


def test_a_retry_that_adds_records_stages_only_the_new_ones() -> None:
    _, core = core_with()
    assert core.stage("m1", 100, 1, [ack(0, 2, ACCEPT)], 10).error is ErrorCode.none
    grown = core.stage("m1", 100, 1, [ack(0, 4, ACCEPT)], 11)
    assert grown.error is ErrorCode.none
    assert core.spans() == [(0, 4, T, 1, "m1")]


def delivered_twice(limit: int, respects: bool) -> tuple[FakeLog, SharePartitionCore]:
    log = FakeLog()
    log.append(3)
    config = SharePartitionConfig(
        delivery_count_limit=limit, abort_respects_delivery_limit=respects
    )
    core, _ = SharePartitionCore.from_persisted(PersistedState(0, 0), config, reset_offset=0)
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 2, RELEASE)], 1)
    assert ranges(acquire(core, log, "m1", now=2)) == [(0, 2, 2)]
    return log, core


def test_an_abort_archives_records_whose_staged_delivery_was_their_last() -> None:
    log, core = delivered_twice(limit=2, respects=True)
    core.stage("m1", 100, 1, [ack(0, 2, ACCEPT)], 3)
    core.apply_marker(100, 1, commit=False, now_ms=4)
    assert core.spans() == [] and core.start == 3  # archived: gone past the start
    assert ranges(acquire(core, log, "m2", now=5)) == []


def test_the_draft_prs_abort_makes_them_available_again() -> None:
    log, core = delivered_twice(limit=2, respects=False)
    core.stage("m1", 100, 1, [ack(0, 2, ACCEPT)], 3)
    core.apply_marker(100, 1, commit=False, now_ms=4)
    assert core.spans() == [(0, 2, A, 2, None)]
    # (a third delivery goes out one record at a time: Kafka's throttled delivery)
    assert ranges(acquire(core, log, "m2", now=5)) == [(0, 0, 3)]


def test_below_the_limit_an_abort_makes_them_available() -> None:
    log, core = delivered_twice(limit=3, respects=True)
    core.stage("m1", 100, 1, [ack(0, 2, ACCEPT)], 3)
    core.apply_marker(100, 1, commit=False, now_ms=4)
    assert core.spans() == [(0, 2, A, 2, None)]
    # (a third delivery goes out one record at a time: Kafka's throttled delivery)
    assert ranges(acquire(core, log, "m2", now=5)) == [(0, 0, 3)]


def test_a_reloaded_core_resolves_with_the_persisted_outcome() -> None:
    _, core = delivered_twice(limit=2, respects=True)
    core.stage("m1", 100, 1, [ack(0, 2, REJECT)], 3)
    reloaded, _ = SharePartitionCore.from_persisted(
        PersistedState(0, core.start, batches=core.persisted_view()),
        SharePartitionConfig(delivery_count_limit=10),  # the limit changed since: still archived
        reset_offset=0,
    )
    reloaded.apply_marker(100, 1, commit=False, now_ms=4)
    assert reloaded.start == 3


# --- resolving persisted state from a marker ---------------------------------------------------


def test_a_commit_gives_the_staged_states_and_moves_the_start() -> None:
    batches = (
        staged(0, 1, 7, 3, ACCEPT),
        staged(2, 2, 7, 3, REJECT),
        PersistedBatch(3, 4, 0, 1),  # in flight
        staged(5, 6, 7, 3, ACCEPT),
    )
    resolution = resolve(0, batches, 7, 4, commit=True)  # TV2: the marker's epoch is one up
    assert resolution is not None
    assert resolution.start_offset == 3
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in resolution.batches] == [
        (3, 4, 0),
        (5, 6, 2),
    ]
    assert resolution.delivery_complete_count == 2
    assert all(b.staging == (-1, -1, -1, -1, -1) for b in resolution.batches)


def test_an_abort_gives_the_staged_abort_state() -> None:
    batches = (
        staged(0, 0, 7, 3, ACCEPT, staged_abort_state=4),  # its last delivery
        staged(1, 2, 7, 3, ACCEPT),
    )
    resolution = resolve(0, batches, 7, 3, commit=False)
    assert resolution is not None
    assert resolution.start_offset == 1
    assert [(b.first_offset, b.delivery_state, b.delivery_count) for b in resolution.batches] == [
        (1, 0, 1)
    ]


def test_a_marker_leaves_other_transactions_and_later_epochs_alone() -> None:
    batches = (staged(0, 0, 7, 3, ACCEPT), staged(1, 1, 8, 3, ACCEPT), staged(2, 2, 7, 5, ACCEPT))
    resolution = resolve(0, batches, 7, 4, commit=True)
    assert resolution is not None
    assert [b.delivery_state for b in resolution.batches] == [5, 5]  # 0 went past the start
    assert resolve(0, batches, 9, 9, commit=True) is None


def test_settle_stops_at_undelivered_offsets() -> None:
    start, kept = settle(0, (PersistedBatch(0, 1, 2, 1), PersistedBatch(3, 3, 2, 1)))
    assert start == 2 and complete_count(kept) == 1


def test_the_staged_outcomes_survive_the_record_encoding() -> None:
    value = ShareUpdateValue(
        0, 1, 0, (staged(0, 4, 7, 3, REJECT, staged_commit_state=3, staged_abort_state=4),), 0
    )
    assert decode_value(SHARE_UPDATE, encode_value(value)) == value


# --- the shard and the service ------------------------------------------------------------------

TOPIC_ID = uuid.uuid4()
KEY = SharePartitionKey("g", TOPIC_ID, 0)


def test_the_shard_resolves_a_marker_and_states_it_in_an_update_that_changes_nothing() -> None:
    shard = ShareCoordinatorShard(lambda _: 1)
    shard.replay(
        StateRecordKey(SHARE_UPDATE, "g", TOPIC_ID, 0),
        ShareUpdateValue(0, 0, 0, (PersistedBatch(0, 0, 0, 1), staged(1, 3, 7, 3, ACCEPT)), 0),
    )
    assert shard.replay_marker(7, 4, commit=True) == [KEY]
    resolved = shard.states[KEY]
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in resolved.batches] == [
        (0, 0, 0),
        (1, 3, 2),
    ]
    assert resolved.delivery_complete_count == 3
    [record] = shard.settle_markers().records
    shard.replay(record.key, record.value)
    assert shard.states[KEY] == resolved and shard.marker_resolved == {}
    assert shard.replay_marker(7, 4, commit=True) == []  # again: nothing left to resolve


def test_the_settling_update_states_the_outcome_of_offsets_the_start_offset_passed() -> None:
    """Offset 0 alone, staged and committed: the start offset moves to 1, and the update still
    names offset 0 as ACKNOWLEDGED, so the latest record naming it is not its TX_PENDING."""
    shard = ShareCoordinatorShard(lambda _: 1)
    shard.replay(
        StateRecordKey(SHARE_UPDATE, "g", TOPIC_ID, 0),
        ShareUpdateValue(0, 0, 0, (staged(0, 0, 7, 3, ACCEPT),), 0),
    )
    assert shard.replay_marker(7, 4, commit=True) == [KEY]
    resolved = shard.states[KEY]
    assert (resolved.start_offset, resolved.batches) == (1, ())
    [record] = shard.settle_markers().records
    assert isinstance(record.value, ShareUpdateValue)
    assert record.value.start_offset == 1
    assert [
        (b.first_offset, b.last_offset, b.delivery_state) for b in record.value.state_batches
    ] == [(0, 0, K)]
    shard.replay(record.key, record.value)
    assert shard.states[KEY] == resolved  # the replay drops what is below the start offset


def make_cluster(logs: dict[tuple[str, int], PartitionLog]) -> Cluster:
    def log_factory(topic: str, index: int) -> PartitionLog:
        return logs.setdefault((topic, index), MemoryLog())

    nodes = {i: BrokerNode(i, "127.0.0.1", 19290 + i) for i in (1, 2, 3)}
    cluster = Cluster(
        cluster_id="markers-unit",
        nodes=nodes,
        config=BrokerConfig({"share.coordinator.state.topic.num.partitions": "3"}),
        log_factory=log_factory,
    )
    return cluster


def staged_service() -> tuple[
    dict[tuple[str, int], PartitionLog], Cluster, ShareCoordinatorService, SharePartitionKey, int
]:
    logs: dict[tuple[str, int], PartitionLog] = {}
    cluster = make_cluster(logs)
    topic = cluster.create_topic("orders", 1, 1)
    key = SharePartitionKey("g", topic.topic_id, 0)
    service = ShareCoordinatorService(Runtime(cluster=cluster, clock_ms=lambda: NOW))
    assert service.initialize_sync(key, 0, 0).error is ErrorCode.none
    written = service.write_sync(
        key,
        state_epoch=0,
        leader_epoch=0,
        start_offset=0,
        delivery_complete_count=0,
        batches=(
            PersistedBatch(0, 0, 0, 1),
            staged(1, 3, 7, 3, ACCEPT),
            staged(4, 4, 7, 3, REJECT),
        ),
    )
    assert written.error is ErrorCode.none
    return logs, cluster, service, key, service.partition_for(key)


def resolved_states(state: PersistedState | None) -> list[tuple[int, int, int]]:
    assert state is not None
    return [(b.first_offset, b.last_offset, b.delivery_state) for b in state.batches]


def test_a_marker_written_to_the_state_log_resolves_before_the_next_read() -> None:
    _, cluster, service, key, index = staged_service()
    cluster.topics[SHARE_STATE_TOPIC].partitions[index].write_marker(7, 4, True, now_ms=NOW)
    state = service.read_sync(key, 0).state
    assert resolved_states(state) == [(0, 0, 0), (1, 3, 2), (4, 4, 4)]
    summary = service.read_summary_sync(key).state
    assert summary is not None and summary.delivery_complete_count == 4


def test_a_marker_the_service_never_saw_resolves_when_it_starts_again() -> None:
    _, cluster, _, key, index = staged_service()
    cluster.topics[SHARE_STATE_TOPIC].partitions[index].write_marker(7, 4, False, now_ms=NOW)
    # a new coordinator replaying the same logs (the marker was the last thing written)
    restarted = ShareCoordinatorService(Runtime(cluster=cluster, clock_ms=lambda: NOW))
    assert resolved_states(restarted.read_sync(key, 0).state) == [(0, 4, 0)]
    # and the outcome was written out: a reader that ignores markers sees it too
    decoder = ShareStateDecoder()
    for partition in cluster.topics[SHARE_STATE_TOPIC].partitions:
        for header, batch in partition.log.batches(0, partition.high_watermark):
            for record in log_records(partition.index, header, batch):
                if record.marker is None:
                    decoder.add(record)
    [state] = [s for s in decoder.states() if s["groupId"] == "g"]
    assert [b["deliveryState"] for b in state["stateBatches"]] == [0]


def test_follow_markers_resolves_at_once() -> None:
    _, cluster, service, key, index = staged_service()
    cluster.topics[SHARE_STATE_TOPIC].partitions[index].write_marker(7, 4, True, now_ms=NOW)
    service.follow_markers([index])
    assert service.shard(index).marker_resolved == {}
    assert resolved_states(
        PersistedState(0, 0, batches=service.shard(index).states[key].batches)
    ) == [(0, 0, 0), (1, 3, 2), (4, 4, 4)]


def test_the_decoder_shows_and_applies_markers() -> None:
    decoder = ShareStateDecoder()
    update = ShareUpdateValue(0, 0, 0, (staged(0, 1, 7, 3, ACCEPT),), 0)
    from kemu.coordinator.share.records import encode_key

    key = StateRecordKey(SHARE_UPDATE, "g", TOPIC_ID, 0)
    decoder.add(LogRecord(0, 0, encode_key(key), encode_value(update)))
    from kemu.coordinator.share.decode import Marker

    line = decoder.add(LogRecord(0, 1, None, None, Marker(7, 4, True)))
    assert line["marker"]["type"] == "COMMIT" and len(line["marker"]["resolved"]) == 1
    [state] = decoder.states()
    assert state["startOffset"] == 2


def test_replace_keeps_the_staging_tuple_in_step() -> None:
    batch = staged(0, 0, 7, 3, ACCEPT, staged_commit_state=2, staged_abort_state=0)
    assert batch._replace(staged_abort_state=4).staging == (7, 3, ACCEPT, 2, 4)
    assert batch.with_range(0, 9).staging == batch.staging


def test_asyncio_is_not_needed_for_any_of_this() -> None:
    assert not asyncio.iscoroutinefunction(ShareCoordinatorService.follow_markers)
