"""The endpoints a client is told about: those of the listener it came in on.

With ``listeners`` configured, ``KemuServer`` registers every listener's ``BrokerNode`` per node
id as the ``listener_nodes`` service, and each connection's security session
(``kemu/broker/security/session.py``) knows its listener; the cluster model's ``nodes`` are the
first listener's. Metadata, DescribeCluster, FindCoordinator and the NodeEndpoints of
Produce/Fetch/ShareFetch/ShareAcknowledge answer with ``advertised_nodes(ctx)``, as Kafka
answers with the endpoints of the request's listener.
"""

from __future__ import annotations

from kemu.cluster.context import RequestContext
from kemu.cluster.model import BrokerNode
from kemu.cluster.services import Service

# Per listener name, the broker nodes as that listener advertises them (provided by KemuServer
# when it runs configured listeners).
LISTENER_NODES: Service[dict[str, dict[int, BrokerNode]]] = Service("listener_nodes")


def advertised_nodes(ctx: RequestContext) -> dict[int, BrokerNode]:
    """The running brokers' endpoints (a stopped broker is not advertised, as Kafka's metadata
    leaves out a broker that is not alive)."""
    session = ctx.session
    nodes = ctx.cluster.nodes
    if session is not None:
        by_listener = ctx.runtime.services.get(LISTENER_NODES)
        nodes = by_listener.get(session.listener.name, ctx.cluster.nodes)
    stopped = ctx.cluster.stopped
    if not stopped:
        return nodes
    return {node_id: node for node_id, node in nodes.items() if node_id not in stopped}
