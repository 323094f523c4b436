"""``python -m kemu.protocol.codegen``: write the kio-style schema classes kemu keeps for the
message versions kio 0.6.5 lacks, from Kafka-format message JSON in the tree.

kio generates one module per message version from Kafka's
``clients/src/main/resources/common/message/*.json``; kio's reader and writer then walk the
dataclass fields (their order, ``kafka_type`` metadata, tags, and the ``__flexible__`` flag).
This generator writes the same shape for: Kafka 4.4.0's ApiVersions v5, TxnOffsetCommit v6 and
DeleteGroups v3 (``kafka44/``), StreamsGroupHeartbeat and StreamsGroupDescribe v1
(``streams_v1/``), and the KIP-1289 draft messages v0 (``kip1289/``). The JSON files sit beside
the output. ``--check`` exits non-zero when a checked-in module differs from what it would write
(``tests/unit/protocol/test_codegen.py`` runs it).

Python names follow kio: snake_case, with the names kio gave Kafka's time fields
(``ThrottleTimeMs`` is ``throttle_time``, an ``i32Timedelta``) and the one field Kafka renamed
after kio named it (``GenerationIdOrMemberEpoch`` stays ``generation_id``), so handlers read the
same attributes whichever version a request came in.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROTOCOL = Path(__file__).parent


@dataclass(frozen=True)
class Target:
    """One message version: the JSON it comes from and the module it becomes."""

    json_file: str  # relative to kemu/protocol
    version: int
    module: str  # relative to kemu/protocol


TARGETS = (
    Target("kafka44/ApiVersionsRequest.json", 5, "kafka44/api_versions_request.py"),
    Target("kafka44/ApiVersionsResponse.json", 5, "kafka44/api_versions_response.py"),
    Target("kafka44/TxnOffsetCommitRequest.json", 6, "kafka44/txn_offset_commit_request.py"),
    Target("kafka44/TxnOffsetCommitResponse.json", 6, "kafka44/txn_offset_commit_response.py"),
    Target("kafka44/DeleteGroupsRequest.json", 3, "kafka44/delete_groups_request.py"),
    Target("kafka44/DeleteGroupsResponse.json", 3, "kafka44/delete_groups_response.py"),
    Target("streams_v1/StreamsGroupHeartbeatRequest.json", 1, "streams_v1/heartbeat_request.py"),
    Target("streams_v1/StreamsGroupHeartbeatResponse.json", 1, "streams_v1/heartbeat_response.py"),
    Target("streams_v1/StreamsGroupDescribeRequest.json", 1, "streams_v1/describe_request.py"),
    Target("streams_v1/StreamsGroupDescribeResponse.json", 1, "streams_v1/describe_response.py"),
    Target(
        "kip1289/TxnShareAcknowledgeRequest.json", 0, "kip1289/txn_share_acknowledge_v0/request.py"
    ),
    Target(
        "kip1289/TxnShareAcknowledgeResponse.json",
        0,
        "kip1289/txn_share_acknowledge_v0/response.py",
    ),
    Target(
        "kip1289/AddShareAcknowledgementsToTxnRequest.json",
        0,
        "kip1289/add_share_acknowledgements_to_txn_v0/request.py",
    ),
    Target(
        "kip1289/AddShareAcknowledgementsToTxnResponse.json",
        0,
        "kip1289/add_share_acknowledgements_to_txn_v0/response.py",
    ),
)

# JSON type -> (Python annotation, kio kafka_type)
PRIMITIVES = {
    "bool": ("bool", "bool"),
    "int8": ("i8", "int8"),
    "int16": ("i16", "int16"),
    "int32": ("i32", "int32"),
    "int64": ("i64", "int64"),
    "uint16": ("u16", "uint16"),
    "float64": ("f64", "float64"),
    "string": ("str", "string"),
    "bytes": ("bytes", "bytes"),
    "uuid": ("uuid.UUID", "uuid"),
    "records": ("Records", "records"),
}
ENTITY_TYPES = {
    "groupId": "GroupId",
    "producerId": "ProducerId",
    "transactionalId": "TransactionalId",
    "topicName": "TopicName",
    "brokerId": "BrokerId",
}
# Kafka field name -> (kio's Python name, annotation, kafka_type): kio's time fields.
TIME_FIELDS = {
    "ThrottleTimeMs": ("throttle_time", "i32Timedelta", "timedelta_i32"),
    "HeartbeatIntervalMs": ("heartbeat_interval", "i32Timedelta", "timedelta_i32"),
    "TaskOffsetIntervalMs": ("task_offset_interval", "i32Timedelta", "timedelta_i32"),
    "SessionTimeoutMs": ("session_timeout", "i32Timedelta", "timedelta_i32"),
    "RebalanceTimeoutMs": ("rebalance_timeout", "i32Timedelta", "timedelta_i32"),
}
# Kafka renamed these after kio named them: handlers keep kio's name.
RENAMED = {"GenerationIdOrMemberEpoch": "generation_id"}
LITERALS = {"i8", "i16", "i32", "i64", "u16", "f64"}


def read_message(path: Path) -> dict[str, Any]:
    """Kafka's message JSON allows ``//`` comments."""
    text = "\n".join(
        line for line in path.read_text().splitlines() if not line.strip().startswith("//")
    )
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def in_versions(spec: str | None, version: int) -> bool:
    if not spec or spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    low, _, high = spec.partition("-")
    return int(low) <= version <= int(high or low)


