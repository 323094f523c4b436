"""``listener.name.<listener>.socket.listen.backlog.size``, resolved as Kafka 4.4.0 does: its
SocketServer parses each listener's configs with the lower-cased ``listener.name.<l>.`` prefix
(so a bad value fails start-up, with the unprefixed name in Kafka's message), while its
Acceptor binds with the broker-wide ``socket.listen.backlog.size`` (checked with ``ss -ltn`` on
a real 4.4.0: broker-wide 33 and ``listener.name.plaintext.socket.listen.backlog.size=7``
listen with 33; 0 and ``abc`` end start-up with the messages below)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kemu.broker.server import KemuServer, ServerOptions
from kemu.cluster.listeners import is_security_config, listen_backlog
from kemu.config.definitions import BrokerConfig, InvalidConfig


def config(**values: str) -> BrokerConfig:
    return BrokerConfig.load(None, [f"{key}={value}" for key, value in values.items()])


def test_the_broker_wide_value_applies_to_every_listener() -> None:
    settings = {
        "socket.listen.backlog.size": "33",
        "listener.name.plaintext.socket.listen.backlog.size": "7",
        "listener.name.sasl_ssl.socket.listen.backlog.size": "4096",
    }
    assert listen_backlog(config(**settings), "PLAINTEXT") == 33
    assert listen_backlog(config(**settings), "SASL_SSL") == 33
    assert listen_backlog(config(), "PLAINTEXT") == 1024  # kemu's default (Kafka: 50)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "listener.name.plaintext.socket.listen.backlog.size",
            "0",
            "Invalid value 0 for configuration socket.listen.backlog.size: Value must be at "
            "least 1",
        ),
        (
            "listener.name.plaintext.socket.listen.backlog.size",
            "abc",
            "Invalid value abc for configuration socket.listen.backlog.size: Not a number of "
            "type INT",
        ),
        (  # Kafka's prefix override also strips one more segment (as for <mechanism>.* keys)
            "listener.name.plaintext.any.socket.listen.backlog.size",
            "-3",
            "Invalid value -3 for configuration socket.listen.backlog.size: Value must be at "
            "least 1",
        ),
    ],
)
def test_a_bad_per_listener_value_is_refused_with_kafkas_message(
    key: str, value: str, message: str
) -> None:
    with pytest.raises(InvalidConfig) as refused:
        listen_backlog(config(**{key: value}), "PLAINTEXT")
    assert str(refused.value) == message


def test_the_prefix_is_the_lower_cased_listener_name_and_other_listeners_are_not_checked() -> None:
    bad = config(**{"listener.name.external.socket.listen.backlog.size": "0"})
    with pytest.raises(InvalidConfig):
        listen_backlog(bad, "EXTERNAL")
    assert listen_backlog(bad, "PLAINTEXT") == 1024
    upper = config(**{"listener.name.EXTERNAL.socket.listen.backlog.size": "0"})
    assert listen_backlog(upper, "EXTERNAL") == 1024  # Kafka looks for the lower-cased prefix


def test_the_per_listener_key_is_a_known_config() -> None:
    assert is_security_config("listener.name.plaintext.socket.listen.backlog.size")
    assert not is_security_config("listener.name.plaintext.socket.listen.backlog")


def test_the_server_refuses_a_bad_value_before_binding(tmp_path: Path) -> None:
    bad = config(
        **{
            "listeners": "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
            "listener.name.external.socket.listen.backlog.size": "0",
        }
    )
    with pytest.raises(InvalidConfig) as refused:
        KemuServer(ServerOptions(brokers=1, port=0, config=bad))
    assert str(refused.value).endswith("socket.listen.backlog.size: Value must be at least 1")
