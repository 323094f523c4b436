"""ListOffsets through the real wire (see ``test_admin_handlers.Broker``): timestamp lookups
land on the record inside a compressed batch, as Kafka 3.8+ answers."""

from __future__ import annotations

import struct
from typing import Any

import crc32c
import pytest

from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import split_batches
from tests.unit.batch_builders import timed_batch
from tests.unit.broker.handlers.test_admin_handlers import Broker

LIST_OFFSETS = 2
MAX_TIMESTAMP = -3
TS = 1_700_000_000_000 - 60_000


def compressed_batch(timestamps: list[int], codec: int) -> bytes:
    return timed_batch([TS + t for t in timestamps], codec, value=b"x" * 50)


def list_offsets(broker: Broker, timestamp: int, *, version: int = 9) -> Any:
    partition = broker.nested(
        LIST_OFFSETS,
        version,
        "ListOffsetsPartition",
        partition_index=0,
        current_leader_epoch=-1,
        timestamp=timestamp,
    )
    topic = broker.nested(
        LIST_OFFSETS, version, "ListOffsetsTopic", name="times", partitions=(partition,)
    )
    request = broker.request(
        LIST_OFFSETS, version, replica_id=-1, isolation_level=0, topics=(topic,)
    )
    return broker.send(request).topics[0].partitions[0]


@pytest.fixture
def broker() -> Broker:
    broker = Broker()
    broker.create("times", -1, -1, assignments={0: [1]})
    partition = broker.cluster.topics["times"].partitions[0]
    partition.leader_epoch = 2
    for timestamps in ([20, 21, 25, 22, 23], [26, 30, 28]):
        batch = compressed_batch(timestamps, codec=4)
        partition.append(split_batches(batch), now_ms=TS + 100)
    return broker


@pytest.mark.parametrize(
    ("target", "offset", "timestamp"),
    [
        (MAX_TIMESTAMP, 6, TS + 30),
        (TS + 21, 1, TS + 21),
        (TS + 22, 2, TS + 25),
        (TS + 27, 6, TS + 30),
        (TS + 31, -1, -1),
    ],
)
def test_lookups_land_on_the_record(
    broker: Broker, target: int, offset: int, timestamp: int
) -> None:
    found = list_offsets(broker, target)
    assert (found.error_code, found.offset, found.timestamp) == (ErrorCode.none, offset, timestamp)
    assert found.leader_epoch == (2 if offset >= 0 else -1)  # the epoch of the batch


def test_old_versions_resolve_to_the_record_too(broker: Broker) -> None:
    found = list_offsets(broker, TS + 22, version=1)
    assert (found.error_code, found.offset, found.timestamp) == (ErrorCode.none, 2, TS + 25)


def test_undecodable_batch_is_corrupt_message(broker: Broker) -> None:
    partition = broker.cluster.topics["times"].partitions[0]
    plain = bytearray(compressed_batch([40, 41], codec=0))
    plain[22] |= 3  # claims lz4 (attributes' low byte), keeps the plain records: CRC redone
    struct.pack_into(">I", plain, 17, crc32c.crc32c(bytes(plain[21:])))
    partition.append(split_batches(bytes(plain)), now_ms=TS + 100)
    found = list_offsets(broker, TS + 40)
    assert found.error_code == ErrorCode.corrupt_message
    # Lookups that stop before it still answer.
    assert list_offsets(broker, TS + 21).offset == 1
