"""Record batches written the way clients write them, by encoders that share no code with kemu:
aiokafka's (C) and kafka-python's (pure Python) record builders."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiokafka.record.default_records import DefaultRecordBatchBuilder as AiokafkaBuilder
from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaPythonBuilder

from kemu.protocol.record_reader import Record

BUILDERS: dict[str, Callable[..., Any]] = {
    "aiokafka": AiokafkaBuilder,
    "kafka-python": KafkaPythonBuilder,
}


def client_batch(records: list[Record], codec: int, builder: str = "aiokafka") -> bytes:
    """One v2 batch of ``records`` (offsets taken as deltas from 0), compressed with ``codec``."""
    writer = BUILDERS[builder](
        magic=2,
        compression_type=codec,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 22,
    )
    for record in records:
        writer.append(
            record.offset,
            timestamp=record.timestamp,
            key=record.key,
            value=record.value,
            headers=list(record.headers),
        )
    return bytes(writer.build())


def timed_batch(timestamps: list[int], codec: int, *, value: bytes = b"v" * 100) -> bytes:
    """A batch of one record per timestamp, null keys, no headers."""
    return client_batch(
        [Record(delta, timestamp, None, value, ()) for delta, timestamp in enumerate(timestamps)],
        codec,
    )
