"""CreateAcls (key 30), v1-v3.

With an authorizer (``authorizer.class.name`` set; kemu implements StandardAuthorizer's
semantics in ``kemu/broker/security/acls.py``) each creation is validated as Kafka's AclApis
and AclControlManager do — resource type, pattern type (LITERAL or PREFIXED), operation and
permission must be concrete, a CLUSTER resource must be named ``kafka-cluster``, the name must
not be empty, the principal must be ``type:name`` — and INVALID_REQUEST carries Kafka's message;
valid ones are stored (an existing identical ACL is not duplicated) in ``<data-dir>/kemu-acls.json``
before the answer. The principal needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for
every creation otherwise). Without an authorizer every creation gets SECURITY_DISABLED
("No Authorizer is configured."), as Kafka answers.
"""

from __future__ import annotations

import datetime
from typing import Any

from kemu.broker.handlers import handler
from kemu.broker.handlers._acls import CLUSTER_DENIED, store_if_authorized
from kemu.broker.security.acls import AclBinding, InvalidAcl, Operation
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.create_acls import CreateAclsRequestView

API_KEY = 30


@handler(API_KEY, 1, 3)
def handle(ctx: RequestContext, request: CreateAclsRequestView) -> Any:
    store, allowed = store_if_authorized(ctx, Operation.ALTER)
    outcomes: list[tuple[ErrorCode, str | None]] = []
    valid: list[AclBinding] = []
    for creation in request.creations:
        if not store.enabled:
            outcomes.append((ErrorCode.security_disabled, "No Authorizer is configured."))
            continue
        if not allowed:
            outcomes.append((ErrorCode.cluster_authorization_failed, CLUSTER_DENIED))
            continue
        binding = AclBinding(
            creation.resource_type,
            creation.resource_name,
            creation.resource_pattern_type,
            creation.principal,
            creation.host,
            creation.operation,
            creation.permission_type,
        )
        try:
            binding.validate()
        except InvalidAcl as invalid:
            outcomes.append((ErrorCode.invalid_request, str(invalid)))
            continue
        valid.append(binding)
        outcomes.append((ErrorCode.none, None))
    if valid:
        store.create(valid)
    return ctx.respond(
        throttle_time=datetime.timedelta(0),
        results=tuple(
            ctx.make("AclCreationResult", error_code=error, error_message=message)
            for error, message in outcomes
        ),
    )
