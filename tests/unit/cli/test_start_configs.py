"""Start-up configs Apache Kafka 4.4.0 refuses or reads differently, and kemu the same way (the
one-line refusals of ``kemu serve`` itself are in test_startup_errors.py). Found by comparing
kemu's start-up with Kafka's (the parity work of issue 15)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kemu.broker.security.acls import super_users
from kemu.cli import _check_start_configs, _data_dir_from_log_dirs, _parser
from kemu.cluster.listeners import configured_listeners, unserved_controller_listeners
from kemu.config.definitions import BrokerConfig, InvalidConfig
from kemu.coordinator.group.config import check_broker_group_configs
from kemu.protocol.versions import CURRENT_RELEASE, KAFKA_RELEASES, release_caps


def test_as_version_accepts_the_current_release_as_the_default_advertisement() -> None:
    args = _parser().parse_args(["serve", "--as-version", "4.4"])
    assert args.as_version == CURRENT_RELEASE == "4.4"
    assert release_caps("4.4") is None  # kemu's own ranges, as without --as-version
    assert release_caps(None) is None
    assert release_caps("4.3") == KAFKA_RELEASES["4.3"]


def test_super_users_must_be_principals_when_an_authorizer_is_configured() -> None:
    authorizer = "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    good = BrokerConfig.load(None, [authorizer, "super.users= User:bob ;;User:alice;:x"])
    assert super_users(good) == {"User:bob", "User:alice", ":x"}  # ':x' parses in Kafka too
    bad = BrokerConfig.load(None, [authorizer, "super.users=User:bob;bogus"])
    with pytest.raises(InvalidConfig) as refused:
        super_users(bad)
    assert str(refused.value) == (
        "Invalid value User:bob;bogus for configuration super.users: expected a string in format "
        "principalType:principalName but got bogus"
    )
    with pytest.raises(InvalidConfig):
        _check_start_configs(bad)
    # Without an authorizer Kafka never parses super.users.
    _check_start_configs(BrokerConfig.load(None, ["super.users=bogus"]))


# The lines of Kafka 4.4.0's shipped config/server.properties (KRaft combined mode) that kemu
# reads: bench/.cache holds only Kafka's jars, not its config directory.
KAFKA_SHIPPED_KRAFT = """\
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
"""


def shipped(tmp_path: Path, *extra: str) -> BrokerConfig:
    properties = tmp_path / "server.properties"
    properties.write_text(KAFKA_SHIPPED_KRAFT)
    return BrokerConfig.load(properties, extra)


def test_the_controller_listener_of_kafkas_shipped_file_is_not_served(tmp_path: Path) -> None:
    config = shipped(tmp_path)
    # Kafka advertises (and serves broker APIs on) PLAINTEXT only; kemu binds nothing else.
    (plaintext,) = configured_listeners(config, "127.0.0.1", 19092, 3)
    assert (plaintext.name, plaintext.port) == ("PLAINTEXT", 9092)
    assert (plaintext.advertised_host, plaintext.advertised_port) == ("localhost", 9092)
    assert unserved_controller_listeners(config) == ["CONTROLLER"]
    _check_start_configs(config)


def test_port_blocks_skip_the_controller_listener(tmp_path: Path) -> None:
    config = shipped(tmp_path, "listeners=CONTROLLER://:0,PLAINTEXT://:0,SSL://:0")
    plaintext, ssl = configured_listeners(config, "127.0.0.1", 20000, 3)
    assert (plaintext.port, ssl.port) == (20000, 20003)


def test_only_controller_listeners_is_refused_with_kafkas_message() -> None:
    controller = ["controller.listener.names=CONTROLLER"]
    only_controllers = (
        ["listeners=CONTROLLER://:9093"],
        ["listeners=PLAINTEXT://:9092,CONTROLLER://:9093", "advertised.listeners=CONTROLLER://h:1"],
    )
    for listeners in only_controllers:
        config = BrokerConfig.load(None, [*controller, *listeners])
        with pytest.raises(InvalidConfig) as refused:
            configured_listeners(config, "127.0.0.1", 9092, 1)
        assert str(refused.value) == (
            "There must be at least one broker advertised listener. Perhaps all listeners "
            "appear in controller.listener.names?"
        )


def test_advertised_listeners_without_listeners_are_parsed_as_kafka_does() -> None:
    # kemu's listener without 'listeners' is PLAINTEXT (Kafka's default, PLAINTEXT://:9092).
    with pytest.raises(InvalidConfig) as garbage:
        _check_start_configs(BrokerConfig.load(None, ["advertised.listeners=garbage"]))
    assert str(garbage.value) == (
        "Invalid value garbage for configuration advertised.listeners: Error creating broker "
        "listeners from 'garbage': Unable to parse garbage to a broker endpoint"
    )
    with pytest.raises(InvalidConfig) as other:
        _check_start_configs(BrokerConfig.load(None, ["advertised.listeners=SSL://h:1"]))
    assert str(other.value) == (
        "advertised.listeners listener names must be equal to or a subset of the ones defined "
        "in listeners. Found SSL. The valid options based on the current configuration are "
        "PLAINTEXT"
    )
    config = BrokerConfig.load(None, ["advertised.listeners=PLAINTEXT://kafka.example:29092"])
    (listener,) = configured_listeners(config, "127.0.0.1", 9092, 3, advertised_host="x")
    assert (listener.host, listener.port) == ("127.0.0.1", 9092)
    assert (listener.advertised_host, listener.advertised_port) == ("kafka.example", 29092)


def test_controller_listeners_default_to_plaintext_as_kafka_maps_them() -> None:
    # Kafka's default listener.security.protocol.map has no CONTROLLER; KafkaConfig adds it as
    # PLAINTEXT unless an SSL or SASL_* listener is in use.
    controller = "controller.listener.names=CONTROLLER"
    plain = BrokerConfig.load(None, [controller, "listeners=PLAINTEXT://:0,CONTROLLER://:0"])
    assert [item.name for item in configured_listeners(plain, "h", 9092, 1)] == ["PLAINTEXT"]
    ssl = BrokerConfig.load(None, [controller, "listeners=SSL://:0,CONTROLLER://:0"])
    with pytest.raises(InvalidConfig, match="No security protocol defined for listener CONTROLLER"):
        configured_listeners(ssl, "h", 9092, 1)


def test_log_dirs_is_the_data_dir_when_no_data_dir_is_given(tmp_path: Path) -> None:
    assert _data_dir_from_log_dirs(shipped(tmp_path)) == Path("/tmp/kraft-combined-logs")
    two = BrokerConfig.load(None, [f"log.dirs= {tmp_path}/a , {tmp_path}/b"])
    assert _data_dir_from_log_dirs(two) == tmp_path / "a"
    assert _data_dir_from_log_dirs(BrokerConfig.load(None, ["log.dir=/x"])) == Path("/x")
    assert _data_dir_from_log_dirs(BrokerConfig.load(None, [])) is None  # in memory


# What KafkaConfig.fromProps of the 4.4.0 jars (bench/.cache/lib) answered for each.
KAFKA_GROUP_REFUSALS = {
    "group.share.heartbeat.interval.ms=1000": "group.share.heartbeat.interval.ms must be "
    "greater than or equal to group.share.min.heartbeat.interval.ms",
    "group.share.heartbeat.interval.ms=20000": "group.share.heartbeat.interval.ms must be less "
    "than or equal to group.share.max.heartbeat.interval.ms",
    "group.share.max.heartbeat.interval.ms=4000": "group.share.max.heartbeat.interval.ms must be "
    "greater than or equal to group.share.min.heartbeat.interval.ms",
    "group.share.session.timeout.ms=1000": "group.share.session.timeout.ms must be greater than "
    "or equal to group.share.min.session.timeout.ms",
    "group.consumer.heartbeat.interval.ms=20000": "group.consumer.heartbeat.interval.ms must be "
    "less than or equal to group.consumer.max.heartbeat.interval.ms",
    "group.consumer.session.timeout.ms=70000": "group.consumer.session.timeout.ms must be less "
    "than or equal to group.consumer.max.session.timeout.ms",
    "group.streams.heartbeat.interval.ms=1": "group.streams.heartbeat.interval.ms must be "
    "greater than or equal to group.streams.min.heartbeat.interval.ms",
    "group.consumer.min.session.timeout.ms=5000,group.consumer.session.timeout.ms=5000": (
        "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"
    ),
}


@pytest.mark.parametrize("overrides", sorted(KAFKA_GROUP_REFUSALS))
def test_group_heartbeats_and_sessions_out_of_bounds_are_refused(overrides: str) -> None:
    config = BrokerConfig.load(None, overrides.split(","))
    with pytest.raises(InvalidConfig) as refused:
        _check_start_configs(config)
    assert str(refused.value) == KAFKA_GROUP_REFUSALS[overrides]


def test_group_heartbeats_and_sessions_within_bounds_start() -> None:
    check_broker_group_configs(BrokerConfig.load(None, []))  # Kafka's defaults
    check_broker_group_configs(
        BrokerConfig.load(
            None,
            [
                "group.share.min.heartbeat.interval.ms=100",
                "group.share.heartbeat.interval.ms=100",
                "group.share.min.session.timeout.ms=1000",
                "group.share.session.timeout.ms=1000",
            ],
        )
    )


SUPPORTED = "kemu supports PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER"


def sasl_refusal(*overrides: str) -> str:
    with pytest.raises(InvalidConfig) as refused:
        _check_start_configs(BrokerConfig.load(None, overrides))
    return str(refused.value)


def test_sasl_mechanisms_kemu_does_not_implement_are_refused() -> None:
    sasl = "listeners=PLAINTEXT://:0,SASL_PLAINTEXT://:0"
    assert sasl_refusal(sasl, "sasl.enabled.mechanisms=PLAIN,GSSAPI") == (
        "Invalid value PLAIN,GSSAPI for configuration sasl.enabled.mechanisms: GSSAPI is not "
        f"implemented by kemu (listener SASL_PLAINTEXT; {SUPPORTED})"
    )
    prefixed = "listener.name.sasl_ssl.sasl.enabled.mechanisms"
    assert sasl_refusal("listeners=SASL_SSL://:0", f"{prefixed}=FOO,BAR") == (
        f"Invalid value FOO,BAR for configuration {prefixed}: FOO, BAR are not implemented by "
        f"kemu (listener SASL_SSL; {SUPPORTED})"
    )
    assert sasl_refusal(sasl, "sasl.enabled.mechanisms=") == (
        "Invalid value  for configuration sasl.enabled.mechanisms: no mechanism is enabled "
        f"(listener SASL_PLAINTEXT; {SUPPORTED})"
    )
    # Only SASL listeners read it (Kafka's default is GSSAPI), and supported ones start.
    _check_start_configs(BrokerConfig.load(None, ["sasl.enabled.mechanisms=GSSAPI"]))
    _check_start_configs(BrokerConfig.load(None, [sasl, "sasl.enabled.mechanisms=SCRAM-SHA-512"]))
    _check_start_configs(BrokerConfig.load(None, [sasl]))  # kemu's default: all of them
