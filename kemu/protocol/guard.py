"""A bound on every compact array a request declares, checked before kio's reader runs.

kio 0.6.5's native reader sizes a compact (flexible-version) array for the element count the
bytes declare before it reads any element, and a failed allocation aborts the whole process:
a five-byte Metadata v12 body declaring four billion topics takes kemu down. Legacy (int32
counted) arrays, strings and bytes are checked against the buffer by kio itself.

``check_request`` walks a flexible request the way the reader will, building nothing, and
refuses any count whose elements, at their smallest encoding, would not fit in the bytes left,
and a null array where the schema has no nullable one (Kafka's parser refuses both; kio would
hand a handler None to iterate). ``check_legacy_nulls`` does the latter for the decoded body of
a legacy (int32-counted) request.
Fixed-size fields are fused into one step, so a Fetch partition costs two steps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)


class ImplausibleRequest(ValueError):
    """The request declares more than its bytes can hold, or ends early."""


FIXED_SIZES = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "float64": 8,
    "uuid": 16,
}
LENGTH_PREFIXED = frozenset({"string", "bytes", "records"})

Step = Callable[[bytes, int, int], int]  # (frame, position, end) -> next position
HEADER_PREFIX = 8  # api key, api version, correlation id


def check_request(body_schema: type[Any], frame: bytes, header_has_tags: bool) -> None:
    """Raise ImplausibleRequest unless every compact array count in ``frame`` is plausible."""
    end = len(frame)
    try:
        position = _skip_legacy_length(frame, HEADER_PREFIX, end, 2)  # client id
        if header_has_tags:
            position = _skip_tags(frame, position, end, {})
        _entity_walker(body_schema)(frame, position, end)
    except IndexError:
        raise ImplausibleRequest("request ends inside a field") from None


def _read_uvarint(frame: bytes, position: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        byte = frame[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
        if shift > 28:
            raise ImplausibleRequest("varint longer than five bytes")


def _skip_legacy_length(frame: bytes, position: int, end: int, width: int) -> int:
    length = int.from_bytes(frame[position : position + width], "big", signed=True)
    position += width
    if length > 0:
        position += length
    if position > end:
        raise ImplausibleRequest("length runs past the end of the request")
    return position


def _skip_compact_length(frame: bytes, position: int, end: int) -> int:
    length, position = _read_uvarint(frame, position)
    if length > 1:
        position += length - 1
    if position > end:
        raise ImplausibleRequest("length runs past the end of the request")
    return position


def _skip_tags(frame: bytes, position: int, end: int, tagged: dict[int, Step]) -> int:
    if frame[position] == 0:  # the usual case: no tagged fields
        return position + 1
    count, position = _read_uvarint(frame, position)
    for _ in range(count):
        tag, position = _read_uvarint(frame, position)
        size, position = _read_uvarint(frame, position)
        stop = position + size
        if stop > end:
            raise ImplausibleRequest("tagged field runs past the end of the request")
        walker = tagged.get(tag)
        if walker is not None:  # a struct the reader will parse: its arrays need bounds too
            walker(frame, position, stop)
        position = stop
    return position


def _array_step(element: Step | int, minimum: int, nullable: bool = True) -> Step:
    def step(frame: bytes, position: int, end: int) -> int:
        count, position = _read_uvarint(frame, position)
        count -= 1  # 0 is a null array
        if count <= 0:
            if count < 0 and not nullable:
                raise ImplausibleRequest("null array where the schema allows none")
            return position
        if count * minimum > end - position:
            raise ImplausibleRequest(
                f"array of {count} elements cannot fit in {end - position} bytes"
            )
        if isinstance(element, int):
            return position + count * element
        for _ in range(count):
            position = element(frame, position, end)
        return position

    return step


def _fixed_entity_array_step(size: int, minimum: int, nullable: bool = True) -> Step:
    """An array of structs made of fixed-size fields only (a Fetch partition): no calls."""

    def step(frame: bytes, position: int, end: int) -> int:
        count, position = _read_uvarint(frame, position)
        count -= 1
        if count <= 0:
            if count < 0 and not nullable:
                raise ImplausibleRequest("null array where the schema allows none")
            return position
        if count * minimum > end - position:
            raise ImplausibleRequest(
                f"array of {count} elements cannot fit in {end - position} bytes"
            )
        for _ in range(count):
            position += size
            if frame[position] == 0:
                position += 1
            else:
                position = _skip_tags(frame, position, end, {})
        if position > end:
            raise ImplausibleRequest("request ends inside a field")
        return position

    return step


def _nullable_entity_step(walker: Step) -> Step:
    def step(frame: bytes, position: int, end: int) -> int:
        marker = frame[position]
        if marker == 0xFF:  # int8 -1: null
            return position + 1
        return walker(frame, position + 1, end)

    return step


_MINIMUM_SIZES: dict[type[Any], int] = {}
_WALKERS: dict[type[Any], Step] = {}
_FIXED_BODIES: dict[type[Any], int] = {}  # structs of fixed-size fields: their size


def _minimum_size(cls: type[Any]) -> int:
    found = _MINIMUM_SIZES.get(cls)
    if found is None:
        found = _MINIMUM_SIZES[cls] = _compute_minimum_size(cls)
    return found


def _compute_minimum_size(cls: type[Any]) -> int:
    total = 1  # the tag buffer
    for field in dataclasses.fields(cls):
        if get_field_tag(field) is not None:
            continue
        kind = classify_field(field)
        kafka_type = field.metadata.get("kafka_type", "")
        if isinstance(kind, PrimitiveField) and kafka_type in FIXED_SIZES:
            total += FIXED_SIZES[kafka_type]
        elif isinstance(kind, EntityField) and not is_optional(field):
            total += _minimum_size(kind.type_)
        else:
            total += 1  # a compact length, a null marker
    return total


def _element(
    field: dataclasses.Field[Any], kind: PrimitiveTupleField | EntityTupleField
) -> tuple[Step | int, int]:
    """How to skip one element of an array field, and its smallest encoding."""
    if isinstance(kind, EntityTupleField):
        return _entity_walker(kind.type_), _minimum_size(kind.type_)
    kafka_type = field.metadata.get("kafka_type", "")
    if kafka_type in FIXED_SIZES:
        return FIXED_SIZES[kafka_type], FIXED_SIZES[kafka_type]
    if kafka_type in LENGTH_PREFIXED:
        return _skip_compact_length, 1
    raise TypeError(f"no rule for arrays of {kafka_type}")


def _field_step(field: dataclasses.Field[Any]) -> Step | int:
    kind = classify_field(field)
    kafka_type = field.metadata.get("kafka_type", "")
    if isinstance(kind, PrimitiveField):
        if kafka_type in FIXED_SIZES:
            return FIXED_SIZES[kafka_type]
        if kafka_type in LENGTH_PREFIXED:
            return _skip_compact_length
        raise TypeError(f"no rule for {kafka_type} field {field.name}")
    if isinstance(kind, EntityField):
        walker = _entity_walker(kind.type_)
        return _nullable_entity_step(walker) if is_optional(field) else walker
    nullable = is_optional(field)
    if isinstance(kind, EntityTupleField):
        _entity_walker(kind.type_)
        fixed = _FIXED_BODIES.get(kind.type_)
        if fixed is not None:
            return _fixed_entity_array_step(fixed, _minimum_size(kind.type_), nullable)
    element, minimum = _element(field, kind)
    return _array_step(element, minimum, nullable)


def _entity_walker(cls: type[Any]) -> Step:
    found = _WALKERS.get(cls)
    if found is None:
        found = _WALKERS[cls] = _compile_walker(cls)
    return found


def _compile_walker(cls: type[Any]) -> Step:
    steps: list[Step | int] = []
    tagged: dict[int, Step] = {}
    for field in dataclasses.fields(cls):
        tag = get_field_tag(field)
        if tag is not None:
            kind = classify_field(field)
            if not isinstance(kind, PrimitiveField):
                step = _field_step(field)
                if not isinstance(step, int):
                    tagged[int(tag)] = step
            continue
        step = _field_step(field)
        if isinstance(step, int) and steps and isinstance(steps[-1], int):
            steps[-1] += step  # fuse runs of fixed-size fields
        else:
            steps.append(step)
    plan = tuple(steps)
    if not tagged and all(isinstance(step, int) for step in plan):
        _FIXED_BODIES[cls] = sum(step for step in plan if isinstance(step, int))

    def walk(frame: bytes, position: int, end: int) -> int:
        for step in plan:
            position = position + step if isinstance(step, int) else step(frame, position, end)
        if position > end:
            raise ImplausibleRequest("request ends inside a field")
        return _skip_tags(frame, position, end, tagged)

    return walk


# --- legacy (non-flexible) requests: null arrays where the schema allows none ------------------

Check = Callable[[Any], None]
_NULL_CHECKS: dict[type[Any], Check] = {}


def check_legacy_nulls(body: Any) -> None:
    """Raise ImplausibleRequest if a decoded legacy request holds a null array (int32 count -1)
    where its schema has no nullable array: kio's legacy reader yields None there, and Kafka's
    parser refuses the request."""
    _null_check(type(body))(body)


def _null_check(cls: type[Any]) -> Check:
    found = _NULL_CHECKS.get(cls)
    if found is None:
        found = _NULL_CHECKS[cls] = _compile_null_check(cls)
    return found


def _compile_null_check(cls: type[Any]) -> Check:
    # arrays: (name, whether null is allowed, the check of each element if it is an entity);
    # the elements of a nullable array are checked too when it is not null (ElectLeaders v1:
    # TopicPartitions is nullable, the Partitions of each entry are not)
    arrays: list[tuple[str, bool, Check | None]] = []
    entities: list[tuple[str, Check]] = []
    for field in dataclasses.fields(cls):
        kind = classify_field(field)
        if isinstance(kind, EntityTupleField):
            arrays.append((field.name, is_optional(field), _null_check(kind.type_)))
        elif isinstance(kind, PrimitiveTupleField):
            if not is_optional(field):
                arrays.append((field.name, False, None))
        elif isinstance(kind, EntityField):
            entities.append((field.name, _null_check(kind.type_)))

    def check(value: Any) -> None:
        for name, nullable, element in arrays:
            items = getattr(value, name)
            if items is None:
                if nullable:
                    continue
                raise ImplausibleRequest(f"null array {cls.__name__}.{name}")
            if element is not None:
                for item in items:
                    element(item)
        for name, nested in entities:
            item = getattr(value, name)
            if item is not None:
                nested(item)

    return check
