"""DescribeUserScramCredentials (key 50), v0.

Lists the SCRAM mechanisms and iteration counts of the named users (every user with a credential
when the list is null or empty) from kemu's credential store (``kemu.sasl.users`` and what
AlterUserScramCredentials stored: ``kemu/broker/security/credentials.py``). A user named twice
gets DUPLICATE_RESOURCE, one without a credential RESOURCE_NOT_FOUND, with the messages of
Kafka's ScramControlManager.

With an authorizer the principal needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import datetime
from collections import Counter
from typing import Any

from kemu.broker.authorization import CLUSTER_NAME, AclOperation, ResourceType, authorize
from kemu.broker.handlers import handler
from kemu.broker.security.credentials import MECHANISM_IDS, credentials
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequestView,
)

API_KEY = 50
MECHANISM_NUMBERS = {name: number for number, name in MECHANISM_IDS.items()}


@handler(API_KEY, 0, 0)
def handle(ctx: RequestContext, request: DescribeUserScramCredentialsRequestView) -> Any:
    store = credentials(ctx.runtime)
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        # As Kafka's getErrorResponse: the error at the top and in one result per named user,
        # whose name it leaves empty.
        denied, why = ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
        return ctx.respond(
            throttle_time=datetime.timedelta(0),
            error_code=denied,
            error_message=why,
            results=tuple(
                ctx.make(
                    "DescribeUserScramCredentialsResult",
                    user="",
                    error_code=denied,
                    error_message=why,
                    credential_infos=(),
                )
                for _ in request.users or ()
            ),
        )
    named = [user.name for user in request.users or ()]
    counts = Counter(named)
    results = []
    message: str | None
    seen: set[str] = set()
    for user in named or store.users():
        if user in seen:
            continue
        seen.add(user)
        mechanisms = store.scram.get(user, {})
        if counts[user] > 1:
            error, message = (
                ErrorCode.duplicate_resource,
                "Cannot describe SCRAM credentials for the same user twice in a single "
                f"request: {user}",
            )
        elif not mechanisms:
            error, message = (
                ErrorCode.resource_not_found,
                f"Attempt to describe a user credential that does not exist: {user}",
            )
        else:
            error, message = ErrorCode.none, None
        infos = (
            tuple(
                ctx.make(
                    "CredentialInfo",
                    mechanism=MECHANISM_NUMBERS[name],
                    iterations=credential.iterations,
                )
                for name, credential in sorted(mechanisms.items())
            )
            if error == ErrorCode.none
            else ()
        )
        results.append(
            ctx.make(
                "DescribeUserScramCredentialsResult",
                user=user,
                error_code=error,
                error_message=message,
                credential_infos=infos,
            )
        )
    return ctx.respond(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        results=tuple(results),
    )
