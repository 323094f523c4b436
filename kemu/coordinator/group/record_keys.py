"""The key of a consumer, share or streams group record in ``__consumer_offsets``.

All three group types key their records the same way (Kafka's generated ``*Key`` messages, one
version): int16 record type, the group id, and the member id for per-member records, each string
an int16 length and UTF-8 bytes. Each type keeps its own record-type sets.
"""

from __future__ import annotations

import struct
from collections.abc import Container

from kemu.protocol.coordinator_records import RecordDecodeError, RecordReader

_INT16 = struct.Struct(">h")


def _key_string(text: str) -> bytes:
    data = text.encode()
    return _INT16.pack(len(data)) + data


def encode_group_key(
    record_type: int, group: str, member: str | None, per_member: Container[int]
) -> bytes:
    body = _INT16.pack(record_type) + _key_string(group)
    if record_type in per_member:
        body += _key_string(member or "")
    return body


def decode_group_key(
    data: bytes, record_types: Container[int], per_member: Container[int], kind: str
) -> tuple[int, str, str | None]:
    """(record type, group, member); RecordDecodeError for bytes that are not a ``kind`` record."""
    reader = RecordReader(data)
    record_type = reader.int16()
    if record_type not in record_types:
        raise RecordDecodeError(f"record type {record_type} is not a {kind} group record")
    try:
        group = reader.key_string()
        member = reader.key_string() if record_type in per_member else None
    except UnicodeDecodeError as error:
        raise RecordDecodeError(str(error)) from None
    reader.done()
    return record_type, group, member
