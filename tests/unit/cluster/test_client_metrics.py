"""Client metrics subscriptions (the CLIENT_METRICS config resource), ListConfigResources,
and the telemetry APIs that serve them, through the wire codecs."""

from __future__ import annotations

import datetime
import uuid
from pathlib import Path
from typing import Any

import pytest

from kemu.cluster.client_metrics import telemetry_store
from kemu.config.definitions import ConfigSource
from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_admin_handlers import Broker

LIST_RESOURCES, GET_TELEMETRY, PUSH_TELEMETRY = 74, 71, 72
CLIENT_METRICS, TOPIC, BROKER, GROUP = 16, 2, 4, 32
SET, DELETE = 0, 1


def alter(broker: Broker, name: str, changes: list[tuple[str, int, str | None]]) -> Any:
    (response,) = broker.incremental([(CLIENT_METRICS, name, changes)])
    return response.error_code, response.error_message


def listed(broker: Broker, types: tuple[int, ...], version: int = 1) -> Any:
    fields = {"resource_types": types} if version else {}
    response = broker.send(broker.request(LIST_RESOURCES, version, **fields))
    if response.error_code != ErrorCode.none:
        return response.error_code
    return [
        (r.resource_name, getattr(r, "resource_type", CLIENT_METRICS))
        for r in response.config_resources
    ]


def test_subscriptions_are_set_described_listed_deleted_and_durable(tmp_path: Path) -> None:
    broker = Broker(data_dir=tmp_path)
    assert alter(
        broker,
        "sub",
        [("metrics", SET, "org.apache.kafka.producer."), ("interval.ms", SET, "1000")],
    ) == (ErrorCode.none, None)
    described = {
        e.name: (e.value, e.config_source)
        for e in broker.describe_configs(CLIENT_METRICS, "sub").configs
    }
    assert described == {
        "interval.ms": ("1000", ConfigSource.DYNAMIC_CLIENT_METRICS_CONFIG),
        "match": ("", ConfigSource.DEFAULT_CONFIG),
        "metrics": ("org.apache.kafka.producer.", ConfigSource.DYNAMIC_CLIENT_METRICS_CONFIG),
    }
    broker.create("t")
    assert listed(broker, (), version=0) == [("sub", CLIENT_METRICS)]
    assert listed(broker, ()) == [
        ("sub", CLIENT_METRICS),
        ("t", TOPIC),
        ("1", BROKER),
        ("2", BROKER),
        ("3", BROKER),
        ("1", 8),
        ("2", 8),
        ("3", 8),
    ]
    assert listed(broker, (99,)) == ErrorCode.unsupported_version
    restarted = Broker(data_dir=tmp_path)
    assert listed(restarted, (CLIENT_METRICS,)) == [("sub", CLIENT_METRICS)]
    assert alter(restarted, "sub", [("metrics", DELETE, None), ("interval.ms", DELETE, None)]) == (
        ErrorCode.none,
        None,
    )
    assert listed(restarted, (CLIENT_METRICS,)) == []


@pytest.mark.parametrize(
    ("changes", "code", "message"),
    [
        (
            [("bogus", SET, "1")],
            ErrorCode.invalid_request,
            "Unknown client metrics configuration: bogus",
        ),
        (
            [("interval.ms", SET, "50")],
            ErrorCode.invalid_config,
            "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)",
        ),
        (
            [("interval.ms", SET, "soon")],
            ErrorCode.invalid_config,
            "Invalid value soon for configuration interval.ms: Not a number of type INT",
        ),
        (
            [("match", SET, "client_colour=red")],
            ErrorCode.invalid_config,
            "Illegal client matching pattern: client_colour=red",
        ),
        (
            [("match", SET, "client_id=[")],
            ErrorCode.invalid_config,
            "Illegal client matching pattern: client_id=[",
        ),
    ],
)
def test_refusals(
    changes: list[tuple[str, int, str | None]], code: ErrorCode, message: str
) -> None:
    broker = Broker()
    assert alter(broker, "sub", changes) == (code, message)
    assert listed(broker, (CLIENT_METRICS,)) == []


def subscribe(broker: Broker, instance: uuid.UUID) -> Any:
    return broker.send(broker.request(GET_TELEMETRY, 0, client_instance_id=instance))


def test_telemetry_follows_matching_subscriptions_and_pushes_are_kept() -> None:
    broker = Broker()
    instance = uuid.uuid4()
    nothing = subscribe(broker, instance)
    assert (nothing.subscription_id, nothing.requested_metrics) == (0, ())
    assert alter(
        broker,
        "producers",
        [
            ("metrics", SET, "org.apache.kafka.producer."),
            ("interval.ms", SET, "2000"),
            ("match", SET, f"client_instance_id={instance}"),
        ],
    ) == (ErrorCode.none, None)
    assert alter(broker, "other", [("metrics", SET, "*"), ("match", SET, "client_id=nobody")])[
        0
    ] == (ErrorCode.none)
    got = subscribe(broker, instance)
    assert got.requested_metrics == ("org.apache.kafka.producer.",)
    assert got.push_interval == datetime.timedelta(milliseconds=2000)
    assert got.subscription_id not in (0, nothing.subscription_id)
    assert subscribe(broker, uuid.uuid4()).requested_metrics == ()
    push = broker.request(
        PUSH_TELEMETRY,
        0,
        client_instance_id=instance,
        subscription_id=got.subscription_id,
        terminating=False,
        compression_type=0,
        metrics=b"otlp",
    )
    assert broker.send(push).error_code == ErrorCode.none
    stale = broker.request(
        PUSH_TELEMETRY,
        0,
        client_instance_id=instance,
        subscription_id=got.subscription_id + 1,
        terminating=False,
        compression_type=0,
        metrics=b"old",
    )
    assert broker.send(stale).error_code == ErrorCode.unknown_subscription_id
    assert list(telemetry_store(broker.runtime).pushes) == [
        (str(instance), got.subscription_id, 0, b"otlp")
    ]
    # everything: the one empty prefix
    assert alter(broker, "producers", [("metrics", SET, "*")]) == (ErrorCode.none, None)
    assert subscribe(broker, instance).requested_metrics == ("",)
