"""``--copier``: a consume-transform-produce loop with the group's offsets in the transaction
(Kafka Streams' and franz-go's ``TestTxnEtl``'s pattern), and its end check.

Two copiers, each a ``GroupConsumer`` of ``input`` (read_committed, group ``copiers``) and a
``TransactionalProducer`` whose transactional id is the role's, so a copier started again fences
the one before it and aborts what it left open. Each poll's records go, transformed, to
``copied`` in one transaction with the group's offsets after them
(``send_offsets_to_transaction``, with the member as it polled); a refused member
(CommitFailedError) or any other abortable error aborts it, and the copier starts a new life.

``GroupConsumer`` has no rebalance listener, so a copier may give up a partition while its
transaction holds records of it, and the partition's new owner may start on it before that
transaction sends its offsets. Exactly once then rests on the broker, as KIP-447 has it: the
new owner's OffsetFetch (``require_stable``) waits while a transaction holds the partition's
offset, and the old owner's TxnOffsetCommit, with the member epoch it polled at, is refused once
it no longer holds the partition, so its transaction aborts.

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
