"""Transactions as Kafka's ``TransactionCoordinator`` runs them, sans-IO.

One ``TransactionMetadata`` per transactional id. Every operation validates against it and returns
an ``Outcome``: the error (or the producer id and epoch to answer), the ``__transaction_state``
records to write first, and for a commit or abort the ``Markers`` to write to the transaction's
partitions; once they are written the caller calls ``complete`` and writes its record too. kemu
holds every partition in one process, so markers are written at once and the Prepare states only
outlive a call after a crash (``recover`` returns them to finish on load) or while a marker or
the COMPLETE record fails to write (the service writes it again later).

States and their status bytes: Empty 0, Ongoing 1, PrepareCommit 2, PrepareAbort 3, CompleteCommit
4, CompleteAbort 5, Dead 6, PrepareEpochFence 7 (kemu fences and aborts in one step, so it never
stays in PrepareEpochFence).

Epochs: InitProducerId bumps the epoch (fencing the previous producer; an Ongoing transaction of
that producer is aborted with the bumped epoch first); an exhausted epoch gets a new producer id.
A transaction ended by the bump that exhausts the epoch keeps, as in Kafka, the producer id that
wrote it at epoch 32767 while it is prepared (its markers' id and epoch, so the PREPARE record is
all recovery needs) with the new id in ``next_producer_id``; ``complete`` switches to the new id
at epoch 0 (``previous_producer_id`` the old one). The client is answered the new id at once.
With transaction version 2 (EndTxn v5) every EndTxn bumps the epoch too and answers the new one; a
retry with the previous epoch of a completed EndTxn gets the same answer, and so does a retry of
the EndTxn that exhausted the epoch (old id, epoch 32766: the new id at epoch 0, as Kafka's
``retryOnOverflow`` recognises it by ``previous_producer_id``). An Ongoing transaction
older than its timeout is aborted with a bumped epoch (the producer is fenced, as in Kafka).

InitProducerId naming the id and epoch the producer holds (KIP-360) is a retry, as in Kafka's
``prepareInitProducerIdTransit``, when the epoch is the one before the last bump a request named
(``last_producer_epoch``: an InitProducerId's, an EndTxn v5's or a fence's; a bump that named
none keeps none); the id may be the one the last transition replaced, at its exhausted epoch
(``replaced_producer_id``). Over an Ongoing transaction any epoch of the current id aborts it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import IntEnum

from kemu.coordinator.transaction.records import TransactionLogValue
from kemu.protocol.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MAX_VALUE; Kafka gives a new producer id before reaching it

TopicPartition = tuple[str, int]
# (group id, topic id, partition): a share partition whose acknowledgements a transaction
# carries (KIP-1289); its __share_group_state partition is among the transaction's partitions.
SharePartition = tuple[str, uuid.UUID, int]


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


PREPARING = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE)
COMPLETE = (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
INVALID_TXN = ErrorCode.invalid_txn_state
STATE_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_epoch: int = NO_PRODUCER_EPOCH  # the epoch before the last bump (retries)
    previous_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0
    # KIP-1289: enlisted in the current transaction (kemu's tag 100 in __transaction_state)
    share_partitions: set[SharePartition] = field(default_factory=set)
    # the producer id a prepared transaction's exhausting bump allocated (-1: none); it takes
    # over, at epoch 0, when the transaction completes
    next_producer_id: int = NO_PRODUCER_ID
    # the producer id the last transition replaced (-1: it kept the id; Kafka's prevProducerId
    # while it differs from the current one). Not persisted, nor compared: a retry that names
    # it needs the last epoch too, which a loaded Kafka coordinator no longer has.
    replaced_producer_id: int = field(default=NO_PRODUCER_ID, compare=False)
    # not before this time does the id expire again: its tombstone failed to write (-1: none).
    # Not persisted: a reload expires it at once, as Kafka's first expiration pass would.
    expiry_retry_ms: int = field(default=-1, compare=False)

    def snapshot(self) -> TransactionMetadata:
        """A copy that no later transition changes (its sets are copied too)."""
        return replace(
            self, partitions=set(self.partitions), share_partitions=set(self.share_partitions)
        )

    def answered(self) -> tuple[int, int]:
        """The producer id and epoch the client holds: the next ones once allocated."""
        if self.next_producer_id != NO_PRODUCER_ID:
            return self.next_producer_id, 0
        return self.producer_id, self.producer_epoch

    def record(self) -> TransactionLogValue:
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(index)
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            timeout_ms=self.timeout_ms,
            status=int(self.state),
            partitions=tuple((topic, tuple(ids)) for topic, ids in by_topic.items()),
            last_update_ms=self.last_update_ms,
            start_ms=self.start_ms,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
            share_partitions=tuple(sorted(self.share_partitions)),
        )


@dataclass(frozen=True, slots=True)
class Markers:
    """COMMIT or ABORT control batches to write, one per partition."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]
    transaction_version: int = 0  # 2: the partitions need an epoch above their producer's


