"""ListConfigResources (key 74), v0-v1 (``kafka-client-metrics.sh --list``, Admin
``listConfigResources``).

The names of config resources of the requested types: CLIENT_METRICS (16) the stored
subscriptions (``kemu/cluster/client_metrics.py``); from v1 also TOPIC (2) every topic, BROKER
(4) and BROKER_LOGGER (8) every node id, GROUP (32) every group with configs set. An empty type
list means client metrics at v0 and every type at v1; at v0 any other type, and at v1 a type
that is not one of those, is UNSUPPORTED_VERSION, as Kafka answers.

Omission: GROUP lists groups that have configs, not every group that exists.

DESCRIBE_CONFIGS on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED), as Kafka checks.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import AclOperation, cluster_check, refused
from kemu.broker.handlers import handler
from kemu.cluster.client_metrics import client_metrics_store
from kemu.cluster.config_resources import BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP, TOPIC
from kemu.cluster.context import RequestContext
from kemu.coordinator.group import config_resource  # noqa: F401 - registers the GROUP resource
from kemu.coordinator.group.config import group_config_store
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.list_config_resources import ListConfigResourcesRequestView

API_KEY = 74
V1_TYPES = (CLIENT_METRICS, TOPIC, BROKER, BROKER_LOGGER, GROUP)


@handler(API_KEY, 0, 1)
def handle(ctx: RequestContext, request: ListConfigResourcesRequestView) -> Any:
    denied = refused(ctx, request, cluster_check(AclOperation.DESCRIBE_CONFIGS))
    if denied is not None:
        return denied
    wanted = set(getattr(request, "resource_types", ()))
    supported = (CLIENT_METRICS,) if ctx.version == 0 else V1_TYPES
    if wanted - set(supported):
        return ctx.respond(error_code=ErrorCode.unsupported_version, config_resources=())
    chosen = [t for t in supported if not wanted or t in wanted]
    found: list[tuple[str, int]] = []
    for kind in chosen:
        found.extend((name, kind) for name in sorted(_names(ctx, kind)))
    return ctx.respond(
        error_code=ErrorCode.none,
        config_resources=tuple(
            ctx.make("ConfigResource", resource_name=name, resource_type=kind)
            for name, kind in found
        ),
    )


def _names(ctx: RequestContext, kind: int) -> list[str]:
    if kind == CLIENT_METRICS:
        return list(client_metrics_store(ctx.runtime).subscriptions)
    if kind == TOPIC:
        return list(ctx.cluster.topics)
    if kind in (BROKER, BROKER_LOGGER):
        return [str(n) for n in ctx.cluster.node_ids]
    return list(group_config_store(ctx.runtime).overrides)
