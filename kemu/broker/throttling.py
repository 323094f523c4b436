"""What a client quota does to one request, as Kafka 4.4's KafkaApis applies it.

Only once a client quota is stored (``kafka-configs --alter --add-config producer_byte_rate=..``);
until then the connection skips all of this. The arithmetic is
``kemu/cluster/quota_enforcement.py``; the request pipeline (``kemu/broker/pipeline/``) sets the
answer's ThrottleTimeMs from ``throttle`` and then reads no further request from that client
until the throttle time has passed on the runtime's clock (Kafka mutes the channel; clients of
KIP-219 versions also hold back by themselves).

- ``request_percentage``: every request's handler time (for a coroutine handler, the time it
  runs, not the time it waits) plus encoding, in percent of one thread per second. Produce with
  acks=0 is not recorded, as Kafka does.
- ``producer_byte_rate``: the Produce request's size (header and body), recorded whatever the
  outcome.
- ``consumer_byte_rate``: the Fetch (and ShareFetch) response's size. A throttled Fetch (by
  either quota) answers with no partitions and takes its bytes back, so the client fetches them
  again once unmuted; MaxBytes is first capped to what one quota window allows
  (``max_value_in_window``), so a large fetch does not guarantee its own throttling. A throttled
  ShareFetch answers the same way (acquisition lock timeout 0), as Kafka 4.4 does: the records
  it acquired for that answer stay acquired by the member until their lock expires.
- ``controller_mutation_rate``: CreateTopics, CreatePartitions and DeleteTopics charge each topic
  with the partitions it creates or deletes, after every other check
  (``controller_mutation_quota``, as Kafka's ControllerApis and ReplicationControlManager). From
  the versions that know THROTTLING_QUOTA_EXCEEDED (CreateTopics v6, CreatePartitions v3,
  DeleteTopics v5) the quota is strict: once the client's token bucket is below zero, further
  topics are refused with that error; older versions are accepted and only throttled. The answer
  carries the larger of this throttle and the request quota's, and the connection is muted as
  for the other quotas (Kafka's broker mutes for the throttle its controller answered).

The user is the connection's principal name (``ANONYMOUS`` on PLAINTEXT), the client id the
request header's (``""`` when null).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Coroutine, Generator
from time import perf_counter_ns
from typing import Any

from kemu.cluster.client_quotas import client_quotas
from kemu.cluster.context import RequestContext
from kemu.cluster.quota_enforcement import (
    NANOS_TO_PERCENTAGE,
    UNBOUNDED_MUTATIONS,
    ClientThrottles,
    MutationQuota,
    client_throttles,
)
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.protocol.wire import DecodedRequest

PRODUCE_KEY, FETCH_KEY, SHARE_FETCH_KEY = 0, 1, 78
FETCH_KEYS = frozenset((FETCH_KEY, SHARE_FETCH_KEY))  # both are counted on consumer_byte_rate


def user_and_client(context: RequestContext) -> tuple[str, str]:
    session = context.session
    principal = session.principal if session is not None else "User:ANONYMOUS"
    return principal.partition(":")[2] or principal, context.header.client_id or ""


def controller_mutation_quota(
    context: RequestContext, strict_since: int, *, throttles_answer: bool = True
) -> MutationQuota:
    """This request's ``controller_mutation_rate`` quota, strict from version ``strict_since``
    (ControllerMutationQuotaManager.newQuotaFor); kept on the context for the answer's throttle
    unless ``throttles_answer`` is false (a Metadata auto-creation: Kafka's broker forwards it
    to the controller as the client's CreateTopics, whose throttle the client never sees)."""
    if not client_quotas(context.runtime).quotas:
        return UNBOUNDED_MUTATIONS
    quota = client_throttles(context.runtime).mutation.quota_for(
        *user_and_client(context),
        strict=context.header.api_version >= strict_since,
        now_ms=context.now_ms(),
    )
    if throttles_answer:
        context.mutation_quota = quota
    return quota


def cap_fetch_bytes(
    throttles: ClientThrottles, context: RequestContext, request: DecodedRequest
) -> DecodedRequest:
    """A Fetch whose MaxBytes is at most one quota window's worth of the client's quota."""
    if request.header.api_key not in FETCH_KEYS or not throttles.fetch.enabled:
        return request
    allowed = throttles.fetch.max_value_in_window(*user_and_client(context))
    if allowed is None or request.body.max_bytes <= allowed:
        return request
    body = dataclasses.replace(request.body, max_bytes=max(int(allowed), 1))
    return DecodedRequest(request.header, body, request.schema)


def throttle(
    throttles: ClientThrottles,
    context: RequestContext,
    request: DecodedRequest,
    body: Any,
    request_size: int,
    handler_ns: int,
) -> tuple[Any, int]:
    """Record this request on the client's quotas: the answer to send and the throttle time."""
    header = request.header
    user, client_id = user_and_client(context)
    now_ms = context.now_ms()
    bandwidth_ms = 0
    if header.api_key == PRODUCE_KEY:
        bandwidth_ms = throttles.produce.record(user, client_id, request_size, now_ms)
        if body is None:  # acks=0: no answer, and the request quota is not recorded
            return None, bandwidth_ms
    request_ms = throttles.request.record(user, client_id, handler_ns * NANOS_TO_PERCENTAGE, now_ms)
    encoded = isinstance(body, bytes)  # a handler that encoded its own frame (ApiVersions)
    if (
        header.api_key in FETCH_KEYS
        and body is not None
        and not encoded
        and throttles.fetch.enabled
    ):
        size = 4 + len(wire.encode_body(body))
        bandwidth_ms = throttles.fetch.record(user, client_id, size, now_ms)
        if max(bandwidth_ms, request_ms) > 0:
            throttles.fetch.unrecord(user, client_id, size, now_ms)
            if getattr(body, "error_code", ErrorCode.none) == ErrorCode.none:
                body = _emptied(body)
    throttle_ms = max(bandwidth_ms, request_ms)
    if context.mutation_quota is not None:
        throttle_ms = max(throttle_ms, context.mutation_quota.throttle_time(now_ms))
    if throttle_ms > 0 and body is not None and not encoded and hasattr(body, "throttle_time"):
        body = dataclasses.replace(body, throttle_time=datetime.timedelta(milliseconds=throttle_ms))
    return body, throttle_ms


def _emptied(body: Any) -> Any:
    """The answer to a throttled Fetch or ShareFetch: no partitions (ShareFetchContext's
    throttleResponse also gives an acquisition lock timeout of 0)."""
    if hasattr(body, "acquisition_lock_timeout"):
        lock = body.acquisition_lock_timeout
        zero = datetime.timedelta(0) if isinstance(lock, datetime.timedelta) else type(lock)(0)
        return dataclasses.replace(body, responses=(), acquisition_lock_timeout=zero)
    return dataclasses.replace(body, responses=())


class TimedCoroutine:
    """Awaits a handler's coroutine, adding up the time it runs between its suspensions."""

    __slots__ = ("coroutine", "ns")

    def __init__(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        self.coroutine = coroutine
        self.ns = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        steps = self.coroutine.__await__()
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            started = perf_counter_ns()
            try:
                yielded = steps.throw(thrown) if thrown is not None else steps.send(sent)
            except StopIteration as finished:
                self.ns += perf_counter_ns() - started
                return finished.value
            except BaseException:
                self.ns += perf_counter_ns() - started
                raise
            self.ns += perf_counter_ns() - started
            try:
                sent, thrown = (yield yielded), None
            except BaseException as error:  # e.g. cancellation, passed on to the handler
                sent, thrown = None, error
