"""Validation of produced records: malformed records, codecs, decompression limits, keyless
records on compacted topics, Produce refusing a bad batch whole.

Where they came from: regression tests for what ``bench.fuzz --records`` found. Produce stored the
records of a batch unread, so a batch whose compressed payload could not be decompressed, or whose
records were malformed, was appended (NONE) and failed later, in ListOffsets or in the consumer; a
keyless record on a compacted topic made Produce v3-v7 raise (those versions have no RecordErrors);
a small compressed payload could inflate without bound when kemu decompressed it; and the log
cleaner rewrote LZ4 batches as frames of dependent blocks, which Kafka's reader refuses. Kafka
4.4.0's answers to the same batches (``docs/reliability.md``, fuzzing) are INVALID_RECORD for
malformed records, as here, and UNKNOWN_SERVER_ERROR for a payload it cannot decompress, where kemu
answers CORRUPT_MESSAGE."""

from __future__ import annotations

import datetime
import gzip
import struct
import sys
from typing import Any

import cramjam
import pytest

from kemu.broker.handlers import REGISTRY, load_handlers
from kemu.cluster.context import RequestContext, Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.protocol.record_reader import (
    DecompressedTooLarge,
    Record,
    decompress,
    validate_produced,
)
from kemu.protocol.records import (
    CorruptBatch,
    InvalidBatch,
    crc32c_of,
    encode_record,
    read_header,
)
from kemu.storage.compaction import compress
from kemu.storage.log import MemoryLog
from tests.unit.batch_builders import BUILDERS, client_batch

TS = 1_700_000_000_000


def batch_of(payload: bytes, count: int, codec: int = 0, attributes: int = 0) -> bytes:
    """A v2 batch around ``payload`` (records, compressed as ``codec``), its CRC right."""
    after_crc = (
        struct.pack(">hiqqqhii", codec | attributes, count - 1, TS, TS, -1, -1, -1, count) + payload
    )
    return struct.pack(">qiibI", 0, 9 + len(after_crc), 0, 2, crc32c_of(after_crc)) + after_crc


def records(count: int, key: bytes | None = b"k") -> bytes:
    return b"".join(encode_record(i, 0, key, b"value", [("h", b"v")]) for i in range(count))


def refusal(batch: bytes) -> tuple[type[Exception], str]:
    with pytest.raises(CorruptBatch) as refused:
        validate_produced(batch, read_header(batch))
    return type(refused.value), str(refused.value)


# --- record structure: INVALID_RECORD with Kafka 4.4's messages -------------------------------


def framed(body: bytes) -> bytes:
    """A record: its body's length (zigzag varint) then the body."""
    return bytes([len(body) << 1]) + body


FIXED = b"\x00\x00\x00" + b"\x02k" + b"\x02v"  # attributes, deltas, key "k", value "v"


def test_malformed_records_are_refused_with_kafkas_messages() -> None:
    cases = {
        framed(FIXED + b"\x01"): "Found invalid number of record headers -1",
        framed(FIXED + b"\x7e"): "Found invalid number of record headers. 63 is larger than the "
        "remaining size of the buffer",
        framed(FIXED + b"\x02\x01\x01"): "Invalid negative header key size -1",
        framed(FIXED + b"\x00") + b"\x00": "Incorrect declared batch size, records still "
        "remaining in file",
        b"\x14" + FIXED + b"\x00": "Invalid record size: expected 10 bytes in record payload, "
        "but instead the buffer has only 8 remaining bytes.",
        b"\x03" + FIXED + b"\x00": "Invalid record size: -2 is negative.",
        framed(b"\x00\x00\x00\x7fk\x02v\x00"): "Found invalid record structure",  # key past end
        b"\xff" * 12: "Found invalid record structure",
    }
    for payload, message in cases.items():
        kind, text = refusal(batch_of(payload, 1))
        assert (kind, text) == (InvalidBatch, message), payload.hex()
    kind, text = refusal(batch_of(framed(FIXED + b"\x00"), 2))  # one record, the header says 2
    assert (kind, text) == (InvalidBatch, "Incorrect declared batch size, premature EOF reached")
    assert (
        validate_produced(
            batch_of(framed(FIXED + b"\x00"), 1), read_header(batch_of(framed(FIXED + b"\x00"), 1))
        )
        == []
    )


def test_a_record_that_reads_fewer_bytes_than_its_length() -> None:
    padded = framed(FIXED + b"\x00" + b"\x00")  # one byte after the header count
    assert refusal(batch_of(padded, 1)) == (
        InvalidBatch,
        "Invalid record size: expected to read 9 bytes in record payload, but instead read 8",
    )


