"""AlterClientQuotas (key 49), v0-v1 (``kafka-configs --alter --entity-type users|clients|ips``).

Sets or removes quota keys per entity (a user, a client id, both, or an IP; a null name is the
default entity), stored durably with ``--data-dir`` (``kemu/cluster/client_quotas.py``). Each
entry succeeds or fails alone, all its ops or none; checks and messages are Kafka's
(ClientQuotaControlManager): an empty entity, a type twice, an unknown type, IP combined with
user or client id, a key that is not a quota of that entity ("Invalid configuration key K"), a
value that is not finite, not greater than 0 or too large for the key's type — all
INVALID_REQUEST. ``validate_only`` checks and changes nothing. Removing an entity's last key
removes the entity.

Quotas take effect at once: ``producer_byte_rate``, ``consumer_byte_rate``,
``request_percentage`` and ``controller_mutation_rate`` (CreateTopics, CreatePartitions,
DeleteTopics) are enforced with Kafka's arithmetic and precedence
(``kemu/cluster/quota_enforcement.py``, ``kemu/broker/throttling.py``: ThrottleTimeMs, then the
connection muted); ``connection_creation_rate`` (an IP or the default IP) throttles the IP's
new connections, kept unread and closed after the throttle time, as Kafka's ConnectionQuotas
(``kemu/cluster/connection_quotas.py``, ``kemu/broker/acceptors.py``).

ALTER_CONFIGS on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED), as Kafka checks.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import AclOperation, cluster_check, refused
from kemu.broker.handlers import handler
from kemu.cluster.client_quotas import QuotaError, QuotaOp, client_quotas, make_entity
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.alter_client_quotas import AlterClientQuotasRequestView

API_KEY = 49


@handler(API_KEY, 0, 1)
def handle(ctx: RequestContext, request: AlterClientQuotasRequestView) -> Any:
    denied = refused(ctx, request, cluster_check(AclOperation.ALTER_CONFIGS))
    if denied is not None:
        return denied
    quotas = client_quotas(ctx.runtime)
    entries = []
    for entry in request.entries:
        code, message = ErrorCode.none, None
        try:
            entity = make_entity((e.entity_type, e.entity_name) for e in entry.entity)
            ops = [QuotaOp(op.key, op.value, op.remove) for op in entry.ops]
            quotas.alter(entity, ops, validate_only=request.validate_only)
        except QuotaError as error:
            code, message = ErrorCode.invalid_request, str(error)
        entries.append(
            ctx.make(
                "EntryData",
                error_code=code,
                error_message=message,
                entity=tuple(
                    ctx.make("EntityData", entity_type=e.entity_type, entity_name=e.entity_name)
                    for e in entry.entity
                ),
            )
        )
    return ctx.respond(entries=tuple(entries))
