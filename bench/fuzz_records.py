"""``python -m bench.fuzz --records N``: N Produce requests whose record batches are framed
validly (sizes, magic, offsets and a correct CRC over whatever they hold) while what is inside
is mutated, so that decompression and record parsing meet bad input.

Each batch has 1-8 records (keys, values and headers of random sizes, sometimes null), is
compressed with none, gzip, snappy (xerial framing, as the Java client writes it, or raw, as
librdkafka does), lz4 or zstd, and then one of:

- ``valid``: sent as made;
- ``record``: a record's bytes changed before compression (its length, a key, value or header
  length, the header count, a null header key, a run of 0xFF varint bytes, bytes cut off or
  added, a record dropped or repeated so the count disagrees);
- ``payload``: the compressed bytes flipped, cut short, extended, or replaced (a snappy chunk
  length, an empty payload, random bytes);
- ``codec``: the attributes name another codec, or one that does not exist (5-7);
- ``bomb``: a small payload that decompresses to 8-64 MiB (zeros), to bound memory;
- ``flags``: transactional, control or LogAppendTime bits set, producer ids and timestamps
  changed.

The batch's CRC is recomputed after the mutation (a wrong CRC is ``bench.fuzz``'s business).
Batches go to three topics: a plain one, a compacted one (kemu reads every record's key there)
and a LogAppendTime one. After a produce, ListOffsets by timestamp and max timestamp
(decompressing the stored batch) and Fetch read the partition back now and then.

kafka-python's record reader judges each batch (it decompresses and parses every record as a
consumer would); the report counts what kemu answered per judgement: a batch the reader cannot
parse should get CORRUPT_MESSAGE or INVALID_RECORD, as Kafka's LogValidator answers, never NONE.
"""

from __future__ import annotations

import asyncio
import datetime
import gzip
import random
import resource
import struct
import time
import traceback
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cramjam
import structlog

from bench.fuzz import Crash, _CrashLog, _KeepingTransport
from kemu.broker.connection import Connection
from kemu.broker.server import KemuServer
from kemu.protocol import wire
from kemu.protocol.records import CRC_START, MAGIC_V2, crc32c_of, encode_record
from kemu.storage.compaction import compress

PRODUCE, FETCH, LIST_OFFSETS = 0, 1, 2
TOPICS = {
    "rec-plain": {},
    "rec-compact": {"cleanup.policy": "compact"},
    "rec-append": {"message.timestamp.type": "LogAppendTime"},
}
MUTATIONS = ("valid", "record", "record", "payload", "payload", "codec", "bomb", "flags")
CODECS = (0, 1, 2, 3, 4)
BOMB_MIB = (8, 64, 200)  # kemu stops decompressing at 128 MiB (MAX_DECOMPRESSED_BATCH_BYTES)
BOMB_CODECS = (1, 3, 4)  # snappy cannot inflate 1 MB (max.message.bytes) past ~21 MB


def make_bomb(codec: int, mib: int) -> bytes:
    """A compressed payload of one record whose value is ``mib`` MiB of zeros, compressed a
    MiB at a time (the fuzzer never holds the whole value)."""
    import zlib

    import lz4.frame  # type: ignore[import-untyped]
    import zstandard

    size = mib << 20
    record_body_start = b"\x00\x00\x00" + _varint(1) + b"k" + _varint(size)
    body_length = len(record_body_start) + size + 1
    prefix = _varint(body_length) + record_body_start
    chunk = bytes(1 << 20)
    if codec == 1:
        gz = zlib.compressobj(9, zlib.DEFLATED, 31)
        out = [gz.compress(prefix)] + [gz.compress(chunk) for _ in range(mib)]
        return b"".join(out) + gz.compress(b"\x00") + gz.flush()
    if codec == 3:
        lz = lz4.frame.LZ4FrameCompressor(
            block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False
        )
        out = [lz.begin(), lz.compress(prefix)] + [lz.compress(chunk) for _ in range(mib)]
        return b"".join(out) + lz.compress(b"\x00") + lz.flush()
    writer = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    out = [writer.compress(prefix)] + [writer.compress(chunk) for _ in range(mib)]
    return b"".join(out) + writer.compress(b"\x00") + writer.flush()


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _bytes_field(rng: random.Random) -> bytes | None:
    roll = rng.random()
    if roll < 0.15:
        return None
    if roll < 0.3:
        return b""
    return rng.randbytes(rng.choice((1, 3, 10, 100, 1000)))


