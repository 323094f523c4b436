"""ACLs and an authorizer with the semantics of Kafka's StandardAuthorizer (sans IO).

An ACL binds a resource pattern (type, name, LITERAL or PREFIXED) to an entry (principal, host,
operation, ALLOW/DENY). ``AclStore.authorize`` decides one action the way
``StandardAuthorizerData.authorize`` does: a ``super.users`` principal may do anything; else the
ACLs whose pattern matches the resource (the literal name, the literal wildcard ``*``, or a
prefix of the name) and whose principal is the request's or ``User:*`` and whose host is the
client's or ``*`` are consulted; any matching DENY denies, else any matching ALLOW allows (an
ALLOW for READ, WRITE, DELETE or ALTER implies DESCRIBE, one for ALTER_CONFIGS implies
DESCRIBE_CONFIGS; ALL matches every operation); with no ALLOW, an action on a resource that has
ACLs (for anyone) is denied, and one on a resource without any ACL follows
``allow.everyone.if.no.acl.found`` (default false).

Filters (DescribeAcls, DeleteAcls) follow Kafka's ``AclBindingFilter``: ANY matches every value,
a null name/principal/host matches every one, and pattern type MATCH selects the patterns that
would apply to the named resource. ACLs are kept in ``<data-dir>/kemu-acls.json`` (rewritten
atomically on change) or in memory.
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kemu.cluster.context import Runtime
from kemu.cluster.services import Service
from kemu.config.definitions import BrokerConfig, InvalidConfig
from kemu.storage.data_files import read_data_file
from kemu.storage.durable import fsync_directory

FILE_NAME = "kemu-acls.json"
REMEDY = "restore it from a backup (removing it would drop every ACL)"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class AclResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


AclOperation = Operation  # Kafka's name for it, as kemu.broker.authorization uses it


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


IMPLIES_DESCRIBE = frozenset(
    {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
)
IMPLIES_DESCRIBE_CONFIGS = frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS})


class InvalidAcl(ValueError):
    """INVALID_REQUEST with Kafka's message."""


def _enum_value(kind: type[enum.IntEnum], value: int) -> enum.IntEnum:
    try:
        return kind(value)
    except ValueError:
        return kind(0)  # UNKNOWN, as Kafka's fromCode maps an unknown code


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def validate(self) -> None:
        """AclControlManager.validateNewAcl and AclApis' checks, with their messages."""
        resource = _enum_value(AclResourceType, self.resource_type)
        if resource in (AclResourceType.UNKNOWN, AclResourceType.ANY):
            raise InvalidAcl(f"Invalid resourceType {resource.name}")
        pattern = _enum_value(PatternType, self.pattern_type)
        if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"Invalid patternType {pattern.name}")
        operation = _enum_value(Operation, self.operation)
        if operation in (Operation.UNKNOWN, Operation.ANY):
            raise InvalidAcl(f"Invalid operation {operation.name}")
        permission = _enum_value(Permission, self.permission)
        if permission not in (Permission.DENY, Permission.ALLOW):
            raise InvalidAcl(f"Invalid permissionType {permission.name}")
        if resource == AclResourceType.CLUSTER and self.resource_name != "kafka-cluster":
            raise InvalidAcl("The only valid name for the CLUSTER resource is kafka-cluster")
        if not self.resource_name:
            raise InvalidAcl("Invalid empty resource name")
        kind, sep, name = self.principal.partition(":")
        if not sep or not kind or not name:
            raise InvalidAcl(
                f"expected a string in format principalType:principalName but got {self.principal}"
            )


@dataclass(frozen=True, slots=True)
class AclFilter:
    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def validate(self) -> None:
        if (
            _enum_value(AclResourceType, self.resource_type) == AclResourceType.UNKNOWN
            or _enum_value(PatternType, self.pattern_type) == PatternType.UNKNOWN
        ):
            raise InvalidAcl("Unknown patternFilter.")
        if (
            _enum_value(Operation, self.operation) == Operation.UNKNOWN
            or _enum_value(Permission, self.permission) == Permission.UNKNOWN
        ):
            raise InvalidAcl("Unknown entryFilter.")

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != AclResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, acl.pattern_type):
            return False
        if self.resource_name is not None:
            if self.pattern_type in (PatternType.ANY, acl.pattern_type):
                if self.resource_name != acl.resource_name:
                    return False
            elif acl.pattern_type == PatternType.LITERAL:  # MATCH
                if acl.resource_name not in (self.resource_name, WILDCARD):
                    return False
            elif not self.resource_name.startswith(acl.resource_name):  # MATCH, PREFIXED
                return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != Operation.ANY and self.operation != acl.operation:
            return False
        return self.permission == Permission.ANY or self.permission == acl.permission


def _applies(acl: AclBinding, operation: Operation) -> bool:
    if acl.operation == Operation.ALL:
        return True
    if acl.permission == Permission.ALLOW:
        if operation == Operation.DESCRIBE:
            return acl.operation in IMPLIES_DESCRIBE
        if operation == Operation.DESCRIBE_CONFIGS:
            return acl.operation in IMPLIES_DESCRIBE_CONFIGS
    return acl.operation == operation


