"""What the client raises: Kafka error codes as exceptions, named after the Java client's."""

from __future__ import annotations

from kemu.protocol.errors import ErrorCode, default_message


class KafkaError(Exception):
    """A Kafka error code a request was answered with (``error``), and its message."""

    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        text = message or default_message(error) or ""
        super().__init__(f"{error.name} ({error.value}): {text}".rstrip(": "))
        self.error = error
        self.message = text


class CommitFailedError(KafkaError):
    """The share-group member's epoch (or id) no longer holds: the records it acknowledged into
    the transaction may already belong to someone else. The application aborts the transaction
    and polls again."""


class ProducerFencedError(KafkaError):
    """Another producer with the same transactional id has initialised since (or this producer's
    epoch was bumped under it): this producer can do nothing more and must be closed."""


class TransactionAbortableError(KafkaError):
    """The transaction cannot commit; ``abort_transaction()`` makes the producer usable again."""


class IllegalStateError(Exception):
    """A call out of turn: ``send`` outside a transaction, ``poll`` in explicit mode with records
    of the previous poll unacknowledged, and so on."""


# Retriable by waiting (and rediscovering the coordinator or leader first, where it moved).
COORDINATOR_MOVED = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
    }
)
LEADER_MOVED = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.leader_not_available,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.unknown_topic_or_partition,
    }
)
MEMBER_FENCED = frozenset(
    {
        ErrorCode.group_id_not_found,
        ErrorCode.illegal_generation,
        ErrorCode.unknown_member_id,
        ErrorCode.stale_member_epoch,
        ErrorCode.fenced_member_epoch,
    }
)
PRODUCER_FENCED = frozenset(
    {
        ErrorCode.producer_fenced,
        ErrorCode.invalid_producer_epoch,
    }
)
