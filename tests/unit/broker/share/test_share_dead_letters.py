"""KIP-1191 in the sans-IO share-partition core: which transitions produce dead letters, with
which cause, and how ``complete_dead_letters`` finishes them (ARCHIVING -> ARCHIVED)."""

from __future__ import annotations

from kemu.broker.share.dead_letter import (
    TOPIC_ENABLE,
    destination,
    topic_problem,
    write_dead_letters,
    written_offsets,
)
from kemu.broker.share.partition import (
    CAUSE_DELIVERY_LIMIT,
    CAUSE_REJECTED,
    DeadLetter,
    SharePartitionConfig,
    SharePartitionCore,
)
from kemu.broker.share.settings import ShareSettings
from kemu.broker.share.states import AckType, RecordState
from kemu.cluster.model import BrokerNode, Cluster
from kemu.cluster.partition import Partition
from kemu.config.definitions import BrokerConfig
from kemu.coordinator.share.persister import PersistedBatch, PersistedState
from kemu.protocol.record_reader import Record, iter_records
from kemu.protocol.records import build_batch, read_header
from kemu.storage.log import MemoryLog
from tests.unit.share_helpers import FakeLog, ack, acquire, ranges

ACCEPT, RELEASE, REJECT = AckType.ACCEPT, AckType.RELEASE, AckType.REJECT
G, R = RecordState.ARCHIVING, RecordState.ARCHIVED


def dlq_core(
    records: int = 4, limit: int = 2, dlq: bool = True
) -> tuple[FakeLog, SharePartitionCore]:
    log = FakeLog()
    log.append(records)
    core, _ = SharePartitionCore.from_persisted(
        PersistedState(0, 0),
        SharePartitionConfig(
            delivery_count_limit=limit, dlq_enabled=dlq, record_lock_duration_ms=100
        ),
        reset_offset=0,
    )
    return log, core


def test_a_reject_goes_archiving_and_asks_for_one_dead_letter() -> None:
    log, core = dlq_core()
    acquire(core, log, "m1", now=0)
    result = core.acknowledge("m1", [ack(0, 3, ACCEPT, REJECT, REJECT, ACCEPT)], 1)
    assert result.effects.dead_letters == (DeadLetter(1, 2, 1, CAUSE_REJECTED),)
    # the ARCHIVING state is in the batches to persist first, and it holds the start offset
    # (written, as Kafka does, with the start the acknowledgement found: 0)
    persisted = [(b.first_offset, b.last_offset, b.delivery_state) for b in result.effects.batches]
    assert persisted == [(0, 0, 2), (1, 2, 3), (3, 3, 2)]
    assert core.start == 1 and core.state_of(1) is G
    core.check_invariants()


def test_completing_the_dead_letters_archives_them_and_moves_the_start() -> None:
    log, core = dlq_core()
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 3, ACCEPT, REJECT, REJECT, ACCEPT)], 1)
    assert core.archiving() == [(1, 2, 1)]
    done = core.complete_dead_letters([(1, 2)])
    assert done.dead_letters == ()
    assert core.start == 4 and core.spans() == []
    assert done.start_moved and done.start_offset == 1  # the move is written by the next write
    assert core.archiving() == []
    # again: nothing left to do, nothing to write
    assert not core.complete_dead_letters([(1, 2)]).durable
    core.check_invariants()


def test_release_and_lock_expiry_at_the_limit_are_the_delivery_count_cause() -> None:
    log, core = dlq_core(records=2, limit=2)
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 1, RELEASE)], 1)
    acquire(core, log, "m1", now=2)  # delivery 2 of 2
    released = core.acknowledge("m1", [ack(0, 0, RELEASE)], 3)
    assert released.effects.dead_letters == (DeadLetter(0, 0, 2, CAUSE_DELIVERY_LIMIT),)
    expired = core.expire_locks(10_000)
    assert expired.dead_letters == (DeadLetter(1, 1, 2, CAUSE_DELIVERY_LIMIT),)
    assert core.spans() == [(0, 1, G, 2, None)]


def test_below_the_limit_a_release_is_no_dead_letter() -> None:
    log, core = dlq_core(limit=3)
    acquire(core, log, "m1", now=0)
    assert core.acknowledge("m1", [ack(0, 3, RELEASE)], 1).effects.dead_letters == ()


