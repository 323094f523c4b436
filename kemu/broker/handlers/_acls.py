"""What the ACL handlers share: the request's principal and the cluster-level check Kafka's
AclApis makes first (DESCRIBE for DescribeAcls, ALTER for CreateAcls and DeleteAcls)."""

from __future__ import annotations

from kemu.broker.security.acls import AclResourceType, AclStore, Operation, acl_store
from kemu.cluster.context import RequestContext

CLUSTER_DENIED = "Cluster authorization failed."


def principal(ctx: RequestContext) -> str:
    session = ctx.session
    return "User:ANONYMOUS" if session is None else str(session.principal)


def store_if_authorized(ctx: RequestContext, operation: Operation) -> tuple[AclStore, bool]:
    """The ACL store, and whether the request's principal may ``operation`` the cluster."""
    store = acl_store(ctx.runtime)
    allowed = store.authorize(
        principal(ctx), ctx.client_host, operation, AclResourceType.CLUSTER, "kafka-cluster"
    )
    return store, allowed
