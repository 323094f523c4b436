"""AlterUserScramCredentials (key 51), v0.

Upserts and deletes SCRAM-SHA-256/512 credentials: the client sends the salted password, salt
and iterations, kemu keeps salt, StoredKey, ServerKey and iterations (as Kafka's metadata
does), in ``<data-dir>/kemu-scram-credentials.json`` (written before the answer) or in memory.
A new credential is used by the next authentication. Refusals per user, with the errors and
messages of Kafka's ScramControlManager: a user altered twice in one request
(DUPLICATE_RESOURCE), an empty name or iterations outside 4096..16384
(UNACCEPTABLE_CREDENTIAL), an unknown mechanism (UNSUPPORTED_SASL_MECHANISM), deleting what
does not exist (RESOURCE_NOT_FOUND).

With an authorizer the principal needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for
every user).
"""

from __future__ import annotations

import datetime
from collections import Counter
from typing import Any

from kemu.broker.authorization import CLUSTER_NAME, AclOperation, ResourceType, authorize
from kemu.broker.handlers import handler
from kemu.broker.security.credentials import (
    MAX_ITERATIONS,
    MECHANISM_IDS,
    MIN_ITERATIONS,
    ScramCredential,
    credentials,
)
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.alter_user_scram_credentials import AlterUserScramCredentialsRequestView

API_KEY = 51


@handler(API_KEY, 0, 0)
def handle(ctx: RequestContext, request: AlterUserScramCredentialsRequestView) -> Any:
    store = credentials(ctx.runtime)
    counts = Counter([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    outcome: dict[str, tuple[ErrorCode, str | None]] = {}
    changes: list[tuple[str, str, ScramCredential | None]] = []

    def refuse(user: str, error: ErrorCode, message: str) -> None:
        outcome.setdefault(user, (error, message))

    if not authorize(ctx, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        for entry in (*request.deletions, *request.upsertions):
            refuse(
                entry.name, ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
            )
    for deletion in request.deletions if not outcome else ():
        user = deletion.name
        mechanism = MECHANISM_IDS.get(deletion.mechanism)
        if counts[user] > 1:
            refuse(
                user,
                ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request",
            )
        elif not user:
            refuse(user, ErrorCode.unacceptable_credential, "Username must not be empty")
        elif mechanism is None:
            refuse(user, ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
        elif store.scram_credential(user, mechanism) is None:
            refuse(
                user,
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            )
        else:
            changes.append((user, mechanism, None))
            outcome[user] = (ErrorCode.none, None)
    for upsertion in request.upsertions if not outcome else ():
        user = upsertion.name
        mechanism = MECHANISM_IDS.get(upsertion.mechanism)
        if counts[user] > 1:
            refuse(
                user,
                ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request",
            )
        elif not user:
            refuse(user, ErrorCode.unacceptable_credential, "Username must not be empty")
        elif mechanism is None:
            refuse(user, ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
        elif upsertion.iterations < MIN_ITERATIONS:
            refuse(user, ErrorCode.unacceptable_credential, "Too few iterations")
        elif upsertion.iterations > MAX_ITERATIONS:
            refuse(user, ErrorCode.unacceptable_credential, "Too many iterations")
        else:
            credential = ScramCredential.from_salted_password(
                mechanism, upsertion.salted_password, upsertion.salt, upsertion.iterations
            )
            changes.append((user, mechanism, credential))
            outcome[user] = (ErrorCode.none, None)
    if changes:
        store.alter(changes)
    return ctx.respond(
        throttle_time=datetime.timedelta(0),
        results=tuple(
            ctx.make(
                "AlterUserScramCredentialsResult",
                user=user,
                error_code=error,
                error_message=message,
            )
            for user, (error, message) in outcome.items()
        ),
    )
