"""kemu's group configs against a real Kafka 4.4.0's DescribeConfigs (bench's jars; skipped
without them): the same 21 names, with the same types, values, documentation and DEFAULT_CONFIG
synonyms (the broker config supplying each default), as generated into
kemu/cluster/kafka_group_catalogue.json by ``python -m conformance.config_catalogues``."""

from __future__ import annotations

import shutil
import socket
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kemu.protocol import wire
from kemu.testing.plugin import KemuProcess

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
BROKER_JAR = ROOT / "bench" / ".cache" / "lib" / "kafka_2.13-4.4.0.jar"
DESCRIBE_CONFIGS, GROUP = 32, 32


def describe_group(address: str, group: str) -> dict[str, Any]:
    module = wire.request_module(DESCRIBE_CONFIGS, 4)
    resource = wire.build(
        module.DescribeConfigsResource,
        resource_type=GROUP,
        resource_name=group,
        configuration_keys=None,
    )
    body = wire.build(
        wire.request_schema(DESCRIBE_CONFIGS, 4),
        resources=(resource,),
        include_synonyms=True,
        include_documentation=True,
    )
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=15) as sock:
        sock.sendall(wire.encode_request_frame(body, 1, "catalogue"))
        size = struct.unpack(">i", _read(sock, 4))[0]
        _, response = wire.decode_response(DESCRIBE_CONFIGS, 4, _read(sock, size))
    result = response.results[0]
    assert result.error_code == 0, result.error_message
    return {entry.name: entry for entry in result.configs}


def _read(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def summary(entry: Any) -> tuple[Any, ...]:
    synonyms = tuple((s.name, s.value, s.source) for s in entry.synonyms)
    return (entry.value, entry.config_type, entry.config_source, entry.read_only, synonyms)


@pytest.fixture(scope="module")
def kafka_groups(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if shutil.which("java") is None or not BROKER_JAR.exists():
        pytest.skip("needs java and Kafka's jars in bench/.cache/lib (make bench fetches them)")
    sys.path.insert(0, str(ROOT))
    from bench.servers import KafkaServer

    server = KafkaServer(tmp_path_factory.mktemp("kafka-group-catalogue"), partitions=1)
    server.start()
    try:
        yield describe_group(server.bootstrap, "catalogue-group")
    finally:
        server.stop()


def test_kemu_describes_every_group_config_as_kafka_does(
    kafka_groups: dict[str, Any], tmp_path: Path
) -> None:
    # Kafka's bench server sets group.initial.rebalance.delay.ms=0 as kemu's default does
    kemu = KemuProcess(brokers=1, log_path=tmp_path / "kemu.log", test_defaults=False).start()
    try:
        mine = describe_group(kemu.first_broker, "catalogue-group")
    finally:
        kemu.stop()
    assert len(kafka_groups) == 21
    assert sorted(mine) == sorted(kafka_groups)
    assert {
        name: (summary(kafka_groups[name]), summary(mine[name]))
        for name in kafka_groups
        if summary(kafka_groups[name]) != summary(mine[name])
    } == {}
    assert {
        name
        for name in kafka_groups
        if kafka_groups[name].documentation != mine[name].documentation
    } == set()
