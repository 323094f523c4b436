"""Decoding the timestamps Kafka sends as -1 for "none".

Kafka's JSON schemas give some int64 timestamps no nullability although -1 means none (the
TransactionStartTimeMs of DescribeTransactions for a transaction that is not open: Java's
``TransactionDescription.transactionStartTimeMs()`` is then empty). kio reads a non-nullable
timestamp as a datetime and refuses a negative one ("Cannot parse negative timestamp"). For the
reader only, such a field is read as nullable: -1 decodes as None. A schema with no such field,
directly or in an entity it holds, is read as it is (the same class), and writing is unchanged
(kemu encodes a -1 start time as the int64 -1, the bytes Kafka sends).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from kio.static.primitive import TZAware

TIMESTAMP = "datetime_i64"
_COPIED = ("__type__", "__version__", "__flexible__", "__api_key__", "__header_schema__")
_READABLE: dict[type[Any], type[Any]] = {}


def readable(cls: type[Any]) -> type[Any]:
    """``cls``, or a copy of it (and of the entities it holds) whose non-nullable timestamps
    read -1 as None."""
    found = _READABLE.get(cls)
    if found is None:
        found = _READABLE[cls] = _readable(cls)
    return found


def _readable(cls: type[Any]) -> type[Any]:
    hints = typing.get_type_hints(cls)
    changed = False
    fields: list[tuple[str, Any, Any]] = []
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        read_as = _read_as(hint, field)
        changed = changed or read_as is not hint
        fields.append((field.name, read_as, _copy_of(field)))
    if not changed:
        return cls
    namespace = {name: getattr(cls, name) for name in _COPIED if hasattr(cls, name)}
    copied: type[Any] = dataclasses.make_dataclass(
        cls.__name__, fields, namespace=namespace, frozen=True, slots=True, kw_only=True
    )
    copied.__module__ = cls.__module__
    copied.__qualname__ = cls.__qualname__
    return copied


def _read_as(hint: Any, field: dataclasses.Field[Any]) -> Any:
    if field.metadata.get("kafka_type") == TIMESTAMP and hint is TZAware:
        return TZAware | None
    if typing.get_origin(hint) is tuple:
        [item, *_] = typing.get_args(hint)
        if dataclasses.is_dataclass(item) and isinstance(item, type):
            entity = readable(item)
            return hint if entity is item else tuple[entity, ...]  # type: ignore[valid-type]
        return hint
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return readable(hint)
    optional = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    if typing.get_origin(hint) in (typing.Union, type(TZAware | None)) and len(optional) == 1:
        [inner] = optional
        if dataclasses.is_dataclass(inner) and isinstance(inner, type):
            entity = readable(inner)
            return hint if entity is inner else entity | None
    return hint


def _copy_of(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return dataclasses.field(metadata=field.metadata, default=field.default)
    if field.default_factory is not dataclasses.MISSING:
        return dataclasses.field(metadata=field.metadata, default_factory=field.default_factory)
    return dataclasses.field(metadata=field.metadata)
