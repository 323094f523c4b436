"""The wire: size framing, request headers, schema lookup and response encoding.

Everything kemu knows about Kafka's message layouts comes from kio (generated from Kafka's own
JSON definitions). This module and its siblings in ``kemu.protocol`` are the only places that
import kio, so a codec swap stays local.

Frame layout: ``int32 size`` then ``size`` bytes. A request starts with its header, whose version
depends on the API and its version (v1 for non-flexible versions, v2 for flexible ones); a
response starts with its header (v0, or v1 for flexible versions, except ApiVersions which is
always v0 so that a client can read it before it knows the broker's versions).
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import struct
import sys
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer

from kemu.protocol import fastwrite
from kemu.protocol.errors import ErrorCode
from kemu.protocol.guard import check_legacy_nulls, check_request
from kemu.protocol.kip1289 import NAMES as KEMU_NAMES
from kemu.protocol.unset_timestamps import readable

# kemu's own schemas: KIP-1289's messages, and versions kio does not have yet (Kafka 4.4's
# ApiVersions v5, TxnOffsetCommit v6, DeleteGroups v3; streams v1). Each package (and the kio
# modules its classes build on, together about 0.05 s of CPU) is imported on the first lookup
# of one of its keys, not at start-up. tests/unit/protocol/test_wire.py checks that this table names
# exactly what each package's ``SCHEMAS`` defines.
KEMU_SCHEMA_PACKAGES: dict[tuple[int, int], str] = {
    (18, 5): "kemu.protocol.kafka44",
    (28, 6): "kemu.protocol.kafka44",
    (42, 3): "kemu.protocol.kafka44",
    (88, 1): "kemu.protocol.streams_v1",
    (89, 1): "kemu.protocol.streams_v1",
    (95, 0): "kemu.protocol.kip1289.schemas",
    (96, 0): "kemu.protocol.kip1289.schemas",
}
# the classes of the packages imported so far: (api key, version) -> (request, response)
KEMU_SCHEMAS: dict[tuple[int, int], tuple[type[Any], type[Any]]] = {}


def _kemu_schemas(api_key: int, api_version: int) -> tuple[type[Any], type[Any]] | None:
    package = KEMU_SCHEMA_PACKAGES.get((api_key, api_version))
    if package is None:
        return None
    found = KEMU_SCHEMAS.get((api_key, api_version))
    if found is None:
        KEMU_SCHEMAS.update(importlib.import_module(package).SCHEMAS)
        found = KEMU_SCHEMAS[(api_key, api_version)]
    return found


SIZE = struct.Struct(">i")
HEADER_PREFIX = struct.Struct(">hhi")

API_VERSIONS_KEY = 18


class MalformedFrame(Exception):
    """The bytes on a connection cannot be a Kafka request; the connection must be closed."""


class UnsupportedRequest(Exception):
    """The api key or version is not one kio (and so kemu) can decode."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"unsupported api_key={api_key} api_version={api_version}")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass(frozen=True, slots=True)
class DecodedRequest:
    header: RequestHeader
    body: Any
    schema: type[Any]


def api_name(api_key: int) -> str:
    return api_key_map.get(api_key) or KEMU_NAMES.get(api_key, f"unknown_{api_key}")


@cache  # fixed for the process, and asked before every request a client sends
def known_versions(api_key: int) -> tuple[int, int] | None:
    """The version range kio has schemas for, or None for an unknown key."""
    name = api_key_map.get(api_key)
    ours = [version for key, version in KEMU_SCHEMA_PACKAGES if key == api_key]
    if name is None:
        return (min(ours), max(ours)) if ours else None
    versions = [*schema_name_map[name].keys(), *ours]
    return min(versions), max(versions)


# kemu's own schemas (KEMU_SCHEMA_PACKAGES) are consulted before kio's.
@cache
def request_schema(api_key: int, api_version: int) -> type[Any]:
    ours = _kemu_schemas(api_key, api_version)
    return ours[0] if ours else load_request_schema(api_key, api_version)


