"""The in-process kemu fixture (kemu/testing/inprocess.py): real clients reach it, a test can look
inside it on its own loop, and it stops cleanly (its ports are free again); what KemuProcess
offers (the control API and virtual clock, listeners, self-signed TLS, a cluster id, a log file)
it offers too."""

from __future__ import annotations

import json
import socket
import time
import uuid
from pathlib import Path

import pytest
import structlog
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.broker.faults import fault_table
from kemu.config.definitions import InvalidConfig
from kemu.testing.inprocess import InProcessKemu

TIMEOUT = 30.0


def test_a_real_client_produces_and_consumes(kemu_inprocess: InProcessKemu) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kemu_inprocess.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": kemu_inprocess.bootstrap})
    producer.produce(topic, value=b"hello", partition=1)
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": kemu_inprocess.bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    try:
        message = consumer.poll(TIMEOUT)
        while message is not None and message.error():
            message = consumer.poll(TIMEOUT)
        assert message is not None and message.value() == b"hello"
    finally:
        consumer.close()
    ends = kemu_inprocess.call(
        lambda: [p.log.log_end_offset for p in kemu_inprocess.cluster.topics[topic].partitions]
    )
    assert ends == [0, 1]


def test_stop_frees_the_ports(kemu_inprocess_factory: type[InProcessKemu]) -> None:
    kemu = kemu_inprocess_factory(brokers=2).start()
    ports = [int(address.rpartition(":")[2]) for address in kemu.bootstrap.split(",")]
    kemu.stop()
    for port in ports:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(("127.0.0.1", port))


def test_control_api_and_virtual_clock(kemu_inprocess_factory: type[InProcessKemu]) -> None:
    kemu = kemu_inprocess_factory(brokers=2, clock="virtual").start()
    assert kemu.control_url.startswith("http://127.0.0.1:")
    before = kemu.control.clock()["now_ms"]
    kemu.control.advance(5000)
    assert kemu.control.clock()["now_ms"] == before + 5000
    assert kemu.call(lambda: kemu.runtime.clock_ms()) == before + 5000
    kemu.stop_broker(2)
    assert [b["node_id"] for b in kemu.control.brokers() if b.get("stopped")] == [2]
    kemu.start_broker(2)


def test_without_control_port_control_says_so(kemu_inprocess: InProcessKemu) -> None:
    with pytest.raises(RuntimeError, match="with_control=True"):
        kemu_inprocess.control.brokers()


def test_listeners_tls_cluster_id_and_json_log(
    kemu_inprocess_factory: type[InProcessKemu], tmp_path: Path
) -> None:
    kemu = kemu_inprocess_factory(
        brokers=2,
        overrides=["listeners=PLAINTEXT://:0,SSL://:0"],
        tls_self_signed=True,
        cluster_id="inprocess-cluster-id",
        log_path=tmp_path / "kemu.log",
        json_logs=True,
    ).start()
    assert list(kemu.listeners) == ["PLAINTEXT", "SSL"]
    assert kemu.bootstrap == kemu.listeners["PLAINTEXT"]
    assert set(kemu.tls) == {"ca", "client_cert", "client_key"}
    ssl_config = {
        "bootstrap.servers": kemu.listeners["SSL"],
        "security.protocol": "SSL",
        "ssl.ca.location": kemu.tls["ca"],
    }
    metadata = AdminClient(ssl_config).list_topics(timeout=TIMEOUT)
    assert metadata.cluster_id == "inprocess-cluster-id"
    assert sorted(f"{b.host}:{b.port}" for b in metadata.brokers.values()) == sorted(
        kemu.listeners["SSL"].split(",")
    )
    kemu.stop()
    events = [json.loads(line) for line in (tmp_path / "kemu.log").read_text().splitlines()]
    started = [event for event in events if event["event"] == "started"]
    assert started and started[0]["cluster_id"] == "inprocess-cluster-id"
    assert all(event["level"] != "debug" for event in events)


def test_a_failed_start_leaves_nothing_running(kemu_inprocess_factory: type[InProcessKemu]) -> None:
    before = structlog.get_config()
    kemu = kemu_inprocess_factory(brokers=1, overrides=["listeners=NOPE://:0"])
    with pytest.raises(InvalidConfig, match="NOPE"):
        kemu.start()
    assert not kemu._thread.is_alive()
    assert structlog.get_config() == before


def test_the_shared_kemu_serves_real_clients(kemu_inprocess_shared: InProcessKemu) -> None:
    """``kemu_inprocess_shared``: a running 3-broker kemu, the session's (as ``kemu_shared``)."""
    assert len(kemu_inprocess_shared.bootstrap.split(",")) == 3
    topic = f"shared-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kemu_inprocess_shared.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    assert kemu_inprocess_shared.call(lambda: topic in kemu_inprocess_shared.cluster.topics)


def test_stop_cuts_the_connections(kemu_inprocess_factory: type[InProcessKemu]) -> None:
    kemu = kemu_inprocess_factory(brokers=1).start()
    host, _, port = kemu.first_broker.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=TIMEOUT) as client:
        while not kemu.call(lambda: fault_table(kemu.runtime).of_node(1)):
            time.sleep(0.01)  # until kemu's loop has accepted it
        kemu.stop()
        assert client.recv(1) == b""  # as when a kemu process exits