def test_without_a_dead_letter_queue_rejects_archive_at_once() -> None:
    log, core = dlq_core(dlq=False)
    acquire(core, log, "m1", now=0)
    result = core.acknowledge("m1", [ack(0, 3, REJECT)], 1)
    assert result.effects.dead_letters == ()
    assert core.start == 4


def test_a_committed_transactional_reject_is_a_dead_letter_an_accept_is_not() -> None:
    log, core = dlq_core()
    acquire(core, log, "m1", now=0)
    core.stage("m1", 100, 1, [ack(0, 3, ACCEPT, REJECT, ACCEPT, ACCEPT)], 1)
    committed = core.apply_marker(100, 1, commit=True, now_ms=2)
    assert committed.dead_letters == (DeadLetter(1, 1, 1, CAUSE_REJECTED),)
    assert core.start == 1 and core.state_of(1) is G
    core.complete_dead_letters([(1, 1)])
    assert core.start == 4


def test_an_abort_at_the_limit_is_a_delivery_count_dead_letter() -> None:
    log, core = dlq_core(records=1, limit=2)
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 0, RELEASE)], 1)
    acquire(core, log, "m1", now=2)
    core.stage("m1", 100, 1, [ack(0, 0, ACCEPT)], 3)
    aborted = core.apply_marker(100, 1, commit=False, now_ms=4)
    assert aborted.dead_letters == (DeadLetter(0, 0, 2, CAUSE_DELIVERY_LIMIT),)


def test_archiving_records_loaded_from_persisted_state_are_recovered_dead_letters() -> None:
    # a crash after ARCHIVING was persisted: the load asks for the writes again, flagged
    # recovered so the caller looks in the DLQ topic first; the cause follows Kafka's rule on
    # resume (delivery count at the limit -> delivery count exceeded, else rejected)
    state = PersistedState(
        0,
        0,
        batches=(
            PersistedBatch(0, 1, int(G), 1),
            PersistedBatch(2, 2, 2, 1),
            PersistedBatch(3, 3, int(G), 2),
        ),
    )
    config = SharePartitionConfig(delivery_count_limit=2, dlq_enabled=True)
    core, effects = SharePartitionCore.from_persisted(state, config, reset_offset=0)
    assert effects.dead_letters == (
        DeadLetter(0, 1, 1, CAUSE_REJECTED, recovered=True),
        DeadLetter(3, 3, 2, CAUSE_DELIVERY_LIMIT, recovered=True),
    )
    assert core.start == 0
    done = core.complete_dead_letters([(0, 1), (3, 3)])
    assert core.start == 4 and core.spans() == []
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in done.batches] == [
        (0, 1, 4),
        (3, 3, 4),
    ]
    assert done.start_offset == 0
    core.check_invariants()


def test_a_last_delivery_lost_with_the_process_is_archived_on_load() -> None:
    # Acquisitions are persisted with their delivery count: offset 1 was acquired for its last
    # delivery (2 of 2) when the process stopped. Loaded, it is a dead letter of the delivery
    # limit, not AVAILABLE for a third delivery (simulation seed 9 at crash-point rate 0.03);
    # offset 0, on its first delivery, stays AVAILABLE.
    log, core = dlq_core(records=2, limit=2)
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(1, 1, RELEASE)], 1)
    acquire(core, log, "m1", now=2)
    persisted = PersistedState(0, core.start, batches=core.persisted_view())
    assert [(b.first_offset, b.delivery_state, b.delivery_count) for b in persisted.batches] == [
        (0, 0, 1),
        (1, 0, 2),
    ]
    loaded, effects = SharePartitionCore.from_persisted(persisted, core.config, reset_offset=0)
    assert effects.dead_letters == (DeadLetter(1, 1, 2, CAUSE_DELIVERY_LIMIT),)
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in effects.batches] == [
        (1, 1, int(G))
    ]
    assert loaded.spans() == [(0, 0, RecordState.AVAILABLE, 1, None), (1, 1, G, 2, None)]
    assert loaded.delivery_limit_archives == 1
    assert ranges(acquire(loaded, log, "m2", now=3)) == [(0, 0, 2)]
    loaded.check_invariants()


