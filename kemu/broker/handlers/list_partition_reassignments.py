"""ListPartitionReassignments (key 46), v0 (``kafka-reassign-partitions.sh --list/--verify``).

Always answers with no ongoing reassignment: kemu completes a reassignment before
AlterPartitionReassignments answers (every replica reports the one copy of the log, so new
replicas are in sync at once). Named topics or partitions that do not exist are left out, as
Kafka leaves out partitions without a reassignment.

DESCRIBE on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED), as Kafka checks.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import AclOperation, cluster_check, refused
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.list_partition_reassignments import ListPartitionReassignmentsRequestView

API_KEY = 46


@handler(API_KEY, 0, 0)
def handle(ctx: RequestContext, request: ListPartitionReassignmentsRequestView) -> Any:
    denied = refused(ctx, request, cluster_check(AclOperation.DESCRIBE))
    if denied is not None:
        return denied
    return ctx.respond(error_code=ErrorCode.none, error_message=None, topics=())