def snake(name: str) -> str:
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


class Module:
    """The text of one generated module."""

    def __init__(self, message: dict[str, Any], version: int, source: str) -> None:
        self.message = message
        self.version = version
        self.source = source
        self.kind = message["type"]
        self.flexible = in_versions(message.get("flexibleVersions"), version)
        self.common = {struct["name"]: struct for struct in message.get("commonStructs", [])}
        self.imports: set[tuple[str, str]] = set()
        self.classes: list[str] = []
        self.written: set[str] = set()

    def header_schema(self) -> str:
        if self.kind == "request":
            number, name = (2 if self.flexible else 1), "RequestHeader"
        else:
            # ApiVersions responses keep header v0 at every version (so an old client reads it)
            flexible = self.flexible and self.message["apiKey"] != 18
            number, name = (1 if flexible else 0), "ResponseHeader"
        module = "request_header" if self.kind == "request" else "response_header"
        self.imports.add((f"kio.schema.{module}.v{number}.header", name))
        return name

    def render(self) -> str:
        header = self.header_schema()
        self.imports.add(("kio.static.constants", "EntityType"))
        self.imports.add(("kio.static.primitive", "i16"))
        self.struct(self.message["name"], self.message["fields"], header, top=True)
        lines = [
            '"""Generated by ``python -m kemu.protocol.codegen`` (do not edit) from',
            f'``kemu/protocol/{self.source}``, version {self.version}."""',
            "",
        ]
        plain = sorted(module for module, name in self.imports if not name)
        lines += [f"import {module}" for module in plain]
        lines += [
            "from dataclasses import dataclass, field",
            "from typing import ClassVar",
            "",
        ]
        by_module: dict[str, list[str]] = {}
        for module, name in self.imports:
            if name:
                by_module.setdefault(module, []).append(name)
        for module in sorted(by_module):
            names = sorted(by_module[module], key=_ruff_order)
            joined = ", ".join(names)
            line = f"from {module} import {joined}"
            if len(line) <= 100:
                lines.append(line)
            else:
                lines.append(f"from {module} import (")
                lines += [f"    {name}," for name in names]
                lines.append(")")
        return "\n".join(lines) + "\n" + "".join(self.classes)

    def struct(
        self, name: str, fields: list[dict[str, Any]], header: str, *, top: bool = False
    ) -> None:
        if name in self.written:
            return
        body: list[str] = []
        for spec in fields:
            if not in_versions(spec.get("versions"), self.version):
                continue
            body += self.field(spec, header)
        self.written.add(name)
        kind = self.kind if top else "nested"
        flexible = "True" if self.flexible else "False"
        self.classes.append(
            "\n\n@dataclass(frozen=True, slots=True, kw_only=True)\n"
            f"class {name}:\n"
            f"    __type__: ClassVar = EntityType.{kind}\n"
            f"    __version__: ClassVar[i16] = i16({self.version})\n"
            f"    __flexible__: ClassVar[bool] = {flexible}\n"
            f"    __api_key__: ClassVar[i16] = i16({self.message['apiKey']})\n"
            f"    __header_schema__: ClassVar[type[{header}]] = {header}\n" + "".join(body)
        )

    def field(self, spec: dict[str, Any], header: str) -> list[str]:
        kafka_name: str = spec["name"]
        type_name: str = spec["type"]
        array = type_name.startswith("[]")
        element = type_name[2:] if array else type_name
        nullable = in_versions(spec.get("nullableVersions"), self.version)
        tagged = "tag" in spec and in_versions(spec.get("taggedVersions"), self.version)
        name = RENAMED.get(kafka_name, snake(kafka_name))
        kafka_type: str | None
        if element in PRIMITIVES:
            annotation, kafka_type = PRIMITIVES[element]
            if kafka_name in TIME_FIELDS and not array:
                name, annotation, kafka_type = TIME_FIELDS[kafka_name]
                self.imports.add(("kio.static.primitive", annotation))
            elif element == "int16" and kafka_name.endswith("ErrorCode"):
                annotation, kafka_type = "ErrorCode", "error_code"
                self.imports.add(("kio.schema.errors", "ErrorCode"))
            elif spec.get("entityType") in ENTITY_TYPES:
                annotation = ENTITY_TYPES[spec["entityType"]]
                self.imports.add(("kio.schema.types", annotation))
            elif annotation in LITERALS:
                self.imports.add(("kio.static.primitive", annotation))
            elif element == "uuid":
                self.imports.add(("uuid", ""))
            elif element == "records":
                self.imports.add(("kio.static.primitive", "Records"))
            if element == "uuid" and not array:
                nullable = True  # kio reads the zero uuid as None
        else:
            kafka_type = None
            annotation = element
            nested = spec.get("fields")
            if nested is None:
                nested = self.common[element]["fields"]
            self.struct(element, nested, header)
        if array:
            annotation = f"tuple[{annotation}, ...]"
        if nullable:
            annotation = f"{annotation} | None"
        metadata: list[str] = []
        if kafka_type is not None:
            metadata.append(f'"kafka_type": "{kafka_type}"')
        if tagged:
            metadata.append(f'"tag": {spec["tag"]}')
        arguments: list[str] = []
        if metadata:
            arguments.append("metadata={" + ", ".join(metadata) + "}")
        default = self.default(spec, annotation, element, array=array)
        if array and kafka_type is None and not tagged:
            default = None  # kio: a list of structs is always given
        elif array and default is None:
            default = "()"
        if default is None and tagged:
            default = "()" if array else "None"
        if default is not None:
            arguments.append(f"default={default}")
        value = f" = field({', '.join(arguments)})" if arguments else ""
        line = f"    {name}: {annotation}{value}\n"
        if len(line) > 101:
            inner = f"        {', '.join(arguments)}\n"
            if len(inner) > 101:
                inner = "".join(f"        {argument},\n" for argument in arguments)
            line = f"    {name}: {annotation} = field(\n{inner}    )\n"
        about = spec.get("about")
        if about:
            line += docstring(about)
        return [line]

    def default(
        self, spec: dict[str, Any], annotation: str, element: str, *, array: bool
    ) -> str | None:
        if "default" not in spec:
            return None
        value = str(spec["default"])
        if value == "null":
            return "None"
        if array:
            return "()"
        base = annotation.removesuffix(" | None")
        if element == "string":
            return json.dumps(value)
        if element == "bool":
            return "True" if value.lower() == "true" else "False"
        if base in TIME_ANNOTATIONS:
            self.imports.add(("datetime", ""))
            return f"{base}.parse(datetime.timedelta(milliseconds={value}))"
        if base in LITERALS:
            return f"{base}({value})"
        if base in ENTITY_TYPES.values():
            return f"{base}({value})"
        return value


