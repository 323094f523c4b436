"""Connection quotas set with Kafka's own ``kafka-configs`` and met by real connections, on kemu
and on a real Kafka 4.4.0 with the same expectations (``bench/connection_quota_figure.py``, whose
``python -m bench.connection_quota_figure`` prints both side by side: docs/conformance.md).

With ``quota.window.num=2`` and ``quota.window.size.seconds=1``, six connections from 127.0.0.1,
each sending ApiVersions at once: under ``max.connections.per.ip=3`` the last three are closed
unanswered; under ``max.connection.creation.rate=2`` all are answered, the third and later ones
after the acceptor's wait; under ``connection_creation_rate=2`` for the default IP entity two are
answered and four closed unanswered. Then four confluent-kafka producers started together under
that IP rate: librdkafka sees connections closed, reconnects, and delivers every message.
Skipped without javac or the jars ``make bench`` fetches into bench/.cache/lib.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kemu.testing.kafka import KafkaConfig, KafkaServer
from kemu.testing.plugin import KemuProcess
from tests import REPO_ROOT
from tests.integration.parity import kafka_timing_overrides

sys.path.insert(0, str(REPO_ROOT))  # bench/ is not an installed package

from bench.connection_quota_figure import LIB, QUOTA_WINDOW, scenario

pytestmark = [pytest.mark.integration, pytest.mark.java, pytest.mark.parity]


def needs_java() -> None:
    # javac: the scenario's kafka-configs driver is compiled once (bench.connection_quota_figure)
    if shutil.which("javac") is None or not (LIB / "kafka-tools-4.4.0.jar").exists():
        pytest.skip("needs javac and Kafka's jars in bench/.cache/lib (make bench fetches them)")


def check(lines: list[str]) -> None:
    print("\n".join(lines))  # shown with pytest -s: the figures in docs/conformance.md
    fates = {line.split(":")[0]: line.split(": ", 1)[1].split(", ") for line in lines}
    per_ip = fates["max.connections.per.ip=3"]
    assert [f.split()[0] for f in per_ip] == ["answered"] * 3 + ["closed"] * 3
    rate = fates["max.connection.creation.rate=2"]
    assert [f.split()[0] for f in rate] == ["answered"] * 6
    delays = [int(f.split()[1]) for f in rate]
    assert delays[2] > delays[1] and delays[5] > delays[2]  # taken one by one, in order
    ip_rate = fates["ip connection_creation_rate=2"]
    assert [f.split()[0] for f in ip_rate] == ["answered"] * 2 + ["closed"] * 4
    clients = lines[-1]
    delivered = int(clients.split(": ")[1].split()[0])
    disconnects = int(clients.split(", ")[1].split()[0])
    assert delivered == 4 and disconnects > 0


def test_connection_quotas_on_kemu(tmp_path: Path) -> None:
    needs_java()
    kemu = KemuProcess(
        brokers=1,
        timing="kafka",  # as the Kafka server its figures are compared with
        overrides=[*kafka_timing_overrides(), *QUOTA_WINDOW],
        log_path=tmp_path / "kemu.log",
    )
    kemu.start()
    try:
        check(scenario(kemu.first_broker, 6))
    finally:
        kemu.stop()


@pytest.fixture(scope="module")
def kafka_bootstrap(kafka_server: Callable[[KafkaConfig], KafkaServer]) -> str:
    needs_java()
    window = dict(setting.split("=", 1) for setting in QUOTA_WINDOW)
    return kafka_server(KafkaConfig("kafka-connection-quotas", window)).bootstrap


def test_the_same_on_kafka(kafka_bootstrap: str) -> None:
    """The expectations above hold on Apache Kafka 4.4.0 itself."""
    check(scenario(kafka_bootstrap, 6))
