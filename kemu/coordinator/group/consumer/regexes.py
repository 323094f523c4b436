"""What a KIP-848 group's regex subscriptions match, and their ``__consumer_offsets`` record.
Sans-IO: the topic names and the time are arguments.

A group keeps, per regular expression its members subscribe with, the topics it matched when
last resolved, with the metadata version and the time of that resolution (Kafka's
``ResolvedRegularExpression``). Kafka writes each resolution as a ConsumerGroupRegularExpression
record (type 16) and a tombstone when the regex's last subscriber leaves or changes it; the
load replays them, so a restarted coordinator keeps what its regexes matched.

====  ==========================================  ==========================================
type  key (int16-length strings)                  value v0 (flexible)
====  ==========================================  ==========================================
16    ConsumerGroupRegularExpression: group,      Topics []string (compact), Version int64,
      regular expression                          Timestamp int64, tagged fields
====  ==========================================  ==========================================

Kafka's Version is the offset of the metadata image the regex was resolved against; kemu has no
metadata log, so it writes 0, and a loaded group counts every topic as new since its
resolutions (as Kafka's first metadata image after a restart carries every topic as created):
its next heartbeat more than 10 s after the last resolution resolves its regexes again.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from kemu.coordinator.group.consumer.topic_regex import InvalidTopicRegex, compile_topic_regex
from kemu.protocol.coordinator_records import RecordReader, encode_compact_string
from kemu.protocol.records import uvarint

REGULAR_EXPRESSION = 16
NO_METADATA_VERSION = 0  # kemu has no metadata log offset to write as the Version

_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    """Kafka's ``ResolvedRegularExpression``: the topics a regex matched, against which
    metadata version and when (the record's value)."""

    topics: frozenset[str]
    version: int = NO_METADATA_VERSION
    timestamp_ms: int = 0


def matches(pattern: str, topic: str) -> bool:
    """Whether the whole of ``topic`` matches ``pattern`` read as RE2J reads it (a pattern it
    does not compile matches nothing, as Kafka's resolution ignores it)."""
    try:
        return compile_topic_regex(pattern).matches(topic)
    except InvalidTopicRegex:
        return False


def resolve(
    regexes: Iterable[str], topic_names: Iterable[str], now_ms: int
) -> dict[str, ResolvedRegex]:
    """Each regex with the topics among ``topic_names`` it matches, resolved at ``now_ms``
    (Kafka's ``refreshRegularExpressions``, run on its executor)."""
    names = list(topic_names)
    return {
        regex: ResolvedRegex(frozenset(name for name in names if matches(regex, name)), 0, now_ms)
        for regex in sorted(regexes)
    }


def last_resolved_ms(resolved: Iterable[ResolvedRegex]) -> int | None:
    """When the group's regexes were last resolved (Kafka's
    ``lastResolvedRegularExpressionRefreshTimeMs``: the latest of their timestamps)."""
    return max((r.timestamp_ms for r in resolved), default=None)


def encode_value(value: ResolvedRegex) -> bytes:
    """The record's value, as Kafka writes it (its topics sorted)."""
    topics = sorted(value.topics)
    return (
        _INT16.pack(0)
        + uvarint(len(topics) + 1)
        + b"".join(encode_compact_string(topic) for topic in topics)
        + _INT64.pack(value.version)
        + _INT64.pack(value.timestamp_ms)
        + uvarint(0)  # no tagged fields
    )


def decode_value(reader: RecordReader) -> ResolvedRegex:
    """The value after its version, to its end (tagged fields skipped)."""
    topics = frozenset(reader.compact_string() or "" for _ in range(max(reader.uvarint() - 1, 0)))
    version, timestamp_ms = reader.int64(), reader.int64()
    reader.tags()
    reader.done()
    return ResolvedRegex(topics, version, timestamp_ms)