TIME_ANNOTATIONS = {"i32Timedelta", "i64Timedelta"}


def _ruff_order(name: str) -> tuple[int, list[tuple[int, str]]]:
    """isort's order of imported names: CONSTANTS, Classes, then the rest; digits as numbers."""
    natural = [
        (int(part), "") if part.isdigit() else (0, part) for part in re.split(r"(\d+)", name)
    ]
    category = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return (category, natural)


def docstring(about: str) -> str:
    about = about.replace("\\", "\\\\").replace('"""', '\\"\\"\\"').strip()
    text = f'"""{about}"""'
    if len(text) <= 96:
        return f"    {text}\n"
    wrapped = textwrap.wrap(f'"""{about}', width=96, break_long_words=False)
    wrapped[-1] += '"""'
    if len(wrapped[-1]) > 96:
        last = wrapped.pop()
        wrapped += [last[:-3], '"""']
    return "".join(f"    {line}\n" for line in wrapped)


def generate(target: Target) -> str:
    message = read_message(PROTOCOL / target.json_file)
    return Module(message, target.version, target.json_file).render()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kemu.protocol.codegen", description=__doc__)
    parser.add_argument(
        "--check", action="store_true", help="change nothing; fail if a module is stale"
    )
    options = parser.parse_args(argv)
    stale = []
    for target in TARGETS:
        text = generate(target)
        path = PROTOCOL / target.module
        if path.exists() and path.read_text() == text:
            continue
        stale.append(target.module)
        if not options.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    verb = "stale" if options.check else "written"
    for module in stale:
        print(f"{verb}: kemu/protocol/{module}")
    return 1 if stale and options.check else 0


if __name__ == "__main__":
    sys.exit(main())
