"""The error answer to any request, as Kafka's ``AbstractRequest.getErrorResponse`` builds it.

``error_response_for(request, code)`` mirrors the request into its response: every topic,
partition, group, transactional id or resource the request names gets an entry carrying the error
code, and the top-level ``error_code`` (where the response has one) carries it too. Fields that
identify an entry (topic name or id, partition index, group id, ...) are copied from the request,
everything else is neutral (offsets -1). The control plane's fault rules answer with it.

It works from the kio classes alone: a response array is matched to the request array of the same
name, or to a known alias (Produce's ``topic_data`` answers as ``responses``); a request list of
plain names or indexes (DescribeGroups' ``groups``, OffsetFetch's ``partition_indexes``) becomes
one entity per item.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
from typing import Any

from kemu.protocol.errors import ErrorCode
from kemu.protocol.wire import DecodedRequest, _field_info, build, response_schema

_EPOCH = datetime.datetime.fromtimestamp(0, datetime.UTC)

# response array -> request arrays it answers (first present wins)
_ARRAY_ALIASES: dict[str, tuple[str, ...]] = {
    "responses": ("topic_data", "topics", "resources"),
    "partition_responses": ("partition_data", "partitions"),
    "partitions": ("partitions", "partition_indexes", "partition_data", "partition_index"),
    "topics": ("topics", "topic_data"),
    "results": ("resources", "topics", "group_ids", "groups", "transactional_ids"),
    "groups": ("groups", "group_ids"),
    "transaction_states": ("transactional_ids",),
    "transactions": ("transactions",),
    "results_by_transaction": ("transactions",),
    "results_by_topic_v4_and_above": ("topics",),
    "results_by_topic_v3_and_below": ("v3_and_below_topics",),
    "results_by_partition": ("partitions",),
    "topic_results": ("topics",),
    "coordinators": ("coordinator_keys",),  # FindCoordinator v4+: one per key, as Kafka
}

# response scalar -> request scalars it copies
_SCALAR_ALIASES: dict[str, tuple[str, ...]] = {
    "partition_index": ("partition_index", "partition", "index"),
    "index": ("index", "partition_index", "partition"),
    "partition": ("partition", "partition_index", "index"),
    "name": ("name", "topic", "topic_name"),
    "topic": ("topic", "name", "topic_name"),
    "topic_name": ("topic_name", "topic", "name"),
}

# a plain string item becomes an entity with the first of these fields it has
_STRING_KEYS = ("group_id", "transactional_id", "name", "topic", "resource_name", "key")
_INT_KEYS = ("partition_index", "index", "partition")
_MINUS_ONE = frozenset(
    {
        "base_offset",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "offset",
        "committed_offset",
        "leader_id",
        "leader_epoch",
        "committed_leader_epoch",
        "end_offset",
        "log_append_time_ms",
        "timestamp",
        "producer_id",
        "producer_epoch",
        "start_offset",
        "preferred_read_replica",
        "low_watermark",
        "generation_id",
    }
)


def error_response_for(
    request: DecodedRequest, error: ErrorCode, message: str | None = None
) -> Any:
    cls = response_schema(request.header.api_key, request.header.api_version)
    return _mirror(cls, request.body, error, message, top=True)


def _entity_type(field: dataclasses.Field[Any]) -> type[Any] | None:
    """The element class of an array-of-entities field, else None."""
    if typing.get_origin(field.type) is not tuple:
        return None
    args = typing.get_args(field.type)
    if args and dataclasses.is_dataclass(args[0]):
        return args[0]  # type: ignore[return-value]
    return None


def _source_items(source: Any, name: str) -> tuple[Any, ...]:
    if source is None:
        return ()
    for candidate in _ARRAY_ALIASES.get(name, (name,)):
        value = getattr(source, candidate, None)
        if isinstance(value, tuple):
            return value
        if isinstance(value, int) and not isinstance(value, bool) and candidate == name:
            return (value,)
    value = getattr(source, name, None)
    return value if isinstance(value, tuple) else ()


def _mirror(
    cls: type[Any], source: Any, error: ErrorCode, message: str | None, *, top: bool = False
) -> Any:
    _, fields = _field_info(cls)
    values: dict[str, Any] = {}
    for name, field in fields.items():
        if name == "error_code" or name.endswith("_error_code"):
            values[name] = error
            continue
        if name == "error_message":
            values[name] = message
            continue
        entity = _entity_type(field)
        if entity is not None:
            values[name] = tuple(
                _mirror(entity, _as_entity_source(item), error, message)
                for item in _source_items(source, name)
            )
            continue
        if field.metadata.get("kafka_type") == "datetime_i64":
            values[name] = _EPOCH
            continue
        if top:
            continue  # top-level scalars (throttle time, session id, ...) stay neutral
        copied = _copy_scalar(source, name)
        if copied is not None:
            values[name] = copied
        elif name in _MINUS_ONE and _is_int(field):
            values[name] = -1
    return build(cls, **values)


class _Scalar:
    """A plain request item (a group id, a partition index) seen as an entity."""

    def __init__(self, value: Any) -> None:
        keys = _STRING_KEYS if isinstance(value, str) else _INT_KEYS
        for key in keys:
            setattr(self, key, value)


def _as_entity_source(item: Any) -> Any:
    if isinstance(item, str | int) and not isinstance(item, bool):
        return _Scalar(item)
    return item


def _copy_scalar(source: Any, name: str) -> Any:
    if source is None:
        return None
    for candidate in _SCALAR_ALIASES.get(name, (name,)):
        value = getattr(source, candidate, None)
        if value is None or isinstance(value, tuple) or dataclasses.is_dataclass(value):
            continue
        return value
    return None


def _is_int(field: dataclasses.Field[Any]) -> bool:
    return field.metadata.get("kafka_type", "") in {"int8", "int16", "int32", "int64"}
