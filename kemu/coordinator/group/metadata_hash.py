"""The metadata hash of KIP-1101: what a KIP-848, share or streams group stores in its metadata
record (``MetadataHash``) instead of the subscribed topics' metadata, and compares to notice that
they changed (a new hash: a new group epoch, so a new target assignment). Sans-IO.

As Kafka 4.4 computes it (``Utils.computeTopicHash``/``computeGroupHash``), over XXH3-64 with
seed 0 fed as hash4j's ``HashStream64`` feeds it (little-endian ints and longs; a string as its
UTF-16 code units followed by its length as an int):

* a topic: the magic byte 0, the topic id's most and least significant halves, the name, the
  partition count, then per partition its index and its replicas' racks, sorted, each as its
  length and itself;
* a group: the hashes of its subscribed topics that exist, ordered by topic name, each a long;
  0 when there is none.

XXH3-64 is written here from its specification (the short-input paths, the 129-240 byte path
and the striped long path with the default 192-byte secret), as kemu needs nothing else of it.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping, Sequence

MASK64 = (1 << 64) - 1
PRIME32_1, PRIME32_2, PRIME32_3 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D
PRIME64_1, PRIME64_2, PRIME64_3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
PRIME64_4, PRIME64_5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
PRIME_MX1, PRIME_MX2 = 0x165667919E3779F9, 0x9FB21C651E98DF25
SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
    "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364"
    "eac5ac8334d3ebc3c581a0fffa1363eb170ddd51b7f0da49d316552629d4689e"
    "2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e"
)
STRIPE_LEN, SECRET_CONSUME_RATE = 64, 8
STRIPES_PER_BLOCK = (len(SECRET) - STRIPE_LEN) // SECRET_CONSUME_RATE
BLOCK_LEN = STRIPE_LEN * STRIPES_PER_BLOCK
TOPIC_HASH_MAGIC_BYTE = 0

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_LANES = struct.Struct("<8Q")


def _r32(data: bytes, at: int) -> int:
    return int(_U32.unpack_from(data, at)[0])


def _r64(data: bytes, at: int) -> int:
    return int(_U64.unpack_from(data, at)[0])


def _fold(a: int, b: int) -> int:
    product = a * b
    return (product ^ (product >> 64)) & MASK64


def _avalanche(h: int) -> int:
    h ^= h >> 37
    h = (h * PRIME_MX1) & MASK64
    return h ^ (h >> 32)


def _xxh64_avalanche(h: int) -> int:
    h ^= h >> 33
    h = (h * PRIME64_2) & MASK64
    h ^= h >> 29
    h = (h * PRIME64_3) & MASK64
    return h ^ (h >> 32)


def _rotl(h: int, bits: int) -> int:
    return ((h << bits) | (h >> (64 - bits))) & MASK64


def _mix16(data: bytes, at: int, secret_at: int) -> int:
    return _fold(
        _r64(data, at) ^ _r64(SECRET, secret_at), _r64(data, at + 8) ^ _r64(SECRET, secret_at + 8)
    )


def xxh3_64(data: bytes) -> int:
    """XXH3-64 of ``data`` with seed 0 and the default secret, unsigned."""
    length = len(data)
    if length <= 16:
        return _short(data)
    if length <= 128:
        acc = (length * PRIME64_1) & MASK64
        pairs = [(0, 0)]
        if length > 32:
            pairs.append((16, 32))
            if length > 64:
                pairs.append((32, 64))
                if length > 96:
                    pairs.append((48, 96))
        for at, secret_at in reversed(pairs):
            acc += _mix16(data, at, secret_at) + _mix16(data, length - 16 - at, secret_at + 16)
        return _avalanche(acc & MASK64)
    if length <= 240:
        acc = (length * PRIME64_1) & MASK64
        for i in range(8):
            acc += _mix16(data, 16 * i, 16 * i)
        acc = _avalanche(acc & MASK64)
        for i in range(8, length // 16):
            acc += _mix16(data, 16 * i, 16 * (i - 8) + 3)
        acc += _mix16(data, length - 16, 136 - 17)
        return _avalanche(acc & MASK64)
    return _long(data)


def _short(data: bytes) -> int:
    length = len(data)
    if length > 8:
        low = _r64(data, 0) ^ (_r64(SECRET, 24) ^ _r64(SECRET, 32))
        high = _r64(data, length - 8) ^ (_r64(SECRET, 40) ^ _r64(SECRET, 48))
        swapped = int.from_bytes(low.to_bytes(8, "little"), "big")
        return _avalanche((length + swapped + high + _fold(low, high)) & MASK64)
    if length >= 4:
        combined = (_r32(data, length - 4) + (_r32(data, 0) << 32)) & MASK64
        h = combined ^ (_r64(SECRET, 8) ^ _r64(SECRET, 16))
        h ^= _rotl(h, 49) ^ _rotl(h, 24)
        h = (h * PRIME_MX2) & MASK64
        h ^= (h >> 35) + length
        h = (h * PRIME_MX2) & MASK64
        return h ^ (h >> 28)
    if length > 0:
        combined = (data[0] << 16) | (data[length >> 1] << 24) | data[-1] | (length << 8)
        return _xxh64_avalanche(combined ^ (_r32(SECRET, 0) ^ _r32(SECRET, 4)))
    return _xxh64_avalanche(_r64(SECRET, 56) ^ _r64(SECRET, 64))


def _long(data: bytes) -> int:
    acc = [PRIME32_3, PRIME64_1, PRIME64_2, PRIME64_3, PRIME64_4, PRIME32_2, PRIME64_5, PRIME32_1]
    length = len(data)
    blocks = (length - 1) // BLOCK_LEN
    for block in range(blocks):
        _accumulate(acc, data, block * BLOCK_LEN, STRIPES_PER_BLOCK)
        _scramble(acc)
    stripes = ((length - 1) - BLOCK_LEN * blocks) // STRIPE_LEN
    _accumulate(acc, data, blocks * BLOCK_LEN, stripes)
    _stripe(acc, data, length - STRIPE_LEN, len(SECRET) - STRIPE_LEN - 7)
    result = (length * PRIME64_1) & MASK64
    for i in range(4):
        result += _fold(
            acc[2 * i] ^ _r64(SECRET, 11 + 16 * i), acc[2 * i + 1] ^ _r64(SECRET, 19 + 16 * i)
        )
    return _avalanche(result & MASK64)


def _accumulate(acc: list[int], data: bytes, at: int, stripes: int) -> None:
    for n in range(stripes):
        _stripe(acc, data, at + n * STRIPE_LEN, n * SECRET_CONSUME_RATE)


def _stripe(acc: list[int], data: bytes, at: int, secret_at: int) -> None:
    values = _LANES.unpack_from(data, at)
    keys = _LANES.unpack_from(SECRET, secret_at)
    for i in range(8):
        keyed = values[i] ^ keys[i]
        acc[i ^ 1] = (acc[i ^ 1] + values[i]) & MASK64
        acc[i] = (acc[i] + (keyed & 0xFFFFFFFF) * (keyed >> 32)) & MASK64


def _scramble(acc: list[int]) -> None:
    keys = _LANES.unpack_from(SECRET, len(SECRET) - STRIPE_LEN)
    for i in range(8):
        lane = acc[i] ^ (acc[i] >> 47) ^ keys[i]
        acc[i] = (lane * PRIME32_1) & MASK64


# --- Kafka's topic and group hashes --------------------------------------------------------------


class _Stream:
    """hash4j's ``HashStream64`` input: what is put, as the bytes it hashes."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def byte(self, value: int) -> _Stream:
        self.parts.append(struct.pack("<b", value))
        return self

    def int32(self, value: int) -> _Stream:
        self.parts.append(struct.pack("<i", value))
        return self

    def int64(self, value: int) -> _Stream:
        self.parts.append(struct.pack("<q", value))
        return self

    def string(self, text: str) -> _Stream:
        units = text.encode("utf-16-le", "surrogatepass")
        self.parts.append(units)
        return self.int32(len(units) // 2)

    def signed_hash(self) -> int:
        value = xxh3_64(b"".join(self.parts))
        return value - (1 << 64) if value >= 1 << 63 else value


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def topic_hash(topic_id: uuid.UUID, name: str, partition_racks: Sequence[Iterable[str]]) -> int:
    """Kafka's ``computeTopicHash`` of an existing topic: ``partition_racks[i]`` are the racks
    of partition i's replicas (those that have one). A signed 64-bit value, as Kafka's long."""
    stream = (
        _Stream()
        .byte(TOPIC_HASH_MAGIC_BYTE)
        .int64(_signed(topic_id.int >> 64))
        .int64(_signed(topic_id.int & MASK64))
        .string(name)
        .int32(len(partition_racks))
    )
    for index, racks in enumerate(partition_racks):
        stream.int32(index)
        for rack in sorted(racks):
            stream.int32(len(rack.encode("utf-16-le", "surrogatepass")) // 2).string(rack)
    return stream.signed_hash()


def group_hash(topic_hashes: Mapping[str, int]) -> int:
    """Kafka's ``computeGroupHash``: the topic hashes in topic-name order (0: no topic)."""
    if not topic_hashes:
        return 0
    stream = _Stream()
    for name in sorted(topic_hashes):
        stream.int64(topic_hashes[name])
    return stream.signed_hash()
