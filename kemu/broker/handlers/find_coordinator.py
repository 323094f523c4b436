"""FindCoordinator (key 10), v0-v6.

Key types GROUP (0), TRANSACTION (1) and SHARE (2, v6+ only, else INVALID_REQUEST); v4+ looks up
a batch of ``coordinator_keys``. The answer is the leader of the internal-topic partition Kafka
would pick, ``abs(hashCode(key)) % partitions`` of ``__consumer_offsets`` or
``__transaction_state`` (created on the first lookup as Kafka does), or for SHARE the
``__share_group_state`` partition the share coordinator places the key on. A SHARE key must be
``groupId:topicId:partition`` with a base64 topic id and a partition >= 0 (else INVALID_REQUEST,
node -1); an unknown key type is INVALID_REQUEST.

kemu runs one group coordinator per process and every broker accepts group requests, so a client
that follows this answer and one that sends to any broker both work; NOT_COORDINATOR is never
returned for groups. Omissions: no authorizer; the coordinator is available at once (Kafka
answers COORDINATOR_NOT_AVAILABLE while it creates the internal topic).
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import AclOperation, ResourceType, authorize
from kemu.broker.endpoints import advertised_nodes
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.cluster.partition import Partition
from kemu.coordinator.group.placement import (
    GROUP,
    SHARE,
    TRANSACTION,
    coordinator_partition,
    parse_share_coordinator_key,
)
from kemu.coordinator.share.service import share_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.find_coordinator import FindCoordinatorRequestView

API_KEY = 10
# Kafka 4.4.0 answers an unknown key type with INVALID_REQUEST's own message.
INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or the "
    "message was sent to an incompatible broker. See the broker logs for more details."
)
FIRST_SHARE_VERSION = 6


@handler(API_KEY, 0, 6)
def handle(ctx: RequestContext, request: FindCoordinatorRequestView) -> Any:
    key_type = getattr(request, "key_type", GROUP)
    if ctx.version >= 4:
        keys = list(request.coordinator_keys)
        return ctx.respond(
            coordinators=tuple(
                ctx.make("Coordinator", key=key, **_lookup(ctx, key_type, key, ok_message=""))
                for key in keys
            )
        )
    return ctx.respond(**_lookup(ctx, key_type, request.key, ok_message="NONE"))


def _lookup(ctx: RequestContext, key_type: int, key: str, ok_message: str) -> dict[str, Any]:
    """One key's answer; a found coordinator carries ``ok_message`` as Kafka's does (its
    ``Errors.NONE.message()``, "NONE", before v4; an empty string in v4+ entries)."""
    if key_type not in (GROUP, TRANSACTION, SHARE):
        return _error(ErrorCode.invalid_request, INVALID_REQUEST_MESSAGE)
    if key_type in (GROUP, TRANSACTION):
        # KafkaApis: DESCRIBE on the group or the transactional id.
        resource = ResourceType.GROUP if key_type == GROUP else ResourceType.TRANSACTIONAL_ID
        if not authorize(ctx, AclOperation.DESCRIBE, resource, key):
            return _error(
                ErrorCode.group_authorization_failed
                if key_type == GROUP
                else ErrorCode.transactional_id_authorization_failed,
                None,
            )
    if key_type == SHARE:
        if ctx.version < FIRST_SHARE_VERSION:
            return _error(ErrorCode.invalid_request, None)
        if parse_share_coordinator_key(key) is None:
            return _error(ErrorCode.invalid_request, None)
        node = share_coordinator(ctx.runtime).coordinator_node(key)
    else:
        partition: Partition = coordinator_partition(ctx.cluster, key_type, key)
        node = ctx.cluster.nodes.get(partition.leader_id)
    if node is not None:
        node = advertised_nodes(ctx).get(node.node_id)
    if node is None:
        return _error(ErrorCode.coordinator_not_available, None)
    return {
        "error_code": ErrorCode.none,
        "error_message": ok_message,
        "node_id": node.node_id,
        "host": node.host,
        "port": node.port,
    }


def _error(code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "node_id": -1, "host": "", "port": -1}
