"""The embedded consumer protocol (protocol type "consumer") as far as the coordinator reads it.

A classic group's coordinator treats member metadata and assignments as opaque bytes, except
that Kafka reads the subscribed topics out of a "consumer" group's metadata to refuse
OffsetDelete on topics the group consumes (GROUP_SUBSCRIBED_TO_TOPIC). Every version of
``ConsumerProtocolSubscription`` starts with the v0 layout: int16 version, then an int32-counted
array of int16-length topic names. ``encode_*`` build v0 messages for tests.
"""

from __future__ import annotations

import struct

PROTOCOL_TYPE = "consumer"

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """The topics a subscription names, or None when the bytes are not a subscription."""
    try:
        position = 2  # the version; v0 is a prefix of every later version
        (count,) = _INT32.unpack_from(metadata, position)
        position += 4
        topics = set()
        for _ in range(max(count, 0)):
            (length,) = _INT16.unpack_from(metadata, position)
            position += 2
            if length < 0 or position + length > len(metadata):
                return None
            topics.add(metadata[position : position + length].decode())
            position += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


def _string(text: str) -> bytes:
    data = text.encode()
    return _INT16.pack(len(data)) + data


def encode_subscription(topics: list[str], user_data: bytes | None = None) -> bytes:
    body = _INT16.pack(0) + _INT32.pack(len(topics)) + b"".join(_string(t) for t in topics)
    return body + (
        _INT32.pack(-1) if user_data is None else _INT32.pack(len(user_data)) + user_data
    )


def encode_assignment(partitions: dict[str, list[int]]) -> bytes:
    parts = [_INT16.pack(0), _INT32.pack(len(partitions))]
    for topic, indexes in partitions.items():
        parts.append(_string(topic) + _INT32.pack(len(indexes)))
        parts += [_INT32.pack(index) for index in indexes]
    parts.append(_INT32.pack(-1))  # no user data
    return b"".join(parts)


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """Topic -> partitions of a ``ConsumerProtocolAssignment`` (any version; {} if unreadable)."""
    try:
        position = 2
        (count,) = _INT32.unpack_from(data, position)
        position += 4
        result: dict[str, list[int]] = {}
        for _ in range(max(count, 0)):
            (length,) = _INT16.unpack_from(data, position)
            position += 2
            topic = data[position : position + length].decode()
            position += length
            (partitions,) = _INT32.unpack_from(data, position)
            position += 4
            result[topic] = [
                _INT32.unpack_from(data, position + 4 * i)[0] for i in range(max(partitions, 0))
            ]
            position += 4 * max(partitions, 0)
        return result
    except (struct.error, UnicodeDecodeError):
        return {}