def make_records(rng: random.Random, count: int) -> list[bytes]:
    records = []
    for index in range(count):
        headers = [
            (rng.choice(("h", "trace-id", "é", "")), _bytes_field(rng))
            for _ in range(rng.choice((0, 0, 1, 2)))
        ]
        records.append(
            encode_record(
                index, rng.choice((0, 1, 100)), _bytes_field(rng), _bytes_field(rng), headers
            )
        )
    return records


def mutate_record(record: bytes, rng: random.Random) -> bytes:
    """One record's bytes changed where its fields are (lengths and counts)."""
    data = bytearray(record)
    roll = rng.randrange(9)
    if roll == 0:  # the record's own length
        length_end = next(i for i, b in enumerate(data) if b < 0x80) + 1
        body = data[length_end:]
        return _varint(len(body) + rng.choice((-3, -1, 1, 2, 1000, -(len(body) + 5)))) + body
    if roll == 1:  # a run of varint continuation bytes somewhere
        at = rng.randrange(len(data))
        data[at : at + 3] = bytes(rng.choice((0xFF, 0x80)) for _ in range(rng.randint(3, 12)))
        return bytes(data)
    if roll == 2:  # key/value/header lengths rewritten: a field index past the fixed part
        at = rng.randrange(min(len(data), 4), len(data)) if len(data) > 4 else 0
        data[at : at + 1] = _varint(rng.choice((-2, -1, 0, 63, 10_000, 2**31 - 1, -(2**31))))
        return bytes(data)
    if roll == 3:  # the header count (the last varint before the headers) made negative/huge
        return record[:-1] + _varint(rng.choice((-5, -1, 100, 2**31 - 1)))
    if roll == 4:
        return bytes(data[: rng.randrange(1, len(data) + 1)])
    if roll == 5:
        return bytes(data) + rng.randbytes(rng.randint(1, 8))
    if roll == 6:  # a null header key
        return record[:-1] + _varint(1) + _varint(-1) + _varint(-1)
    if roll == 7:
        data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    return b""  # the record dropped: the count disagrees


def mutate_payload(payload: bytes, codec: int, rng: random.Random) -> bytes:
    data = bytearray(payload)
    roll = rng.randrange(7)
    if roll == 0 and data:
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)
    if roll == 1 and data:
        return bytes(data[: rng.randrange(len(data))])
    if roll == 2:
        return bytes(data) + rng.randbytes(rng.randint(1, 64))
    if roll == 3:
        return rng.randbytes(rng.choice((0, 1, 16, 200)))
    if roll == 4 and codec == 2 and len(data) >= 20:  # a xerial chunk length
        struct.pack_into(">i", data, 16, rng.choice((-1, 0, 2**31 - 1, len(data))))
        return bytes(data)
    if roll == 5 and data:  # an interior byte replaced by a valid-looking header byte
        data[rng.randrange(len(data))] = rng.choice((0x00, 0xFF, 0x1F, 0x8B, 0x28, 0xB5))
        return bytes(data)
    return bytes(data) + bytes(data)  # concatenated (gzip members, zstd frames)


