"""DeleteAcls (key 31), v1-v3.

Each filter (Kafka's AclBindingFilter, as DescribeAcls) removes the ACLs it matches and lists
them; the store is rewritten before the answer. An unknown filter is INVALID_REQUEST for that
filter. Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED per filter); without an
authorizer every filter gets SECURITY_DISABLED ("No Authorizer is configured."), as Kafka.
"""

from __future__ import annotations

import datetime
from typing import Any

from kemu.broker.handlers import handler
from kemu.broker.handlers._acls import CLUSTER_DENIED, store_if_authorized
from kemu.broker.security.acls import AclBinding, AclFilter, InvalidAcl, Operation
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.delete_acls import DeleteAclsRequestView

API_KEY = 31


@handler(API_KEY, 1, 3)
def handle(ctx: RequestContext, request: DeleteAclsRequestView) -> Any:
    store, allowed = store_if_authorized(ctx, Operation.ALTER)
    refusals: dict[int, tuple[ErrorCode, str]] = {}
    filters: list[tuple[int, AclFilter]] = []
    for index, entry in enumerate(request.filters):
        if not store.enabled:
            refusals[index] = (ErrorCode.security_disabled, "No Authorizer is configured.")
            continue
        if not allowed:
            refusals[index] = (ErrorCode.cluster_authorization_failed, CLUSTER_DENIED)
            continue
        acl_filter = AclFilter(
            entry.resource_type_filter,
            entry.resource_name_filter,
            entry.pattern_type_filter,
            entry.principal_filter,
            entry.host_filter,
            entry.operation,
            entry.permission_type,
        )
        try:
            acl_filter.validate()
        except InvalidAcl as invalid:
            refusals[index] = (ErrorCode.invalid_request, str(invalid))
            continue
        filters.append((index, acl_filter))
    removed = dict(
        zip(
            (index for index, _ in filters),
            store.delete([f for _, f in filters]) if filters else [],
            strict=True,
        )
    )
    results = []
    for index in range(len(request.filters)):
        error, message = refusals.get(index, (ErrorCode.none, None))
        results.append(
            ctx.make(
                "DeleteAclsFilterResult",
                error_code=error,
                error_message=message,
                matching_acls=tuple(_matching(ctx, acl) for acl in removed.get(index, [])),
            )
        )
    return ctx.respond(throttle_time=datetime.timedelta(0), filter_results=tuple(results))


def _matching(ctx: RequestContext, acl: AclBinding) -> Any:
    return ctx.make(
        "DeleteAclsMatchingAcl",
        error_code=ErrorCode.none,
        error_message=None,
        resource_type=acl.resource_type,
        resource_name=acl.resource_name,
        pattern_type=acl.pattern_type,
        principal=acl.principal,
        host=acl.host,
        operation=acl.operation,
        permission_type=acl.permission,
    )
