"""For tests that compare kemu with a real Kafka 4.4.0 (``bench/servers.py``'s KafkaServer):
kemu runs with Kafka's timers (``--timing kafka``) and the ones that server sets."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.testing.kafka import KafkaConfig
from kemu.testing.plugin import KemuProcess
from tests import REPO_ROOT

ROOT = REPO_ROOT


def kafka_timing_overrides(**extra: str) -> list[str]:
    """``--override`` values giving a kemu started with ``--timing kafka`` the timers the bench
    Kafka server sets (``bench.servers.ASSIGN_AT_ONCE``), then ``extra`` (the test's own
    server properties; dots in names as keyword arguments are passed with ``**{...}``)."""
    sys.path.insert(0, str(ROOT))
    from bench.servers import kafka_timing_overrides as overrides

    return overrides(**extra)


@dataclass
class Server:
    name: str  # "kemu" or "kafka"
    bootstrap: str


@contextmanager
def kemu_or_kafka(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    kemu_properties: Mapping[str, str] | None = None,
    kafka_config: KafkaConfig | None = None,
) -> Iterator[Server]:
    """The body of a module's ``server`` fixture (``params=["kemu", "kafka"]``, the module in
    conftest's "kafka" group): a one-broker kemu process with Kafka's timers
    (``kafka_timing_overrides``) and ``kemu_properties``, or the session's plain Kafka 4.4.0.
    With ``kafka_config`` (server properties Kafka cannot take at run time), the session's Kafka
    of that configuration, whose properties kemu gets too (before ``kemu_properties``)."""
    if request.param == "kemu":
        properties = {
            **(kafka_config.properties if kafka_config else {}),
            **(kemu_properties or {}),
        }
        kemu = KemuProcess(
            brokers=1,
            log_path=tmp_path_factory.mktemp("kemu") / "kemu.log",
            timing="kafka",
            overrides=kafka_timing_overrides(**properties),
        ).start()
        try:
            yield Server("kemu", kemu.bootstrap)
        finally:
            kemu.stop()
        return
    if kafka_config is not None:
        yield Server("kafka", request.getfixturevalue("kafka_server")(kafka_config).bootstrap)
        return
    yield Server("kafka", request.getfixturevalue("kafka").bootstrap)  # the session's plain Kafka


# the errors a coordinator answers while it starts (Kafka loads its internal topics on first use)
COORDINATOR_STARTING = {
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress,
}


def nested(api_key: int, version: int, class_name: str, /, **fields: Any) -> Any:
    """A nested structure ``class_name`` of request ``api_key`` v``version``."""
    return wire.build(getattr(wire.request_module(api_key, version), class_name), **fields)
