"""The quota stages: client quotas on requests, connection quotas on the connection itself.

Client quotas (``kemu/broker/throttling.py``): nothing is measured while none is stored. When
some are, a Fetch's bytes are capped before its handler, and every answer is recorded after it;
a throttled answer mutes the connection (no further request is read until the throttle has
passed), as Kafka mutes the channel.

Connection quotas (``kemu/broker/acceptors.py``): a new connection is "arriving" while its
listener's acceptor decides, "queued" (frames held) until the acceptor takes it, then "admitted"
with the ticket that counts it, "throttled" (unread until closed) or "refused" (closed at once).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kemu.broker.acceptors import Ticket, connection_acceptors
from kemu.broker.throttling import cap_fetch_bytes, throttle
from kemu.cluster.client_quotas import client_quotas
from kemu.cluster.connection_quotas import normalize_ip
from kemu.cluster.context import RequestContext
from kemu.cluster.quota_enforcement import client_throttles
from kemu.protocol.wire import DecodedRequest

if TYPE_CHECKING:
    from kemu.broker.connection import Connection
    from kemu.cluster.clock import TimerHandle


class QuotaStage:
    """Client quotas: capping before the handler, recording and muting after it."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.runtime = connection.runtime
        # The stored quotas: ``store.quotas`` is empty (falsy) while none is; the hot path reads
        # it directly rather than through a property.
        self.store = client_quotas(connection.runtime)
        self._muted_until = 0  # clock ms: a throttled client's next request is read then
        self._unmute_timer: TimerHandle | None = None

    @property
    def active(self) -> bool:
        return bool(self.store.quotas)

    def cap(self, context: RequestContext, request: DecodedRequest) -> DecodedRequest:
        return cap_fetch_bytes(client_throttles(self.runtime), context, request)

    def record(
        self, context: RequestContext, request: DecodedRequest, body: Any, size: int, ns: int
    ) -> tuple[Any, int]:
        """The answer as throttled, and the throttle in ms (``size``: the request's frame,
        ``ns``: the time its handler ran)."""
        return throttle(client_throttles(self.runtime), context, request, body, size, ns)

    def mute(self, throttle_ms: int) -> None:
        """Read no further request until ``throttle_ms`` have passed, as Kafka mutes the channel."""
        until = self.runtime.clock_ms() + throttle_ms
        if until <= self._muted_until or self.connection.closing:
            return
        if self._unmute_timer is not None:
            self._unmute_timer.cancel()
        else:
            self.connection.hold()
        self._muted_until = until
        self._unmute_timer = self.runtime.clock.call_at(until, self._unmute)

    def _unmute(self) -> None:
        self._muted_until = 0
        self._unmute_timer = None
        self.connection.release()

    def closed(self) -> None:
        if self._unmute_timer is not None:
            self._unmute_timer.cancel()


class Admission:
    """Connection quotas: what the listener's acceptor decided about this connection."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.state = "arriving"
        self.ticket: Ticket | None = None
        self._close_timer: TimerHandle | None = None

    def arrive(self) -> None:
        connection = self.connection
        connection.client_ip = normalize_ip(connection.client_host)
        acceptors = connection_acceptors(connection.runtime, connection.node.node_id)
        listener = connection.listener
        acceptors.acceptor(listener.name if listener else None).arrive(connection)
        if self.state == "arriving":  # its listener's acceptor takes it later
            self.state = "queued"
            connection.hold()

    def admitted(self, ticket: Ticket) -> None:
        self.ticket = ticket
        queued = self.state == "queued"
        self.state = "admitted"
        if self.connection.closing:  # the client left while it waited: Kafka counts it, then
            ticket.release()  # closes it
        elif queued:
            self.connection.release()

    def throttled(self, close_at_ms: int) -> None:
        if self.state == "arriving":
            self.connection.hold()
        self.state = "throttled"
        if not self.connection.closing:
            self._close_timer = self.connection.runtime.clock.call_at(
                close_at_ms, self._close_throttled
            )

    def _close_throttled(self) -> None:
        self._close_timer = None
        self.connection.close_now()

    def refused(self) -> None:
        self.state = "refused"
        self.connection.close_now()

    def closed(self) -> None:
        if self._close_timer is not None:
            self._close_timer.cancel()
        if self.ticket is not None:
            self.ticket.release()