def test_without_a_dlq_a_lost_last_delivery_is_archived_on_load() -> None:
    state = PersistedState(0, 0, batches=(PersistedBatch(0, 1, 0, 2),))
    config = SharePartitionConfig(delivery_count_limit=2)
    core, effects = SharePartitionCore.from_persisted(state, config, reset_offset=0)
    assert effects.dead_letters == ()
    assert core.start == 2 and effects.start_moved
    core.check_invariants()


def test_a_lost_last_delivery_stays_available_when_aborts_do_not_respect_the_limit() -> None:
    # kemu.kip1289.abort.respects.delivery.limit=false: an abort leaves records AVAILABLE at
    # the limit on purpose (the draft PR's behaviour), so a load does not archive them either
    state = PersistedState(0, 0, batches=(PersistedBatch(0, 1, 0, 2),))
    config = SharePartitionConfig(delivery_count_limit=2, abort_respects_delivery_limit=False)
    core, effects = SharePartitionCore.from_persisted(state, config, reset_offset=0)
    assert effects.dead_letters == () and not effects.durable
    assert core.spans() == [(0, 1, RecordState.AVAILABLE, 2, None)]


def test_a_partial_completion_keeps_the_start_at_the_first_archiving_record() -> None:
    log, core = dlq_core()
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 3, REJECT)], 1)
    core.complete_dead_letters([(2, 3)])
    assert core.start == 0 and core.spans() == [(0, 1, G, 1, None), (2, 3, R, 1, None)]
    core.check_invariants()
    core.complete_dead_letters([(0, 1)])
    assert core.start == 4


# --- the write itself (kemu/broker/share/dead_letter.py), on an in-memory cluster --------------


def dlq_cluster(**static: str) -> Cluster:
    return Cluster(
        cluster_id="unit",
        nodes={1: BrokerNode(1, "127.0.0.1", 19092)},
        config=BrokerConfig(static),
        log_factory=lambda topic, index: MemoryLog(),
    )


ENABLED = {TOPIC_ENABLE: "true"}


def source_with(cluster: Cluster, records: int) -> Partition:
    partition = cluster.create_topic("src", 3, 1, persist=False).partitions[2]
    batch = build_batch(
        [(b"k%d" % i, b"v%d" % i) for i in range(records)], timestamp_ms=1, headers=None
    )
    partition.append([(read_header(batch), batch)], now_ms=1)
    return partition


def dlq_records(cluster: Cluster, topic: str) -> list[tuple[int, Record]]:
    return [
        (p.index, record)
        for p in cluster.topics[topic].partitions
        for _, batch in p.log.batches(0, p.high_watermark)
        for record in iter_records(batch)
    ]


def settings(topic: str, copy: bool = True) -> ShareSettings:
    return ShareSettings(
        SharePartitionConfig(dlq_enabled=True), dlq_topic=topic, dlq_copy_record=copy
    )


def test_the_topic_checks_come_in_kafkas_order_with_its_messages() -> None:
    cluster = dlq_cluster()
    cluster.create_topic("dlq.off", 1, 1, persist=False)
    cluster.create_topic("elsewhere", 1, 1, ENABLED, persist=False)
    cluster.create_topic("dlq.on", 1, 1, ENABLED, persist=False)
    assert (
        topic_problem(cluster, "g", "") == "Configured DLQ topic name in share group: g is empty."
    )
    assert topic_problem(cluster, "g", "__x") == (
        "Configured DLQ topic name in share group: g cannot start with __, topic: __x."
    )
    assert topic_problem(cluster, "g", "dlq.off") == (
        "DLQ is not enabled on configured DLQ topic for share group: g, topic: dlq.off."
    )
    assert topic_problem(cluster, "g", "dlq.none") == (
        "DLQ topic does not exist and auto create is disabled on cluster for share group: g, "
        "topic: dlq.none."
    )
    assert topic_problem(cluster, "g", "elsewhere") == (
        "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: g, "
        "topic: elsewhere, prefix: dlq.."
    )
    assert topic_problem(cluster, "g", "dlq.on") is None
    # the existence checks come before the prefix check
    assert "auto create is disabled" in (topic_problem(cluster, "g", "other") or "")
    anything = dlq_cluster(**{"errors.deadletterqueue.topic.name.prefix": ""})
    anything.create_topic("elsewhere", 1, 1, ENABLED, persist=False)
    assert topic_problem(anything, "g", "elsewhere") is None


