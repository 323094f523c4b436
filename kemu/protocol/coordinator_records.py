"""Reading and writing the keys and values of coordinator records (``__consumer_offsets``,
``__transaction_state``, ``__share_group_state``).

Each coordinator module describes its own record layouts; this module holds the primitives they
share: a bounds-checked reader over one key or value (legacy or flexible encoding) and the
writers of tagged fields and compact strings. A record that does not parse raises
``RecordDecodeError``, never ``IndexError`` or a struct error, so a damaged internal topic is
reported, not crashed on.
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


def encode_compact_string(text: str | None) -> bytes:
    """A compact (flexible) nullable string: its length + 1 as a uvarint (0: null), then UTF-8."""
    if text is None:
        return uvarint(0)
    data = text.encode()
    return uvarint(len(data) + 1) + data


class RecordReader:
    """A cursor over one record key or value. ``flexible`` selects compact lengths for strings,
    bytes and arrays (flexible versions) over int16/int32 lengths (legacy versions)."""

    __slots__ = ("data", "flexible", "position")

    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = data
        self.position = 0
        self.flexible = flexible

    def take(self, size: int) -> bytes:
        position = self.position
        end = position + size
        if size < 0 or end > len(self.data):
            raise self._short(size)
        self.position = end
        return self.data[position:end]

    def _short(self, size: int) -> RecordDecodeError:
        return RecordDecodeError(
            f"need {size} bytes at position {self.position} of a {len(self.data)}-byte record"
        )

    # The readers below are on the start-up path (every coordinator record of every internal
    # topic is decoded once per start): they read in place rather than through ``take``.

    def unpack(self, layout: struct.Struct) -> tuple[int, ...]:
        position = self.position
        end = position + layout.size
        if end > len(self.data):
            raise self._short(layout.size)
        self.position = end
        values: tuple[int, ...] = layout.unpack_from(self.data, position)
        return values

    def int16(self) -> int:
        return self.unpack(_INT16)[0]

    def int32(self) -> int:
        return self.unpack(_INT32)[0]

    def int64(self) -> int:
        return self.unpack(_INT64)[0]

    def uvarint(self) -> int:
        data, position = self.data, self.position
        if position < len(data) and data[position] < 0x80:  # one byte: nearly every length
            self.position = position + 1
            return data[position]
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
