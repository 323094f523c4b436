"""Reading and writing the keys and values of coordinator records (``__consumer_offsets``,
``__transaction_state``, ``__share_group_state``).

Each coordinator module describes its own record layouts; this module holds the primitives they
share: a bounds-checked reader over one key or value (legacy or flexible encoding) and the
tagged-field writer. A record that does not parse raises ``RecordDecodeError``, never
``IndexError`` or a struct error, so a damaged internal topic is reported, not crashed on.
"""

from __future__ import annotations

import struct

from kemu.protocol.records import uvarint

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class RecordDecodeError(ValueError):
    """Bytes that are not a coordinator record kemu (or Kafka) can read."""


def encode_tags(tags: list[tuple[int, bytes]]) -> bytes:
    """A tagged-fields section; callers list tags in ascending order, as Kafka requires."""
    parts = [uvarint(len(tags))]
    for tag, data in tags:
        parts.append(uvarint(tag) + uvarint(len(data)) + data)
    return b"".join(parts)


class RecordReader:
    """A cursor over one record key or value. ``flexible`` selects compact lengths for strings,
    bytes and arrays (flexible versions) over int16/int32 lengths (legacy versions)."""

    __slots__ = ("data", "flexible", "position")

    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = data
        self.position = 0
        self.flexible = flexible

    def take(self, size: int) -> bytes:
        end = self.position + size
        if size < 0 or end > len(self.data):
            raise RecordDecodeError(
                f"need {size} bytes at position {self.position} of a {len(self.data)}-byte record"
            )
        chunk = self.data[self.position : end]
        self.position = end
        return chunk

    def unpack(self, layout: struct.Struct) -> tuple[int, ...]:
        return tuple(layout.unpack(self.take(layout.size)))

    def int16(self) -> int:
        return int(_INT16.unpack(self.take(2))[0])

    def int32(self) -> int:
        return int(_INT32.unpack(self.take(4))[0])

    def int64(self) -> int:
        return int(_INT64.unpack(self.take(8))[0])

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise RecordDecodeError("unsigned varint longer than 5 bytes")

    def _length(self, wide: bool) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return self.int32() if wide else self.int16()

    def nullable_string(self) -> str | None:
        length = self._length(wide=False)
        if length < 0:
            return None
        try:
            return self.take(length).decode()
        except UnicodeDecodeError as error:
            raise RecordDecodeError(f"string is not UTF-8: {error}") from None

    def string(self) -> str:
        text = self.nullable_string()
        if text is None:
            raise RecordDecodeError("null where a string is required")
        return text

    def compact_string(self) -> str | None:
        """A compact (flexible) nullable string, whatever the reader's mode."""
        length = self.uvarint() - 1
        if length < 0:
            return None
        try:
            return self.take(length).decode()
        except UnicodeDecodeError as error:
            raise RecordDecodeError(f"string is not UTF-8: {error}") from None

    def key_string(self) -> str:
        """An int16-length string, as coordinator record keys are written."""
        length = self.int16()
        try:
            return self.take(length).decode()
        except UnicodeDecodeError as error:
            raise RecordDecodeError(f"string is not UTF-8: {error}") from None

    def array_length(self) -> int:
        return max(self._length(wide=True), 0)

    def tags(self) -> dict[int, bytes]:
        """The tagged fields, by tag."""
        found: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            found[tag] = self.take(self.uvarint())
        return found

    def skip_tags(self) -> None:
        if self.flexible:
            self.tags()

    def done(self) -> None:
        if self.position != len(self.data):
            raise RecordDecodeError(f"{len(self.data) - self.position} trailing bytes")

    # Last in the class: after this the name ``bytes`` means the method, not the type.
    def bytes(self) -> bytes:
        length = self._length(wide=True)
        return b"" if length < 0 else self.take(length)
