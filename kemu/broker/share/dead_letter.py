"""Share-group dead-letter queues (KIP-1191), as Kafka 4.4.0 writes them: the I/O half.

The core (``window.py``) moves a record REJECTed, or released / expired at the delivery-count
limit, to ARCHIVING when the group has ``errors.deadletterqueue.topic.name``, and returns a
``DeadLetter`` in its ``Effects``. Once that state is durable, the actor calls
``write_dead_letters`` and then ``core.complete_dead_letters`` (ARCHIVING -> ARCHIVED, persisted),
as Kafka's ``SharePartition.initiateDLQAndArchive`` does.

What Kafka 4.4.0 does and this module repeats (``ShareGroupDLQStateManager``):

* the DLQ topic is checked before every write, in this order and with these messages (each a
  ``ConfigException`` Kafka only logs): the name is empty; it starts with ``__``; it exists
  without ``errors.deadletterqueue.group.enable=true``; it does not exist and the broker's
  ``errors.deadletterqueue.auto.create.topics.enable`` is false; it does not start with the
  broker's ``errors.deadletterqueue.topic.name.prefix`` (``dlq.`` by default; empty means any).
  A refused (or failed) write is logged - "Failed to write to DLQ, proceeding to ARCHIVED
  regardless." - and the records become ARCHIVED all the same;
* a missing topic is created with the broker's ``num.partitions`` and
  ``default.replication.factor`` and the configs ``errors.deadletterqueue.group.enable=true``,
  ``message.timestamp.type=CreateTime``;
* records go to partition ``source partition % DLQ partition count``, one uncompressed,
  non-idempotent batch per archived range, one record per offset, timestamped now;
* each record carries the headers ``__dlq.errors.topic``, ``__dlq.errors.partition``,
  ``__dlq.errors.offset``, ``__dlq.errors.group``, ``__dlq.errors.delivery.count`` and
  ``__dlq.errors.message`` ("Offset rejected by client." or "Offset delivery count exceeded the
  threshold."), UTF-8 strings; with ``errors.deadletterqueue.copy.record.enable`` the original
  key and value too (Kafka 4.4.0 does not copy the original headers; an offset the log no longer
  holds is written with the headers alone).

Exactly once where Kafka is at least once: Kafka re-sends every ARCHIVING record it finds when it
loads a share partition, so a crash between its DLQ write and its ARCHIVED write duplicates the
DLQ record. Here a ``DeadLetter`` found on load (``recovered``) is first looked for in its DLQ
partition - a record whose group, topic, partition and offset headers name it - and only the
offsets not found are written. The look is a scan of that one partition, made only on recovery;
a DLQ record already deleted by retention, or a DLQ topic whose partition count changed in
between, can still give a duplicate.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import structlog

from kemu.broker.share.partition import DeadLetter
from kemu.broker.share.settings import ShareSettings
from kemu.cluster.model import Cluster, Topic, TopicError
from kemu.cluster.partition import Partition
from kemu.protocol.errors import ErrorCode
from kemu.protocol.record_reader import iter_records
from kemu.protocol.records import BATCH_HEADER_SIZE, RecordHeaders, build_batch, read_header

log = structlog.get_logger("kemu.share.dlq")

TOPIC_ENABLE = "errors.deadletterqueue.group.enable"
AUTO_CREATE = "errors.deadletterqueue.auto.create.topics.enable"
PREFIX = "errors.deadletterqueue.topic.name.prefix"

H_TOPIC = "__dlq.errors.topic"
H_PARTITION = "__dlq.errors.partition"
H_OFFSET = "__dlq.errors.offset"
H_GROUP = "__dlq.errors.group"
H_DELIVERY_COUNT = "__dlq.errors.delivery.count"
H_MESSAGE = "__dlq.errors.message"

FAILED = "Failed to write to DLQ, proceeding to ARCHIVED regardless."


@dataclass(frozen=True, slots=True)
class Outcome:
    written: int  # records appended to the DLQ topic
    skipped: int  # recovered offsets already in the DLQ topic
    problem: str | None = None  # why nothing was written (Kafka's message), if so


def topic_problem(cluster: Cluster, group_id: str, topic: str) -> str | None:
    """Why Kafka 4.4.0 would not write ``group_id``'s dead letters to ``topic`` (its message),
    or None (``ProduceRequestHandler.validateDlqTopic``, in its order)."""
    if not topic:
        return f"Configured DLQ topic name in share group: {group_id} is empty."
    if topic.startswith("__"):
        return (
            f"Configured DLQ topic name in share group: {group_id} cannot start with __, "
            f"topic: {topic}."
        )
    found = cluster.topics.get(topic)
    if found is not None and found.config.get(TOPIC_ENABLE) != "true":
        return (
            f"DLQ is not enabled on configured DLQ topic for share group: {group_id}, "
            f"topic: {topic}."
        )
    if found is None and not cluster.config.get_bool(AUTO_CREATE):
        return (
            "DLQ topic does not exist and auto create is disabled on cluster for share group: "
            f"{group_id}, topic: {topic}."
        )
    prefix = cluster.config.get(PREFIX) or ""
    if prefix and not topic.startswith(prefix):
        return (
            "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: "
            f"{group_id}, topic: {topic}, prefix: {prefix}."
        )
    return None


def destination(source_partition: int, partitions: int) -> int:
    """The DLQ partition of a source partition's dead letters (Kafka: source % count)."""
    return source_partition % partitions