def test_max_decompressed_message_bytes_bounds_each_record() -> None:
    batch = batch_of(compress(1, records(2)), 2, codec=1)
    length = len(encode_record(0, 0, b"k", b"value", [("h", b"v")])) - 1
    with pytest.raises(InvalidBatch) as refused:
        validate_produced(batch, read_header(batch), max_record_bytes=length - 1)
    assert str(refused.value) == (
        f"Invalid record size: {length} exceeds the configured maximum record size of {length - 1}."
    )
    assert validate_produced(batch, read_header(batch), max_record_bytes=length) == []


# --- payloads that cannot be decompressed: CORRUPT_MESSAGE ------------------------------------


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_a_payload_that_cannot_be_decompressed_is_corrupt(codec: int) -> None:
    payload = compress(codec, records(3))
    for bad in (payload[: len(payload) // 2], b"\x00garbage" * 4, payload[:4] + b"\xff" * 40):
        kind, text = refusal(batch_of(bad, 3, codec=codec))
        assert kind is CorruptBatch and text.startswith("cannot decompress the batch"), text


def test_an_unknown_codec_is_corrupt() -> None:
    assert refusal(batch_of(records(1), 1, codec=6)) == (
        CorruptBatch,
        "unknown compression codec 6",
    )


def test_an_lz4_frame_of_dependent_blocks_is_refused_as_kafkas_reader_refuses_it() -> None:
    dependent = bytes(cramjam.lz4.compress(records(2)))
    assert not dependent[4] & 0x20  # FLG: block independence unset
    assert refusal(batch_of(dependent, 2, codec=3)) == (
        CorruptBatch,
        "cannot decompress the batch: Dependent block stream is unsupported",
    )


def test_the_log_cleaner_writes_lz4_as_kafka_does() -> None:
    frame = compress(3, records(2))
    assert frame[4] & 0x20 and not frame[4] & 0x08  # independent blocks, no content size
    assert decompress(3, frame) == records(2)


# --- decompression is bounded ------------------------------------------------------------------


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompression_stops_at_the_limit(codec: int) -> None:
    bomb = compress(codec, bytes(8 << 20))
    assert len(bomb) < 1 << 20
    with pytest.raises(DecompressedTooLarge):
        decompress(codec, bomb, limit=1 << 20)
    assert len(decompress(codec, bomb, limit=8 << 20)) == 8 << 20


def test_a_batch_beyond_the_limit_is_an_invalid_record() -> None:
    value = bytes(130 << 20)  # beyond MAX_DECOMPRESSED_BATCH_BYTES (128 MiB)
    batch = batch_of(gzip.compress(encode_record(0, 0, b"k", value), 1), 1, codec=1)
    kind, text = refusal(batch)
    assert kind is InvalidBatch and text == "the batch decompresses to more than 134217728 bytes"


def test_multi_member_gzip_and_concatenated_frames_are_read_whole() -> None:
    body = records(4)
    half = len(body) // 2
    assert decompress(1, gzip.compress(body[:half]) + gzip.compress(body[half:])) == body
    # Java's GZIPInputStream ignores what follows a member unless it starts another one:
    # Kafka 4.4.0 accepted such batches (the comparison in docs/reliability.md)
    assert decompress(1, gzip.compress(body) + b"\x00garbage") == body
    assert decompress(1, gzip.compress(body) + b"\x1f") == body
    assert decompress(4, compress(4, body[:half]) + compress(4, body[half:])) == body
    # LZ4: the first frame only, as Kafka's reader (the records then come up short)
    assert decompress(3, compress(3, body[:half]) + compress(3, body[half:])) == body[:half]
    assert decompress(3, compress(3, body[:half]) + b"trailing", limit=half) == body[:half]


# --- what clients write is accepted ---------------------------------------------------------------


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("builder_name", BUILDERS)
def test_client_batches_of_every_codec_pass(builder_name: str, codec: int) -> None:
    written = [
        Record(i, TS + i, None if i == 2 else f"k{i}".encode(), b"v" * (i * 300), (("h", None),))
        for i in range(40)
    ]
    batch = client_batch(written, codec, builder_name)
    assert validate_produced(batch, read_header(batch)) == [2]


# --- through the Produce handler --------------------------------------------------------------


class Broker:
    def __init__(self, **config: str) -> None:
        load_handlers()
        self.cluster = Cluster(
            cluster_id="fuzz-records",
            nodes={1: BrokerNode(1, "127.0.0.1", 19092)},
            config=BrokerConfig(config),
            log_factory=lambda topic, index: MemoryLog(),
        )
        self.runtime = Runtime(cluster=self.cluster, clock_ms=lambda: TS)
        self.cluster.create_topic("plain", 1, 1)
        self.cluster.create_topic("compacted", 1, 1, {"cleanup.policy": "compact"})

    def produce(self, version: int, topic: str, batch: bytes) -> Any:
        module = sys.modules[wire.request_schema(0, version).__module__]
        partition = wire.build(module.PartitionProduceData, index=0, records=batch)
        body = wire.build(
            wire.request_schema(0, version),
            acks=1,
            timeout=datetime.timedelta(seconds=1),
            topic_data=(
                wire.build(module.TopicProduceData, name=topic, partition_data=(partition,)),
            ),
        )
        decoded = wire.decode_request(wire.encode_request_frame(body, 7)[4:])
        context = RequestContext(self.cluster.nodes[1], self.runtime, decoded.header)
        answer = REGISTRY[0].function(context, decoded.body)
        frame = wire.encode_response_frame(0, version, 7, answer)
        return wire.decode_response(0, version, frame[4:])[1].responses[0].partition_responses[0]

    def end_offset(self, topic: str) -> int:
        return self.cluster.topics[topic].partitions[0].high_watermark


@pytest.mark.parametrize("version", [3, 7, 8, 9])
def test_a_keyless_record_on_a_compacted_topic_with_any_version(version: int) -> None:
    broker = Broker()
    answer = broker.produce(version, "compacted", batch_of(records(2, key=None), 2))
    assert answer.error_code == ErrorCode.invalid_record  # v3-v7 raised before
    assert len(getattr(answer, "record_errors", ())) == (2 if version >= 8 else 0)
    assert broker.end_offset("compacted") == 0


def test_bad_records_are_refused_and_nothing_is_appended() -> None:
    broker = Broker()
    payload = compress(1, records(3))
    cases = [
        (batch_of(payload[:20], 3, codec=1), ErrorCode.corrupt_message),
        (batch_of(records(1) + b"\x00", 1), ErrorCode.invalid_record),
        (batch_of(records(1), 1, attributes=0x20), ErrorCode.invalid_record),  # control
    ]
    for batch, error in cases:
        assert broker.produce(9, "plain", batch).error_code == error
    assert broker.end_offset("plain") == 0
    assert broker.produce(9, "plain", batch_of(payload, 3, codec=1)).error_code == ErrorCode.none
    assert broker.end_offset("plain") == 3


def test_transactional_records_without_a_transactional_id_are_refused_before_timestamps() -> None:
    """Kafka's KafkaApis refuses them before any validation of the records: a batch from the
    far future without a transactional id is TRANSACTIONAL_ID_AUTHORIZATION_FAILED there, not
    INVALID_TIMESTAMP (seen comparing the fuzzer's batches with Kafka 4.4.0)."""
    broker = Broker()
    after_crc = struct.pack(">hiqqqhii", 0x10, 0, 2**62, 2**62, 7, 0, 0, 1) + records(1)
    batch = struct.pack(">qiibI", 0, 9 + len(after_crc), 0, 2, crc32c_of(after_crc)) + after_crc
    answer = broker.produce(9, "plain", batch)
    assert answer.error_code == ErrorCode.transactional_id_authorization_failed


def test_how_much_of_the_records_is_checked_is_configurable() -> None:
    """``kemu.produce.validate.records``: 'lengths' (default) lets a key length that lies
    inside its record through on a plain topic, 'full' refuses it as Kafka does, 'none'
    stores even an undecompressable payload; a compacted topic is always parsed in full."""
    lying_key = batch_of(framed(b"\x00\x00\x00\x02k\x7ev\x00"), 1)  # value length 63
    corrupt = batch_of(compress(1, records(3))[:20], 3, codec=1)
    expected = {
        "lengths": (ErrorCode.none, ErrorCode.corrupt_message),
        "full": (ErrorCode.invalid_record, ErrorCode.corrupt_message),
        "none": (ErrorCode.none, ErrorCode.none),
    }
    for mode, (for_lying_key, for_corrupt) in expected.items():
        broker = Broker(**{"kemu.produce.validate.records": mode})
        assert broker.produce(9, "plain", lying_key).error_code == for_lying_key, mode
        assert broker.produce(9, "plain", corrupt).error_code == for_corrupt, mode
        assert broker.produce(9, "compacted", lying_key).error_code == ErrorCode.invalid_record
        control = batch_of(records(1), 1, attributes=0x20)
        assert broker.produce(9, "plain", control).error_code == ErrorCode.invalid_record
