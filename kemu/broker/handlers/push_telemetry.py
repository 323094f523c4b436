"""PushTelemetry (key 72), v0 (KIP-714 client metrics).

Accepts and drops the metrics: kemu never subscribes to any (see GetTelemetrySubscriptions), so
a push is only a client being thorough, e.g. its final push on close. A missing or zero client
instance id is INVALID_REQUEST, as in Kafka.

Omissions: subscription ids, push intervals and payload sizes are not checked.
"""

from __future__ import annotations

import uuid
from typing import Any

from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode

API_KEY = 72
ZERO_UUID = uuid.UUID(int=0)


@handler(API_KEY, 0, 0)
async def handle(ctx: RequestContext, request: Any) -> Any:
    instance_id = request.client_instance_id
    if instance_id is None or instance_id == ZERO_UUID:
        return ctx.respond(error_code=ErrorCode.invalid_request)
    return ctx.respond(error_code=ErrorCode.none)