@cache
def response_schema(api_key: int, api_version: int) -> type[Any]:
    ours = _kemu_schemas(api_key, api_version)
    return ours[1] if ours else load_response_schema(api_key, api_version)


def request_module(api_key: int, api_version: int) -> ModuleType:
    """The module holding the request class and its nested classes for one version."""
    return sys.modules[request_schema(api_key, api_version).__module__]


@cache
def response_module(api_key: int, api_version: int) -> ModuleType:
    """The module holding the response class and its nested classes for one version."""
    return sys.modules[response_schema(api_key, api_version).__module__]


@cache
def response_class(api_key: int, api_version: int, class_name: str) -> type[Any]:
    """A nested class of one version's response (``PartitionData`` of Fetch v17, ...)."""
    found: type[Any] = getattr(response_module(api_key, api_version), class_name)
    return found


@cache
def response_has_class(api_key: int, api_version: int, class_name: str) -> bool:
    """Whether one version's response has a nested class of that name (Fetch v12+: leaders)."""
    return hasattr(response_module(api_key, api_version), class_name)


_READERS: dict[type[Any], Callable[[bytes, int], tuple[Any, int]]] = {}
_WRITERS: dict[type[Any], Callable[[io.BytesIO, Any], None]] = {}


def _reader(cls: type[Any]) -> Callable[[bytes, int], tuple[Any, int]]:
    found = _READERS.get(cls)
    if found is None:
        found = _READERS[cls] = entity_reader(readable(cls))  # -1 timestamps read as None
    return found


def _writer(cls: type[Any]) -> Callable[[io.BytesIO, Any], None]:
    found = _WRITERS.get(cls)
    if found is None:
        found = _WRITERS[cls] = entity_writer(cls)
    return found


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """api_key, api_version, correlation_id from the fixed start of a request frame."""
    if len(frame) < HEADER_PREFIX.size:
        raise MalformedFrame(f"request of {len(frame)} bytes is shorter than a header")
    key, version, correlation_id = HEADER_PREFIX.unpack_from(frame, 0)
    return int(key), int(version), int(correlation_id)


def decode_request(frame: bytes, api_key: int | None = None) -> DecodedRequest:
    """Decode one request frame (without its size prefix).

    ``api_key`` decodes the frame as that API whatever key it carries (a KIP-1289 API a broker
    serves at a configured key); the decoded header then names that API. Raises
    UnsupportedRequest for a key/version kio has no schema for, and MalformedFrame when the
    bytes do not decode. Bytes after the body are ignored, as Kafka's parser does: librdkafka
    2.16 sends three of them after an all-topics Metadata v13 request.
    """
    wire_key, api_version, correlation_id = peek_header(frame)
    if api_key is None:
        api_key = wire_key
    try:
        schema = request_schema(api_key, api_version)
    except Exception:
        raise UnsupportedRequest(api_key, api_version, correlation_id) from None
    try:
        if schema.__flexible__:
            check_request(schema, frame, header_has_tags=True)
        header, used = _reader(schema.__header_schema__)(frame, 0)
        body, _ = _reader(schema)(frame, used)
        if not schema.__flexible__:
            check_legacy_nulls(body)
    except Exception as exc:
        raise MalformedFrame(f"undecodable {api_name(api_key)} v{api_version}: {exc}") from exc
    return DecodedRequest(
        RequestHeader(api_key, api_version, correlation_id, header.client_id), body, schema
    )


def encode_body(body: Any) -> bytes:
    buffer = io.BytesIO()
    _writer(type(body))(buffer, body)
    return buffer.getvalue()


def encode_message(header: Any, body: Any) -> bytes:
    """A request's (or response's) header and body, encoded by ``fastwrite``: kio's bytes,
    several times faster than kio's own writer (``tests/unit/protocol/test_fastwrite.py``)."""
    return b"".join(fastwrite.encode_chunks(header) + fastwrite.encode_chunks(body))