Record = tuple[str, TransactionLogValue | None]  # None: a tombstone (the id expired)


@dataclass(frozen=True, slots=True)
class Outcome:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    records: list[Record] = field(default_factory=list)
    markers: Markers | None = None


class TransactionCoordinator:
    def __init__(
        self,
        allocate_producer_id: Callable[[], int],
        max_timeout_ms: int,
        id_expiration_ms: int = 604_800_000,
    ) -> None:
        self.allocate_producer_id = allocate_producer_id
        self.max_timeout_ms = max_timeout_ms
        self.id_expiration_ms = id_expiration_ms  # transactional.id.expiration.ms
        self.transactions: dict[str, TransactionMetadata] = {}

    # --- InitProducerId --------------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        now_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> Outcome:
        """Kafka's ``prepareInitProducerIdTransit``. A request naming a producer id (KIP-360: the
        id and epoch the producer holds) is fenced unless it names the current id, or the id the
        last transition replaced at an exhausted epoch (a retry of the request that exhausted it).
        Over an Ongoing transaction any epoch of it aborts the transaction. Otherwise its epoch
        is bumped, or, if it is the epoch before the last bump a request named (the last epoch;
        an InitProducerId without a producer id forgets it), it is a retry answered the current
        id and epoch, the transaction Empty."""
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return Outcome(ErrorCode.invalid_transaction_timeout)
        meta = self.transactions.get(transactional_id)
        if meta is None:
            meta = TransactionMetadata(
                transactional_id, self.allocate_producer_id(), 0, timeout_ms, last_update_ms=now_ms
            )
            self.transactions[transactional_id] = meta
            return self._answer(meta, [self._record(meta)])
        if meta.state in PREPARING:  # before the producer id, as Kafka's pending transition
            return Outcome(ErrorCode.concurrent_transactions)
        named = producer_id != NO_PRODUCER_ID
        if named and not self._held_by(meta, producer_id, producer_epoch):
            return Outcome(ErrorCode.producer_fenced)
        meta.timeout_ms = timeout_ms
        if meta.state == TxnState.ONGOING:
            # Fence the previous producer and abort its transaction with the bumped epoch. As in
            # Kafka that epoch is never handed out: CONCURRENT_TRANSACTIONS makes the caller
            # retry once the abort completed, and the retry bumps again into Empty (so
            # Admin.forceTerminateTransaction ends Empty, the epoch bumped twice).
            # Its last epoch is the fenced producer's (Kafka 4.4.0's fence with transaction
            # version 2): that producer's InitProducerId is then a retry, the zombie's is fenced.
            self._bump(meta)
            fenced = self._prepare(meta, commit=False, now_ms=now_ms)
            return replace(fenced, error=ErrorCode.concurrent_transactions)
        if named and producer_epoch != meta.producer_epoch:
            if producer_epoch != meta.last_producer_epoch:
                return Outcome(ErrorCode.producer_fenced)
            return self._emptied(meta, now_ms)  # a retry of the bump we already made
        last_epoch = meta.producer_epoch if named else NO_PRODUCER_EPOCH
        self._bump(meta)
        replaced = self._take_next_producer_id(meta)  # no transaction to end: in use at once
        meta.last_producer_epoch = last_epoch
        return self._emptied(meta, now_ms, replaced=replaced)

    @staticmethod
    def _held_by(meta: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
        """Whether an InitProducerId naming ``producer_id`` may go on (Kafka's
        ``isValidProducerId``): the current id at any epoch, or the id the last transition
        replaced at its exhausted epoch."""
        return producer_id == meta.producer_id or (
            producer_id == meta.replaced_producer_id and producer_epoch >= MAX_EPOCH - 1
        )

    def _emptied(
        self, meta: TransactionMetadata, now_ms: int, *, replaced: int = NO_PRODUCER_ID
    ) -> Outcome:
        """InitProducerId's transition to Empty; the current id and epoch answered."""
        meta.state = TxnState.EMPTY
        meta.partitions.clear()
        meta.share_partitions.clear()
        meta.start_ms = -1
        meta.last_update_ms = now_ms
        return self._answer(meta, [self._record(meta, replaced=replaced)])

    def _bump(self, meta: TransactionMetadata) -> None:
        """Bump the epoch. The id and epoch it leaves are those the markers of a transaction
        ended by this bump carry: an exhausted epoch goes to the last one, 32767, of the id that
        wrote the transaction, and a new producer id waits in ``next_producer_id`` (Kafka's
        ``prepareAbortOrCommit``) until ``_take_next_producer_id``."""
        meta.last_producer_epoch = meta.producer_epoch
        if meta.producer_epoch >= MAX_EPOCH - 1:
            meta.next_producer_id = self.allocate_producer_id()
            meta.previous_producer_id = meta.producer_id
            meta.producer_epoch = MAX_EPOCH
            return
        meta.producer_epoch += 1

    @staticmethod
    def _take_next_producer_id(meta: TransactionMetadata) -> int:
        """The producer id an exhausting bump allocated takes over at epoch 0; the id it
        replaced is returned (-1: none). The last epoch stays the old id's last usable one, as
        in Kafka: a retry of the request that exhausted it names the old id at that epoch."""
        if meta.next_producer_id == NO_PRODUCER_ID:
            return NO_PRODUCER_ID
        replaced = meta.producer_id
        meta.previous_producer_id = replaced
        meta.producer_id = meta.next_producer_id
        meta.producer_epoch = 0
        meta.next_producer_id = NO_PRODUCER_ID
        return replaced

    # --- AddPartitionsToTxn / AddOffsetsToTxn / implicit adds (TV2) --------------------------

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        now_ms: int,
    ) -> Outcome:
        meta = self.transactions.get(transactional_id)
        if meta is not None and meta.state in PREPARING:
            # Kafka 4.4.0 checks its pending transition first, and a prepared transaction has
            # one (to Complete*) while its markers are written: any producer id and epoch waits.
            return Outcome(ErrorCode.concurrent_transactions)
        error = self._check_producer(meta, producer_id, producer_epoch)
        if error is not None:
            return Outcome(error)
        assert meta is not None
        wanted = set(partitions)
        if meta.state == TxnState.ONGOING and wanted <= meta.partitions:
            return self._answer(meta, [])
        if meta.state != TxnState.ONGOING:
            meta.partitions.clear()
            meta.share_partitions.clear()
            meta.start_ms = now_ms
            meta.state = TxnState.ONGOING
        meta.partitions |= wanted
        meta.last_update_ms = now_ms
        return self._answer(meta, [self._record(meta)])

    def verify_partition(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> ErrorCode:
        """Whether ``tp`` is in the producer's open transaction, as Kafka's coordinator answers a
        partition leader's verify-only AddPartitionsToTxn (a transactional batch below transaction
        version 2): TRANSACTION_ABORTABLE when it is not; nothing changes."""
        meta = self.transactions.get(transactional_id)
        error = self._check_producer(meta, producer_id, producer_epoch)
        if error is not None:
            return error
        assert meta is not None
        if meta.state in PREPARING:
            return ErrorCode.concurrent_transactions
        if meta.state == TxnState.ONGOING and tp in meta.partitions:
            return ErrorCode.none
        return ErrorCode.transaction_abortable

    def add_share_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        share_partitions: Iterable[SharePartition],
        state_partitions: Iterable[TopicPartition],
        now_ms: int,
    ) -> Outcome:
        """KIP-1289 enlistment: ``state_partitions`` (the ``__share_group_state`` partitions of
        ``share_partitions``) join the transaction as AddPartitionsToTxn would add them, which
        makes it non-empty and starts its timeout if it is the first; the share partitions are
        remembered as enlisted by this producer id and epoch. Idempotent."""
        wanted = set(share_partitions)
        outcome = self.add_partitions(
            transactional_id, producer_id, producer_epoch, state_partitions, now_ms
        )
        if outcome.error is not ErrorCode.none:
            return outcome
        meta = self.transactions[transactional_id]
        if wanted <= meta.share_partitions:
            return outcome
        meta.share_partitions |= wanted
        # the record add_partitions wrote (if any) is superseded by one naming them all
        return self._answer(meta, [self._record(meta)])

    def enlisted_share_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode, frozenset[SharePartition]]:
        """The share partitions enlisted in the producer's Ongoing transaction (none when it has
        no Ongoing transaction), or the error that producer gets from the coordinator."""
        meta = self.transactions.get(transactional_id)
        error = self._check_producer(meta, producer_id, producer_epoch)
        if error is not None:
            return error, frozenset()
        assert meta is not None
        if meta.state in PREPARING:
            return ErrorCode.concurrent_transactions, frozenset()
        if meta.state != TxnState.ONGOING:
            return ErrorCode.none, frozenset()
        return ErrorCode.none, frozenset(meta.share_partitions)

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn with VerifyOnly: is each partition in the Ongoing transaction?"""
        meta = self.transactions.get(transactional_id)
        wanted = list(partitions)
        error = self._check_producer(meta, producer_id, producer_epoch)
        if error is None and meta is not None and meta.state in PREPARING:
            error = ErrorCode.concurrent_transactions
        if error is not None:
            return dict.fromkeys(wanted, error)
        assert meta is not None
        ongoing = meta.state == TxnState.ONGOING
        return {
            tp: ErrorCode.none if ongoing and tp in meta.partitions else ErrorCode.invalid_txn_state
            for tp in wanted
        }

    def _check_producer(
        self, meta: TransactionMetadata | None, producer_id: int, producer_epoch: int
    ) -> ErrorCode | None:
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if meta.producer_epoch != producer_epoch:
            return ErrorCode.producer_fenced
        return None

    # --- EndTxn ------------------------------------------------------------------------------

    def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        now_ms: int,
        *,
        bump_epoch: bool = False,
    ) -> Outcome:
        """``bump_epoch``: transaction version 2 (EndTxn v5). While a prepared transaction's
        markers are written (Kafka 4.4.0: a pending transition to Complete*) the answer is
        CONCURRENT_TRANSACTIONS, with transaction version 2 before any check of the producer,
        with version 1 after the producer id (INVALID_PRODUCER_ID_MAPPING) and epoch
        (PRODUCER_FENCED) checks, whichever outcome it asks for."""
        meta = self.transactions.get(transactional_id)
        if meta is None:
            return Outcome(ErrorCode.invalid_producer_id_mapping)
        if bump_epoch and meta.state in PREPARING:
            # Transaction version 2 checks the pending transition (to Complete*, while the
            # markers are written) before the producer: any id, epoch and outcome waits.
            return Outcome(ErrorCode.concurrent_transactions)
        wanted = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if bump_epoch and self._retries_exhausting_bump(meta, producer_id, producer_epoch):
            if meta.state == wanted:
                return self._answer(meta, [])  # the new id at epoch 0, as the lost answer
            if meta.state in COMPLETE:
                return Outcome(INVALID_TXN)
            return Outcome(ErrorCode.producer_fenced)  # Empty: InitProducerId gave the new id
        # Kafka's retryOnEpochBump: the epoch is the one before the bump, wherever the bump was
        # learnt from (a restart over a compacted log keeps no record of the epoch before it)
        retried = (
            bump_epoch
            and producer_id == meta.producer_id
            and producer_epoch + 1 == meta.producer_epoch
        )
        if retried:
            if meta.state == wanted:
                return self._answer(meta, [])
            # As Kafka's TransactionCoordinator: the other outcome of this transaction (a commit
            # after the coordinator aborted it on timeout) is an invalid transition, not a fence.
            if meta.state in COMPLETE:
                return Outcome(INVALID_TXN)
            return Outcome(ErrorCode.producer_fenced)
        error = self._check_producer(meta, producer_id, producer_epoch)
        if error is not None:
            return Outcome(error)
        if bump_epoch:
            meta.client_transaction_version = 2
        if meta.state == TxnState.ONGOING:
            if bump_epoch:
                self._bump(meta)
            return self._prepare(meta, commit=commit, now_ms=now_ms)
        if meta.state in PREPARING:  # transaction version 1: after the producer's checks
            return Outcome(ErrorCode.concurrent_transactions)
        if meta.state == wanted and not bump_epoch:
            return self._answer(meta, [])  # a retry of an EndTxn that completed
        if bump_epoch and not commit and meta.state in (TxnState.EMPTY, *COMPLETE):
            self._bump(meta)  # TV2 lets a producer abort a transaction it never started
            return self._prepare(meta, commit=False, now_ms=now_ms)
        return Outcome(ErrorCode.invalid_txn_state)

    @staticmethod
    def _retries_exhausting_bump(
        meta: TransactionMetadata, producer_id: int, producer_epoch: int
    ) -> bool:
        """Whether a TV2 EndTxn comes from the producer id an exhausting bump replaced, at its
        last usable epoch (Kafka's ``retryOnOverflow``). Kafka records the new id as the previous
        one once the new id opens a transaction (which then answers INVALID_PRODUCER_ID_MAPPING),
        and every later TV2 EndTxn bumps past epoch 0."""
        return (
            producer_id != NO_PRODUCER_ID
            and producer_id == meta.previous_producer_id
            and producer_epoch == MAX_EPOCH - 1
            and meta.producer_epoch == 0
            and (meta.state == TxnState.EMPTY or meta.state in COMPLETE)
        )

    def _prepare(self, meta: TransactionMetadata, *, commit: bool, now_ms: int) -> Outcome:
        meta.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        meta.last_update_ms = now_ms
        if meta.start_ms < 0:
            meta.start_ms = now_ms
        producer_id, producer_epoch = meta.answered()
        return Outcome(
            ErrorCode.none,
            producer_id,
            producer_epoch,
            [self._record(meta)],
            self._markers(meta),
        )

    @staticmethod
    def _markers(meta: TransactionMetadata) -> Markers:
        """A prepared transaction's markers: the id and epoch it is prepared under."""
        return Markers(
            meta.transactional_id,
            meta.producer_id,
            meta.producer_epoch,
            meta.state == TxnState.PREPARE_COMMIT,
            frozenset(meta.partitions),
            meta.client_transaction_version,
        )

    def complete(self, transactional_id: str, now_ms: int) -> list[Record]:
        """Finish a prepared commit or abort once its markers are written."""
        meta = self.transactions[transactional_id]
        if meta.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return []
        commit = meta.state == TxnState.PREPARE_COMMIT
        meta.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        replaced = self._take_next_producer_id(meta)
        meta.partitions.clear()
        meta.share_partitions.clear()
        meta.last_update_ms = now_ms
        return [self._record(meta, replaced=replaced)]

    # --- timeouts, load ----------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        deadlines = [self._deadline(meta) for meta in self.transactions.values()]
        found = [deadline for deadline in deadlines if deadline is not None]
        return min(found) if found else None

    def _deadline(self, meta: TransactionMetadata) -> int | None:
        if meta.state == TxnState.ONGOING:
            return meta.start_ms + meta.timeout_ms
        if meta.state == TxnState.EMPTY or meta.state in COMPLETE:
            return self._expires_at(meta)
        return None

    def _expires_at(self, meta: TransactionMetadata) -> int:
        return max(meta.last_update_ms + self.id_expiration_ms, meta.expiry_retry_ms)

    def expiring_ids(self, now_ms: int) -> list[str]:
        """The transactional ids ``expire_ids`` expires at ``now_ms``, in its order."""
        return [
            meta.transactional_id
            for meta in self.transactions.values()
            if (meta.state == TxnState.EMPTY or meta.state in COMPLETE)
            and self._expires_at(meta) <= now_ms
        ]

    def expire_ids(self, now_ms: int) -> list[Record]:
        """Tombstones for transactional ids unused for ``transactional.id.expiration.ms``
        (Empty or completed ones; as in Kafka, an open transaction keeps its id)."""
        expired = self.expiring_ids(now_ms)
        for transactional_id in expired:
            del self.transactions[transactional_id]
        return [(transactional_id, None) for transactional_id in expired]

    def retry_expiry(self, transactional_id: str, at_ms: int) -> None:
        """The tombstone of an expired id failed to write and the id was put back: it expires
        again at ``at_ms`` at the earliest (Kafka's next expiration pass)."""
        meta = self.transactions.get(transactional_id)
        if meta is not None:
            meta.expiry_retry_ms = at_ms

    def timed_out(self, now_ms: int) -> list[str]:
        """The transactional ids whose Ongoing transaction is past its timeout."""
        return [
            meta.transactional_id
            for meta in self.transactions.values()
            if meta.state == TxnState.ONGOING and meta.start_ms + meta.timeout_ms <= now_ms
        ]

    def expire(self, now_ms: int) -> list[Outcome]:
        """Abort every Ongoing transaction past its timeout, fencing its producer."""
        return [self._fence(self.transactions[t], now_ms) for t in self.timed_out(now_ms)]

    def replay(self, transactional_id: str, value: TransactionLogValue | None) -> None:
        if value is None:
            self.transactions.pop(transactional_id, None)
            return
        previous = self.transactions.get(transactional_id)
        last_epoch = NO_PRODUCER_EPOCH
        if previous is not None and previous.producer_id == value.producer_id:
            if previous.producer_epoch != value.producer_epoch:
                last_epoch = previous.producer_epoch
            else:
                last_epoch = previous.last_producer_epoch
        self.transactions[transactional_id] = TransactionMetadata(
            transactional_id,
            value.producer_id,
            value.producer_epoch,
            value.timeout_ms,
            TxnState(value.status),
            {(topic, index) for topic, ids in value.partitions for index in ids},
            value.start_ms,
            value.last_update_ms,
            last_epoch,
            value.previous_producer_id,
            value.client_transaction_version,
            set(value.share_partitions),
            value.next_producer_id,
        )

    def fence_and_abort(self, transactional_id: str, now_ms: int) -> Outcome | None:
        """Abort an Ongoing transaction at once, fencing its producer (None if not Ongoing)."""
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.state != TxnState.ONGOING:
            return None
        return self._fence(meta, now_ms)

    def _fence(self, meta: TransactionMetadata, now_ms: int) -> Outcome:
        self._bump(meta)
        return self._prepare(meta, commit=False, now_ms=now_ms)

    def recover(self) -> list[Markers]:
        """After a load: the markers of transactions left prepared, to write and ``complete``."""
        return [
            self._markers(meta)
            for meta in self.transactions.values()
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
        ]

    # --- helpers -----------------------------------------------------------------------------

    def _record(self, meta: TransactionMetadata, *, replaced: int = NO_PRODUCER_ID) -> Record:
        """The record of a transition; ``replaced``: the producer id it replaced, if it did."""
        meta.replaced_producer_id = replaced
        return (meta.transactional_id, meta.record())

    def _answer(self, meta: TransactionMetadata, records: list[Record]) -> Outcome:
        return Outcome(ErrorCode.none, meta.producer_id, meta.producer_epoch, records)
