"""GetTelemetrySubscriptions (key 71), v0 (KIP-714 client metrics).

Always answers "no subscription": an empty metrics list, subscription id 0, Kafka's default
push interval (5 minutes), the compression types Kafka accepts and 1 MiB as the largest push.
A client sending the zero uuid gets a fresh client instance id; any other id is echoed. A
client told nothing is wanted asks again after the push interval and never pushes.

Deliberate difference: a real Kafka 4.2 broker advertises the telemetry APIs only when a
metrics reporter that receives client telemetry is configured; kemu always advertises them
and politely asks for nothing.
"""

from __future__ import annotations

import uuid
from typing import Any

from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode

API_KEY = 71
PUSH_INTERVAL_MS = 300_000
TELEMETRY_MAX_BYTES = 1024 * 1024
ACCEPTED_COMPRESSION = (4, 3, 1, 2)  # zstd, lz4, gzip, snappy: Kafka's preference order
NO_SUBSCRIPTION = 0
ZERO_UUID = uuid.UUID(int=0)


@handler(API_KEY, 0, 0)
async def handle(ctx: RequestContext, request: Any) -> Any:
    import datetime

    instance_id = request.client_instance_id
    if instance_id is None or instance_id == ZERO_UUID:
        instance_id = uuid.uuid4()
    return ctx.respond(
        error_code=ErrorCode.none,
        client_instance_id=instance_id,
        subscription_id=NO_SUBSCRIPTION,
        accepted_compression_types=ACCEPTED_COMPRESSION,
        push_interval=datetime.timedelta(milliseconds=PUSH_INTERVAL_MS),
        telemetry_max_bytes=TELEMETRY_MAX_BYTES,
        delta_temporality=True,
        requested_metrics=(),
    )
