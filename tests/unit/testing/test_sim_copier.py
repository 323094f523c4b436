"""``--copier``: the simulation's consume-transform-produce role, whose transactions carry its
group's offsets (TxnOffsetCommit), and its end check (``kemu/testing/sim/copier.py``).

Seed 2 at 600 steps finds kemu's old handling re-introduced (before ``14c67b6`` a transaction's
offsets were in memory until its markers were written, then written as plain commits, and the
transactional records were not in the log): a crash while a copier transaction committed kept
its output and lost its offsets, so ``copied`` holds copies of records past the group's committed
offsets, which a copier reads again. Of seeds 1-8 x 600, 2 and 3 find it; 1-6 pass with the fix.

``--copier-listener``: the copiers' transactions span polls and their ``RebalanceListener``
commits one before a partition is revoked. Seed 1 at 600 steps finds a listener that does not:
the transaction, committed later with the member's new epoch, carries offsets of a partition
another copier has started on, and a record is copied twice. Of seeds 1-10 x 600, only 1 finds
it; 1-4 x 1,500 with the listener as it is pass.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kemu.client.group_consumer import GroupConsumer
from kemu.client.txn_offsets import ConsumerGroupMetadata
from kemu.coordinator.group.offset_operations import OffsetOperations
from kemu.coordinator.group.offsets_log import LoggedMarker, LoggedRecord, OffsetsLog
from kemu.coordinator.group.records import NO_TIMESTAMP, OffsetCommitKey, OffsetCommitValue
from kemu.testing.sim.copier import ListeningCopier
from kemu.testing.sim.run import Simulation

SEED, STEPS = 2, 600


def test_the_copier_copies_each_input_record_once() -> None:
    result = Simulation(SEED, STEPS, copier=True).run()
    assert result.ok, (result.violations, result.trace[-30:])
    assert result.counts.get("copier.committed", 0) > 500, result.counts


def test_the_old_in_memory_offsets_lose_committed_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    real_end = OffsetOperations.end_transaction
    real_entries = OffsetsLog.entries

    def end_then_write_plain(
        self: OffsetOperations, partition_index: int, producer_id: int, commit: bool
    ) -> None:
        ending = self.offset_manager.pending.of_producer(producer_id)
        real_end(self, partition_index, producer_id, commit)
        if not commit:
            return
        now = self.runtime.clock_ms()
        for group_id, offsets in ending.items():
            records = [
                (
                    OffsetCommitKey(group_id, topic, partition),
                    OffsetCommitValue(
                        offset=value.offset,
                        metadata=value.metadata,
                        commit_timestamp=now,
                        leader_epoch=value.leader_epoch,
                        expire_timestamp=NO_TIMESTAMP,
                    ),
                )
                for (topic, partition), value in offsets.items()
            ]
            self._append(group_id, list(records), now)

    def without_transactions(
        self: OffsetsLog, partitions: object = None
    ) -> Iterator[LoggedRecord | LoggedMarker]:
        for entry in real_entries(self, partitions):  # type: ignore[arg-type]
            if isinstance(entry, LoggedMarker) or entry.producer_id >= 0:
                continue
            yield entry

    monkeypatch.setattr(OffsetOperations, "end_transaction", end_then_write_plain)
    monkeypatch.setattr(OffsetsLog, "entries", without_transactions)
    result = Simulation(SEED, STEPS, copier=True).run()
    assert any(v.startswith("copied:") for v in result.violations), result.violations


GIVEN_UP_SEED, GIVEN_UP_STEPS = 26, 500


def test_records_of_a_partition_given_up_are_not_committed_at_the_new_epoch() -> None:
    """Seed 26 (two copiers, 2,000 steps) found it: copier-2 was lost by the group while a poll
    was reading, rejoined at once and was answered epoch 3 without the partition copier-1 then
    got; the poll handed out records of that partition, and ``group_metadata()`` gave epoch 3,
    the member's current one, at which the coordinator takes a commit of any partition: both
    copiers copied those records. ``group_metadata()`` now gives the epoch of the partitions the
    member reads, so that commit (at the older epoch, of a partition no longer held) is refused
    and the transaction aborts. Seed 27 found it too. 500 steps are enough for seed 26 (the
    next test); of seeds 1-26 x 800 only 26 finds it."""
    result = Simulation(GIVEN_UP_SEED, GIVEN_UP_STEPS, copier=True).run()
    assert result.ok, (result.violations, result.trace[-30:])


def test_with_the_members_current_epoch_that_seed_copies_records_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def current_epoch(self: GroupConsumer) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(self.group_id, self.member_id, self.member_epoch)

    monkeypatch.setattr(GroupConsumer, "group_metadata", current_epoch)
    result = Simulation(GIVEN_UP_SEED, GIVEN_UP_STEPS, copier=True).run()
    assert any("copied twice" in found for found in result.violations), result.violations


def test_a_listening_copier_commits_before_a_revocation() -> None:
    result = Simulation(1, 600, copier_listener=True).run()
    assert result.ok, (result.violations, result.trace[-30:])
    assert result.counts.get("copier.revoked", 0) > 0, result.counts
    assert result.counts.get("copier.committed", 0) > 500, result.counts


def test_a_listener_leaving_the_transaction_open_copies_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def only_counted(self: ListeningCopier, partitions: list[tuple[str, int]]) -> None:
        self.ledger.count("copier.revoked")

    monkeypatch.setattr(ListeningCopier, "on_partitions_revoked", only_counted)
    result = Simulation(1, 600, copier_listener=True).run()
    assert any("copied twice" in v for v in result.violations), result.violations
