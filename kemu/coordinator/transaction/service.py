"""The asyncio side of the transaction coordinator: one per process, shared by every broker.

It writes the coordinator's records to ``__transaction_state`` (partition
``abs(hashCode(transactionalId)) % transaction.state.log.num.partitions``, one batch per
operation) before answering, writes COMMIT/ABORT markers straight into the transaction's
partitions (kemu holds them all in this process) and completes the transaction, hands the
transaction's marker on a ``__consumer_offsets`` partition to the group coordinator, whose
TxnOffsetCommit offsets there it commits or drops, and tells its marker listeners
(``add_marker_listener``: KIP-1289 share acknowledgements staged in a transaction complete on its
markers). A timer aborts transactions past their timeout
and writes tombstones for ids unused for ``transactional.id.expiration.ms``. At start it replays
``__transaction_state`` and finishes transactions a crash left prepared; Ongoing ones resume and
time out as in Kafka.

TxnOffsetCommit offsets are records of the transaction in ``__consumer_offsets``, as in Kafka
(``kemu.coordinator.group.offset_operations``): an Ongoing transaction keeps them across a
restart, and a prepared one commits them when its markers are written again.

An operation whose records fail to write (a full disk, no leader) is undone in memory, as Kafka
clears its pending transition when the append fails: the transaction stays as the log has it
(Ongoing, for a failed prepare), so the producer's retry, or the timeout, ends it.

A marker that fails to write (a disk error in that partition) does not end the transaction, as
Kafka's marker channel sends a marker again on KAFKA_STORAGE_ERROR and completes the transaction
only once every partition has its marker: the transaction stays PrepareCommit/PrepareAbort (the
producer, answered at the PREPARE record, gets CONCURRENT_TRANSACTIONS for its next one) and the
timer writes the markers left, and then the COMPLETE record, every ``MARKER_RETRY_BACKOFF_MS``.
A COMPLETE record that fails to write is written again the same way (Kafka's log-append retry
queue). A group's ``TxnOffsetCommit`` offsets are committed, and marker listeners hear of a
partition, once that partition's marker is written, as Kafka's group coordinator completes the
offsets on the ``__consumer_offsets`` marker. A restart finds the transaction prepared in the log
and writes its markers again.

A partition that refuses its marker (INVALID_PRODUCER_EPOCH: a later epoch of the producer wrote
there, e.g. a tool's marker) cancels the transaction's markers, as Kafka's
``TransactionMarkerRequestCompletionHandler`` does (``marker_answers``): nothing is written again,
no COMPLETE record is written, and the transaction stays prepared (``cancelled_markers`` keeps the
partitions not written, for the control plane) until its ``__transaction_state`` partition is
loaded again (a restart, a leader move), which writes its markers again.

An expired transactional id whose tombstone fails to write is kept, as Kafka keeps it in its
cache, and expires again at the next expiration pass
(``transaction.remove.expired.transaction.cleanup.interval.ms``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import structlog

from kemu.cluster.clock import TimerHandle
from kemu.cluster.context import Runtime
from kemu.cluster.crash_points import crash_point
from kemu.cluster.partition import MarkerRefused
from kemu.cluster.services import Service
from kemu.coordinator.group.hashing import partition_for
from kemu.coordinator.group.placement import (
    GROUP,
    INTERNAL_TOPICS,
    TRANSACTION,
    internal_topic,
)
from kemu.coordinator.share.service import SHARE_STATE_TOPIC
from kemu.coordinator.transaction.coordinator import (
    Markers,
    Outcome,
    Record,
    SharePartition,
    TopicPartition,
    TransactionCoordinator,
    TransactionMetadata,
    TxnState,
)
from kemu.coordinator.transaction.marker_answers import MarkerRound, sort_answers
from kemu.coordinator.transaction.producer_ids import producer_ids
from kemu.coordinator.transaction.records import encode_key, encode_value
from kemu.coordinator.transaction.state_log import DECODED_BATCHES as DECODED_BATCHES
from kemu.coordinator.transaction.state_log import replay_state_log
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import build_batch, read_header

if TYPE_CHECKING:
    # The group coordinator's modules load on its first use, not at start-up (0.15 s of CPU
    # before the broker is ready): only transactions carrying offsets need them.
    pass

log = structlog.get_logger("kemu.transaction")

SERVICE = "transaction_coordinator"
TOPIC = INTERNAL_TOPICS[TRANSACTION].name
OFFSETS_TOPIC = INTERNAL_TOPICS[GROUP].name


MarkerListener = Callable[[Markers], None]
# After a marker or a COMPLETE record failed to write, wait this long before writing it again.
# Kafka's marker channel sends it again on its sender thread's next round; kemu writes in-process,
# so trying at once would spin on a failing disk: the clients' retry.backoff.ms default instead.
MARKER_RETRY_BACKOFF_MS = 100
PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
# a transactional id's metadata before an operation (None: it had none), restored when the
# operation's records fail to write
Snapshot = tuple[str, TransactionMetadata | None]


@functools.lru_cache(maxsize=4096)
def _state_index(transactional_id: str, partitions: int) -> int:
    """The ``__transaction_state`` partition of ``transactional_id``, remembered: every state
    record of a transaction hashes the same id again (Java's ``String.hashCode``, in Python)."""
    return partition_for(transactional_id, partitions)


class TransactionService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        config = runtime.cluster.config
        self.coordinator = TransactionCoordinator(
            producer_ids(runtime).allocate,
            config.get_int("transaction.max.timeout.ms"),
            config.get_int("transactional.id.expiration.ms"),
        )
        # the group coordinator hears first: a transaction's offsets are committed before a
        # share acknowledgement of the same transaction completes
        self.marker_listeners: list[MarkerListener] = [self._end_group_offsets]
        self._timer: TimerHandle | None = None
        # Kafka looks for timed-out transactions at this interval: after an abort failed to write
        # the timer waits that long before it tries again, instead of firing at once
        self.abort_retry_ms = config.get_int(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms"
        )
        self._abort_retry_at: int | None = None
        # prepared transactions whose markers (those not written yet; none: only the COMPLETE
        # record) failed to write, tried again at _marker_retry_at
        self.pending_markers: dict[str, Markers] = {}
        self._marker_retry_at: int | None = None
        # prepared transactions whose markers a partition refused (a later producer epoch
        # there), with the partitions not written: they stay prepared until a reload
        self.cancelled_markers: dict[str, Markers] = {}
        # Kafka looks for expired transactional ids at this interval: a tombstone that failed to
        # write is written again that much later
        self.expiry_retry_ms = config.get_int(
            "transaction.remove.expired.transaction.cleanup.interval.ms"
        )
        loaded = 0
        for transactional_id, value in replay_state_log(self.runtime.cluster.topics.get(TOPIC)):
            self.coordinator.replay(transactional_id, value)
            loaded += 1
        if loaded:
            log.info("transaction_state_loaded", records=loaded)
        now = runtime.clock_ms()
        for markers in self.coordinator.recover():
            if self._send_markers(markers, now):
                self._complete(markers, now)
        self.rearm()

    # --- operations (each writes its records before it returns) -----------------------------

    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> Outcome:
        now = self.runtime.clock_ms()
        before = self._snapshot(transactional_id)
        outcome = self.coordinator.init_producer_id(
            transactional_id, timeout_ms, now, producer_id, producer_epoch
        )
        return self._carry_out(outcome, now, before)

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> Outcome:
        now = self.runtime.clock_ms()
        before = self._snapshot(transactional_id)
        outcome = self.coordinator.add_partitions(
            transactional_id, producer_id, producer_epoch, partitions, now
        )
        return self._carry_out(outcome, now, before)

    def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> Outcome:
        partition = self._offsets_partition(group_id)
        return self.add_partitions(transactional_id, producer_id, producer_epoch, [partition])

    def verify_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> ErrorCode:
        """TxnOffsetCommit below v5: the group's ``__consumer_offsets`` partition must be in the
        Ongoing transaction (an AddOffsetsToTxn added it), as Kafka verifies it (KIP-890 part
        1); else INVALID_TXN_STATE, and nothing is written (no marker would end it)."""
        partition = self._offsets_partition(group_id)
        answers = self.verify_partitions(transactional_id, producer_id, producer_epoch, [partition])
        return answers[partition]

    def _offsets_partition(self, group_id: str) -> TopicPartition:
        offsets = internal_topic(self.runtime.cluster, GROUP)
        return (OFFSETS_TOPIC, partition_for(group_id, len(offsets.partitions)))

    def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        bump_epoch: bool,
    ) -> Outcome:
        now = self.runtime.clock_ms()
        before = self._snapshot(transactional_id)
        outcome = self.coordinator.end_transaction(
            transactional_id, producer_id, producer_epoch, commit, now, bump_epoch=bump_epoch
        )
        return self._carry_out(outcome, now, before)

    def resolve_now(self, transactional_id: str, commit: bool) -> Outcome | None:
        """The control plane ends an Ongoing transaction: abort fences the producer as the
        timeout does; commit writes the markers as an EndTxn commit would. None when the id has
        no Ongoing transaction."""
        now = self.runtime.clock_ms()
        before = self._snapshot(transactional_id)
        if commit:
            meta = self.coordinator.transactions.get(transactional_id)
            if meta is None or meta.state != TxnState.ONGOING:
                return None
            outcome = self.coordinator.end_transaction(
                transactional_id, meta.producer_id, meta.producer_epoch, True, now
            )
        else:
            found = self.coordinator.fence_and_abort(transactional_id, now)
            if found is None:
                return None
            outcome = found
        if outcome.markers is not None:
            log.info(
                "transaction_resolved_by_control",
                transactional_id=transactional_id,
                commit=commit,
                producer_id=outcome.producer_id,
            )
        return self._carry_out(outcome, now, before)

    def add_share_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        share_partitions: list[SharePartition],
        state_partitions: list[TopicPartition],
    ) -> Outcome:
        now = self.runtime.clock_ms()
        before = self._snapshot(transactional_id)
        outcome = self.coordinator.add_share_partitions(
            transactional_id, producer_id, producer_epoch, share_partitions, state_partitions, now
        )
        return self._carry_out(outcome, now, before)

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        return self.coordinator.verify_partitions(
            transactional_id, producer_id, producer_epoch, partitions
        )

    def check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> ErrorCode:
        """For TxnOffsetCommit: the producer must hold the transactional id's current epoch."""
        meta = self.coordinator.transactions.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if meta.producer_epoch != producer_epoch:
            return ErrorCode.producer_fenced
        return ErrorCode.none

    def on_transactional_produce(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> ErrorCode:
        """A transactional batch of transaction version 2 (Produce v12+) reached ``tp``'s leader:
        the partition joins the transaction (KIP-890)."""
        meta = self.coordinator.transactions.get(transactional_id)
        if (
            meta is not None
            and meta.state == TxnState.ONGOING
            and tp in meta.partitions
            and meta.producer_id == producer_id
            and meta.producer_epoch == producer_epoch
        ):
            return ErrorCode.none  # the hot path: nothing to write
        return self.add_partitions(transactional_id, producer_id, producer_epoch, [tp]).error

    def verify_transactional_produce(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> ErrorCode:
        """A transactional batch below transaction version 2 (Produce v11 and older) reached
        ``tp``'s leader: the client must have added ``tp`` (``TransactionCoordinator.
        verify_partition``)."""
        return self.coordinator.verify_partition(transactional_id, producer_id, producer_epoch, tp)

    # --- effects -------------------------------------------------------------------------------

    def _snapshot(self, transactional_id: str) -> Snapshot:
        meta = self.coordinator.transactions.get(transactional_id)
        return transactional_id, None if meta is None else meta.snapshot()

    def _restore(self, before: Snapshot) -> None:
        transactional_id, meta = before
        if meta is None:
            self.coordinator.transactions.pop(transactional_id, None)
        else:
            self.coordinator.transactions[transactional_id] = meta

    def _carry_out(self, outcome: Outcome, now: int, before: Snapshot) -> Outcome:
        """Write ``outcome``'s records, then its markers and the completion. When the records
        fail to write, the transactional id goes back to ``before`` (taken just before the
        coordinator's transition) and the error is answered."""
        if outcome.records:
            error = self._write(outcome.records, now)
            if error is not ErrorCode.none:
                self._restore(before)
                return Outcome(error)
        markers = outcome.markers
        if markers is not None:
            crash_point("txn.prepared")
            if self._send_markers(markers, now):
                crash_point("txn.markers_written")
                self._complete(markers, now)
        self.rearm()
        return outcome

    def _write(self, records: list[Record], now: int) -> ErrorCode:
        if not records:
            return ErrorCode.none
        transactional_id = records[0][0]
        topic = internal_topic(self.runtime.cluster, TRANSACTION)
        partition = topic.partitions[_state_index(transactional_id, len(topic.partitions))]
        batch = build_batch(
            [
                (
                    encode_key(txn_id),
                    encode_value(value, empty=value is not None and value.status == TxnState.EMPTY),
                )
                for txn_id, value in records
            ],
            timestamp_ms=now,
        )
        try:
            appended = partition.append([(read_header(batch), batch)], now_ms=now)
        except OSError as error:
            log.error("transaction_state_append_failed", error=str(error))
            return ErrorCode.coordinator_not_available
        if appended.error is not ErrorCode.none:
            return ErrorCode.coordinator_not_available
        return ErrorCode.none

    def _send_markers(self, markers: Markers, now: int) -> bool:
        """Write ``markers``; whether every partition has its marker now. Those that failed to
        write wait in ``pending_markers`` for the timer. A partition that refuses its marker (a
        later epoch of the producer wrote there) cancels the transaction's markers, as Kafka's
        marker channel does (``marker_answers``): it stays prepared, those not written are kept
        in ``cancelled_markers``, and only a reload of its partition writes them again."""
        transactional_id = markers.transactional_id
        answers = self._write_markers(markers, now)
        if answers.cancelled:
            self.pending_markers.pop(transactional_id, None)
            left = markers.partitions - answers.written
            self.cancelled_markers[transactional_id] = replace(markers, partitions=left)
            log.warning(
                "transaction_markers_cancelled",
                transactional_id=transactional_id,
                refused={f"{t}-{i}": error.name for (t, i), error in answers.cancelled_by.items()},
                not_written=sorted(f"{t}-{i}" for t, i in left),
            )
            return False
        if answers.retry:
            self.pending_markers[transactional_id] = replace(markers, partitions=answers.retry)
            self._retry_markers_later(now)
            return False
        self.pending_markers.pop(transactional_id, None)
        return True

    def _complete(self, markers: Markers, now: int) -> None:
        """Write the COMPLETE record of a transaction whose markers are all written. When it
        fails to write, the transaction stays prepared (as the log has it) and the record is
        written again on the timer."""
        transactional_id = markers.transactional_id
        before = self._snapshot(transactional_id)
        records = self.coordinator.complete(transactional_id, now)
        if self._write(records, now) is ErrorCode.none:
            return
        self._restore(before)
        self.pending_markers[transactional_id] = replace(markers, partitions=frozenset())
        self._retry_markers_later(now)

    def _retry_markers_later(self, now: int) -> None:
        if self._marker_retry_at is None:
            self._marker_retry_at = now + MARKER_RETRY_BACKOFF_MS

    def _retry_markers(self, now: int) -> None:
        """Write again the markers, then the COMPLETE records, that failed to write."""
        for transactional_id, markers in list(self.pending_markers.items()):
            meta = self.coordinator.transactions.get(transactional_id)
            if (
                meta is None
                or meta.state not in PREPARED
                or (meta.state == TxnState.PREPARE_COMMIT) != markers.commit
                or (meta.producer_id, meta.producer_epoch)
                != (markers.producer_id, markers.producer_epoch)
            ):
                del self.pending_markers[transactional_id]  # reloaded since: not ours to finish
                continue
            if markers.partitions and not self._send_markers(markers, now):
                continue
            crash_point("txn.markers_written")
            self._complete(markers, now)

    def _write_markers(self, markers: Markers, now: int) -> MarkerRound:
        """Write a marker to each of ``markers``' partitions, then tell the marker listeners
        (the group coordinator first) which partitions have theirs. Returns each partition's
        answer, sorted: a disk error is Kafka's KAFKA_STORAGE_ERROR, a refusal the partition's
        error."""
        cluster = self.runtime.cluster
        answers: dict[TopicPartition, ErrorCode] = {}
        for topic_name, index in sorted(markers.partitions):
            topic = cluster.topics.get(topic_name)
            if topic is None or not 0 <= index < len(topic.partitions):
                continue  # deleted since it joined the transaction: Kafka finds no leader
            try:
                topic.partitions[index].write_marker(
                    markers.producer_id,
                    markers.producer_epoch,
                    markers.commit,
                    transaction_version=markers.transaction_version,
                    now_ms=now,
                )
            except MarkerRefused as refused:
                # a later epoch of the producer (or coordinator) wrote there
                log.warning(
                    "transaction_marker_refused",
                    topic=topic_name,
                    partition=index,
                    error=refused.refusal.error.name,
                    message=refused.refusal.message,
                )
                answers[topic_name, index] = refused.refusal.error
            except OSError as error:
                log.error(
                    "transaction_marker_failed",
                    topic=topic_name,
                    partition=index,
                    error=str(error),
                )
                answers[topic_name, index] = ErrorCode.kafka_storage_error
            else:
                answers[topic_name, index] = ErrorCode.none
                crash_point(
                    "txn.share_state_marker_written"
                    if topic_name == SHARE_STATE_TOPIC
                    else "txn.data_marker_written"
                )
        crash_point("txn.markers_appended")
        sorted_answers = sort_answers(answers)
        unwritten = frozenset(tp for tp, error in answers.items() if error is not ErrorCode.none)
        written = markers
        if unwritten:
            written = replace(markers, partitions=markers.partitions - unwritten)
        if written.partitions or not unwritten:
            self.notify_markers(written)
        return sorted_answers

    def add_marker_listener(self, listener: MarkerListener) -> None:
        """Call ``listener`` with every transaction's markers once they are written (KIP-1289:
        the share side completes acknowledgements staged under the producer id and epoch); a
        marker that failed to write is heard of, with its partition alone, once written."""
        self.marker_listeners.append(listener)

    def notify_markers(self, markers: Markers) -> None:
        for listener in list(self.marker_listeners):
            try:
                listener(markers)
            except Exception:
                log.exception("transaction_marker_listener_failed", listener=repr(listener))

    def _end_group_offsets(self, markers: Markers) -> None:
        """A marker on a ``__consumer_offsets`` partition commits or drops the transaction's
        TxnOffsetCommit offsets there, as Kafka's group coordinator replays it. A group
        coordinator not built yet reads the marker from the log when it loads."""
        from kemu.coordinator.group.service import GROUP_COORDINATOR

        groups = self.runtime.services.built(GROUP_COORDINATOR)
        if groups is None:
            return
        for topic, index in sorted(markers.partitions):
            if topic == OFFSETS_TOPIC:
                groups.end_transaction(index, markers.producer_id, markers.commit)

    # --- timer, load ---------------------------------------------------------------------------

    def reload_partition(self, index: int) -> int:
        """A ``__transaction_state`` partition's leader moved (a broker stopped or came back):
        forget its transactional ids and replay them from the log, as Kafka's new transaction
        coordinator loads the partition it takes over; a transaction found prepared gets its
        markers and COMPLETE record, an Ongoing one goes on (its producer may still end it, its
        timeout still runs from its start). Its TxnOffsetCommit offsets wait in
        ``__consumer_offsets``, as in Kafka. Returns how many transactional ids it loaded."""
        topic = self.runtime.cluster.topics.get(TOPIC)
        if topic is None or not 0 <= index < len(topic.partitions):
            return 0
        count = len(topic.partitions)
        transactions = self.coordinator.transactions
        for transactional_id in [t for t in transactions if partition_for(t, count) == index]:
            del transactions[transactional_id]
            # markers still to write are written again from the log's PREPARE record, as Kafka
            # drops the markers it queued for a partition it loads again
            self.pending_markers.pop(transactional_id, None)
            self.cancelled_markers.pop(transactional_id, None)
        for transactional_id, value in replay_state_log(topic, [index]):
            self.coordinator.replay(transactional_id, value)
        loaded = sum(1 for t in transactions if partition_for(t, count) == index)
        now = self.runtime.clock_ms()
        for markers in self.coordinator.recover():
            if markers.transactional_id in self.pending_markers:
                continue  # another partition's, written again on the timer
            if self._send_markers(markers, now):
                self._complete(markers, now)
        self.rearm()
        log.debug("transaction_state_partition_loaded", partition=index, transactional_ids=loaded)
        return loaded

    def rearm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self.coordinator.next_deadline_ms()
        if deadline is not None and self._abort_retry_at is not None:
            deadline = max(deadline, self._abort_retry_at)
        if self._marker_retry_at is not None:
            retry = self._marker_retry_at
            deadline = retry if deadline is None else min(deadline, retry)
        if deadline is None:
            return
        with contextlib.suppress(RuntimeError):  # no loop yet: the next operation arms it
            self._timer = self.runtime.clock.call_at(deadline, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        now = self.runtime.clock_ms()
        if self._marker_retry_at is not None and self._marker_retry_at <= now:
            self._marker_retry_at = None
            self._retry_markers(now)
        if self._abort_retry_at is not None and self._abort_retry_at <= now:
            self._abort_retry_at = None
        if self._abort_retry_at is None:  # else a marker's retry woke the timer before it
            self._abort_timed_out(now)
        expiring = [self._snapshot(t) for t in self.coordinator.expiring_ids(now)]
        for before, record in zip(expiring, self.coordinator.expire_ids(now), strict=True):
            log.info("transactional_id_expired", transactional_id=record[0])
            if self._write([record], now) is not ErrorCode.none:
                # As Kafka, which keeps the id in its cache when the tombstone fails to append:
                # it stays as the log has it and expires again at the next expiration pass.
                self._restore(before)
                self.coordinator.retry_expiry(before[0], now + self.expiry_retry_ms)
        self.rearm()

    def _abort_timed_out(self, now: int) -> None:
        # every timed-out transaction is prepared first, then each is written in turn
        befores = [self._snapshot(t) for t in self.coordinator.timed_out(now)]
        for before, outcome in zip(befores, self.coordinator.expire(now), strict=True):
            log.info(
                "transaction_timed_out",
                transactional_id=before[0],
                producer_id=outcome.producer_id,
            )
            if self._carry_out(outcome, now, before).error is not ErrorCode.none:
                self._abort_retry_at = now + self.abort_retry_ms  # still Ongoing: try later


TRANSACTION_COORDINATOR = Service(SERVICE, TransactionService)


def transaction_coordinator(runtime: Runtime) -> TransactionService:
    return runtime.services.get(TRANSACTION_COORDINATOR)


def start_transactions(runtime: Runtime) -> None:
    """At process start: load ``__transaction_state`` when it exists, so that transactions a
    restart interrupted are finished or time out without waiting for a client."""
    if TOPIC in runtime.cluster.topics:
        transaction_coordinator(runtime).rearm()
