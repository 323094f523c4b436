"""kemu's topic configs against a real Kafka 4.4.0's DescribeConfigs (bench's jars; skipped
without them): a topic created with no configs of its own is described with the same 37 names,
types, values, sources, synonyms and documentation, as generated into
kemu/cluster/kafka_topic_catalogue.json by ``python -m conformance.config_catalogues``."""

from __future__ import annotations

import datetime
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
CREATE_TOPICS, DESCRIBE_CONFIGS, TOPIC = 19, 32, 2
NAME = "catalogue-topic"


def _read(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _call(address: str, api_key: int, version: int, body: Any) -> Any:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(wire.encode_request_frame(body, 1, "catalogue"))
        size = struct.unpack(">i", _read(sock, 4))[0]
        return wire.decode_response(api_key, version, _read(sock, size))[1]


def describe_new_topic(address: str) -> dict[str, Any]:
    create = wire.request_module(CREATE_TOPICS, 7)
    topic = wire.build(
        create.CreatableTopic, name=NAME, num_partitions=1, replication_factor=1, configs=()
    )
    created = _call(
        address,
        CREATE_TOPICS,
        7,
        wire.build(
            wire.request_schema(CREATE_TOPICS, 7),
            topics=(topic,),
            timeout=datetime.timedelta(seconds=30),
            validate_only=False,
        ),
    )
    assert created.topics[0].error_code == 0, created.topics[0].error_message
    describe = wire.request_module(DESCRIBE_CONFIGS, 4)
    resource = wire.build(
        describe.DescribeConfigsResource,
        resource_type=TOPIC,
        resource_name=NAME,
        configuration_keys=None,
    )
    response = _call(
        address,
        DESCRIBE_CONFIGS,
        4,
        wire.build(
            wire.request_schema(DESCRIBE_CONFIGS, 4),
            resources=(resource,),
            include_synonyms=True,
            include_documentation=True,
        ),
    )
    result = response.results[0]
    assert result.error_code == 0, result.error_message
    return {entry.name: entry for entry in result.configs}


def summary(entry: Any) -> tuple[Any, ...]:
    synonyms = tuple((s.name, s.value, s.source) for s in entry.synonyms)
    return (entry.value, entry.config_type, entry.config_source, entry.read_only, synonyms)


@pytest.fixture(scope="module")
def kafka_topic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if shutil.which("java") is None or not BROKER_JAR.exists():
        pytest.skip("needs java and Kafka's jars in bench/.cache/lib (make bench fetches them)")
    sys.path.insert(0, str(ROOT))
    from bench.servers import KafkaServer

    server = KafkaServer(tmp_path_factory.mktemp("kafka-topic-catalogue"), partitions=1)
    server.start()
    try:
        yield describe_new_topic(server.bootstrap)
    finally:
        server.stop()


def test_kemu_describes_every_topic_config_as_kafka_does(
    kafka_topic: dict[str, Any], tmp_path: Path
) -> None:
    kemu = KemuProcess(brokers=1, log_path=tmp_path / "kemu.log", test_defaults=False).start()
    try:
        mine = describe_new_topic(kemu.first_broker)
    finally:
        kemu.stop()
    assert len(kafka_topic) == 37
    assert sorted(mine) == sorted(kafka_topic)
    assert {
        name: (summary(kafka_topic[name]), summary(mine[name]))
        for name in kafka_topic
        if summary(kafka_topic[name]) != summary(mine[name])
    } == {}
    assert {
        name for name in kafka_topic if kafka_topic[name].documentation != mine[name].documentation
    } == set()
