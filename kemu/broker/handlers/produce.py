"""Produce (key 0), v3-v13.

Topics by name, or by topic id from v13. Each partition's records must be exactly one whole
v2 batch (else INVALID_RECORD, as for a legacy v0/v1 message set) with a valid CRC (else
CORRUPT_MESSAGE), and nothing is appended otherwise; a batch above the topic's
``max.message.bytes`` gets MESSAGE_TOO_LARGE; CreateTime timestamps outside
``message.timestamp.before/after.max.ms`` get INVALID_TIMESTAMP; on a compacted topic
(``cleanup.policy`` with ``compact``) a record without a key fails the batch with
INVALID_RECORD, Kafka's per-record ``RecordErrors`` (index in the batch and LogValidator's
message) and the summary of its RecordValidationException as the error message. A partition
led by another broker gets NOT_LEADER_OR_FOLLOWER with the current leader and its endpoint
(v10+). Idempotent producers are deduplicated against their last five batches, and their epochs
and sequence numbers checked as Kafka does (``kemu.cluster.producer_state``: its table);
``LogAppendTime`` topics get the broker's time. acks=0 gets no response at all; acks=1 and
acks=-1 both answer once the batch is in the log (one copy is the whole ISR), after an fsync
when ``kemu.log.flush=always``. The handler is a plain function: it never waits, so the
connection answers it without a task.

A transactional batch of Produce v12+ (transaction version 2) joins its partition to the
producer's transaction first (KIP-890: the partition leader adds it); below v12 the partition
must be in the transaction already (the client's AddPartitionsToTxn), else TRANSACTION_ABORTABLE
(INVALID_TXN_STATE up to v10), as Kafka's verify-only check answers. Either fails with the
coordinator's error (INVALID_PRODUCER_ID_MAPPING, CONCURRENT_TRANSACTIONS); the partition then
counts the transaction as open until its marker (last stable offset). A producer fenced by a
newer epoch of its transactional id gets INVALID_PRODUCER_EPOCH, as Kafka's partition leader
translates the coordinator's PRODUCER_FENCED. Transactional records in a request without a
transactional id get TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as in Kafka.

The records are checked as Kafka's LogValidator reads them (``_refused_records``): a client's
control batch or a producer id without a sequence is INVALID_RECORD; a compressed payload is
decompressed (bounded: ``record_reader.MAX_DECOMPRESSED_BATCH_BYTES``) and one that cannot be
is CORRUPT_MESSAGE (Kafka 4.4.0 answers UNKNOWN_SERVER_ERROR); records whose lengths do not
tile the batch, or longer than ``max.decompressed.message.bytes``, are INVALID_RECORD with
Kafka's message. On a compacted topic every field of every record is parsed; elsewhere only
the records' lengths are walked (a full parse costs several times more in Python), so a key,
value or header length that contradicts its record's bytes there is stored as sent;
``kemu.produce.validate.records=full`` parses every record everywhere, ``none`` stores the
records unread (the control-batch and sequence checks remain).

Omissions: compression is passed through, never recompressed
(``compression.type`` is reported but not applied).
"""

from __future__ import annotations

from typing import Any

import structlog

from kemu.broker.authorization import AclOperation, ResourceType, authorize
from kemu.broker.handlers import handler
from kemu.broker.handlers._transactions import as_partition_writer
from kemu.broker.leadership import endpoints_field, leader_fields
from kemu.cluster.context import RequestContext
from kemu.cluster.partition import Partition
from kemu.cluster.services import Service
from kemu.config.definitions import TopicConfig
from kemu.coordinator.transaction.service import transaction_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.record_reader import validate_produced
from kemu.protocol.records import BatchHeader, CorruptBatch, InvalidBatch, split_batches
from kemu.protocol.topic_ids import wire_topic_id
from kemu.protocol.views.produce import ProduceRequestView

API_KEY = 0
STORAGE_ERROR_MESSAGE = "Disk error when trying to access log file on the disk."
MAX_RECORD_BYTES = 2**31 - 1  # an uncompressed record is bounded by its batch already

log = structlog.get_logger("kemu.produce")


