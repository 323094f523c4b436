"""DescribeCluster (key 60), v0-v2.

Cluster id, controller id (the lowest node id, as Metadata reports it) and every broker; all
brokers are unfenced. Brokers answer for endpoint type 1 (BROKER, the only one before v1); a
request for controllers (2) gets MISMATCHED_ENDPOINT_TYPE and an unknown type
UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST at v0), with Kafka's messages. With
``include_cluster_authorized_operations`` every cluster operation is reported allowed (as Kafka
without an authorizer: ``kemu.broker.authorization``).

Omissions: no authorizer, no controller endpoints (kemu has no separate controller quorum).
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import CLUSTER_NAME, OMITTED, ResourceType, operations_if
from kemu.broker.endpoints import advertised_nodes
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.describe_cluster import DescribeClusterRequestView

API_KEY = 60
BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2
ENDPOINT_NAMES = {BROKER_ENDPOINT: "BROKER", CONTROLLER_ENDPOINT: "CONTROLLER"}


@handler(API_KEY, 0, 2)
def handle(ctx: RequestContext, request: DescribeClusterRequestView) -> Any:
    endpoint_type = getattr(request, "endpoint_type", BROKER_ENDPOINT)
    if endpoint_type not in ENDPOINT_NAMES:
        return ctx.respond(
            error_code=ErrorCode.invalid_request
            if ctx.version == 0
            else ErrorCode.unsupported_endpoint_type,
            error_message=f"Unsupported endpoint type {endpoint_type}",
            endpoint_type=endpoint_type,
            cluster_id="",
            controller_id=-1,
            brokers=(),
            cluster_authorized_operations=OMITTED,
        )
    if endpoint_type != BROKER_ENDPOINT:
        return ctx.respond(
            error_code=ErrorCode.invalid_request
            if ctx.version == 0
            else ErrorCode.mismatched_endpoint_type,
            error_message="The request was sent to an endpoint of type BROKER, but we wanted an "
            f"endpoint of type {ENDPOINT_NAMES[endpoint_type]}",
            endpoint_type=BROKER_ENDPOINT,  # Kafka names the endpoint that answered
            cluster_id="",
            controller_id=-1,
            brokers=(),
            cluster_authorized_operations=OMITTED,
        )
    cluster = ctx.cluster
    nodes = advertised_nodes(ctx)
    brokers = tuple(
        ctx.make(
            "DescribeClusterBroker",
            broker_id=node.node_id,
            host=node.host,
            port=node.port,
            rack=node.rack,
            is_fenced=False,
        )
        for node in (nodes[i] for i in cluster.node_ids if i in nodes)
    )
    return ctx.respond(
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=BROKER_ENDPOINT,
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        brokers=brokers,
        cluster_authorized_operations=operations_if(
            request.include_cluster_authorized_operations,
            ctx,
            ResourceType.CLUSTER,
            CLUSTER_NAME,
        ),
    )
