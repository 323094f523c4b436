"""A heartbeat answer that ends a group membership for good, as Java's consumers take it.

Kafka 4.4.0's clients (``AbstractHeartbeatRequestManager.onErrorResponse``, shared by the
ConsumerGroupHeartbeat and ShareGroupHeartbeat managers) treat GROUP_ID_NOT_FOUND as fatal to a
member in the group: the group was deleted under it (DeleteGroups, or the coordinator's
offsets-retention check after it emptied), so the member does not rejoin. ``handleFatalFailure``
queues the error for the application (its next ``poll()`` throws GroupIdNotFoundException, once)
and ``transitionToFatal`` loses the member's partitions; heartbeats stop, a later
``subscribe()`` joins nothing ("No action taken to join the group ... FATAL state") and
``close()`` sends no leave (the member is not in a group). The same answer to a leave is only
logged ("received GROUP_ID_NOT_FOUND for group ... while unsubscribed").
"""

from __future__ import annotations

import logging

from kemu.client.errors import KafkaError
from kemu.protocol.errors import ErrorCode

FATAL_TO_MEMBER = ErrorCode.group_id_not_found

log = logging.getLogger("kemu.client.group")


class Fatal:
    """A member's fatal heartbeat error: once set the member is out for good, and the error is
    raised to the application once."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.error: KafkaError | None = None
        self._unraised: KafkaError | None = None

    def fail(self, member_id: str, error: ErrorCode, message: str | None) -> KafkaError:
        """The member is out: the error to raise now (the next ``raise_once`` raises it too)."""
        self.error = self._unraised = KafkaError(error, message)
        log.error("member %s of group %s is out for good: %s", member_id, self.group_id, message)
        return self.error

    def raise_once(self) -> None:
        """Raise the fatal error if the application has not seen it yet."""
        error, self._unraised = self._unraised, None
        if error is not None:
            raise error

    def refuses_join(self) -> bool:
        """A ``subscribe()`` of a member that is out joins nothing, as Java's does."""
        if self.error is None:
            return False
        log.warning("group %s: no join, the member is out for good: %s", self.group_id, self.error)
        return True