@handler(API_KEY, 3, 13)
def handle(ctx: RequestContext, request: ProduceRequestView) -> Any:
    acks = request.acks
    by_id = ctx.version >= 13
    cluster = ctx.cluster
    now = ctx.now_ms()
    other_leaders: set[int] = set()
    topics = []
    # KafkaApis: WRITE on the transactional id, then WRITE on each topic (before existence).
    txn_denied = request.transactional_id is not None and not authorize(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    )
    for topic_data in request.topic_data:
        topic = (
            cluster.topics_by_id.get(wire_topic_id(topic_data.topic_id))
            if by_id
            else cluster.topics.get(topic_data.name)
        )
        unknown = ErrorCode.unknown_topic_id if by_id else ErrorCode.unknown_topic_or_partition
        # v13+ names topics by id only: an unknown id has no name to authorize
        name = topic.name if topic is not None else None if by_id else topic_data.name
        denied = (
            ErrorCode.transactional_id_authorization_failed
            if txn_denied
            else ErrorCode.topic_authorization_failed
            if name and not authorize(ctx, AclOperation.WRITE, ResourceType.TOPIC, name)
            else None
        )
        results = []
        for data in topic_data.partition_data:
            if acks not in (0, 1, -1):
                results.append(_result(ctx, data.index, ErrorCode.invalid_required_acks))
            elif denied is not None:
                results.append(_result(ctx, data.index, denied))
            elif topic is None:
                results.append(_result(ctx, data.index, unknown))
            elif not 0 <= data.index < len(topic.partitions):
                results.append(_result(ctx, data.index, ErrorCode.unknown_topic_or_partition))
            else:
                partition = topic.partitions[data.index]
                if partition.leader_id != ctx.node.node_id:
                    other_leaders.add(partition.leader_id)
                    results.append(
                        _result(
                            ctx,
                            data.index,
                            ErrorCode.not_leader_or_follower,
                            current_leader=leader_fields(ctx, partition),
                        )
                    )
                else:
                    results.append(
                        _append(ctx, partition, data.records, now, request.transactional_id)
                    )
        topics.append(
            ctx.make(
                "TopicProduceResponse",
                partition_responses=tuple(results),
                # only the field this version has (v13: the id instead of the name)
                **({"topic_id": topic_data.topic_id} if by_id else {"name": topic_data.name}),
            )
        )
    if acks == 0:
        return None
    return ctx.respond(
        responses=tuple(topics),
        **endpoints_field(ctx, other_leaders),
    )


def _result(ctx: RequestContext, index: int, error: ErrorCode, **extra: Any) -> Any:
    values: dict[str, Any] = {
        "index": index,
        "error_code": error,
        "base_offset": -1,
        "log_append_time": None,
        "log_start_offset": -1,
        "record_errors": (),
        "error_message": None,
    }
    values.update(extra)
    if "current_leader" not in values and ctx.has("LeaderIdAndEpoch"):
        values["current_leader"] = ctx.make_shared(
            "LeaderIdAndEpoch", leader_id=-1, leader_epoch=-1
        )
    return ctx.make("PartitionProduceResponse", **values)


def _append(
    ctx: RequestContext,
    partition: Partition,
    records: bytes | None,
    now: int,
    transactional_id: str | None,
) -> Any:
    try:
        batches = split_batches(records or b"")
    except InvalidBatch as invalid:
        return _result(ctx, partition.index, ErrorCode.invalid_record, error_message=str(invalid))
    except CorruptBatch as corrupt:
        return _result(ctx, partition.index, ErrorCode.corrupt_message, error_message=str(corrupt))
    if batches[0][0].is_transactional and transactional_id is None:
        # As Kafka: transactional records need the request's transactional id (its check is an
        # authorization one, made before any validation of the records); appended untracked
        # they would hold the LSO back for ever.
        return _result(ctx, partition.index, ErrorCode.transactional_id_authorization_failed)
    topic = ctx.cluster.topics[partition.topic_name]
    config = topic.config
    max_bytes = config.get_int("max.message.bytes")
    for _header, batch in batches:
        if len(batch) > max_bytes:
            # No error message: Kafka only sends the text of record validation failures.
            return _result(ctx, partition.index, ErrorCode.message_too_large)
    log_append_time = config.get("message.timestamp.type") == "LogAppendTime"
    if not log_append_time:
        problem = _timestamp_problem(
            batches,
            config.get_int("message.timestamp.before.max.ms"),
            config.get_int("message.timestamp.after.max.ms"),
            now,
        )
        if problem is not None:
            return _result(ctx, partition.index, ErrorCode.invalid_timestamp, error_message=problem)
    first = batches[0][0]
    if first.is_transactional and transactional_id is not None:
        joined = _join_transaction(ctx, partition, first, transactional_id, now)
        if joined is not ErrorCode.none:
            return _result(ctx, partition.index, joined)
    refused = _refused_records(ctx, partition, batches, config)
    if refused is not None:
        return refused
    try:
        result = partition.append(batches, now_ms=now, log_append_time=log_append_time)
    except OSError as error:
        _report_storage_error(ctx, partition, error)
        return _result(
            ctx,
            partition.index,
            ErrorCode.kafka_storage_error,
            error_message=STORAGE_ERROR_MESSAGE,
        )
    if result.error is not ErrorCode.none:
        return _result(ctx, partition.index, result.error, error_message=result.message)
    return _result(
        ctx,
        partition.index,
        ErrorCode.none,
        base_offset=result.base_offset,
        log_append_time=_as_datetime(result.log_append_time),
        log_start_offset=partition.log_start_offset,
    )


