"""DescribeAcls (key 29), v1-v3.

The ACLs matching the filter (Kafka's AclBindingFilter: ANY, null name/principal/host, pattern
type MATCH for the patterns that apply to a name), grouped by resource pattern. Needs DESCRIBE
on the cluster (CLUSTER_AUTHORIZATION_FAILED); an unknown filter is INVALID_REQUEST; without an
authorizer the answer is SECURITY_DISABLED ("No Authorizer is configured on the broker"), as
Kafka's AclApis answers.
"""

from __future__ import annotations

import datetime
from typing import Any

from kemu.broker.handlers import handler
from kemu.broker.handlers._acls import CLUSTER_DENIED, store_if_authorized
from kemu.broker.security.acls import AclBinding, AclFilter, InvalidAcl, Operation
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.describe_acls import DescribeAclsRequestView

API_KEY = 29


@handler(API_KEY, 1, 3)
def handle(ctx: RequestContext, request: DescribeAclsRequestView) -> Any:
    store, allowed = store_if_authorized(ctx, Operation.DESCRIBE)
    if not store.enabled:
        return _error(ctx, ErrorCode.security_disabled, "No Authorizer is configured on the broker")
    if not allowed:
        return _error(ctx, ErrorCode.cluster_authorization_failed, CLUSTER_DENIED)
    acl_filter = AclFilter(
        request.resource_type_filter,
        request.resource_name_filter,
        request.pattern_type_filter,
        request.principal_filter,
        request.host_filter,
        request.operation,
        request.permission_type,
    )
    try:
        acl_filter.validate()
    except InvalidAcl as invalid:
        return _error(ctx, ErrorCode.invalid_request, str(invalid))
    grouped: dict[tuple[int, str, int], list[AclBinding]] = {}
    for acl in store.describe(acl_filter):
        grouped.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(acl)
    resources = tuple(
        ctx.make(
            "DescribeAclsResource",
            resource_type=resource_type,
            resource_name=name,
            pattern_type=pattern_type,
            acls=tuple(
                ctx.make(
                    "AclDescription",
                    principal=acl.principal,
                    host=acl.host,
                    operation=acl.operation,
                    permission_type=acl.permission,
                )
                for acl in acls
            ),
        )
        for (resource_type, name, pattern_type), acls in grouped.items()
    )
    return ctx.respond(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        resources=resources,
    )


def _error(ctx: RequestContext, error: ErrorCode, message: str) -> Any:
    return ctx.respond(
        throttle_time=datetime.timedelta(0), error_code=error, error_message=message, resources=()
    )
