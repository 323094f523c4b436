"""A faster encoder for kio messages, byte for byte what kio's own writer produces.

kio's writer is general and checks every value against its phantom type on the way out, which
made encoding the largest single cost of answering a Produce request. This module reads the
same schema introspection (field order, kafka types, nullability, tags and their defaults) once
per message class and builds a chain of small closures that append ``bytes`` chunks to a list:

- runs of consecutive fixed-width fields become one ``struct.pack`` call;
- ``records``/``bytes`` values are appended as they are, never copied, so a Fetch answer can go
  to the socket with ``writelines`` and the records are copied only by the kernel.

``tests/unit/protocol/test_fastwrite.py`` checks it against kio's writer on generated messages of
every response class kio has.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import MISSING, Field, fields
from functools import cache
from operator import attrgetter
from typing import Any

from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

Chunks = list[bytes]
Encoder = Callable[[Chunks, Any], None]

_UUID_ZERO = bytes(16)
_SMALL_VARINTS = [bytes([value]) for value in range(128)]
_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_NULL_MARKER = _INT8.pack(-1)
_NOT_NULL_MARKER = _INT8.pack(1)
_NO_TAGS = b"\x00"  # a tagged-field section with no field in it


def uvarint(value: int) -> bytes:
    if value < 0x80:
        return _SMALL_VARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _millis_timedelta(value: Any) -> int:
    return round(float(value.total_seconds()) * 1000)


def _millis_datetime(value: Any) -> int:
    return round(float(value.timestamp()) * 1000)


def _millis_datetime_or_null(value: Any) -> int:
    return -1 if value is None else round(value.timestamp() * 1000)


def _error_code(value: Any) -> int:
    return int(value._value_)  # ErrorCode's value, without the enum's ``value`` descriptor


# Fixed-width kafka types: struct code and the conversion kio applies before packing.
_FIXED: dict[str, tuple[str, Callable[[Any], Any] | None]] = {
    "int8": ("b", None),
    "int16": ("h", None),
    "int32": ("i", None),
    "int64": ("q", None),
    "uint8": ("B", None),
    "uint16": ("H", None),
    "uint32": ("I", None),
    "uint64": ("Q", None),
    "float64": ("d", None),
    "bool": ("?", None),
    "error_code": ("h", _error_code),
    "timedelta_i32": ("i", _millis_timedelta),
    "timedelta_i64": ("q", _millis_timedelta),
}


def _fixed(kafka_type: str, optional: bool) -> tuple[str, Callable[[Any], Any] | None] | None:
    if kafka_type == "datetime_i64":
        return ("q", _millis_datetime_or_null if optional else _millis_datetime)
    if optional:
        return None
    return _FIXED.get(kafka_type)


# --- variable-width primitives --------------------------------------------------------------


def _compact_text(out: Chunks, value: str | bytes | None) -> None:
    if value is None:
        out.append(b"\x00")
        return
    data = value.encode() if isinstance(value, str) else value
    out.append(uvarint(len(data) + 1))
    out.append(data)


def _legacy_string(out: Chunks, value: str | None) -> None:
    if value is None:
        out.append(_INT16.pack(-1))
        return
    data = value.encode()
    out.append(_INT16.pack(len(data)))
    out.append(data)


def _legacy_bytes(out: Chunks, value: bytes | None) -> None:
    if value is None:
        out.append(_INT32.pack(-1))
        return
    out.append(_INT32.pack(len(value)))
    out.append(value)


def _uuid(out: Chunks, value: Any) -> None:
    out.append(_UUID_ZERO if value is None else value.bytes)


def _primitive(kafka_type: str, flexible: bool, optional: bool) -> Encoder:
    if kafka_type in ("string", "bytes", "records"):
        if flexible:
            return _compact_text
        return _legacy_string if kafka_type == "string" else _legacy_bytes
    if kafka_type == "uuid":
        return _uuid
    fixed = _fixed(kafka_type, optional)
    if fixed is None:
        raise NotImplementedError(f"no encoder for {kafka_type} (optional={optional})")
    packer = struct.Struct(">" + fixed[0]).pack
    convert = fixed[1]
    if convert is None:
        return lambda out, value: out.append(packer(value))
    return lambda out, value: out.append(packer(convert(value)))


def _array(item: Encoder, flexible: bool, required: str | None = None) -> Encoder:
    """An array of ``item``s; ``required``: the field's name when it is not nullable (as in
    ``_required``, checked here to spare a call per array)."""
    if flexible:

        def compact_array(out: Chunks, items: Any) -> None:
            if items is None:
                if required is not None:
                    raise ValueError(f"{required} is not nullable")
                out.append(b"\x00")
                return
            out.append(uvarint(len(items) + 1))
            for value in items:
                item(out, value)

        return compact_array

    def legacy_array(out: Chunks, items: Any) -> None:
        if items is None:
            if required is not None:
                raise ValueError(f"{required} is not nullable")
            out.append(_INT32.pack(-1))
            return
        out.append(_INT32.pack(len(items)))
        for value in items:
            item(out, value)

    return legacy_array


def _required(encode: Encoder, name: str) -> Encoder:
    """kio refuses None for a field the schema does not make nullable; so do we, rather than
    writing a null the client cannot parse."""

    def required(out: Chunks, value: Any) -> None:
        if value is None:
            raise ValueError(f"{name} is not nullable")
        encode(out, value)

    return required


def _nullable_entity(encode: Encoder) -> Encoder:
    def nullable(out: Chunks, value: Any) -> None:
        if value is None:
            out.append(_NULL_MARKER)
            return
        out.append(_NOT_NULL_MARKER)
        encode(out, value)

    return nullable


# --- fields and entities ---------------------------------------------------------------------


def _field_encoder(field: Field[Any], flexible: bool, tagged: bool, owner: str) -> Encoder:
    if owner == "RequestHeader" and field.name == "client_id":
        return _legacy_string  # Kafka keeps the legacy format here even in flexible headers
    optional = False if tagged else is_optional(field)
    shape = classify_field(field)
    match shape:
        case PrimitiveField():
            kafka_type = get_schema_field_type(field)
            encoder = _primitive(kafka_type, flexible, optional)
            if not optional and not tagged and kafka_type in ("string", "bytes", "records"):
                encoder = _required(encoder, f"{owner}.{field.name}")
        case PrimitiveTupleField():
            encoder = _primitive(get_schema_field_type(field), flexible, False)
        case EntityField(entity_type):
            encoder = entity_encoder(entity_type)
            if optional:
                encoder = _nullable_entity(encoder)
        case EntityTupleField(entity_type):
            encoder = entity_encoder(entity_type)
        case _:
            raise NotImplementedError(f"unknown field shape {shape!r}")
    if not shape.is_array:
        return encoder
    if is_optional(field) or tagged:
        return _array(encoder, flexible)
    return _array(encoder, flexible, required=f"{owner}.{field.name}")


def _fixed_run(
    names: list[str], codes: str, converts: list[Callable[[Any], Any] | None]
) -> Encoder:
    """One struct.pack for consecutive fixed-width fields."""
    packer = struct.Struct(">" + codes).pack
    getter = attrgetter(*names)
    if all(convert is None for convert in converts):
        if len(names) == 1:
            return lambda out, entity: out.append(packer(getter(entity)))
        return lambda out, entity: out.append(packer(*getter(entity)))
    if len(names) == 1:
        only = converts[0]
        assert only is not None
        return lambda out, entity: out.append(packer(only(getter(entity))))
    converted = [(index, convert) for index, convert in enumerate(converts) if convert]

    def run(out: Chunks, entity: Any) -> None:
        values = list(getter(entity))
        for index, convert in converted:
            values[index] = convert(values[index])
        out.append(packer(*values))

    return run


def _tag_default(field: Field[Any]) -> Any:
    """The value a tagged field is left out at."""
    return field.default if field.default is not MISSING else get_tagged_field_default(field)


@cache
def entity_encoder(cls: type[Any]) -> Encoder:
    """The encoder of one kio message class (a request, response, header or nested struct)."""
    flexible = bool(cls.__flexible__)
    steps: list[Encoder] = []
    run_names: list[str] = []
    run_codes = ""
    run_converts: list[Callable[[Any], Any] | None] = []
    tagged: list[tuple[int, str, Encoder, Any]] = []  # tag, name, encoder, default

    def end_run() -> None:
        nonlocal run_codes
        if run_names:
            steps.append(_fixed_run(list(run_names), run_codes, list(run_converts)))
            run_names.clear()
            run_converts.clear()
            run_codes = ""

    for field in fields(cls):
        tag = get_field_tag(field)
        if tag is not None:
            tagged.append(
                (
                    int(tag),
                    field.name,
                    _field_encoder(field, flexible, True, cls.__name__),
                    _tag_default(field),
                )
            )
            continue
        shape = classify_field(field)
        fixed = (
            _fixed(get_schema_field_type(field), is_optional(field))
            if isinstance(shape, PrimitiveField)
            else None
        )
        if fixed is not None:
            run_names.append(field.name)
            run_codes += fixed[0]
            run_converts.append(fixed[1])
            continue
        end_run()
        encode = _field_encoder(field, flexible, False, cls.__name__)
        getter = attrgetter(field.name)
        steps.append(_apply(encode, getter))
    end_run()
    tagged.sort(key=lambda entry: entry[0])

    if not flexible:

        def encode_plain(out: Chunks, entity: Any) -> None:
            for step in steps:
                step(out, entity)

        return encode_plain

    if not tagged:

        def encode_untagged(out: Chunks, entity: Any) -> None:
            for step in steps:
                step(out, entity)
            out.append(_NO_TAGS)

        return encode_untagged

    def encode_flexible(out: Chunks, entity: Any) -> None:
        for step in steps:
            step(out, entity)
        present = []
        for tag, name, encode, default in tagged:
            value = getattr(entity, name)
            if value != default:
                present.append((tag, encode, value))
        out.append(uvarint(len(present)))
        for tag, encode, value in present:
            body: Chunks = []
            encode(body, value)
            data = b"".join(body)
            out.append(uvarint(tag))
            out.append(uvarint(len(data)))
            out.append(data)

    return encode_flexible


def _apply(encode: Encoder, getter: Callable[[Any], Any]) -> Encoder:
    return lambda out, entity: encode(out, getter(entity))


def encode_chunks(entity: Any) -> Chunks:
    """The encoded message as chunks to join or hand to ``writelines``."""
    out: Chunks = []
    encoder: Encoder = entity_encoder(type(entity))  # type: ignore[arg-type]
    encoder(out, entity)
    return out


def encode(entity: Any) -> bytes:
    return b"".join(encode_chunks(entity))
