"""``kemu.debug.request.log=true``: one log line per answered request, to see where a client's
wait goes (which request, when it arrived, when its answer was ready).

Off by default, and then nothing on the request path but one ``is None`` test. The line
(``request``, logger ``kemu.requests``) carries the API, its version, the client id, the
correlation id, the arrival and answer times (Unix seconds, as a client's own debug log can be
lined up with them) and the wait between them; for the group heartbeats and JoinGroup/SyncGroup,
the member epoch or generation asked and answered and the partitions assigned, as those say when
a member learned of a rebalance.
"""

from __future__ import annotations

from datetime import timedelta
from time import perf_counter_ns, time
from typing import Any

import structlog

from kemu.cluster.context import Runtime
from kemu.protocol import wire
from kemu.protocol.wire import RequestHeader

log = structlog.get_logger("kemu.requests")

CONFIG = "kemu.debug.request.log"


class RequestTrace:
    """Logs each answered request."""

    def answered(
        self, peer: str, header: RequestHeader, request: Any, answer: Any, started_ns: int
    ) -> None:
        waited_ns = perf_counter_ns() - started_ns
        now = time()
        fields: dict[str, Any] = {
            "api": wire.api_name(header.api_key),
            "v": header.api_version,
            "client": header.client_id,
            "corr": header.correlation_id,
            "peer": peer,
            "arrived": round(now - waited_ns / 1e9, 6),
            "answered": round(now, 6),
            "waited_ms": round(waited_ns / 1e6, 3),
        }
        if answer is not None and not isinstance(answer, bytes):
            code = getattr(answer, "error_code", 0)
            if code:
                fields["error"] = int(code)
            fields.update(_group_fields(request, answer))
        log.info("request", **fields)


def _group_fields(request: Any, answer: Any) -> dict[str, Any]:
    """Member epochs / generations and assignments, where the API has them."""
    fields: dict[str, Any] = {}
    for name, value in (
        ("epoch_in", getattr(request, "member_epoch", None)),
        ("epoch_out", getattr(answer, "member_epoch", None)),
        ("generation", getattr(answer, "generation_id", None)),
    ):
        if value is not None:
            fields[name] = int(value)
    interval = getattr(answer, "heartbeat_interval", None)
    if isinstance(interval, timedelta):
        fields["interval_ms"] = interval // timedelta(milliseconds=1)
    assignment = getattr(answer, "assignment", None)
    topics = getattr(assignment, "topic_partitions", None)
    if topics is not None:
        fields["assigned"] = sorted(
            int(partition) for topic in topics for partition in topic.partitions
        )
    return fields


def request_trace(runtime: Runtime) -> RequestTrace | None:
    """The trace when ``kemu.debug.request.log`` is on, else None."""
    return RequestTrace() if runtime.cluster.config.get_bool(CONFIG) else None