def compress_with(codec: int, body: bytes, rng: random.Random) -> bytes:
    if codec == 2 and rng.random() < 0.4:
        return bytes(cramjam.snappy.compress_raw(body))  # librdkafka's raw snappy
    if codec == 1 and rng.random() < 0.2:
        return gzip.compress(body[: len(body) // 2]) + gzip.compress(body[len(body) // 2 :])
    return compress(codec, body) if codec else body


def frame_batch(
    payload: bytes,
    *,
    attributes: int,
    count: int,
    timestamp_ms: int,
    max_timestamp_ms: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            count - 1,
            timestamp_ms,
            max_timestamp_ms,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
        + payload
    )
    crc = crc32c_of(after_crc)
    length = 4 + 1 + 4 + len(after_crc)
    batch = struct.pack(">qiibI", 0, length, 0, MAGIC_V2, crc) + after_crc
    assert crc32c_of(batch[CRC_START:]) == crc
    return batch


@dataclass
class MadeBatch:
    batch: bytes
    mutation: str
    codec: int
    bomb_bytes: int = 0


def make_batch(
    rng: random.Random, now_ms: int, bombs: dict[tuple[int, int], bytes] | None = None
) -> MadeBatch:
    mutation = rng.choice(MUTATIONS)
    codec = rng.choice(CODECS)
    count = rng.randint(1, 8)
    records = make_records(rng, count)
    attributes = codec
    timestamp = now_ms - rng.choice((0, 10, 1000))
    max_timestamp = timestamp + 100
    producer = (-1, -1, -1)
    bomb = 0
    if mutation == "record":
        at = rng.randrange(count)
        records[at] = mutate_record(records[at], rng)
        if rng.random() < 0.2:
            records.append(records[at])
    if mutation == "bomb" and not bombs:
        mutation = "valid"
    body = b"".join(records)
    payload = compress_with(codec, body, rng)
    if mutation == "bomb" and bombs:
        codec, mib = rng.choice(sorted(bombs))
        attributes = codec
        bomb = mib << 20
        count = 1
        payload = bombs[(codec, mib)]
    if mutation == "payload":
        if codec == 0:
            codec = rng.choice((1, 2, 3, 4))  # an uncompressed payload under a codec's flag
            attributes = codec
        else:
            payload = mutate_payload(payload, codec, rng)
    if mutation == "codec":
        attributes = rng.choice(tuple(c for c in range(8) if c != codec))
    if mutation == "flags":
        attributes |= rng.choice((0x08, 0x10, 0x20, 0x40, 0x80, 0x08 | 0x10))
        timestamp = rng.choice((timestamp, -1, -2, 2**62, 0))
        max_timestamp = rng.choice((max_timestamp, -1, timestamp - 5, 2**62))
        producer = rng.choice(((-1, -1, -1), (1_000_000, 0, 0), (1_000_001, 3, 7), (-5, -3, -9)))
    batch = frame_batch(
        payload,
        attributes=attributes,
        count=count,
        timestamp_ms=timestamp,
        max_timestamp_ms=max_timestamp,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
    )
    return MadeBatch(batch, mutation, codec, bomb)


def client_verdict(batch: bytes) -> str:
    """What a consumer's reader makes of the batch: "parses" or "unreadable"."""
    from kafka.record.default_records import DefaultRecordBatch

    try:
        reader = DefaultRecordBatch(batch)
        for _record in reader:
            pass
    except Exception:
        return "unreadable"
    return "parses"


ERROR_NAMES = {0: "NONE", 2: "CORRUPT_MESSAGE", 87: "INVALID_RECORD", 10: "MESSAGE_TOO_LARGE"}


@dataclass
class RecordReport:
    produces: int = 0
    frames: int = 0
    per_mutation: Counter[str] = field(default_factory=Counter)
    per_codec: Counter[int] = field(default_factory=Counter)
    answers: Counter[tuple[str, str]] = field(default_factory=Counter)  # (verdict, error)
    # (mutation, topic, batch hex) of batches a client cannot read that were answered NONE
    accepted_unreadable: list[tuple[str, str, str]] = field(default_factory=list)
    reads: Counter[str] = field(default_factory=Counter)
    crashes: list[Crash] = field(default_factory=list)
    seconds: float = 0.0
    max_rss_kib: int = 0
    rss_after_warmup_kib: int = 0
    rss_at_end_kib: int = 0  # what stays once the last request is answered (a leak would)


class RecordFuzzer:
    def __init__(
        self,
        server: KemuServer,
        seed: int,
        crash_log: _CrashLog,
        bomb_mib: tuple[int, ...] = BOMB_MIB,
    ) -> None:
        self.server = server
        self.bombs = {
            (codec, mib): make_bomb(codec, mib) for codec in BOMB_CODECS for mib in bomb_mib
        }
        self.rng = random.Random(seed)
        self.crash_log = crash_log
        self.report = RecordReport()
        self.correlation = 0
        self.loop_errors: list[str] = []
        self.topic_ids: dict[str, uuid.UUID] = {}
        self._ports = 0
        self._current: bytes = b""

    def prepare(self) -> None:
        cluster = self.server.cluster
        for name, configs in TOPICS.items():
            if cluster.topics.get(name) is None:
                cluster.create_topic(name, 1, 1, configs=dict(configs))
            self.topic_ids[name] = cluster.topics[name].topic_id

    def loop_error(self, _loop: Any, context: dict[str, Any]) -> None:
        error = context.get("exception")
        text = context.get("message", "")
        if error is not None:
            text += "\n" + "".join(traceback.format_exception(error))
        self.loop_errors.append(text)

    async def run(self, produces: int) -> RecordReport:
        began = time.monotonic()
        for number in range(produces):
            await self.produce_one()
            if number == min(200, produces // 10):
                self.report.rss_after_warmup_kib = _current_rss_kib()
        await self._read_back(next(iter(TOPICS)), always=True)
        self.report.seconds = time.monotonic() - began
        self.report.max_rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self.report.rss_at_end_kib = _current_rss_kib()
        return self.report

    async def produce_one(self) -> None:
        rng = self.rng
        report = self.report
        made = make_batch(rng, int(time.time() * 1000), self.bombs)
        topic = rng.choice(tuple(TOPICS))
        version = rng.randint(3, 13)
        report.produces += 1
        report.per_mutation[made.mutation] += 1
        report.per_codec[made.codec] += 1
        verdict = "bomb" if made.bomb_bytes else client_verdict(made.batch)
        partition = wire.build(
            _schema_class(PRODUCE, version, "PartitionProduceData"), index=0, records=made.batch
        )
        named: dict[str, Any] = (
            {"topic_id": self.topic_ids[topic]} if version >= 13 else {"name": topic}
        )
        topic_data = wire.build(
            _schema_class(PRODUCE, version, "TopicProduceData"),
            partition_data=(partition,),
            **named,
        )
        body = wire.build(
            wire.request_schema(PRODUCE, version),
            transactional_id=None,
            acks=rng.choice((1, 1, 1, -1)),
            timeout=datetime.timedelta(seconds=1),
            topic_data=(topic_data,),
        )
        answer = await self._exchange(PRODUCE, version, body, topic)
        if answer is None:
            report.answers[(verdict, "closed")] += 1
            return
        if not answer.responses or not answer.responses[0].partition_responses:
            report.answers[(verdict, "no partition in the answer")] += 1
            self._crash("empty answer", f"Produce v{version} answered {answer!r}")
            return
        error = answer.responses[0].partition_responses[0].error_code
        name = ERROR_NAMES.get(int(error), str(int(error)))
        report.answers[(verdict, name)] += 1
        if verdict == "unreadable" and int(error) == 0:
            report.accepted_unreadable.append((made.mutation, topic, made.batch.hex()))
        if rng.random() < 0.3:
            await self._read_back(topic)

    async def _read_back(self, topic: str, always: bool = False) -> None:
        """ListOffsets by a timestamp and by max timestamp, and a Fetch, on ``topic``."""
        rng = self.rng
        for timestamp in (rng.choice((0, int(time.time() * 1000) - 500)), -3):
            version = 7 if timestamp == -3 else rng.randint(1, 9)
            partition = wire.build(
                _schema_class(LIST_OFFSETS, version, "ListOffsetsPartition"),
                partition_index=0,
                current_leader_epoch=-1,
                timestamp=timestamp,
            )
            listed = wire.build(
                _schema_class(LIST_OFFSETS, version, "ListOffsetsTopic"),
                name=topic,
                partitions=(partition,),
            )
            body = wire.build(
                wire.request_schema(LIST_OFFSETS, version), replica_id=-1, topics=(listed,)
            )
            answer = await self._exchange(LIST_OFFSETS, version, body, topic)
            if answer is not None:
                error = answer.topics[0].partitions[0].error_code
                self.report.reads[f"ListOffsets {ERROR_NAMES.get(int(error), int(error))}"] += 1
        fetch_version = 12
        fetch_partition = wire.build(
            _schema_class(FETCH, fetch_version, "FetchPartition"),
            partition=0,
            fetch_offset=0,
            partition_max_bytes=1 << 20,
        )
        fetch_topic = wire.build(
            _schema_class(FETCH, fetch_version, "FetchTopic"),
            topic=topic,
            partitions=(fetch_partition,),
        )
        body = wire.build(
            wire.request_schema(FETCH, fetch_version),
            max_wait=datetime.timedelta(0),
            min_bytes=0,
            max_bytes=4 << 20,
            topics=(fetch_topic,),
        )
        answer = await self._exchange(FETCH, fetch_version, body, topic)
        if answer is not None:
            self.report.reads["Fetch answered"] += 1

    async def _exchange(self, api_key: int, version: int, body: Any, topic: str) -> Any | None:
        """One request on a fresh connection to ``topic``'s leader; its decoded answer."""
        self.correlation += 1
        frame = wire.encode_request_frame(body, self.correlation, "fuzz-records")
        self._current = frame
        self.report.frames += 1
        cluster = self.server.cluster
        node = cluster.nodes[cluster.topics[topic].partitions[0].leader_id]
        connection = Connection(node, self.server.runtime)
        self._ports += 1
        transport = _KeepingTransport(200_000_000 + self._ports)
        connection.connection_made(transport)  # type: ignore[arg-type]
        try:
            connection.data_received(frame)
        except Exception:
            self._crash("exception", traceback.format_exc())
        deadline = time.monotonic() + 5
        while not transport.has_frame() and not transport.closed and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
        tasks = [slot for slot in connection._slots if isinstance(slot, asyncio.Task)]
        connection.connection_lost(None)
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        self._collect()
        if not transport.has_frame():
            return None
        try:
            return wire.decode_response(api_key, version, bytes(transport.buffer[4:]))[1]
        except Exception:
            self._crash("undecodable answer", traceback.format_exc())
            return None

    def _collect(self) -> None:
        while self.crash_log.events:
            _peer, detail = self.crash_log.events.pop(0)
            self._crash("logged", detail)
        while self.loop_errors:
            self._crash("loop", self.loop_errors.pop(0))

    def _crash(self, kind: str, detail: str) -> None:
        self.report.crashes.append(Crash(kind, PRODUCE, 0, "records", self._current, detail))


def _schema_class(api_key: int, version: int, name: str) -> type[Any]:
    import sys

    module = sys.modules[wire.request_schema(api_key, version).__module__]
    return getattr(module, name)  # type: ignore[no-any-return]


def _current_rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def print_record_report(report: RecordReport, out: Any = print) -> None:
    out(
        f"record batches produced: {report.produces} ({report.frames} frames with the read-backs)"
        f", in {report.seconds:.1f} s"
    )
    out("mutations: " + ", ".join(f"{k} {v}" for k, v in sorted(report.per_mutation.items())))
    out("codecs: " + ", ".join(f"{k} {v}" for k, v in sorted(report.per_codec.items())))
    out(
        "answers (client reader's verdict, kemu's error): "
        + ", ".join(f"{v}/{e} {n}" for (v, e), n in sorted(report.answers.items()))
    )
    out("read-backs: " + ", ".join(f"{k} {v}" for k, v in sorted(report.reads.items())))
    accepted = Counter((mutation, topic) for mutation, topic, _ in report.accepted_unreadable)
    out(
        f"unreadable batches accepted: {len(report.accepted_unreadable)} "
        + ", ".join(f"{m} on {t}: {n}" for (m, t), n in sorted(accepted.items()))
    )
    for mutation, topic, batch in report.accepted_unreadable[:2]:
        out(f"    {mutation} on {topic}: {batch[:300]}")
    out(
        f"RSS after warm-up {report.rss_after_warmup_kib / 1024:.1f} MiB, "
        f"at the end {report.rss_at_end_kib / 1024:.1f} MiB, "
        f"max RSS {report.max_rss_kib / 1024:.1f} MiB"
    )
    out(f"record crashes: {len(report.crashes)}")
    kinds: dict[str, list[Crash]] = {}
    for crash in report.crashes:
        kinds.setdefault(crash.signature, []).append(crash)
    for signature, crashes in kinds.items():
        out(f"--- {len(crashes)} x {signature}")
        out(crashes[0].describe()[:1500])


async def fuzz_records(
    produces: int,
    seed: int,
    *,
    data_dir: Path,
    config: dict[str, str] | None = None,
    bomb_mib: tuple[int, ...] = BOMB_MIB,
) -> RecordReport:
    """Run ``produces`` mutated batches against a fresh in-process kemu on ``data_dir``."""
    from bench.fuzz import CONFIG, fuzzing_server

    logging_config = structlog.get_config()
    async with fuzzing_server(data_dir, {**CONFIG, **(config or {})}) as server:
        crash_log = _CrashLog()
        structlog.configure(processors=[crash_log], cache_logger_on_first_use=False)
        fuzzer = RecordFuzzer(server, seed, crash_log, bomb_mib)
        asyncio.get_running_loop().set_exception_handler(fuzzer.loop_error)
        fuzzer.prepare()
        try:
            return await fuzzer.run(produces)
        finally:
            structlog.configure(**logging_config)
