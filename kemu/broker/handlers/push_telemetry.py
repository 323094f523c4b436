"""PushTelemetry (key 72), v0 (KIP-714 client metrics).

Keeps what a client pushes: (client instance id, subscription id, compression type, payload as
received) in the process's ``TelemetryStore`` (``kemu/cluster/client_metrics.py``; the newest
1000 pushes), for a later control API to show. A missing or zero client instance id is
INVALID_REQUEST, as in Kafka; a push larger than the advertised 1 MiB is
TELEMETRY_TOO_LARGE; a push with a subscription id other than the one this client's
subscriptions now give is UNKNOWN_SUBSCRIPTION_ID, so the client asks again (a terminating push
is kept whatever its subscription id).

Omissions: push intervals are not checked (no THROTTLING_QUOTA_EXCEEDED); payloads are kept
as bytes, not decompressed or decoded.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.handlers import handler
from kemu.broker.handlers.get_telemetry_subscriptions import TELEMETRY_MAX_BYTES, subscription_for
from kemu.cluster.client_metrics import telemetry_store
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode
from kemu.protocol.topic_ids import ZERO_UUID
from kemu.protocol.views.push_telemetry import PushTelemetryRequestView

API_KEY = 72


@handler(API_KEY, 0, 0)
def handle(ctx: RequestContext, request: PushTelemetryRequestView) -> Any:
    instance_id = request.client_instance_id
    if instance_id is None or instance_id == ZERO_UUID:
        return ctx.respond(error_code=ErrorCode.invalid_request)
    metrics = bytes(request.metrics or b"")
    if len(metrics) > TELEMETRY_MAX_BYTES:
        return ctx.respond(error_code=ErrorCode.telemetry_too_large)
    subscription_id, _, _ = subscription_for(ctx, instance_id)
    if not request.terminating and request.subscription_id != subscription_id:
        return ctx.respond(error_code=ErrorCode.unknown_subscription_id)
    telemetry_store(ctx.runtime).push(
        str(instance_id), request.subscription_id, request.compression_type, metrics
    )
    return ctx.respond(error_code=ErrorCode.none)
