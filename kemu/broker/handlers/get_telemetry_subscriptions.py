"""GetTelemetrySubscriptions (key 71), v0 (KIP-714 client metrics).

Answers from the client metrics subscriptions (``kafka-client-metrics.sh --alter``, the
CLIENT_METRICS config resource, ``kemu/cluster/client_metrics.py``) whose ``match`` selects the
client: by ``client_instance_id``, ``client_id`` (the request header's) and
``client_source_address``. The requested metrics are the union of their ``metrics`` prefixes
(``*`` asks for everything, sent as the one empty prefix as Kafka does), the push interval the
smallest of theirs, and the subscription id a CRC32 of both, so it changes when they change. No
matching subscription: no metrics requested, Kafka's default push interval (5 minutes), and the
client never pushes. A client sending the zero uuid gets a fresh client instance id; any other
id is echoed. The compression types are Kafka's preference order; 1 MiB the largest push.

Deliberate difference: a real Kafka broker advertises the telemetry APIs only when a metrics
reporter that receives client telemetry is configured; kemu always advertises them.
Omissions: ``client_software_name``/``client_software_version`` (sent in ApiVersions) and
``client_source_port`` are not known here, so selectors on them match only an empty pattern.
"""

from __future__ import annotations

import datetime
import uuid
import zlib
from typing import Any

from kemu.broker.handlers import handler
from kemu.cluster import seeded
from kemu.cluster.client_metrics import client_metrics_store
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode
from kemu.protocol.topic_ids import ZERO_UUID
from kemu.protocol.views.get_telemetry_subscriptions import GetTelemetrySubscriptionsRequestView

API_KEY = 71
PUSH_INTERVAL_MS = 300_000
TELEMETRY_MAX_BYTES = 1024 * 1024
ACCEPTED_COMPRESSION = (4, 3, 1, 2)  # zstd, lz4, gzip, snappy: Kafka's preference order
NO_SUBSCRIPTION = 0
ALL_METRICS = "*"


def subscription_for(
    ctx: RequestContext, instance_id: uuid.UUID
) -> tuple[int, tuple[str, ...], int]:
    """(subscription id, requested metric prefixes, push interval ms) for this client."""
    client = {
        "client_instance_id": str(instance_id),
        "client_id": ctx.header.client_id or "",
        "client_source_address": ctx.client_host,
    }
    matched = client_metrics_store(ctx.runtime).matching(client)
    if not matched:
        return NO_SUBSCRIPTION, (), PUSH_INTERVAL_MS
    prefixes = sorted({m for s in matched for m in s.metrics})
    metrics: tuple[str, ...] = ("",) if ALL_METRICS in prefixes else tuple(prefixes)
    interval = min(s.interval_ms for s in matched)
    subscription_id = zlib.crc32(f"{','.join(metrics)}|{interval}".encode()) & 0x7FFFFFFF
    return subscription_id or 1, metrics, interval


@handler(API_KEY, 0, 0)
def handle(ctx: RequestContext, request: GetTelemetrySubscriptionsRequestView) -> Any:
    instance_id = request.client_instance_id
    if instance_id is None or instance_id == ZERO_UUID:
        instance_id = seeded.new_uuid()
    subscription_id, metrics, interval = subscription_for(ctx, instance_id)
    return ctx.respond(
        error_code=ErrorCode.none,
        client_instance_id=instance_id,
        subscription_id=subscription_id,
        accepted_compression_types=ACCEPTED_COMPRESSION,
        push_interval=datetime.timedelta(milliseconds=interval),
        telemetry_max_bytes=TELEMETRY_MAX_BYTES,
        delta_temporality=True,
        requested_metrics=metrics,
    )
