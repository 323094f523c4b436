"""The group coordinator's committed-offset operations: OffsetCommit, OffsetFetch, OffsetDelete,
a deleted topic's offsets, and a transaction's (TxnOffsetCommit, then its marker).

A TxnOffsetCommit's offsets are written at once to the group's ``__consumer_offsets`` partition,
in a transactional batch of the producer's id and epoch, as Kafka's coordinator writes them; they
wait in ``OffsetManager.pending`` until the transaction's marker on that partition commits or
drops them (``end_transaction``, called when the transaction coordinator or a tool has written
it; a load replays both from the log). So they survive a restart like any record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kemu.cluster.context import Runtime
from kemu.coordinator.group.hashing import partition_for
from kemu.coordinator.group.offset_manager import (
    CommitPartition,
    CommitResult,
    DeleteResult,
    FetchedOffset,
    OffsetManager,
)
from kemu.coordinator.group.offsets_log import TOPIC as OFFSETS_TOPIC
from kemu.coordinator.group.offsets_log import OffsetsLog
from kemu.coordinator.group.records import RecordKey, RecordValue
from kemu.protocol.errors import ErrorCode

Record = tuple[RecordKey, RecordValue | None]


class OffsetOperations:
    runtime: Runtime
    offset_manager: OffsetManager
    offsets_log: OffsetsLog

    if TYPE_CHECKING:

        def _append(self, group_id: str, records: list[Record], now_ms: int) -> ErrorCode: ...

        def _rearm(self) -> None: ...

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        partitions: list[CommitPartition],
        *,
        api_version: int,
        retention_ms: int = -1,
    ) -> CommitResult:
        now = self.runtime.clock_ms()
        result = self.offset_manager.commit(
            group_id,
            member_id,
            group_instance_id,
            generation_id,
            partitions,
            now,
            api_version=api_version,
            retention_ms=retention_ms,
        )
        if result.records:
            error = self._append(group_id, result.records, now)
            if error != ErrorCode.none:
                return CommitResult(error)
        self._rearm()
        return result

    def commit_transactional_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[CommitPartition],
    ) -> ErrorCode:
        """Write a TxnOffsetCommit's offsets (checked by the caller) in the producer's
        transaction; the error the request answers when they could not be written."""
        now = self.runtime.clock_ms()
        records = self.offset_manager.transactional_records(group_id, partitions, now)
        error, first_offset = self.offsets_log.write(
            group_id, records, now, producer_id=producer_id, producer_epoch=producer_epoch
        )
        if error == ErrorCode.none:
            self.offset_manager.replay(records, producer_id=producer_id, first_offset=first_offset)
        return error

    def end_transaction(self, partition_index: int, producer_id: int, commit: bool) -> None:
        """A transaction's COMMIT or ABORT marker was written to ``__consumer_offsets``
        partition ``partition_index``: the offsets it holds of that partition's groups are
        committed or dropped."""
        topic = self.runtime.cluster.topics.get(OFFSETS_TOPIC)
        if topic is None:
            return
        count = len(topic.partitions)
        self.offset_manager.end_transaction(
            producer_id, commit, lambda group_id: partition_for(group_id, count) == partition_index
        )

    def fetch_offsets(
        self,
        group_id: str,
        requested: list[tuple[str, list[int]]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
        *,
        require_stable: bool = False,
    ) -> tuple[ErrorCode, list[FetchedOffset]]:
        return self.offset_manager.fetch(
            group_id, requested, member_id, member_epoch, require_stable=require_stable
        )

    def delete_offsets(self, group_id: str, requested: list[tuple[str, list[int]]]) -> DeleteResult:
        result = self.offset_manager.delete(group_id, requested)
        if result.records:
            error = self._append(group_id, result.records, self.runtime.clock_ms())
            if error != ErrorCode.none:
                return DeleteResult(error)
        return result

    def delete_topic_offsets(self, topic: str) -> None:
        """A deleted topic's committed offsets, tombstoned in every group, as Kafka deletes them
        with the topic (a failed write leaves a group's, as an expiry does)."""
        now = self.runtime.clock_ms()
        for group_id, records in self.offset_manager.topic_tombstones(topic).items():
            self._append(group_id, records, now)
