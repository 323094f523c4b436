"""``--copier``: a consume-transform-produce loop with the group's offsets in the transaction
(Kafka Streams' and franz-go's ``TestTxnEtl``'s pattern), and its end check.

Two copiers, each a ``GroupConsumer`` of ``input`` (read_committed, group ``copiers``) and a
``TransactionalProducer`` whose transactional id is the role's, so a copier started again fences
the one before it and aborts what it left open. Each poll's records go, transformed, to
``copied`` in one transaction with the group's offsets after them
(``send_offsets_to_transaction``, with the member as it polled); a refused member
(CommitFailedError) or any other abortable error aborts it, and the copier starts a new life.

These copiers have no rebalance listener, so a copier may give up a partition while its
transaction holds records of it, and the partition's new owner may start on it before that
transaction sends its offsets. Exactly once then rests on the broker, as KIP-447 has it: the
new owner's OffsetFetch (``require_stable``) waits while a transaction holds the partition's
offset, and the old owner's TxnOffsetCommit, with the member epoch it polled at, is refused once
it no longer holds the partition, so its transaction aborts.

``--copier-listener``: the copiers are ``ListeningCopier``s, as Kafka Streams is: a transaction
spans one to three polls (drawn from the copier's stream), and the copier's
``RebalanceListener`` commits it before a partition is revoked (the member still holds it, so
the offsets are accepted) and aborts it when the partitions are lost. This drives
``GroupConsumer``'s listener path under the simulation's faults.

The end check reads, in one synchronous look at the simulated kemu, the group's committed
offsets and what ``copied`` holds below its last stable offset, aborted transactions left out:
for each ``input`` partition the copies must be exactly the committed input records below the
group's committed offset, each once. Output and offsets commit together or not at all, so one
without the other (offsets lost at a crash, output aborted while its offsets committed) or a
record copied twice is a violation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from kemu.client import (
    CommitFailedError,
    GroupConsumer,
    KafkaError,
    ProducerFencedError,
    RebalanceListener,
    TransactionalProducer,
)
from kemu.cluster.context import Runtime
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.transaction.service import transaction_coordinator
from kemu.protocol.record_reader import iter_records
from kemu.testing.sim.workload import INPUT, Actor, _close

COPIED, COPIER_GROUP = "copied", "copiers"
COPIER_TRANSACTION_TIMEOUT_MS = 3_500


def copy_of(value: bytes) -> bytes:
    return b"copy:" + value


class Copier(Actor):
    kind = "copier"

    async def body(self) -> None:
        consumer = GroupConsumer(
            self.bootstrap, COPIER_GROUP, auto_offset_reset="earliest", max_wait_ms=200
        )
        producer = TransactionalProducer(
            self.bootstrap,
            f"{self.name}-tx",
            transaction_timeout_ms=COPIER_TRANSACTION_TIMEOUT_MS,
            request_timeout=10,
        )
        self.clients = [consumer, producer]
        try:
            await consumer.subscribe([INPUT])
            await producer.init_transactions()
            while True:
                records = await consumer.poll(timeout=self.rng.uniform(0.1, 1.0))
                # the member as it read them (Java apps take groupMetadata() after poll): one
                # fenced or moved since is refused, its partitions read again from the offsets
                member = consumer.group_metadata()
                if not records:
                    continue
                offsets: dict[tuple[str, int], int] = {}
                for record in records:
                    where = (record.topic, record.partition)
                    offsets[where] = max(offsets.get(where, 0), record.offset + 1)
                producer.begin_transaction()
                try:
                    for record in records:
                        await producer.send(COPIED, copy_of(record.value or b""))
                    await producer.send_offsets_to_transaction(offsets, member)
                    await producer.commit_transaction()
                except ProducerFencedError:
                    raise
                except KafkaError as error:
                    refused = isinstance(error, CommitFailedError)
                    self.ledger.count("copier.refused" if refused else "copier.aborted")
                    await producer.abort_transaction()
                    # a new life: its member starts at the committed offsets, where what this
                    # transaction read comes again
                    raise
                self.ledger.count("copier.committed", len(records))
        finally:
            await _close(consumer)
            await _close(producer)


class ListeningCopier(Copier, RebalanceListener):
    """A copier whose transaction spans polls and whose listener ends it (module docstring).
    It stalls with its transaction open: thawed, its member is lost (its session ended), and
    ``on_partitions_lost`` aborts what the transaction holds."""

    stall_points = ("open",)

    async def body(self) -> None:
        # the open transaction: the offsets after what it copied, and how many records
        self._offsets: dict[tuple[str, int], int] | None = None
        self._copied = 0
        self._polls_left = 0
        self._consumer = GroupConsumer(
            self.bootstrap,
            COPIER_GROUP,
            auto_offset_reset="earliest",
            max_wait_ms=200,
            listener=self,
        )
        self._producer = TransactionalProducer(
            self.bootstrap,
            f"{self.name}-tx",
            transaction_timeout_ms=COPIER_TRANSACTION_TIMEOUT_MS,
            request_timeout=10,
        )
        self.clients = [self._consumer, self._producer]
        try:
            await self._consumer.subscribe([INPUT])
            await self._producer.init_transactions()
            while True:
                records = await self._consumer.poll(timeout=self.rng.uniform(0.1, 1.0))
                if records and self._offsets is None:
                    self._producer.begin_transaction()
                    self._offsets, self._copied = {}, 0
                    self._polls_left = self.rng.randint(1, 3)
                if self._offsets is None:
                    continue
                try:
                    for record in records:
                        await self._producer.send(COPIED, copy_of(record.value or b""))
                except KafkaError as error:
                    await self._abort(error)
                    raise
                for record in records:
                    where = (record.topic, record.partition)
                    self._offsets[where] = max(self._offsets.get(where, 0), record.offset + 1)
                self._copied += len(records)
                await self.chance_to_stall("open")
                self._polls_left -= 1
                if self._polls_left <= 0:
                    await self._commit()
        finally:
            await _close(self._consumer)  # its listener commits what is open
            await _close(self._producer)

    async def _commit(self) -> None:
        offsets, self._offsets = self._offsets, None
        if offsets is None:
            return
        try:
            # the member now: it holds every partition the transaction read (a revocation
            # would have committed the transaction first)
            await self._producer.send_offsets_to_transaction(
                offsets, self._consumer.group_metadata()
            )
            await self._producer.commit_transaction()
        except ProducerFencedError:
            raise
        except KafkaError as error:
            await self._abort(error)
            raise
        self.ledger.count("copier.committed", self._copied)

    async def _abort(self, error: KafkaError | None) -> None:
        self._offsets = None
        if error is not None:
            refused = isinstance(error, CommitFailedError)
            self.ledger.count("copier.refused" if refused else "copier.aborted")
        await self._producer.abort_transaction()

    async def on_partitions_revoked(self, partitions: list[tuple[str, int]]) -> None:
        self.ledger.count("copier.revoked")
        await self._commit()  # still the member's partitions: its offsets are accepted

    async def on_partitions_lost(self, partitions: list[tuple[str, int]]) -> None:
        self.ledger.count("copier.lost")
        if self._offsets is not None:  # another member may read them already: abort
            self.ledger.count("copier.aborted_lost")
            await self._abort(None)


def copier_final(runtime: Runtime, inputs: Mapping[tuple[int, int], bytes]) -> list[str]:
    """The end check (module docstring); ``inputs``: the committed ``input`` records, by
    (partition, offset), as the verifier read them."""
    if transaction_coordinator(runtime).pending_markers:
        return []  # a marker still to write again: output and offsets may differ until it is
    committed = {
        entry.partition: entry.offset
        for entry in group_coordinator(runtime).fetch_offsets(COPIER_GROUP, None)[1]
        if entry.topic == INPUT
    }
    expected = Counter(
        copy_of(value)
        for (partition, offset), value in inputs.items()
        if offset < committed.get(partition, 0)
    )
    copied = Counter(_committed_values(runtime, COPIED))
    found = []
    twice = sorted(value for value, count in copied.items() if count > 1)
    if twice:
        found.append(f"{COPIED}: {len(twice)} input records copied twice, e.g. {twice[:3]}")
    missing = sorted((expected - copied).elements())
    if missing:
        found.append(
            f"{COPIED}: {len(missing)} records below {COPIER_GROUP}'s committed offsets "
            f"{dict(sorted(committed.items()))} not copied, e.g. {missing[:3]}"
        )
    extra = sorted(set(copied) - set(expected))
    if extra:
        found.append(
            f"{COPIED}: {len(extra)} copies of records at or past {COPIER_GROUP}'s committed "
            f"offsets {dict(sorted(committed.items()))}, e.g. {extra[:3]}"
        )
    return found


def _committed_values(runtime: Runtime, topic_name: str) -> list[bytes]:
    """The values of ``topic_name`` a read_committed reader gets: below each partition's last
    stable offset, control batches and aborted transactions' batches left out."""
    topic = runtime.cluster.topics.get(topic_name)
    if topic is None:
        return []
    values: list[bytes] = []
    for partition in topic.partitions:
        start, stable = partition.log_start_offset, partition.last_stable_offset
        aborted = partition.aborted_ranges(start, stable)
        for header, batch in partition.log.batches(start, stable):
            if header.is_control:
                continue
            if header.is_transactional and any(
                producer == header.producer_id and first <= header.base_offset <= last
                for producer, first, last in aborted
            ):
                continue
            values += [record.value or b"" for record in iter_records(batch)]
    return values
