"""kemu's authorizer against StandardAuthorizer's rules, ACL validation and filters with Kafka's
messages, and the ACL store across a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from kemu.broker.security.acls import (
    AclBinding,
    AclFilter,
    AclResourceType,
    AclStore,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
)
from kemu.config.definitions import BrokerConfig

T, G, C = AclResourceType.TOPIC, AclResourceType.GROUP, AclResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def acl(
    resource: int,
    name: str,
    pattern: int,
    principal: str,
    operation: int,
    permission: int = ALLOW,
    host: str = "*",
) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, host, operation, permission)


def store(tmp_path: Path | None = None, **config: str) -> AclStore:
    return AclStore(BrokerConfig({"authorizer.class.name": STANDARD, **config}), tmp_path)


def test_no_authorizer_allows_everything() -> None:
    plain = AclStore(BrokerConfig(), None)
    assert plain.authorize("User:x", "h", Operation.WRITE, T, "t")


def test_literal_prefixed_and_wildcard_patterns() -> None:
    acls = store()
    acls.create(
        [
            acl(T, "orders", LIT, "User:alice", Operation.WRITE),
            acl(T, "logs-", PRE, "User:alice", Operation.READ),
            acl(T, "*", LIT, "User:bob", Operation.DESCRIBE),
        ]
    )
    assert acls.authorize("User:alice", "h", Operation.WRITE, T, "orders")
    assert not acls.authorize("User:alice", "h", Operation.WRITE, T, "orders-2")
    assert acls.authorize("User:alice", "h", Operation.READ, T, "logs-app")
    assert not acls.authorize("User:alice", "h", Operation.READ, T, "log")
    assert acls.authorize("User:bob", "h", Operation.DESCRIBE, T, "anything")
    assert not acls.authorize("User:bob", "h", Operation.READ, T, "anything")
    assert not acls.authorize("User:alice", "h", Operation.READ, G, "orders")


def test_implied_operations_deny_and_all() -> None:
    acls = store()
    acls.create(
        [
            acl(T, "t", LIT, "User:alice", Operation.READ),
            acl(T, "t", LIT, "User:alice", Operation.ALTER_CONFIGS),
            acl(T, "t", LIT, "User:*", Operation.ALL),
            acl(T, "t", LIT, "User:mallory", Operation.ALL, DENY),
            acl(T, "u", LIT, "User:alice", Operation.READ, DENY),
            acl(T, "u", LIT, "User:alice", Operation.DESCRIBE),
        ]
    )
    assert acls.authorize("User:alice", "h", Operation.DESCRIBE, T, "t")  # READ implies it
    assert acls.authorize("User:alice", "h", Operation.DESCRIBE_CONFIGS, T, "t")
    assert acls.authorize("User:carol", "h", Operation.DELETE, T, "t")  # User:* ALL
    assert not acls.authorize("User:mallory", "h", Operation.DESCRIBE, T, "t")
    # A DENY for READ does not deny DESCRIBE; it denies READ only.
    assert acls.authorize("User:alice", "h", Operation.DESCRIBE, T, "u")
    assert not acls.authorize("User:alice", "h", Operation.READ, T, "u")


def test_hosts_super_users_and_the_no_acl_default() -> None:
    acls = store(**{"super.users": "User:admin;User:ops"})
    acls.create([acl(T, "t", LIT, "User:alice", Operation.READ, host="10.0.0.1")])
    assert acls.authorize("User:alice", "10.0.0.1", Operation.READ, T, "t")
    assert not acls.authorize("User:alice", "10.0.0.2", Operation.READ, T, "t")
    assert acls.authorize("User:ops", "x", Operation.ALTER, C, "kafka-cluster")
    assert not acls.authorize("User:alice", "10.0.0.1", Operation.READ, T, "no-acls")
    lenient = store(**{"allow.everyone.if.no.acl.found": "true"})
    lenient.create([acl(T, "t", LIT, "User:alice", Operation.READ)])
    assert lenient.authorize("User:bob", "h", Operation.WRITE, T, "no-acls")
    assert not lenient.authorize("User:bob", "h", Operation.READ, T, "t")  # t has ACLs


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (acl(AclResourceType.ANY, "t", LIT, "User:a", Operation.READ), "Invalid resourceType ANY"),
        (acl(T, "t", PatternType.MATCH, "User:a", Operation.READ), "Invalid patternType MATCH"),
        (acl(T, "t", LIT, "User:a", Operation.ANY), "Invalid operation ANY"),
        (acl(T, "t", LIT, "User:a", Operation.READ, Permission.ANY), "Invalid permissionType ANY"),
        (
            acl(C, "c", LIT, "User:a", Operation.ALTER),
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (acl(T, "", LIT, "User:a", Operation.READ), "Invalid empty resource name"),
        (
            acl(T, "t", LIT, "alice", Operation.READ),
            "expected a string in format principalType:principalName but got alice",
        ),
    ],
)
def test_invalid_acls_get_kafkas_messages(binding: AclBinding, message: str) -> None:
    with pytest.raises(InvalidAcl, match=f"^{message}$"):
        binding.validate()


def test_filters_and_persistence(tmp_path: Path) -> None:
    acls = store(tmp_path)
    literal = acl(T, "orders", LIT, "User:alice", Operation.WRITE)
    prefixed = acl(T, "ord", PRE, "User:bob", Operation.READ)
    wildcard = acl(T, "*", LIT, "User:carol", Operation.DESCRIBE)
    group = acl(G, "g", LIT, "User:alice", Operation.READ)
    acls.create([literal, prefixed, wildcard, group, literal])
    assert len(acls.acls) == 4  # an identical ACL is not added twice
    any_topic = AclFilter(T, None, PatternType.ANY, None, None, Operation.ANY, Permission.ANY)
    assert acls.describe(any_topic) == [literal, prefixed, wildcard]
    match = AclFilter(T, "orders", PatternType.MATCH, None, None, Operation.ANY, Permission.ANY)
    assert acls.describe(match) == [literal, prefixed, wildcard]
    exact = AclFilter(T, "orders", PatternType.ANY, None, None, Operation.ANY, Permission.ANY)
    assert acls.describe(exact) == [literal]
    with pytest.raises(InvalidAcl, match=r"Unknown patternFilter\."):
        AclFilter(0, None, 1, None, None, 1, 1).validate()
    assert store(tmp_path).acls == acls.acls
    by_alice = AclFilter(
        AclResourceType.ANY,
        None,
        PatternType.ANY,
        "User:alice",
        None,
        Operation.ANY,
        Permission.ANY,
    )
    assert acls.delete([by_alice]) == [[literal, group]]
    assert store(tmp_path).acls == [prefixed, wildcard]
