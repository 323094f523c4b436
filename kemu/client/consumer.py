"""Consumer: a plain assign-and-fetch reader, read_committed by default, for checking what a
transactional pipeline wrote. No group membership and no committed offsets.

read_committed: the leader only returns records below the last stable offset, and names the
aborted transactions in that range; their batches are skipped until the ABORT marker of each.
"""

from __future__ import annotations

import asyncio
import datetime
import random
from dataclasses import dataclass

from kemu.client.backoff import Backoff
from kemu.client.cluster import ClusterClient, RetriableError
from kemu.client.codec import batch_records, control_marker, whole_batches
from kemu.client.connection import ConnectionClosed
from kemu.client.errors import LEADER_MOVED, KafkaError
from kemu.protocol.errors import ErrorCode

FETCH = 1
LIST_OFFSETS = 2
EARLIEST = -2
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
CONTROL_ABORT = 0


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...]


class Consumer:
    def __init__(
        self,
        bootstrap: str,
        *,
        isolation_level: str = "read_committed",
        client_id: str = "kemu-consumer",
        max_wait_ms: int = 500,
        allow_auto_topic_creation: bool = True,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if isolation_level not in ("read_committed", "read_uncommitted"):
            raise ValueError("isolation_level is 'read_committed' or 'read_uncommitted'")
        self.isolation = READ_COMMITTED if isolation_level == "read_committed" else READ_UNCOMMITTED
        self.max_wait_ms = max_wait_ms
        # the Java consumer's allow.auto.create.topics (default true)
        self.cluster = ClusterClient(
            bootstrap,
            client_id,
            allow_auto_topic_creation=allow_auto_topic_creation,
            backoff=backoff,
            rng=rng,
        )
        self.positions: dict[tuple[str, int], int] = {}

    async def __aenter__(self) -> Consumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def assign(self, partitions: list[tuple[str, int]], offset: int = 0) -> None:
        """Read these partitions from ``offset`` (the log start when that is gone)."""
        await self.cluster.start()
        for topic, partition in partitions:
            await self.cluster.topic(topic)
            self.positions[(topic, partition)] = offset

    async def assign_topic(self, topic: str, offset: int = 0) -> None:
        info = await self.cluster.topic(topic) if self.cluster.nodes else None
        if info is None:
            await self.cluster.start()
            info = await self.cluster.topic(topic)
        await self.assign([(topic, p) for p in sorted(info.leaders)], offset)

    async def poll(self, timeout: float = 1.0) -> list[ConsumerRecord]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = deadline - loop.time()
            wait_ms = max(0, min(self.max_wait_ms, int(remaining * 1000)))
            by_leader: dict[int, list[tuple[str, int]]] = {}
            for topic, partition in self.positions:
                leader = await self.cluster.leader(topic, partition)
                by_leader.setdefault(leader, []).append((topic, partition))
            fetched = await asyncio.gather(
                *(self._fetch(node, tps, wait_ms) for node, tps in by_leader.items()),
                return_exceptions=True,
            )
            records: list[ConsumerRecord] = []
            for outcome in fetched:
                if isinstance(outcome, (RetriableError, ConnectionClosed)):
                    await asyncio.sleep(0.05)
                elif isinstance(outcome, BaseException):
                    raise outcome
                else:
                    records.extend(outcome)
            if records or loop.time() >= deadline:
                return records

    async def _fetch(
        self, node: int, partitions: list[tuple[str, int]], wait_ms: int
    ) -> list[ConsumerRecord]:
        version = await self.cluster.version(FETCH, 12, node)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        topics = tuple(
            self.cluster.nested(
                FETCH,
                version,
                "FetchTopic",
                topic=topic,
                partitions=tuple(
                    self.cluster.nested(
                        FETCH,
                        version,
                        "FetchPartition",
                        partition=p,
                        current_leader_epoch=-1,
                        fetch_offset=self.positions[(topic, p)],
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                    for p in ps
                ),
            )
            for topic, ps in by_topic.items()
        )
        response = await self.cluster.call(
            node,
            FETCH,
            version,
            replica_id=-1,
            max_wait=datetime.timedelta(milliseconds=wait_ms),
            min_bytes=1,
            max_bytes=50 << 20,
            isolation_level=self.isolation,
            session_id=0,
            session_epoch=-1,
            topics=topics,
            forgotten_topics_data=(),
            rack_id="",
        )
        if response.error_code != ErrorCode.none:
            raise KafkaError(response.error_code, "Fetch")
        out: list[ConsumerRecord] = []
        for topic in response.responses:
            for partition in topic.partitions:
                tp = (str(topic.topic), int(partition.partition_index))
                error = partition.error_code
                if error == ErrorCode.offset_out_of_range:
                    # Kafka's answer carries no offsets (-1): ask for the log start.
                    self.positions[tp] = await self._earliest(node, *tp)
                    continue
                if error in LEADER_MOVED:
                    await self.cluster.forget_leaders()
                    continue
                if error != ErrorCode.none:
                    raise KafkaError(error, f"Fetch {tp[0]}-{tp[1]}")
                out.extend(self._records(tp, partition))
        return out

    async def _earliest(self, node: int, topic: str, index: int) -> int:
        """The log start offset of a partition (ListOffsets EARLIEST)."""
        version = await self.cluster.version(LIST_OFFSETS, 7, node)
        wanted = self.cluster.nested(
            LIST_OFFSETS,
            version,
            "ListOffsetsPartition",
            partition_index=index,
            current_leader_epoch=-1,
            timestamp=EARLIEST,
        )
        response = await self.cluster.call(
            node,
            LIST_OFFSETS,
            version,
            replica_id=-1,
            isolation_level=self.isolation,
            topics=(
                self.cluster.nested(
                    LIST_OFFSETS, version, "ListOffsetsTopic", name=topic, partitions=(wanted,)
                ),
            ),
        )
        [found] = response.topics[0].partitions
        if found.error_code != ErrorCode.none:
            raise KafkaError(found.error_code, f"ListOffsets {topic}-{index}")
        return int(found.offset)

    def _records(self, tp: tuple[str, int], partition: object) -> list[ConsumerRecord]:
        aborted = sorted(
            (int(a.first_offset), int(a.producer_id))
            for a in (getattr(partition, "aborted_transactions", None) or ())
        )
        aborting: set[int] = set()
        position = self.positions[tp]
        out = []
        for header, batch in whole_batches(getattr(partition, "records", None)):
            if header.last_offset < position:
                continue
            while aborted and aborted[0][0] <= header.last_offset:
                aborting.add(aborted.pop(0)[1])
            position = header.next_offset
            if header.is_control:
                if control_marker(batch) == CONTROL_ABORT:
                    aborting.discard(header.producer_id)
                continue
            if (
                self.isolation == READ_COMMITTED
                and header.is_transactional
                and header.producer_id in aborting
            ):
                continue
            for record in batch_records(batch):
                if record.offset >= self.positions[tp]:
                    out.append(
                        ConsumerRecord(
                            tp[0],
                            tp[1],
                            record.offset,
                            record.key,
                            record.value,
                            record.timestamp,
                            record.headers,
                        )
                    )
        self.positions[tp] = max(self.positions[tp], position)
        return out

    async def close(self) -> None:
        await self.cluster.close()
