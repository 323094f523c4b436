"""Share-group records in ``__consumer_offsets`` (``share_records``): every record type round
trips, what the log holds rebuilds the group, and bytes that are not a share-group record are
refused with ``RecordDecodeError`` (the loader skips them) rather than anything else. Kafka 4.4.0
reading kemu's bytes: ``tests/integration/share/test_share_group_records_kafka.py``."""

from __future__ import annotations

import contextlib
import random
import uuid

import pytest

from kemu.coordinator.group import records
from kemu.coordinator.group.share import records as share_records
from kemu.coordinator.group.share.group import ShareGroup, ShareMember
from kemu.coordinator.group.share.records import ShareImageBuilder, diff, image_of
from kemu.protocol.coordinator_records import RecordDecodeError

TOPIC = uuid.UUID(int=42)


def group() -> ShareGroup:
    return ShareGroup(
        "g",
        group_epoch=7,
        assignment_epoch=6,
        assignment_timestamp_ms=99,
        members={
            "a": ShareMember("a", 6, 5, "r1", "c", "/h", frozenset({"t"}), frozenset({(TOPIC, 0)})),
            "b": ShareMember("b", 6, 4, None, "c", "/h", frozenset({"t", "u"})),
        },
        target={"a": frozenset({(TOPIC, 0)}), "b": frozenset({(TOPIC, 1)})},
        initialized={TOPIC: {0, 1}},
        initializing={TOPIC: {2}},
    )


def encoded(group_records: list[share_records.Record]) -> list[tuple[bytes, bytes | None]]:
    return [(records.encode_key(key), records.encode_value(value)) for key, value in group_records]


def test_the_log_rebuilds_the_group_and_writes_only_what_changed() -> None:
    written = image_of(group(), lambda topic_id: "t")
    log = ShareImageBuilder()
    for key, value in encoded(diff("g", None, written)):
        decoded_key = records.decode_key(key)
        log.apply(decoded_key, records.decode_value(decoded_key, value))  # type: ignore[arg-type]
    assert log.images["g"] == written
    rebuilt = share_records.group_from_image("g", log.images["g"], 0)
    assert (rebuilt.group_epoch, rebuilt.assignment_epoch) == (7, 6)
    assert rebuilt.members == group().members and rebuilt.target == group().target
    # partitions being initialized are kept, as Kafka keeps its InitializingTopics
    assert rebuilt.initialized == {TOPIC: {0, 1}} and rebuilt.initializing == {TOPIC: {2}}
    assert diff("g", written, written) == []
    changed = group()
    changed.members["b"] = ShareMember("b", 7, 6, None, "c", "/h", frozenset({"t", "u"}))
    (only,) = diff("g", written, image_of(changed, lambda topic_id: "t"))
    assert only[0].record_type == share_records.CURRENT_ASSIGNMENT and only[0].member == "b"


def test_a_deleted_group_leaves_nothing() -> None:
    written = image_of(group(), lambda topic_id: "t")
    log = ShareImageBuilder()
    for key, value in [*diff("g", None, written), *diff("g", written, None)]:
        log.apply(key, value)
    assert log.images == {}


def test_bytes_that_are_not_a_share_record_are_refused_cleanly() -> None:
    pairs = encoded(diff("g", None, image_of(group(), lambda topic_id: "t")))
    chance = random.Random(1289)
    for key, value in pairs:
        assert value is not None
        for cut in range(len(value)):
            damaged = value[:cut]
            if chance.random() < 0.5 and cut:
                at = chance.randrange(cut)
                damaged = damaged[:at] + bytes([chance.randrange(256)]) + damaged[at + 1 :]
            decoded_key = records.decode_key(key)
            with contextlib.suppress(RecordDecodeError):
                records.decode_value(decoded_key, damaged)
    with pytest.raises(RecordDecodeError):
        records.decode_value(records.decode_key(pairs[0][0]), b"\x00\x01")  # version 1
