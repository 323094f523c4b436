"""NOT_LEADER_OR_FOLLOWER answers: the current leader and, where the API carries them, the
endpoints of the brokers the client should go to instead (KIP-951)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kemu.broker.endpoints import advertised_nodes
from kemu.cluster.context import RequestContext
from kemu.cluster.partition import Partition


def leader_fields(ctx: RequestContext, partition: Partition) -> Any:
    """The current leader, or None where this version has no such field (build() drops it)."""
    if not ctx.has("LeaderIdAndEpoch"):
        return None
    return ctx.make(
        "LeaderIdAndEpoch", leader_id=partition.leader_id, leader_epoch=partition.leader_epoch
    )


def endpoints_field(ctx: RequestContext, node_ids: set[int]) -> dict[str, Any]:
    """``node_endpoints`` for the versions that have it, else no field at all: a field given
    that the version lacks makes ``wire.build`` check its name in other versions' schemas
    (~10 ms of imports on the first answer of an older version)."""
    if not ctx.has("NodeEndpoint"):
        return {}
    return {"node_endpoints": node_endpoints(ctx, node_ids) if node_ids else ()}


def node_endpoints(ctx: RequestContext, node_ids: Iterable[int]) -> tuple[Any, ...]:
    if not ctx.has("NodeEndpoint"):
        return ()
    nodes = advertised_nodes(ctx)
    return tuple(
        ctx.make("NodeEndpoint", node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
        for n in (nodes[i] for i in sorted(set(node_ids)) if i in nodes)
    )