def super_users(config: BrokerConfig) -> frozenset[str]:
    """``super.users``: principals separated by ';', each ``Type:name`` (as Kafka 4.4.0's
    StandardAuthorizer reads them when it is configured: an entry without a colon fails start-up
    with SecurityUtils.parseKafkaPrincipal's message). Raises InvalidConfig."""
    value = config.get("super.users") or ""
    users = [user.strip() for user in value.split(";") if user.strip()]
    for user in users:
        if ":" not in user:
            raise InvalidConfig(
                f"Invalid value {value} for configuration super.users: expected a string in "
                f"format principalType:principalName but got {user}"
            )
    return frozenset(users)


class AclStore:
    """The process's ACLs and authorizer settings (runtime service ``acls``)."""

    def __init__(self, config: BrokerConfig, data_dir: Path | None) -> None:
        self.enabled = bool((config.get("authorizer.class.name") or "").strip())
        self.super_users = super_users(config) if self.enabled else frozenset()
        self.allow_if_no_acl = (
            config.get("allow.everyone.if.no.acl.found") or "false"
        ).lower() == "true"
        self.path = data_dir / FILE_NAME if data_dir is not None else None
        self.acls: list[AclBinding] = []
        if self.path is not None:
            self.acls = read_data_file(self.path, REMEDY, _decode_acls) or []

    def authorize(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: AclResourceType,
        name: str,
    ) -> bool:
        if not self.enabled or principal in self.super_users:
            return True
        has_resource_acls = False
        allowed = False
        for acl in self.acls:
            if acl.resource_type != resource_type or not _pattern_matches(acl, name):
                continue
            has_resource_acls = True
            if acl.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if acl.host not in (WILDCARD, host) or not _applies(acl, operation):
                continue
            if acl.permission == Permission.DENY:
                return False
            allowed = True
        if allowed:
            return True
        return not has_resource_acls and self.allow_if_no_acl

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: Operation, resource_type: AclResourceType
    ) -> bool:
        """Whether some resource of the type allows ``operation`` (Kafka's default
        ``Authorizer.authorizeByResourceType``): super users and the no-ACL default as for a
        made-up name, else an ALLOW (the operation or ALL) for the principal on a literal or
        prefixed name that no DENY covers (a literal DENY on ``*`` covers everything)."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny_literals: set[str] = set()
        deny_prefixes: set[str] = set()
        allows: list[AclBinding] = []
        for acl in self.acls:
            if acl.resource_type != resource_type:
                continue
            if acl.operation not in (operation, Operation.ALL):
                continue
            if acl.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if acl.host not in (WILDCARD, host):
                continue
            if acl.permission == Permission.DENY:
                if acl.pattern_type == PatternType.LITERAL:
                    deny_literals.add(acl.resource_name)
                else:
                    deny_prefixes.add(acl.resource_name)
            elif acl.permission == Permission.ALLOW:
                allows.append(acl)
        if WILDCARD in deny_literals:
            return False

        def prefix_denied(name: str) -> bool:
            return any(name.startswith(prefix) for prefix in deny_prefixes)

        for acl in allows:
            name = acl.resource_name
            if acl.pattern_type == PatternType.LITERAL:
                if name == WILDCARD or (name not in deny_literals and not prefix_denied(name)):
                    return True
            elif not prefix_denied(name):
                return True
        return False

    def create(self, bindings: list[AclBinding]) -> None:
        for binding in bindings:
            if binding not in self.acls:
                self.acls.append(binding)
        self._save()

    def delete(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """The ACLs each filter removed (an ACL matched by two filters is listed by both)."""
        removed = [[acl for acl in self.acls if f.matches(acl)] for f in filters]
        gone = {acl for matched in removed for acl in matched}
        if gone:
            self.acls = [acl for acl in self.acls if acl not in gone]
            self._save()
        return removed

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        return [acl for acl in self.acls if acl_filter.matches(acl)]

    def _save(self) -> None:
        if self.path is None:
            return
        temporary = self.path.with_name(FILE_NAME + ".tmp")
        with open(temporary, "w") as file:
            json.dump({"acls": [asdict(acl) for acl in self.acls]}, file)
            file.flush()
            os.fsync(file.fileno())
        temporary.replace(self.path)
        # the rename itself is durable only once the directory is synced (a power loss)
        fsync_directory(self.path.parent)


def _decode_acls(saved: dict[str, list[dict[str, Any]]]) -> list[AclBinding]:
    return [AclBinding(**entry) for entry in saved["acls"]]


def _pattern_matches(acl: AclBinding, name: str) -> bool:
    if acl.pattern_type == PatternType.LITERAL:
        return acl.resource_name in (name, WILDCARD)
    return name.startswith(acl.resource_name)


ACL_STORE = Service("acls", lambda rt: AclStore(rt.cluster.config, rt.cluster.data_dir))


def acl_store(runtime: Runtime) -> AclStore:
    return runtime.services.get(ACL_STORE)
