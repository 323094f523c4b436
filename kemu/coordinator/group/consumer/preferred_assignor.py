"""The server assignor a KIP-848 consumer group prefers, picked as Kafka 4.4.0's ConsumerGroup
picks it.

Kafka counts the members' ServerAssignor names (the group's ``serverAssignors``, a member that
never named one not counted); the preferred assignor is the most used name, or the default
(``uniform``, the first of ``group.consumer.assignors``) when no member names one. Among names
used as often, the first that the map holding the counts iterates wins (``Stream.max`` keeps the
first of equals), and two maps of different orders are read:

* ``preferred``: the counts as the group's records left them (a ``TimelineHashMap``, whose slots
  go by a Fibonacci hash of ``String.hashCode``: ``uniform`` before ``range``). It is what
  ConsumerGroupDescribe answers as AssignorName.
* ``preferred_with``: Kafka's ``computePreferredServerAssignor`` during a heartbeat, a
  ``java.util.HashMap`` copy of those counts with the heartbeating member's name before the
  heartbeat taken off and its name after it added. ``HashMap.compute`` puts a new key at the
  head of its bucket, and ``uniform`` and ``range`` share a bucket in the small tables such a
  copy has: a name added back after its count went to 0 comes first.

A heartbeat after which the two differ bumps the group epoch (``hasPreferredServerAssignorChanged``,
whether or not the member's own name changed), and the target assignment it computes uses
``preferred_with``. So with as many ``uniform`` as ``range`` members, each heartbeat of a range
member whose name nobody else uses bumps the epoch, as on Kafka 4.4.0.

Both orders are reproduced for any names; the timeline's within a slot holding several (never
``uniform`` and ``range``, at any table size) takes the members' order as the order the names
were added.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kemu.coordinator.group.consumer.assignor import UNIFORM

DEFAULT_ASSIGNOR = UNIFORM  # Kafka's default group.consumer.assignors: uniform, range
_LOAD_FACTOR = 0.75
_FIBONACCI = -7046029254386353131  # BaseHashTable.findSlot's multiplier (a signed long)
_INT, _LONG = 1 << 32, 1 << 64


def preferred(assignors: Iterable[str | None]) -> str:
    """The group's preferred assignor, its members naming ``assignors`` (None: no name)."""
    return _most_used(_timeline_counts(assignors)) or DEFAULT_ASSIGNOR


def preferred_with(assignors: Iterable[str | None], before: str | None, after: str | None) -> str:
    """The preferred assignor of a heartbeat whose member named ``before`` (counted among
    ``assignors``, the group's members as they were) and names ``after``."""
    counts = _JavaHashMap(_timeline_counts(assignors))
    if before is not None:
        counts.compute(before, -1)
    if after is not None:
        counts.compute(after, +1)
    return _most_used(counts.items()) or DEFAULT_ASSIGNOR


def java_string_hash(text: str) -> int:
    """``String.hashCode`` as an unsigned 32-bit value."""
    value = 0
    units = text.encode("utf-16-be")
    for index in range(0, len(units), 2):
        value = (31 * value + int.from_bytes(units[index : index + 2], "big")) % _INT
    return value


def _most_used(counts: Iterable[tuple[str, int]]) -> str | None:
    best: tuple[str, int] | None = None
    for name, count in counts:
        if best is None or count > best[1]:
            best = (name, count)
    return best[0] if best else None


def _timeline_counts(assignors: Iterable[str | None]) -> list[tuple[str, int]]:
    """The counts in the order Kafka's TimelineHashMap iterates them: by slot, the table grown
    from 2 slots as each name was added (it never shrinks back); within a slot, the name added
    last first (taken as the order ``assignors`` first name them)."""
    counts: dict[str, int] = {}
    for name in assignors:
        if name is not None:
            counts[name] = counts.get(name, 0) + 1
    slots = 2
    for size in range(len(counts)):
        if (size + 1) * _LOAD_FACTOR > slots:
            slots *= 2
    added = {name: index for index, name in enumerate(counts)}
    return sorted(
        counts.items(), key=lambda item: (_timeline_slot(item[0], slots), -added[item[0]])
    )


def _timeline_slot(name: str, slots: int) -> int:
    signed = java_string_hash(name)
    signed -= _INT if signed >= _INT // 2 else 0
    return ((signed * _FIBONACCI) % _LONG) >> (65 - slots.bit_length())


@dataclass
class _Entry:
    key: str
    value: int
    hash: int


class _JavaHashMap:
    """What of ``java.util.HashMap<String, Integer>`` (JDK 17) decides its iteration order: its
    copy constructor's table size, ``compute`` inserting at a bucket's head (after growing the
    table if it was over its threshold), and growth keeping each bucket's order."""

    def __init__(self, entries: list[tuple[str, int]]) -> None:
        self.table: list[list[_Entry]] = []
        self.threshold = 0
        self.size = 0
        if entries:
            self.threshold = _table_size_for(int(len(entries) / _LOAD_FACTOR + 1.0))
            for key, value in entries:
                self._put(key, value)

    def items(self) -> list[tuple[str, int]]:
        return [(entry.key, entry.value) for bucket in self.table for entry in bucket]

    def compute(self, key: str, delta: int) -> None:
        """``compute`` with ``Utils.incValue`` (+1) or ``decValue`` (-1, removing at 0)."""
        if self.size > self.threshold or not self.table:
            self._resize()
        hashed = _spread(key)
        bucket = self.table[hashed & (len(self.table) - 1)]
        for entry in bucket:
            if entry.key == key:
                entry.value += delta
                if entry.value <= 0:
                    bucket.remove(entry)
                    self.size -= 1
                return
        if delta > 0:
            bucket.insert(0, _Entry(key, delta, hashed))
            self.size += 1

    def _put(self, key: str, value: int) -> None:
        if not self.table:
            self._resize()
        hashed = _spread(key)
        self.table[hashed & (len(self.table) - 1)].append(_Entry(key, value, hashed))
        self.size += 1
        if self.size > self.threshold:
            self._resize()

    def _resize(self) -> None:
        old = self.table
        if old:
            capacity = len(old) * 2
            threshold = self.threshold * 2 if len(old) >= 16 else int(capacity * _LOAD_FACTOR)
        elif self.threshold > 0:
            capacity = self.threshold
            threshold = int(capacity * _LOAD_FACTOR)
        else:
            capacity, threshold = 16, 12
        self.table = [[] for _ in range(capacity)]
        self.threshold = threshold
        for bucket in old:
            for entry in bucket:
                self.table[entry.hash & (capacity - 1)].append(entry)


def _spread(key: str) -> int:
    value = java_string_hash(key)
    return value ^ (value >> 16)


def _table_size_for(wanted: int) -> int:
    size = 1
    while size < wanted:
        size *= 2
    return size
