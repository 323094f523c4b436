"""DescribeClientQuotas (key 48), v0-v1 (``kafka-configs --describe``: users, clients, ips).

Answers from the stored quotas (``kemu/cluster/client_quotas.py``) with Kafka's filter rules:
each component matches an entity type exactly (a name), its default entity, or any specified
(non-default) name; ``strict`` also requires the entity to have no other types. A bad filter (a
type twice, an unknown type or match type, a match string where none belongs, IP with user or
client id) is INVALID_REQUEST with Kafka's message and no entries.

DESCRIBE_CONFIGS on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED), as Kafka checks.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import AclOperation, cluster_check, refused
from kemu.broker.handlers import handler
from kemu.cluster.client_quotas import Component, QuotaError, client_quotas
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.describe_client_quotas import DescribeClientQuotasRequestView

API_KEY = 48


@handler(API_KEY, 0, 1)
def handle(ctx: RequestContext, request: DescribeClientQuotasRequestView) -> Any:
    denied = refused(ctx, request, cluster_check(AclOperation.DESCRIBE_CONFIGS))
    if denied is not None:
        return denied
    components = [Component(c.entity_type, c.match_type, c.match) for c in request.components]
    try:
        found = client_quotas(ctx.runtime).describe(components, request.strict)
    except QuotaError as error:
        return ctx.respond(
            error_code=ErrorCode.invalid_request, error_message=str(error), entries=None
        )
    entries = tuple(
        ctx.make(
            "EntryData",
            entity=tuple(
                ctx.make("EntityData", entity_type=kind, entity_name=name) for kind, name in entity
            ),
            values=tuple(
                ctx.make("ValueData", key=key, value=value) for key, value in sorted(values.items())
            ),
        )
        for entity, values in found
    )
    return ctx.respond(error_code=ErrorCode.none, error_message=None, entries=entries)