def test_records_go_to_source_partition_modulo_the_dlq_partitions_with_kafkas_headers() -> None:
    cluster = dlq_cluster()
    cluster.create_topic("dlq.x", 2, 1, ENABLED, persist=False)
    source = source_with(cluster, 3)
    letters = [DeadLetter(0, 1, 1, CAUSE_REJECTED), DeadLetter(2, 2, 5, CAUSE_DELIVERY_LIMIT)]
    outcome = write_dead_letters(cluster, "g", source, settings("dlq.x"), letters, 99)
    assert (outcome.written, outcome.skipped, outcome.problem) == (3, 0, None)
    written = dlq_records(cluster, "dlq.x")
    assert {p for p, _ in written} == {destination(2, 2)} == {0}
    assert [(r.key, r.value, r.timestamp) for _, r in written] == [
        (b"k0", b"v0", 99),
        (b"k1", b"v1", 99),
        (b"k2", b"v2", 99),
    ]
    assert [dict(r.headers) for _, r in written][2] == {
        "__dlq.errors.topic": b"src",
        "__dlq.errors.partition": b"2",
        "__dlq.errors.offset": b"2",
        "__dlq.errors.group": b"g",
        "__dlq.errors.delivery.count": b"5",
        "__dlq.errors.message": CAUSE_DELIVERY_LIMIT.encode(),
    }


def test_without_copy_there_is_no_key_or_value() -> None:
    cluster = dlq_cluster()
    cluster.create_topic("dlq.x", 1, 1, ENABLED, persist=False)
    source = source_with(cluster, 1)
    letters = [DeadLetter(0, 0, 1, CAUSE_REJECTED)]
    write_dead_letters(cluster, "g", source, settings("dlq.x", copy=False), letters, 5)
    [(_, record)] = dlq_records(cluster, "dlq.x")
    assert (record.key, record.value) == (None, None)


def test_a_refused_topic_writes_nothing_and_says_why() -> None:
    cluster = dlq_cluster()
    source = source_with(cluster, 1)
    letters = [DeadLetter(0, 0, 1, CAUSE_REJECTED)]
    outcome = write_dead_letters(cluster, "g", source, settings("dlq.none"), letters, 5)
    assert outcome.written == 0 and outcome.problem is not None
    assert "auto create is disabled" in outcome.problem
    assert "dlq.none" not in cluster.topics


def test_auto_creation_gives_the_topic_kafkas_configs() -> None:
    cluster = dlq_cluster(**{"errors.deadletterqueue.auto.create.topics.enable": "true"})
    source = source_with(cluster, 1)
    letters = [DeadLetter(0, 0, 1, CAUSE_REJECTED)]
    outcome = write_dead_letters(cluster, "g", source, settings("dlq.new"), letters, 5)
    assert outcome.written == 1
    created = cluster.topics["dlq.new"]
    assert created.config.get(TOPIC_ENABLE) == "true"
    assert created.config.get("message.timestamp.type") == "CreateTime"


def test_a_recovered_dead_letter_already_in_the_dlq_is_not_written_again() -> None:
    cluster = dlq_cluster()
    cluster.create_topic("dlq.x", 1, 1, ENABLED, persist=False)
    source = source_with(cluster, 3)
    first = [DeadLetter(0, 1, 1, CAUSE_REJECTED)]
    write_dead_letters(cluster, "g", source, settings("dlq.x"), first, 5)
    # a crash before ARCHIVED was written: the load finds 0-2 ARCHIVING (2 never written)
    again = [DeadLetter(0, 2, 1, CAUSE_REJECTED, recovered=True)]
    outcome = write_dead_letters(cluster, "g", source, settings("dlq.x"), again, 6)
    assert (outcome.written, outcome.skipped) == (1, 2)
    offsets = [dict(r.headers)["__dlq.errors.offset"] for _, r in dlq_records(cluster, "dlq.x")]
    assert offsets == [b"0", b"1", b"2"]
    # another group's (or partition's) records of the same offsets do not count
    assert written_offsets(cluster.topics["dlq.x"].partitions[0], "other", "src", 2) == set()
    assert written_offsets(cluster.topics["dlq.x"].partitions[0], "g", "src", 2) == {0, 1, 2}
