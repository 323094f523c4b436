"""Authorized operations, in one place for every handler that reports them.

Responses that carry an ``...AuthorizedOperations`` bit field (Metadata, DescribeCluster,
DescribeTopicPartitions, DescribeGroups, ConsumerGroupDescribe, ShareGroupDescribe) get it from
``authorized_operations``, Kafka's ``AuthHelper.authorizedOperations``: the operations a resource
type supports (Kafka's ``AclEntry.supportedOperations``), filtered by the authorizer. kemu has no
authorizer yet, so, as Kafka without one, every supported operation is reported allowed; an
authorizer plugs in by filtering ``SUPPORTED_OPERATIONS[resource_type]`` for the request's
principal here.

The bit field sets bit ``1 << code`` for each operation's ``AclOperation`` code
(``Utils.to32BitField``). ``OMITTED`` (Integer.MIN_VALUE) is the schemas' default, sent when the
request did not ask for operations.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import structlog

from kemu.cluster.context import RequestContext

if TYPE_CHECKING:
    from kemu.broker.security.acls import AclStore
    from kemu.protocol.errors import ErrorCode

_log = structlog.get_logger("kemu.authorizer")

OMITTED = -(2**31)


class AclOperation(enum.IntEnum):
    """Kafka's ``AclOperation`` codes."""

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


class ResourceType(enum.IntEnum):
    """Kafka's ``ResourceType`` codes (the concrete ones)."""

    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


CLUSTER_NAME = "kafka-cluster"

_Op = AclOperation
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {_Op.READ, _Op.WRITE, _Op.CREATE, _Op.DESCRIBE, _Op.DELETE, _Op.ALTER}
        | {_Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}
    ),
    ResourceType.GROUP: frozenset(
        (_Op.READ, _Op.DESCRIBE, _Op.DELETE, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS)
    ),
    ResourceType.CLUSTER: frozenset(
        {_Op.CREATE, _Op.CLUSTER_ACTION, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}
        | {_Op.IDEMPOTENT_WRITE, _Op.ALTER, _Op.DESCRIBE}
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset((_Op.DESCRIBE, _Op.WRITE)),
    ResourceType.DELEGATION_TOKEN: frozenset((_Op.DESCRIBE,)),
    ResourceType.USER: frozenset((_Op.CREATE_TOKENS, _Op.DESCRIBE_TOKENS)),
}


def bit_field(operations: Iterable[AclOperation]) -> int:
    """Kafka's ``Utils.to32BitField`` of the operations' codes."""
    bits = 0
    for operation in operations:
        bits |= 1 << int(operation)
    return bits


def authorized_operations(ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
    """The operations on ``name`` the request's principal may perform, as a bit field.

    Without an authorizer that is every operation the resource type supports.
    """
    supported = SUPPORTED_OPERATIONS[resource_type]
    if not _store(ctx).enabled:
        return bit_field(supported)
    return bit_field(op for op in supported if authorize(ctx, op, resource_type, name, log=False))


def _store(ctx: RequestContext) -> AclStore:
    from kemu.broker.security.acls import acl_store

    return acl_store(ctx.runtime)


def authorize(
    ctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    log: bool = True,
) -> bool:
    """Whether the request's principal may perform ``operation`` on the resource: always without
    ``authorizer.class.name``, else by the ACLs (``kemu/broker/security/acls.py``, Kafka's
    StandardAuthorizer rules). A denial is logged, as Kafka's authorizer audit log does."""
    store = _store(ctx)
    if not store.enabled:
        return True
    from kemu.broker.security.acls import AclResourceType, Operation

    session = ctx.session
    principal = "User:ANONYMOUS" if session is None else str(session.principal)
    allowed = store.authorize(
        principal,
        ctx.client_host,
        Operation(int(operation)),
        AclResourceType(int(resource_type)),
        name,
    )
    if not allowed and log:
        _log.info(
            "authorization_denied",
            principal=principal,
            host=ctx.client_host,
            operation=operation.name,
            resource=f"{resource_type.name}:{name}",
        )
    return allowed


def operations_if(wanted: bool, ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
    """``authorized_operations`` when the request asked for them, else ``OMITTED``."""
    return authorized_operations(ctx, resource_type, name) if wanted else OMITTED


# --- whole-request checks ------------------------------------------------------------------------

# (operation, resource type, resource name or None to skip, error code when denied)
Check = tuple[AclOperation, ResourceType, "str | None", "ErrorCode"]


def group_read(name: str | None) -> Check:
    from kemu.protocol.errors import ErrorCode

    return (AclOperation.READ, ResourceType.GROUP, name, ErrorCode.group_authorization_failed)


def txn_write(name: str | None) -> Check:
    from kemu.protocol.errors import ErrorCode

    code = ErrorCode.transactional_id_authorization_failed
    return (AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, name, code)


def refused(ctx: RequestContext, request: Any, *checks: Check) -> Any | None:
    """The error answer to ``request`` at the first check the principal fails (every group,
    topic and partition of it carrying the check's error code, as Kafka's
    ``getErrorResponse``), or None when all pass or no authorizer is configured."""
    if not _store(ctx).enabled:
        return None
    for operation, resource_type, name, code in checks:
        if name is not None and not authorize(ctx, operation, resource_type, name):
            from kemu.protocol.error_responses import error_response_for
            from kemu.protocol.wire import DecodedRequest

            return error_response_for(DecodedRequest(ctx.header, request, type(request)), code)
    return None