def write_dead_letters(
    cluster: Cluster,
    group_id: str,
    source: Partition,
    settings: ShareSettings,
    letters: Sequence[DeadLetter],
    now_ms: int,
) -> Outcome:
    """Append ``letters`` to the group's DLQ topic (created if allowed); never raises."""
    topic = settings.dlq_topic
    try:
        problem = topic_problem(cluster, group_id, topic)
        if problem is not None:
            raise _Refused(problem)
        target = cluster.topics.get(topic)
        if target is None:
            target = _create(cluster, topic)
        partition = target.partitions[destination(source.index, len(target.partitions))]
        done: set[int] = set()
        if any(letter.recovered for letter in letters):
            done = written_offsets(partition, group_id, source.topic_name, source.index)
        written = skipped = 0
        max_bytes = target.config.get_int("max.message.bytes")
        for letter in letters:
            records = [
                record
                for record in _records(source, group_id, letter, settings.dlq_copy_record)
                if not (letter.recovered and record[0] in done)
            ]
            skipped += letter.last_offset - letter.first_offset + 1 - len(records)
            for batch in _batches(records, now_ms, max_bytes):
                result = partition.append([(read_header(batch), batch)], now_ms=now_ms)
                if result.error is not ErrorCode.none:
                    raise _Refused(f"Unable to produce to DLQ topic {topic}: {result.error.name}")
            written += len(records)
        return Outcome(written, skipped)
    except _Refused as refused:
        log.error(FAILED, group=group_id, topic=source.topic_name, error=str(refused))
        return Outcome(0, 0, str(refused))
    except Exception as error:  # Kafka archives whatever went wrong; so does kemu
        log.exception(FAILED, group=group_id, topic=source.topic_name)
        return Outcome(0, 0, repr(error))


class _Refused(Exception):
    pass


def _create(cluster: Cluster, topic: str) -> Topic:
    config = cluster.config
    partitions = config.get_int("num.partitions")
    replication = min(config.get_int("default.replication.factor"), len(cluster.nodes))
    try:
        return cluster.create_topic(
            topic,
            partitions,
            replication,
            {TOPIC_ENABLE: "true", "message.timestamp.type": "CreateTime"},
        )
    except TopicError as error:
        if error.code is ErrorCode.topic_already_exists and topic in cluster.topics:
            return cluster.topics[topic]
        raise _Refused(f"Unable to create DLQ topic {topic}: {error.message}") from error


_Record = tuple[int, bytes | None, bytes | None, RecordHeaders]


def _records(source: Partition, group_id: str, letter: DeadLetter, copy: bool) -> list[_Record]:
    originals: dict[int, tuple[bytes | None, bytes | None]] = {}
    if copy:
        originals = _originals(source, letter.first_offset, letter.last_offset)
    out: list[_Record] = []
    for offset in range(letter.first_offset, letter.last_offset + 1):
        key, value = originals.get(offset, (None, None))
        headers: RecordHeaders = (
            (H_TOPIC, source.topic_name.encode()),
            (H_PARTITION, str(source.index).encode()),
            (H_OFFSET, str(offset).encode()),
            (H_GROUP, group_id.encode()),
            (H_DELIVERY_COUNT, str(letter.delivery_count).encode()),
            (H_MESSAGE, letter.cause.encode()),
        )
        out.append((offset, key, value, headers))
    return out


def _originals(
    source: Partition, first: int, last: int
) -> dict[int, tuple[bytes | None, bytes | None]]:
    found: dict[int, tuple[bytes | None, bytes | None]] = {}
    start = max(first, source.log_start_offset)
    if start > last:
        return found
    for header, batch in source.log.batches(start, last + 1):
        if header.is_control:
            continue
        for record in iter_records(batch):
            if first <= record.offset <= last:
                found[record.offset] = (record.key, record.value)
    return found


def _batches(records: list[_Record], now_ms: int, max_bytes: int) -> Iterable[bytes]:
    """Batches of ``records`` each within the DLQ topic's max.message.bytes (as Kafka sends a
    range that does not fit in one produce as several)."""
    chunk: list[_Record] = []
    size = BATCH_HEADER_SIZE
    for record in records:
        estimate = 32 + len(record[1] or b"") + len(record[2] or b"")
        estimate += sum(len(name) + len(value or b"") + 4 for name, value in record[3])
        if chunk and size + estimate > max_bytes:
            yield _batch(chunk, now_ms)
            chunk, size = [], BATCH_HEADER_SIZE
        chunk.append(record)
        size += estimate
    if chunk:
        yield _batch(chunk, now_ms)


def _batch(chunk: list[_Record], now_ms: int) -> bytes:
    return build_batch(
        [(key, value) for _, key, value, _ in chunk],
        timestamp_ms=now_ms,
        headers=[headers for _, _, _, headers in chunk],
    )


def written_offsets(partition: Partition, group_id: str, topic: str, index: int) -> set[int]:
    """Source offsets of (group, topic, partition) already in this DLQ partition."""
    found: set[int] = set()
    want = {H_GROUP: group_id.encode(), H_TOPIC: topic.encode(), H_PARTITION: str(index).encode()}
    for header, batch in partition.log.batches(
        partition.log_start_offset, partition.high_watermark
    ):
        if header.is_control:
            continue
        for record in iter_records(batch):
            headers = dict(record.headers)
            if all(headers.get(name) == value for name, value in want.items()):
                offset = headers.get(H_OFFSET)
                if offset is not None:
                    found.add(int(offset))
    return found