def reencodes_identically(frame: bytes, schema: type[Any]) -> bool:
    """Whether ``frame`` (a request or a response, without its size prefix) decodes as
    ``schema``'s header and body and encodes back to the same bytes: nothing left over, no
    field kio reads differently from how it writes it. Raises when the frame does not decode."""
    header, used = _reader(schema.__header_schema__)(frame, 0)
    body, _ = _reader(schema)(frame, used)
    return encode_body(header) + encode_body(body) == frame


def _response_header_bytes(api_key: int, api_version: int, correlation_id: int) -> bytes:
    flexible = response_schema(api_key, api_version).__flexible__
    if flexible and api_key != API_VERSIONS_KEY:
        return struct.pack(">iB", correlation_id, 0)  # header v1: id + empty tagged fields
    return struct.pack(">i", correlation_id)


def encode_response_frame(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    """Size-prefixed response frame: header then body.

    Encoded by ``fastwrite`` (kio's bytes, several times faster); the chunks are joined once, so
    a Fetch answer's records are copied once on their way out.
    """
    chunks = fastwrite.encode_chunks(body)
    header = _response_header_bytes(api_key, api_version, correlation_id)
    size = len(header) + sum(map(len, chunks))
    return b"".join([SIZE.pack(size), header, *chunks])


def encode_raw_response_frame(correlation_id: int, body_bytes: bytes) -> bytes:
    """A frame whose body was encoded elsewhere, with a v0 response header."""
    payload = struct.pack(">i", correlation_id) + body_bytes
    return SIZE.pack(len(payload)) + payload


def encode_request_frame(body: Any, correlation_id: int, client_id: str | None = "kemu") -> bytes:
    """Size-prefixed request frame (used by kemu's own client and tests)."""
    schema = type(body)
    header_cls = schema.__header_schema__
    fields = {f.name for f in dataclasses.fields(header_cls)}
    values: dict[str, Any] = {
        "request_api_key": schema.__api_key__,
        "request_api_version": schema.__version__,
        "correlation_id": correlation_id,
    }
    if "client_id" in fields:
        values["client_id"] = client_id
    payload = encode_body(header_cls(**values)) + encode_body(body)
    return SIZE.pack(len(payload)) + payload


def decode_response(api_key: int, api_version: int, payload: bytes) -> tuple[int, Any]:
    """Decode a response frame (without size prefix): correlation id and body."""
    schema = response_schema(api_key, api_version)
    header, used = _reader(schema.__header_schema__)(payload, 0)
    body, _ = _reader(schema)(payload, used)
    return int(header.correlation_id), body


# --- building version-agnostic messages -------------------------------------------------------


_FIELD_INFO: dict[type[Any], tuple[frozenset[str], dict[str, dataclasses.Field[Any]]]] = {}


def _field_info(cls: type[Any]) -> tuple[frozenset[str], dict[str, dataclasses.Field[Any]]]:
    found = _FIELD_INFO.get(cls)
    if found is None:
        fields = {f.name: f for f in dataclasses.fields(cls)}
        found = _FIELD_INFO[cls] = (frozenset(fields), fields)
    return found


def build(cls: type[Any], **values: Any) -> Any:
    """Construct a kio message of any version from the union of fields across versions.

    Handlers describe a response once; fields this version lacks are dropped, fields the caller
    did not give get a neutral default (0, empty, None, -1 for leader fields). This is what lets
    one handler serve Produce v3 and v13 alike.
    """
    plan = _BUILD_PLANS.get(cls)
    if plan is None:
        plan = _BUILD_PLANS[cls] = _build_plan(cls)
    names, neutrals = plan
    if not names.issuperset(values):  # fields this version lacks: dropped, if known somewhere
        _check_known_somewhere(cls, values.keys() - names)
        values = {name: value for name, value in values.items() if name in names}
    # the given values over the neutral ones (one merge in C: this runs for every message)
    return cls(**(neutrals | values))


class UnknownField(TypeError):
    """A message was built with a field name that no version of its class has: a misspelling,
    which ``build`` would otherwise drop without a word."""


def _check_known_somewhere(cls: type[Any], dropped: set[str]) -> None:
    unknown = _versions_seen(cls).unknown(dropped)
    if unknown:
        raise UnknownField(
            f"{cls.__module__}.{cls.__qualname__} has no field {', '.join(sorted(unknown))} "
            "in any version"
        )


@dataclass
class _VersionsSeen:
    """The field names of ``cls`` (same class name, same API) in the versions looked at so far,
    and the versions left. A version's modules are imported only when a name is still missing,
    oldest and newest first (fields are added, or removed in a newer version): importing every
    version's request and response modules at once took a quarter of a second for Fetch, which
    the first request of each kind waited for."""

    cls: type[Any]
    names: set[str]
    left: list[int]

    def unknown(self, dropped: set[str]) -> set[str]:
        missing = dropped - self.names
        while missing and self.left:
            self.names |= _names_in_version(self.cls, self.left.pop(0))
            missing -= self.names
        return missing


_VERSIONS_SEEN: dict[type[Any], _VersionsSeen] = {}


def _versions_seen(cls: type[Any]) -> _VersionsSeen:
    found = _VERSIONS_SEEN.get(cls)
    if found is None:
        api_key = getattr(cls, "__api_key__", None)
        versions = known_versions(api_key) if isinstance(api_key, int) else None
        left: list[int] = []
        if versions is not None:
            low, high = versions
            left = [low, *([high] if high != low else []), *range(high - 1, low, -1)]
        found = _VERSIONS_SEEN[cls] = _VersionsSeen(cls, set(_field_info(cls)[0]), left)
    return found


def _names_in_version(cls: type[Any], version: int) -> set[str]:
    """The field names of the classes named as ``cls`` in one version of its API, either side
    (its own side first)."""
    api_key = cls.__api_key__
    names: set[str] = set()
    for module_of in (request_module, response_module):
        try:
            module = module_of(api_key, version)
        except (KeyError, ValueError, ImportError, LookupError):
            continue
        same = getattr(module, cls.__name__, None)
        if isinstance(same, type) and dataclasses.is_dataclass(same):
            names.update(_field_info(same)[0])
    return names


# Per class: its field names, and the neutral value of each field without a default. Neutral
# values are immutable (numbers, strings, tuples, frozen kio messages), so one serves every call.
_BUILD_PLANS: dict[type[Any], tuple[frozenset[str], dict[str, Any]]] = {}


def _build_plan(cls: type[Any]) -> tuple[frozenset[str], dict[str, Any]]:
    names, fields = _field_info(cls)
    neutrals = {
        name: neutral_value(field)
        for name, field in fields.items()
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
    }
    return names, neutrals


def neutral_value(field: dataclasses.Field[Any]) -> Any:
    field_type = field.type
    if typing.get_origin(field_type) is tuple:
        return ()
    optional = type(None) in typing.get_args(field_type)
    if optional:
        return None
    if dataclasses.is_dataclass(field_type):
        return build(field_type)  # type: ignore[arg-type]
    kafka_type = field.metadata.get("kafka_type", "")
    return _NEUTRAL_BY_KAFKA_TYPE.get(kafka_type, 0)


def error_response(request: DecodedRequest, error: ErrorCode, message: str | None = None) -> Any:
    """A response for ``request`` carrying ``error`` wherever the response has an error field.

    Used when a handler cannot run at all (unexpected exception, unknown topic on a single
    resource API): top-level ``error_code``/``error_message`` are set and every array is empty.
    """
    cls = response_schema(request.header.api_key, request.header.api_version)
    names, _ = _field_info(cls)
    values: dict[str, Any] = {}
    if "error_code" in names:
        values["error_code"] = error
    if "error_message" in names:
        values["error_message"] = message
    return build(cls, **values)


def _neutral_table() -> dict[str, Any]:
    import datetime
    import uuid

    return {
        "error_code": ErrorCode.none,
        "timedelta_i32": datetime.timedelta(0),
        "timedelta_i64": datetime.timedelta(0),
        "string": "",
        "bytes": b"",
        "records": b"",
        "uuid": uuid.UUID(int=0),
        "bool": False,
        "float64": 0.0,
    }


_NEUTRAL_BY_KAFKA_TYPE = _neutral_table()
