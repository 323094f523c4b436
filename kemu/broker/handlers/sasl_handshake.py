"""SaslHandshake (key 17), v0-v1.

On a SASL listener (``listener.security.protocol.map`` SASL_PLAINTEXT or SASL_SSL) the first
request after ApiVersions: it names the mechanism and answers the listener's
``sasl.enabled.mechanisms``. v1 is followed by SaslAuthenticate requests; v0 by bare
size-prefixed SASL tokens (``kemu/broker/security/session.py``). A mechanism not enabled gets
UNSUPPORTED_SASL_MECHANISM and the connection is closed, as Kafka does. On an authenticated
connection a v1 handshake starts re-authentication (KIP-368, same mechanism only). On a
PLAINTEXT or SSL listener the answer is ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers.

Omissions: GSSAPI.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.sasl_handshake import SaslHandshakeRequestView

API_KEY = 17


@handler(API_KEY, 0, 1)
def handle(ctx: RequestContext, request: SaslHandshakeRequestView) -> Any:
    session = ctx.session
    if session is None:
        return ctx.respond(error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    error, mechanisms = session.handshake(request.mechanism, ctx.version)
    return ctx.respond(error_code=error, mechanisms=tuple(mechanisms))
