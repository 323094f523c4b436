"""SaslAuthenticate (key 36), v0-v2.

Carries the SASL tokens of the mechanism chosen by SaslHandshake v1 (PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512, OAUTHBEARER with unsecured JWS tokens: ``kemu/broker/security/mechanisms.py``).
A refusal is SASL_AUTHENTICATION_FAILED with Kafka's message, logged with the reason, and the
connection is closed after the answer. v1+ reports the session lifetime (KIP-368:
``connections.max.reauth.ms``, capped by an OAUTHBEARER token's expiry). On an authenticated
connection that is not re-authenticating, or where SASL is not in use, the answer is
ILLEGAL_SASL_STATE ("SaslAuthenticate request received after successful authentication"), as
Kafka's KafkaApis answers.
"""

from __future__ import annotations

import datetime
from typing import Any

from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.sasl_authenticate import SaslAuthenticateRequestView

API_KEY = 36


@handler(API_KEY, 0, 2)
def handle(ctx: RequestContext, request: SaslAuthenticateRequestView) -> Any:
    session = ctx.session
    if session is None:
        error, message, token, lifetime = (
            ErrorCode.illegal_sasl_state,
            "SaslAuthenticate request received after successful authentication",
            b"",
            0,
        )
    else:
        error, message, token, lifetime = session.authenticate(request.auth_bytes, ctx.now_ms())
    return ctx.respond(
        error_code=error,
        error_message=message,
        auth_bytes=token,
        session_lifetime=datetime.timedelta(milliseconds=lifetime),
    )
