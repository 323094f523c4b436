"""Batches pipelined behind a Produce that a fault rule refused get the same error.

A broker that answers NOT_LEADER_OR_FOLLOWER (or any partition error) to a Produce does so
because of its state, so it answers the same to the batches the producer had already sent
behind that one on the connection. A fault rule answers one request only; without this, an
idempotent producer's later batch would be appended while the refused earlier one waits for its
retry — on a partition that has no state for the producer yet, any first sequence is taken
(Kafka's rule too) — and the retried batch would then be out of order, which no real broker
produces. So, per connection: after an injected error on a Produce, a later Produce carrying a
batch of the same producer, epoch and partition with a higher sequence than the refused batch
gets that error too, until the refused batch itself comes back (the client's retry, after it
saw the error). Requests without such a batch pass untouched, and nothing is kept while no
rule has fired.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import read_header

PRODUCE_KEY = 0


@dataclass(frozen=True, slots=True)
class _Refused:
    producer_id: int
    producer_epoch: int
    base_sequence: int
    error: ErrorCode
    rule_id: int


PartitionKey = tuple[object, int]  # (topic name or topic id, partition index)


class RefusedBatches:
    """The idempotent batches a connection's injected Produce errors refused, by partition."""

    def __init__(self) -> None:
        # Empty until a rule refuses a Produce: the request path tests it, no call needed.
        self.by_partition: dict[PartitionKey, _Refused] = {}

    def note(self, body: Any, error: ErrorCode, rule_id: int) -> None:
        """Fault rule ``rule_id`` answered the Produce ``body`` with ``error``: remember its
        idempotent batches."""
        if error == ErrorCode.none:
            return
        for key, header in _idempotent_batches(body):
            self.by_partition[key] = _Refused(
                header.producer_id, header.producer_epoch, header.base_sequence, error, rule_id
            )

    def refusal_for(self, body: Any) -> tuple[ErrorCode, int] | None:
        """The error a Produce ``body`` gets because it carries a batch sent behind a refused one
        (the whole request is refused, as a leader that moved refuses each of its partitions),
        with the rule that refused the first; None to handle it. The refused batch's own retry
        clears its partition."""
        refusal: tuple[ErrorCode, int] | None = None
        for key, header in _idempotent_batches(body):
            refused = self.by_partition.get(key)
            if refused is None:
                continue
            if (
                header.producer_id != refused.producer_id
                or header.producer_epoch != refused.producer_epoch
                or header.base_sequence <= refused.base_sequence
            ):
                del self.by_partition[key]  # the retry (or a new producer/epoch): in order again
            else:
                refusal = (refused.error, refused.rule_id)
        return refusal


def _idempotent_batches(body: Any) -> list[tuple[PartitionKey, Any]]:
    found = []
    for topic in getattr(body, "topic_data", ()) or ():
        name = getattr(topic, "name", None) or getattr(topic, "topic_id", None)
        for partition in getattr(topic, "partition_data", ()) or ():
            records = getattr(partition, "records", None)
            if not records or len(records) < 61:  # shorter than a v2 batch header
                continue
            try:
                header = read_header(records)
            except Exception:  # malformed: the handler answers it
                continue
            if header.producer_id >= 0 and header.base_sequence >= 0:
                found.append(((name, int(partition.index)), header))
    return found