def _join_transaction(
    ctx: RequestContext,
    partition: Partition,
    first: BatchHeader,
    transactional_id: str,
    now: int,
) -> ErrorCode:
    """Kafka's transaction verification of a transactional batch, before it is appended."""
    producers = partition.producers
    open_here = producers.has_open_transaction(
        first.producer_id, first.producer_epoch, partition.transactions.ongoing
    )
    if not open_here:
        # Kafka's VerificationStateEntry, opened before the coordinator is asked and kept until a
        # transactional append or marker: the batch's sequence is checked with it
        producers.start_verification(
            first.producer_id,
            first.base_sequence,
            first.producer_epoch,
            supports_epoch_bump=ctx.version >= 12,
            now_ms=now,
        )
    coordinator = transaction_coordinator(ctx.runtime)
    tp = (partition.topic_name, partition.index)
    if ctx.version >= 12:
        joined = coordinator.on_transactional_produce(
            transactional_id, first.producer_id, first.producer_epoch, tp
        )
    elif open_here:
        return ErrorCode.none  # Kafka asks the coordinator only for a transaction's first batch
    else:
        joined = coordinator.verify_transactional_produce(
            transactional_id, first.producer_id, first.producer_epoch, tp
        )
        if joined is ErrorCode.transaction_abortable and ctx.version <= 10:
            joined = ErrorCode.invalid_txn_state  # before KIP-890's abortable error
    return as_partition_writer(joined)


def _refused_records(
    ctx: RequestContext,
    partition: Partition,
    batches: list[tuple[BatchHeader, bytes]],
    config: TopicConfig,
) -> Any | None:
    """Kafka's LogValidator: the batch itself (no control batch from a client, a sequence with
    a producer id), then its records, decompressed first (``validate_produced``): on a
    compacted topic every field of every record is parsed and every record needs a key, else
    the batch is refused with INVALID_RECORD, a RecordError per keyless record (its index in
    the batch) and the summary Kafka's RecordValidationException carries as the error
    message; on other topics the records' lengths must tile the batch."""
    where = f"{partition.topic_name}-{partition.index}"
    compacted = "compact" in (config.get("cleanup.policy") or "")
    mode = "full" if compacted else ctx.cluster.config.get("kemu.produce.validate.records")
    for header, batch in batches:
        problem: str | None = None
        if header.is_control:
            problem = f"Clients are not allowed to write control records in topic partition {where}"
        elif header.producer_id >= 0 and header.base_sequence < 0:
            problem = (
                f"Invalid sequence number {header.base_sequence} in record batch with producerId "
                f"{header.producer_id} in topic partition {where}"
            )
        if problem is not None:
            return _result(ctx, partition.index, ErrorCode.invalid_record, error_message=problem)
        if mode == "none":
            continue
        try:
            keyless = validate_produced(
                batch,
                header,
                config.get_int("max.decompressed.message.bytes")
                if header.compression
                else MAX_RECORD_BYTES,
                # every field of every record where keys are read anyway; elsewhere the
                # records' lengths only unless configured: the full parse costs several times
                # more in Python
                full=mode == "full",
            )
        except InvalidBatch as invalid:
            return _result(
                ctx, partition.index, ErrorCode.invalid_record, error_message=str(invalid)
            )
        except CorruptBatch as corrupt:
            return _result(
                ctx, partition.index, ErrorCode.corrupt_message, error_message=str(corrupt)
            )
        if not keyless or not compacted:
            continue
        message = f"Compacted topic cannot accept message without key in topic partition {where}"
        shown = ", ".join(
            f"RecordError(batchIndex={index}, message='{message}')" for index in keyless[:3]
        )
        return _result(
            ctx,
            partition.index,
            ErrorCode.invalid_record,
            log_start_offset=partition.log_start_offset,
            # v8+ (KIP-467); older versions carry the error code alone
            record_errors=tuple(
                ctx.make(
                    "BatchIndexAndErrorMessage",
                    batch_index=index,
                    batch_index_error_message=message,
                )
                for index in keyless
            )
            if ctx.has("BatchIndexAndErrorMessage")
            else (),
            error_message=f"One or more records have been rejected due to {len(keyless)} "
            f"record errors in total, and only showing the first three errors at most: [{shown}]",
        )
    return None


def _report_storage_error(ctx: RequestContext, partition: Partition, error: OSError) -> None:
    """Log a partition's first failed append; a full disk would otherwise log every request."""
    reported = ctx.runtime.services.get(STORAGE_ERRORS)
    key = (partition.topic_name, partition.index)
    if key not in reported:
        reported.add(key)
        log.error(
            "log_append_failed",
            topic=partition.topic_name,
            partition=partition.index,
            error=str(error),
        )


# the (topic, partition)s whose failed append was logged
STORAGE_ERRORS: Service[set[tuple[str, int]]] = Service("produce.storage_errors", lambda _: set())


def _timestamp_problem(
    batches: list[tuple[BatchHeader, bytes]], before_max: int, after_max: int, now: int
) -> str | None:
    for header, _ in batches:
        if header.max_timestamp >= 0 and header.max_timestamp - now > after_max:
            return (
                f"Timestamp {header.max_timestamp} of message is out of range: more than "
                f"{after_max} ms ahead of the broker's time"
            )
        if header.base_timestamp >= 0 and now - header.base_timestamp > before_max:
            return (
                f"Timestamp {header.base_timestamp} of message is out of range: more than "
                f"{before_max} ms before the broker's time"
            )
    return None


def _as_datetime(timestamp_ms: int) -> Any:
    if timestamp_ms < 0:
        return None
    import datetime

    return datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.UTC)
