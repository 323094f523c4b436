"""One partition's idempotent-producer state and the checks Kafka 4.4.0 makes with it on a client's
batch (``ProducerAppendInfo``, ``UnifiedLog.analyzeAndValidateProducerState``) and on a marker.

Sans-IO: ``Partition`` asks ``check_batch``/``check_marker`` before an append and tells
``remember_batch``/``remember_marker`` after; the produce handler opens a ``Verification`` for a
transactional batch the partition has no open transaction for (Kafka's VerificationStateEntry,
made before the coordinator is asked). Per producer id: its epoch, the sequence ranges and base
offsets of its last five batches of that epoch (a new epoch forgets them), the coordinator epoch
of its last marker and its last timestamp.

What is checked, in Kafka's order (the first failing check answers):

======================================================  ============================  ==========
data batch from a client                                Kafka 4.4.0                   kemu before
======================================================  ============================  ==========
same epoch and sequence range as one of the producer's  NONE, the original offset     same
last 5 batches                                          (nothing appended)
epoch below the partition's                             INVALID_PRODUCER_EPOCH        same
produce v12+ (transaction version 2) transactional      OUT_OF_ORDER_SEQUENCE_NUMBER  appended
batch, no batch of the producer here, sequence not 0
transactional batch with a sequence above the lowest    OUT_OF_ORDER_SEQUENCE_NUMBER  appended
one an unfinished attempt opened (its verification)
epoch above the partition's (producer known here),      OUT_OF_ORDER_SEQUENCE_NUMBER  appended
sequence not 0
unknown producer (or state expired), any sequence       appended                      same
(bar the v12+ case above)
same epoch, sequence not last + 1 (0 after 2**31-1;     OUT_OF_ORDER_SEQUENCE_NUMBER  same
last: -1 when no batch of that epoch is known)
producer known only with epoch -1, any sequence         appended                      refused
non-transactional batch while the producer has a       INVALID_TXN_STATE             appended
transaction open here
======================================================  ============================  ==========

UNKNOWN_PRODUCER_ID is never answered (KIP-360): a producer without state here is accepted.

Markers (``Partition.write_marker``; the WriteTxnMarkers handler and the coordinator's own):
transaction version 2 needs an epoch above the partition's (INVALID_PRODUCER_EPOCH; equal is a
retry of a marker already written and is written again while no transaction is open), below 2
an epoch not below it; a coordinator epoch below the last marker's is
TRANSACTION_COORDINATOR_FENCED. kemu before checked the epoch in the handler only and never
the coordinator epoch.

State ends as in Kafka: retention and DeleteRecords keep it (Kafka keeps it in memory, its
snapshots keep it across restarts); ``expire`` drops the producers idle for
``producer.id.expiration.ms`` (by their last batch's or marker's timestamp) without an open
transaction, and verifications older than that (kemu looks with retention, every
``log.retention.check.interval.ms``; Kafka every ``producer.id.expiration.check.interval.ms``).
After a restart kemu rebuilds the state from the log's batches and markers (Kafka reads its
snapshot): a producer none of whose batches or markers is left is unknown again, and the
coordinator epoch of its last marker is not rebuilt.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass, field

from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import BatchHeader

MAX_REMEMBERED_BATCHES = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
NO_PRODUCER_EPOCH = -1
MAX_SEQUENCE = 2**31 - 1


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    # (first sequence, last sequence, base offset) of the most recent batches of ``epoch``
    recent: list[tuple[int, int, int]] = field(default_factory=list)
    last_timestamp: int = -1  # the max timestamp of its last batch (or its marker's), Kafka's
    coordinator_epoch: int = -1  # of its last marker

    @property
    def last_sequence(self) -> int:
        return self.recent[-1][1] if self.recent else -1


@dataclass(slots=True)
class Verification:
    """A transactional batch's attempt to join a transaction here (Kafka's
    VerificationStateEntry): the lowest sequence of the attempts at its epoch."""

    lowest_sequence: int
    epoch: int
    supports_epoch_bump: bool  # produce v12+ (transaction version 2)
    started_ms: int

    def note(self, sequence: int, epoch: int) -> None:
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence


@dataclass(frozen=True, slots=True)
class Refusal:
    error: ErrorCode
    message: str


class ProducerStates(dict[int, ProducerEntry]):
    """Producer id -> its state here; ``verifying``: producer id -> its open verification."""

    __slots__ = ("verifying",)

    def __init__(self, entries: Iterable[tuple[int, ProducerEntry]] = ()) -> None:
        super().__init__(entries)
        self.verifying: dict[int, Verification] = {}

    # --- data batches ------------------------------------------------------------------------

    def duplicate_of(self, header: BatchHeader) -> int | None:
        """The base offset of the batch ``header`` repeats (same epoch and sequence range)."""
        entry = self.get(header.producer_id)
        if entry is None or entry.epoch != header.producer_epoch:
            return None
        last_sequence = header.base_sequence + header.last_offset_delta
        for first_seq, last_seq, offset in entry.recent:
            if first_seq == header.base_sequence and last_seq == last_sequence:
                return offset
        return None

    def has_open_transaction(self, producer_id: int, epoch: int, open_ids: Container[int]) -> bool:
        """Kafka's ``hasOngoingTransaction``: open here, at this epoch."""
        entry = self.get(producer_id)
        return entry is not None and entry.epoch == epoch and producer_id in open_ids

    def start_verification(
        self, producer_id: int, sequence: int, epoch: int, *, supports_epoch_bump: bool, now_ms: int
    ) -> None:
        found = self.verifying.get(producer_id)
        if found is None:
            self.verifying[producer_id] = Verification(sequence, epoch, supports_epoch_bump, now_ms)
        else:
            found.note(sequence, epoch)

    def check_batch(
        self, header: BatchHeader, *, offset: int, in_transaction: bool, where: str
    ) -> Refusal | None:
        """Why a client's data batch (not a duplicate) may not be appended at ``offset``, if it
        may not."""
        producer_id, epoch, first_seq = (
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
        )
        entry = self.get(producer_id)
        current_epoch = entry.epoch if entry is not None else NO_PRODUCER_EPOCH
        if epoch < current_epoch:
            return Refusal(
                ErrorCode.invalid_producer_epoch,
                f"Epoch of producer {producer_id} at offset {offset} in {where} is {epoch}, "
                f"which is < the last seen epoch {current_epoch} (TV-1)",
            )
        verification = self.verifying.get(producer_id) if header.is_transactional else None
        known_batches = entry is not None and bool(entry.recent)
        if (
            verification is not None
            and verification.supports_epoch_bump
            and first_seq != 0
            and not known_batches
        ):
            return _out_of_order(
                f"Invalid sequence number for producer {producer_id} at offset {offset} in "
                f"partition {where}: {first_seq} (incoming seq. number). Expected sequence 0 for "
                "transactions v2 idempotent producer with no existing state."
            )
        if verification is not None and first_seq > verification.lowest_sequence:
            return _out_of_order(
                f"Out of order sequence number for producer {producer_id} in partition {where}: "
                f"{first_seq} (incoming seq. number), {verification.lowest_sequence} (earliest "
                "seen sequence)"
            )
        if epoch != current_epoch:
            if first_seq != 0 and current_epoch != NO_PRODUCER_EPOCH:
                return _out_of_order(
                    f"Invalid sequence number for new epoch of producer {producer_id} in "
                    f"partition {where}: {epoch} (request epoch), {first_seq} (seq. number), "
                    f"{current_epoch} (current producer epoch)"
                )
        elif current_epoch != NO_PRODUCER_EPOCH:
            assert entry is not None
            last = entry.last_sequence
            if not (first_seq == last + 1 or (first_seq == 0 and last == MAX_SEQUENCE)):
                return _out_of_order(
                    f"Out of order sequence number for producer {producer_id} in partition "
                    f"{where}: {first_seq} (incoming seq. number), {last} (current end "
                    "sequence number)"
                )
        if in_transaction and not header.is_transactional:
            return Refusal(
                ErrorCode.invalid_txn_state,
                f"Expected transactional write from producer {producer_id} in partition {where}",
            )
        return None

    def remember_batch(self, header: BatchHeader, base_offset: int) -> None:
        entry = self.get(header.producer_id)
        if entry is None:
            entry = self[header.producer_id] = ProducerEntry(header.producer_epoch)
        elif entry.epoch != header.producer_epoch:
            entry.epoch = header.producer_epoch
            entry.recent.clear()
        entry.recent.append(
            (header.base_sequence, header.base_sequence + header.last_offset_delta, base_offset)
        )
        entry.last_timestamp = header.max_timestamp
        if len(entry.recent) > MAX_REMEMBERED_BATCHES:
            del entry.recent[0]
        if header.is_transactional:
            self.verifying.pop(header.producer_id, None)  # the transaction has a first offset

    # --- markers -----------------------------------------------------------------------------

    def check_marker(
        self,
        producer_id: int,
        epoch: int,
        coordinator_epoch: int | None,
        *,
        transaction_version: int,
        in_transaction: bool,
        where: str,
    ) -> Refusal | None:
        entry = self.get(producer_id)
        if entry is None:
            return None
        if transaction_version >= 2:
            stale = epoch <= entry.epoch and not (epoch == entry.epoch and not in_transaction)
        else:
            stale = epoch < entry.epoch
        if stale:
            comparison = "<=" if transaction_version >= 2 else "<"
            return Refusal(
                ErrorCode.invalid_producer_epoch,
                f"Epoch of producer {producer_id} in {where} is {epoch}, which is {comparison} "
                f"the last seen epoch {entry.epoch} (TV{transaction_version})",
            )
        if coordinator_epoch is not None and entry.coordinator_epoch > coordinator_epoch:
            return Refusal(
                ErrorCode.transaction_coordinator_fenced,
                f"Invalid coordinator epoch for producerId {producer_id} in partition {where}: "
                f"{coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)",
            )
        return None

    def remember_marker(
        self, producer_id: int, epoch: int, coordinator_epoch: int | None, timestamp: int
    ) -> None:
        """``coordinator_epoch`` None: kemu's own coordinator's marker, written with epoch 0
        (reported as 0, as Kafka reports its coordinator's first epoch; a higher one stays)."""
        entry = self.get(producer_id)
        if entry is None:
            entry = self[producer_id] = ProducerEntry(epoch)
        elif entry.epoch != epoch:
            entry.epoch = epoch
            entry.recent.clear()
        entry.coordinator_epoch = (
            max(entry.coordinator_epoch, 0) if coordinator_epoch is None else coordinator_epoch
        )
        entry.last_timestamp = timestamp
        found = self.verifying.get(producer_id)
        # a version-2 verification at the marker's (bumped) epoch is the next transaction's
        if found is not None and not (found.supports_epoch_bump and found.epoch == epoch):
            del self.verifying[producer_id]

    # --- expiry --------------------------------------------------------------------------------

    def expire(self, now_ms: int, expiration_ms: int, open_ids: Container[int]) -> list[int]:
        """Forget the producers idle ``expiration_ms`` without an open transaction here (Kafka's
        ``removeExpiredProducers``) and verifications as old; the producer ids forgotten."""
        gone = [
            producer_id
            for producer_id, entry in self.items()
            if producer_id not in open_ids and now_ms - entry.last_timestamp >= expiration_ms
        ]
        for producer_id in gone:
            del self[producer_id]
        for producer_id in [
            producer_id
            for producer_id, verification in self.verifying.items()
            if now_ms - verification.started_ms >= expiration_ms
        ]:
            del self.verifying[producer_id]
        return gone


def _out_of_order(message: str) -> Refusal:
    return Refusal(ErrorCode.out_of_order_sequence_number, message)
