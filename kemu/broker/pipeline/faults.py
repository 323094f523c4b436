"""The fault stage: fault rules the control plane installs (``kemu/broker/faults.py``), applied
to the requests they match, and the idempotent batches an injected Produce error refused
(``kemu/broker/refused_batches.py``), which this stage owns.

A matched request holds the frames behind it until it is decided (a later Produce must not be
applied first). After a drop or a torn answer the connection closes, and what the client sent
behind it is never read, as on Kafka, which reads a connection's next request only once the
answer before it is out.
"""

from __future__ import annotations

import asyncio
import enum
from typing import TYPE_CHECKING

from kemu.broker.faults import FaultRule
from kemu.broker.handlers import HandlerSpec
from kemu.broker.pipeline.handler import CutFrame, HandlerStage, Slot
from kemu.broker.refused_batches import PRODUCE_KEY, RefusedBatches
from kemu.cluster.context import RequestContext
from kemu.protocol import wire
from kemu.protocol.error_responses import error_response_for
from kemu.protocol.errors import ErrorCode
from kemu.protocol.wire import DecodedRequest

if TYPE_CHECKING:
    from kemu.broker.connection import Connection


class Verdict(enum.Enum):
    PASS = "pass"  # no rule: on to the handler
    CLOSE = "close"  # the connection closes, the answers ready before still go out


class FaultStage:
    def __init__(self, connection: Connection, handler: HandlerStage) -> None:
        self.connection = connection
        self.handler = handler
        self.table = connection.faults
        self.rules = self.table.by_key  # api key -> fault rules; empty unless a test set some
        self.refused = RefusedBatches()

    def intercept(
        self, spec: HandlerSpec, context: RequestContext, request: DecodedRequest, size: int
    ) -> Slot | Verdict:
        """The slot a fault gives ``request``, or what the pipeline does instead."""
        if self.refused.by_partition and spec.api_key == PRODUCE_KEY:
            refusal = self.refused.refusal_for(request.body)
            if refusal is not None:
                error, rule_id = refusal
                return self._injected_error(
                    request, error, f"injected by kemu fault rule {rule_id}"
                )
        rules = self.rules.get(spec.api_key)
        if rules is None:
            return Verdict.PASS
        rule = self.table.match(rules, self.connection.node.node_id, request)
        if rule is None:
            return Verdict.PASS
        if rule.kind == "drop_before" and not rule.latency_ms:
            return Verdict.CLOSE
        self.connection.hold()
        task = asyncio.get_running_loop().create_task(
            self._faulted(rule, spec, context, request, size)
        )
        task.add_done_callback(self.connection.task_done)
        return task

    async def _faulted(
        self,
        rule: FaultRule,
        spec: HandlerSpec,
        context: RequestContext,
        request: DecodedRequest,
        size: int,
    ) -> bytes | None:
        if rule.latency_ms:
            await asyncio.sleep(rule.latency_ms / 1000)
        kind = rule.kind
        if kind == "drop_before":
            return CutFrame()  # the frames behind it are never read: the connection closes
        if kind == "error":
            error = ErrorCode(rule.error_code)
            if request.header.api_key == PRODUCE_KEY:
                self.refused.note(request.body, error, rule.id)
            refused = self._injected_error(request, error, f"injected by kemu fault rule {rule.id}")
            self.connection.release()
            return refused
        slot = self.handler.dispatch(spec, context, request, size)
        if kind not in ("drop_after", "torn"):
            # Applied: the requests behind it may go on (their answers still queue in order).
            self.connection.release()
        frame = await slot if isinstance(slot, asyncio.Task) else slot
        if kind == "drop_after":
            return CutFrame()
        if kind == "torn":
            return CutFrame(frame[: max(1, len(frame) // 2)] if frame else b"")
        return frame

    def _injected_error(self, request: DecodedRequest, error: ErrorCode, message: str) -> bytes:
        header = request.header
        body = error_response_for(request, error, message)
        self.connection.stats.answered(header.api_key, header.api_version, body, 0)
        return wire.encode_response_frame(
            header.api_key, header.api_version, header.correlation_id, body
        )
