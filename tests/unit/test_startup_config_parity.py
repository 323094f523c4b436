"""Start-up configs Apache Kafka 4.4.0 refuses or reads differently, and kemu the same way (the
one-line refusals of ``kemu serve`` itself are in test_startup_errors.py)."""

from __future__ import annotations

import pytest

from kemu.broker.security.acls import super_users
from kemu.cli import _check_start_configs, _parser
from kemu.cluster.config import BrokerConfig, InvalidConfig
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
