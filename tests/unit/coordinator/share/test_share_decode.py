"""The ``__share_group_state`` reader: v2 batch records, JSON lines, states."""

from __future__ import annotations

import gzip
import json
import struct
import uuid
from pathlib import Path

import crc32c

from kemu.coordinator.share.decode import (
    LogRecord,
    batch_records,
    data_dir_topic_names,
    decode_all,
    split_fetched,
)
from kemu.coordinator.share.persister import PersistedBatch
from kemu.coordinator.share.records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    ShareSnapshotValue,
    ShareUpdateValue,
    StateRecordKey,
    encode_key,
    encode_value,
)
from kemu.protocol.records import (
    BATCH_HEADER_SIZE,
    CONTROL_COMMIT,
    build_batch,
    control_batch,
    read_header,
)

TOPIC = uuid.UUID("01020304-0506-0708-090a-0b0c0d0e0f10")


def test_records_of_a_batch() -> None:
    batch = build_batch([(b"k1", b"v1"), (None, None), (b"k3", b"")], timestamp_ms=5, base_offset=7)
    assert batch_records(read_header(batch), batch) == [
        (7, b"k1", b"v1"),
        (8, None, None),
        (9, b"k3", b""),
    ]


def test_control_batches_hold_no_records() -> None:
    marker = control_batch(
        CONTROL_COMMIT, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp_ms=5
    )
    assert batch_records(read_header(marker), marker) == []


def test_gzip_batches_are_read() -> None:
    plain = build_batch([(b"k", b"value")] * 3, timestamp_ms=5)
    body = gzip.compress(plain[BATCH_HEADER_SIZE:])
    header = bytearray(plain[:BATCH_HEADER_SIZE])
    struct.pack_into(">i", header, 8, BATCH_HEADER_SIZE - 12 + len(body))  # batch length
    struct.pack_into(">h", header, 21, 1)  # attributes: gzip
    after_crc = bytes(header[21:]) + body
    struct.pack_into(">I", header, 17, crc32c.crc32c(after_crc))
    compressed = bytes(header) + body
    assert batch_records(read_header(compressed), compressed) == [
        (0, b"k", b"value"),
        (1, b"k", b"value"),
        (2, b"k", b"value"),
    ]


def test_split_fetched_drops_a_partial_tail() -> None:
    one = build_batch([(b"a", b"b")], timestamp_ms=1)
    two = build_batch([(b"c", b"d")], timestamp_ms=1, base_offset=1)
    batches = list(split_fetched(one + two[:-3]))
    assert [batch for _, batch in batches] == [one]


def test_decode_all_prints_records_then_states() -> None:
    snapshot_key = StateRecordKey(SHARE_SNAPSHOT, "g", TOPIC, 0)
    update_key = StateRecordKey(SHARE_UPDATE, "g", TOPIC, 0)
    snapshot = ShareSnapshotValue(0, 1, 0, 0, 10, 10, (), 0)
    update = ShareUpdateValue(0, 2, 5, (PersistedBatch(5, 6, 2, 1, 9, 0, 1),), 1)
    records = [
        LogRecord(1, 0, encode_key(snapshot_key), encode_value(snapshot)),
        LogRecord(1, 1, encode_key(update_key), encode_value(update)),
        LogRecord(1, 2, b"\x00\x09", b""),
    ]
    lines = [json.loads(line) for line in decode_all(records)]
    assert lines[0] == {
        "partition": 1,
        "offset": 0,
        "recordType": "ShareSnapshot",
        "key": {
            "type": 0,
            "data": {"groupId": "g", "topicId": "AQIDBAUGBwgJCgsMDQ4PEA", "partition": 0},
        },
        "value": {
            "version": 0,
            "data": {
                "snapshotEpoch": 0,
                "stateEpoch": 1,
                "leaderEpoch": 0,
                "startOffset": 0,
                "deliveryCompleteCount": 0,
                "createTimestamp": 10,
                "writeTimestamp": 10,
                "stateBatches": [],
            },
        },
    }
    assert lines[1]["value"]["data"]["stateBatches"] == [
        {
            "firstOffset": 5,
            "lastOffset": 6,
            "deliveryState": 2,
            "deliveryStateName": "ACKNOWLEDGED",
            "deliveryCount": 1,
            "stagedProducerId": 9,
            "stagedProducerEpoch": 0,
            "stagedAckType": 1,
            "stagedAckTypeName": "ACCEPT",
        }
    ]
    assert "error" in lines[2]
    assert lines[3] == {
        "state": {
            "statePartition": 1,
            "groupId": "g",
            "topicId": "AQIDBAUGBwgJCgsMDQ4PEA",
            "partition": 0,
            "snapshotEpoch": 0,
            "stateEpoch": 1,
            "leaderEpoch": 2,
            "startOffset": 5,
            "deliveryCompleteCount": 1,
            "stateBatches": [lines[1]["value"]["data"]["stateBatches"][0]],
        }
    }
    only_states = [json.loads(line) for line in decode_all(records, states_only=True)]
    assert only_states == [lines[3]]


def test_topic_names_stand_beside_topic_ids_when_known(tmp_path: Path) -> None:
    key = StateRecordKey(SHARE_SNAPSHOT, "g", TOPIC, 0)
    snapshot = ShareSnapshotValue(0, 1, 0, 0, 10, 10, (PersistedBatch(0, 3, 5, 1),), 0)
    records = [LogRecord(0, 0, encode_key(key), encode_value(snapshot))]
    (tmp_path / "kemu-metadata.json").write_text(
        json.dumps({"topics": [{"name": "orders", "topic_id": str(TOPIC)}]})
    )
    names = data_dir_topic_names(tmp_path)
    assert names == {TOPIC: "orders"}
    record, state = (json.loads(line) for line in decode_all(records, topic_names=names))
    assert record["key"]["data"] == {
        "groupId": "g",
        "topicId": "AQIDBAUGBwgJCgsMDQ4PEA",
        "topicName": "orders",
        "partition": 0,
    }
    assert state["state"]["topicName"] == "orders"
    assert state["state"]["stateBatches"][0]["deliveryStateName"] == "TX_PENDING"
    assert data_dir_topic_names(tmp_path / "none") == {}  # no catalogue: ids alone
