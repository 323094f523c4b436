"""kemu's record reader against the batches real clients write, every codec.

Each client produces one multi-record batch per codec to a kemu with a data directory; the
segment files then hold the batches byte-for-byte as the client encoded them, and
``record_reader`` must read back every record: offset, timestamp, key, value and headers.
librdkafka (confluent-kafka) writes raw snappy, kafka-python and aiokafka xerial-framed snappy;
the Java client's batches are checked through ListOffsets in ``test_java_clients.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Producer
from kafka import KafkaProducer

from kemu.protocol.record_reader import XERIAL_MAGIC, Record, iter_records
from kemu.protocol.records import BATCH_HEADER_SIZE, read_header
from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TS = 1_700_000_000_000
COUNT = 12


def records() -> list[Record]:
    out = []
    for i in range(COUNT):
        key = None if i == 3 else f"key-{i}".encode()
        value = None if i == 4 else f"value-{i}-".encode() * (1 + 50 * i)
        headers: tuple[tuple[str, bytes | None], ...] = (("seq", str(i).encode()), ("empty", b""))
        out.append(Record(i, TS + (9_000 if i == 5 else i * 100), key, value, headers))
    return out


def produce_confluent(bootstrap: str, topic: str, codec: str) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 300, "compression.type": codec}
    )
    for r in records():
        producer.produce(
            topic, r.value, r.key, partition=0, timestamp=r.timestamp, headers=list(r.headers)
        )
    assert producer.flush(30) == 0


def produce_kafka_python(bootstrap: str, topic: str, codec: str) -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        linger_ms=300,
        compression_type=None if codec == "none" else codec,
    )
    futures = [
        producer.send(
            topic,
            value=r.value,
            key=r.key,
            partition=0,
            timestamp_ms=r.timestamp,
            headers=list(r.headers),
        )
        for r in records()
    ]
    producer.flush(30)
    for future in futures:
        future.get(30)
    producer.close(10)


def produce_aiokafka(bootstrap: str, topic: str, codec: str) -> None:
    async def run() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            linger_ms=300,
            compression_type=None if codec == "none" else codec,
        )
        await producer.start()
        try:
            sends = [
                await producer.send(
                    topic,
                    value=r.value,
                    key=r.key,
                    partition=0,
                    timestamp_ms=r.timestamp,
                    headers=list(r.headers),
                )
                for r in records()
            ]
            await asyncio.gather(*sends)
        finally:
            await producer.stop()

    asyncio.run(run())


PRODUCERS: dict[str, Callable[[str, str, str], None]] = {
    "confluent-kafka": produce_confluent,
    "kafka-python": produce_kafka_python,
    "aiokafka": produce_aiokafka,
}


@pytest.fixture(scope="module")
def kemu_with_data(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[InProcessKemu, Path]]:
    data_dir = tmp_path_factory.mktemp("client-batches") / "data"
    kemu = InProcessKemu(brokers=1, data_dir=data_dir).start()
    yield kemu, data_dir
    kemu.stop()


def stored_batches(data_dir: Path, topic: str) -> list[bytes]:
    data = b"".join(path.read_bytes() for path in sorted((data_dir / f"{topic}-0").glob("*.log")))
    batches = []
    position = 0
    while position < len(data):
        size = read_header(data, position).size
        batches.append(data[position : position + size])
        position += size
    return batches


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", PRODUCERS)
def test_every_record_reads_back(
    kemu_with_data: tuple[InProcessKemu, Path], client: str, codec: str
) -> None:
    kemu, data_dir = kemu_with_data
    topic = f"batches-{client}-{codec}"
    PRODUCERS[client](kemu.bootstrap, topic, codec)
    batches = stored_batches(data_dir, topic)
    headers = [read_header(batch) for batch in batches]
    shared = [header for header in headers if header.record_count > 1]
    assert shared  # records shared a batch
    # A client may send a lone record uncompressed when compressing does not pay.
    assert {header.compression for header in shared} == {CODECS[codec]}
    if codec == "snappy":
        framed = {batch[BATCH_HEADER_SIZE:].startswith(XERIAL_MAGIC) for batch in batches}
        assert framed == {client != "confluent-kafka"}
    read = [record for batch in batches for record in iter_records(batch)]
    assert read == records()
