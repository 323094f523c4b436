"""kemu's broker configs against a real Kafka 4.4.0's DescribeConfigs (bench's jars; skipped
without them): every config Kafka describes, kemu describes, with the same type, read-only flag
and, where both report the default, the same value and documentation, except the differences
listed in kemu/cluster/broker_catalogue.py (KEMU_DIFFERENCES)."""

from __future__ import annotations

import shutil
import socket
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kemu.cluster.broker_catalogue import KEMU_DIFFERENCES
from kemu.protocol import wire
from kemu.testing.plugin import KemuProcess

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
BROKER_JAR = ROOT / "bench" / ".cache" / "lib" / "kafka_2.13-4.4.0.jar"
DESCRIBE_CONFIGS, BROKER, DEFAULT_CONFIG = 32, 4, 5
# Per-broker settings that differ by deployment, not by definition.
DEPLOYMENT = {"listeners", "advertised.listeners", "log.dirs", "node.id", "broker.id"}


def describe_broker(address: str) -> dict[str, Any]:
    module = wire.request_module(DESCRIBE_CONFIGS, 4)
    resource = wire.build(
        module.DescribeConfigsResource,
        resource_type=BROKER,
        resource_name="1",
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
    return {entry.name: entry for entry in response.results[0].configs}


def _read(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


@pytest.fixture(scope="module")
def kafka_configs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if shutil.which("java") is None or not BROKER_JAR.exists():
        pytest.skip("needs java and Kafka's jars in bench/.cache/lib (make bench fetches them)")
    sys.path.insert(0, str(ROOT))
    from bench.servers import KafkaServer

    server = KafkaServer(tmp_path_factory.mktemp("kafka-catalogue"), partitions=1)
    server.start()
    try:
        yield describe_broker(server.bootstrap)
    finally:
        server.stop()


def test_kemu_describes_every_broker_config_as_kafka_does(
    kafka_configs: dict[str, Any], tmp_path: Path
) -> None:
    kemu = KemuProcess(brokers=1, log_path=tmp_path / "kemu.log", test_defaults=False).start()
    try:
        mine = describe_broker(kemu.first_broker)
    finally:
        kemu.stop()
    assert len(kafka_configs) == 350
    assert set(kafka_configs) - set(mine) == set()
    compared = [n for n in kafka_configs if n not in set(KEMU_DIFFERENCES) | DEPLOYMENT]
    assert {
        n: (kafka_configs[n].config_type, mine[n].config_type)
        for n in compared
        if kafka_configs[n].config_type != mine[n].config_type
    } == {}
    assert {
        n: (kafka_configs[n].read_only, mine[n].read_only)
        for n in compared
        if kafka_configs[n].read_only != mine[n].read_only
    } == {}
    both_default = [
        n
        for n in compared
        if kafka_configs[n].config_source == DEFAULT_CONFIG
        and mine[n].config_source == DEFAULT_CONFIG
    ]
    assert len(both_default) > 300
    assert {
        n: (kafka_configs[n].value, mine[n].value)
        for n in both_default
        if kafka_configs[n].value != mine[n].value
    } == {}
    assert {
        n for n in both_default if kafka_configs[n].documentation != mine[n].documentation
    } == set()
