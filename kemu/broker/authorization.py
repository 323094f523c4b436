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
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import structlog

from kemu.broker.security.acls import AclOperation as AclOperation  # one enum for both
from kemu.broker.security.acls import AclResourceType, Operation, acl_store
from kemu.cluster.context import RequestContext

if TYPE_CHECKING:
    from kemu.broker.security.acls import AclStore
    from kemu.protocol.errors import ErrorCode

_log = structlog.get_logger("kemu.authorizer")

OMITTED = -(2**31)


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


def refused(ctx: RequestContext, request: object, *checks: Check) -> Any | None:
    """The error answer to ``request`` at the first check the principal fails (every group,
    topic and partition of it carrying the check's error code, as Kafka's
    ``getErrorResponse``), or None when all pass or no authorizer is configured."""
    if not _store(ctx).enabled:
        return None
    for operation, resource_type, name, code in checks:
        if name is not None and not authorize(ctx, operation, resource_type, name):
            return error_answer(ctx, request, code)
    return None


def error_answer(ctx: RequestContext, request: object, code: ErrorCode) -> Any:
    """The whole-request error answer to ``request`` (Kafka's ``getErrorResponse``)."""
    from kemu.protocol.error_responses import error_response_for
    from kemu.protocol.wire import DecodedRequest

    return error_response_for(DecodedRequest(ctx.header, request, type(request)), code)


def undescribable_subscription(ctx: RequestContext, request: object) -> Any | None:
    """A group heartbeat naming subscribed topics the principal may not DESCRIBE is refused
    whole with TOPIC_AUTHORIZATION_FAILED (KafkaApis since KAFKA-18813/18817); None otherwise."""
    names = getattr(request, "subscribed_topic_names", None)
    if not names or not _store(ctx).enabled:
        return None
    if len(allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)) < len(set(names)):
        from kemu.protocol.errors import ErrorCode

        return error_answer(ctx, request, ErrorCode.topic_authorization_failed)
    return None


def enabled(ctx: RequestContext) -> bool:
    """Whether an authorizer is configured (``authorizer.class.name``)."""
    return _store(ctx).enabled


def allowed_names(
    ctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[str],
    log: bool = True,
) -> set[str]:
    """The names among ``names`` the principal may perform ``operation`` on, each asked once:
    Kafka's ``AuthHelper.filterByAuthorized``."""
    distinct = set(names)
    if not _store(ctx).enabled:
        return distinct
    return {name for name in distinct if authorize(ctx, operation, resource_type, name, log=log)}


def topic_check(operation: AclOperation, name: str | None) -> Check:
    """``operation`` on a topic, refused with TOPIC_AUTHORIZATION_FAILED."""
    from kemu.protocol.errors import ErrorCode

    return (operation, ResourceType.TOPIC, name, ErrorCode.topic_authorization_failed)


def cluster_check(operation: AclOperation) -> Check:
    """``operation`` on the cluster, refused with CLUSTER_AUTHORIZATION_FAILED."""
    from kemu.protocol.errors import ErrorCode

    return (operation, ResourceType.CLUSTER, CLUSTER_NAME, ErrorCode.cluster_authorization_failed)


def group_check(operation: AclOperation, name: str | None) -> Check:
    """``operation`` on a group, refused with GROUP_AUTHORIZATION_FAILED."""
    from kemu.protocol.errors import ErrorCode

    return (operation, ResourceType.GROUP, name, ErrorCode.group_authorization_failed)


# Kafka's ConfigResource.Type ids
_CONFIG_TOPIC, _CONFIG_BROKER, _CONFIG_BROKER_LOGGER, _CONFIG_CLIENT_METRICS, _CONFIG_GROUP = (
    2,
    4,
    8,
    16,
    32,
)


def config_refusal(
    ctx: RequestContext, operation: AclOperation, resource_type: int, name: str
) -> ErrorCode | None:
    """The error for DESCRIBE_CONFIGS / ALTER_CONFIGS on a config resource the principal may
    not touch, else None: broker, broker-logger and client-metrics resources are the cluster's
    (CLUSTER_AUTHORIZATION_FAILED), topics and groups their own (Kafka's ConfigHelper and
    ControllerApis.authorizeAlterResource). Other types are left to the handler."""
    from kemu.protocol.errors import ErrorCode

    if not _store(ctx).enabled:
        return None
    if resource_type in (_CONFIG_BROKER, _CONFIG_BROKER_LOGGER, _CONFIG_CLIENT_METRICS):
        check = cluster_check(operation)
    elif resource_type == _CONFIG_TOPIC:
        check = topic_check(operation, name)
    elif resource_type == _CONFIG_GROUP:
        check = group_check(operation, name)
    else:
        return None
    op, kind, resource, code = check
    assert resource is not None
    return None if authorize(ctx, op, kind, resource) else ErrorCode(code)


def authorize_by_resource_type(
    ctx: RequestContext, operation: AclOperation, resource_type: ResourceType
) -> bool:
    """Whether the principal may perform ``operation`` on some resource of the type (Kafka's
    ``Authorizer.authorizeByResourceType``); always without an authorizer."""
    store = _store(ctx)
    if not store.enabled:
        return True
    session = ctx.session
    principal = "User:ANONYMOUS" if session is None else str(session.principal)
    return store.authorize_by_resource_type(
        principal, ctx.client_host, Operation(int(operation)), AclResourceType(int(resource_type))
    )


def unreadable_topics(ctx: RequestContext, topic_ids: Iterable[uuid.UUID]) -> set[uuid.UUID]:
    """The ids among ``topic_ids`` of existing topics the principal may not READ (unknown ids
    are left to the handler's UNKNOWN_TOPIC_ID)."""
    if not _store(ctx).enabled:
        return set()
    names = {}
    for topic_id in set(topic_ids):
        topic = ctx.cluster.topics_by_id.get(topic_id)
        if topic is not None:
            names[topic_id] = topic.name
    readable = allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC, names.values())
    return {topic_id for topic_id, name in names.items() if name not in readable}


UNDESCRIBABLE_TOPICS_MESSAGE = (
    "The group has described topic(s) that the client is not authorized to describe."
)


def hide_undescribable_topics(ctx: RequestContext, described: Any) -> Any:
    """A described KIP-848 / share group whose members' assignments (or target assignments)
    name a topic the principal may not DESCRIBE, answered as Kafka's ConsumerGroupDescribe and
    ShareGroupDescribe answer it: TOPIC_AUTHORIZATION_FAILED with its message and no members
    (KAFKA-18813/18817). Anything else is returned as it is."""
    from kemu.protocol.errors import ErrorCode

    if not _store(ctx).enabled or described.error_code != ErrorCode.none:
        return described
    names: set[str] = set()
    for member in described.members:
        for assignment in (member.assignment, getattr(member, "target_assignment", None)):
            if assignment is not None:
                names.update(tp.topic_name for tp in assignment.topic_partitions)
    if len(allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)) == len(names):
        return described
    import dataclasses

    return dataclasses.replace(
        described,
        error_code=ErrorCode.topic_authorization_failed,
        error_message=UNDESCRIBABLE_TOPICS_MESSAGE,
        members=(),
    )
