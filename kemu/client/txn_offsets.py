"""A consumer group's offsets committed in a producer's transaction (Java's
``sendOffsetsToTransaction``): the consume-transform-produce loop of exactly-once apps.

With transaction version 2 (KIP-890 part 2) the producer sends TxnOffsetCommit v5 to the
group's coordinator and the group's ``__consumer_offsets`` partition joins the transaction there;
below 2 it first adds that partition with AddOffsetsToTxn (v4) to the transaction coordinator,
then sends TxnOffsetCommit v3. The offsets become the group's committed offsets when the
transaction commits and are dropped when it aborts; until then a member fetching them with
``require_stable`` (``GroupConsumer`` does) is told they are unstable and asks again.

Answers, as the Java producer takes them: a member no longer current (UNKNOWN_MEMBER_ID,
ILLEGAL_GENERATION, STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH, GROUP_ID_NOT_FOUND) raises
``CommitFailedError`` and the transaction must be aborted; a fenced producer
``ProducerFencedError``; a moved coordinator or CONCURRENT_TRANSACTIONS is retried.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kemu.client.cluster import (
    GROUP_COORDINATOR,
    TRANSACTION_COORDINATOR,
    ClusterClient,
    RetriableError,
)
from kemu.client.errors import (
    COORDINATOR_MOVED,
    MEMBER_FENCED,
    CommitFailedError,
    KafkaError,
    ProducerFencedError,
)
from kemu.protocol.errors import ErrorCode

ADD_OFFSETS_TO_TXN, TXN_OFFSET_COMMIT = 25, 28
IMPLICIT_ADD_VERSION = 5  # TxnOffsetCommit v5: the partition joins the transaction by itself


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """Who commits (Java's ``ConsumerGroupMetadata``): the coordinator refuses a member that
    is not the group's current one, so a zombie cannot commit a partition it lost."""

    group_id: str
    member_id: str = ""
    generation_id: int = -1  # a KIP-848 member's epoch; -1: not a member (no check)
    group_instance_id: str | None = None


class TransactionalOffsets:
    """``TransactionalProducer``'s ``send_offsets_to_transaction``."""

    cluster: ClusterClient
    transactional_id: str
    producer_id: int
    producer_epoch: int
    request_timeout: float
    _transaction_version: int
    _has_work: bool

    if TYPE_CHECKING:

        def _check_not_fenced(self) -> None: ...

        def _require_in_transaction(self, what: str) -> None: ...

        def _make_abortable(self, cause: KafkaError) -> None: ...

        def _raise_for(
            self,
            error: ErrorCode,
            what: str,
            *,
            coordinator: bool = False,
            message: str | None = None,
        ) -> None: ...

    async def send_offsets_to_transaction(
        self, offsets: dict[tuple[str, int], int], metadata: ConsumerGroupMetadata
    ) -> None:
        """Commit ``offsets`` ((topic, partition) -> the next offset to read) for the group in
        the open transaction. Raises CommitFailedError when the member is no longer the group's
        current one (abort, then poll again), ProducerFencedError when this producer was fenced."""
        self._check_not_fenced()
        self._require_in_transaction("send offsets")
        if not offsets:
            return
        try:
            if self._transaction_version < 2:
                await self._add_offsets(metadata.group_id)
            self._has_work = True
            await self._txn_offset_commit(offsets, metadata)
        except ProducerFencedError:
            raise
        except KafkaError as exc:
            self._make_abortable(exc)
            raise

    async def _add_offsets(self, group_id: str) -> None:
        async def attempt() -> None:
            node = await self.cluster.coordinator(
                TRANSACTION_COORDINATOR, self.transactional_id, timeout=self.request_timeout
            )
            version = await self.cluster.version(ADD_OFFSETS_TO_TXN, 4, node)
            response = await self.cluster.call(
                node,
                ADD_OFFSETS_TO_TXN,
                version,
                transactional_id=self.transactional_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                group_id=group_id,
            )
            self._raise_for(response.error_code, "AddOffsetsToTxn", coordinator=True)

        await self.cluster.retry(attempt, timeout=self.request_timeout)

    async def _txn_offset_commit(
        self, offsets: dict[tuple[str, int], int], metadata: ConsumerGroupMetadata
    ) -> None:
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append((partition, offset))
        group_id = metadata.group_id

        async def attempt() -> None:
            node = await self.cluster.coordinator(
                GROUP_COORDINATOR, group_id, timeout=self.request_timeout
            )
            wanted = IMPLICIT_ADD_VERSION if self._transaction_version >= 2 else 3
            version = await self.cluster.version(TXN_OFFSET_COMMIT, wanted, node)
            topics = tuple(
                self.cluster.nested(
                    TXN_OFFSET_COMMIT,
                    version,
                    "TxnOffsetCommitRequestTopic",
                    name=topic,
                    partitions=tuple(
                        self.cluster.nested(
                            TXN_OFFSET_COMMIT,
                            version,
                            "TxnOffsetCommitRequestPartition",
                            partition_index=partition,
                            committed_offset=offset,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        )
                        for partition, offset in partitions
                    ),
                )
                for topic, partitions in by_topic.items()
            )
            response = await self.cluster.call(
                node,
                TXN_OFFSET_COMMIT,
                version,
                transactional_id=self.transactional_id,
                group_id=group_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                generation_id=metadata.generation_id,
                member_id=metadata.member_id,
                group_instance_id=metadata.group_instance_id,
                topics=topics,
            )
            errors = {
                ErrorCode(p.error_code)
                for topic in response.topics
                for p in topic.partitions
                if p.error_code != ErrorCode.none
            }
            for error in sorted(errors, key=lambda e: e.value):
                if error in COORDINATOR_MOVED:
                    self.cluster.forget_coordinator(GROUP_COORDINATOR, group_id)
                    raise RetriableError(f"TxnOffsetCommit: {error.name}")
                if error in MEMBER_FENCED or error == ErrorCode.fenced_instance_id:
                    raise CommitFailedError(
                        error, f"TxnOffsetCommit: member {metadata.member_id} is not current"
                    )
                self._raise_for(error, "TxnOffsetCommit")

        await self.cluster.retry(attempt, timeout=self.request_timeout)
