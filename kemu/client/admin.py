"""The few admin calls a share pipeline's tests need: a share group's start offsets and lag
(DescribeShareGroupOffsets, v1 for KIP-1226's Lag)."""

from __future__ import annotations

from dataclasses import dataclass

from kemu.client.cluster import GROUP_COORDINATOR, ClusterClient, RetriableError
from kemu.client.errors import COORDINATOR_MOVED, KafkaError
from kemu.protocol.errors import ErrorCode

DESCRIBE_SHARE_GROUP_OFFSETS = 90


@dataclass(frozen=True, slots=True)
class SharePartitionOffset:
    partition: int
    start_offset: int
    lag: int  # -1 when the broker does not know it (v0, or no state yet)


class Admin:
    def __init__(self, bootstrap: str, client_id: str = "kemu-admin") -> None:
        self.cluster = ClusterClient(bootstrap, client_id)

    async def __aenter__(self) -> Admin:
        await self.cluster.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.cluster.close()

    async def share_group_offsets(
        self, group_id: str, topic: str
    ) -> dict[int, SharePartitionOffset]:
        """Per partition of ``topic``: the group's share-partition start offset and lag."""
        info = await self.cluster.topic(topic)

        async def attempt() -> dict[int, SharePartitionOffset]:
            node = await self.cluster.coordinator(GROUP_COORDINATOR, group_id)
            version = await self.cluster.version(DESCRIBE_SHARE_GROUP_OFFSETS, 1, node)
            wanted = self.cluster.nested(
                DESCRIBE_SHARE_GROUP_OFFSETS,
                version,
                "DescribeShareGroupOffsetsRequestTopic",
                topic_name=topic,
                partitions=tuple(sorted(info.leaders)),
            )
            group = self.cluster.nested(
                DESCRIBE_SHARE_GROUP_OFFSETS,
                version,
                "DescribeShareGroupOffsetsRequestGroup",
                group_id=group_id,
                topics=(wanted,),
            )
            response = await self.cluster.call(
                node, DESCRIBE_SHARE_GROUP_OFFSETS, version, groups=(group,)
            )
            [found] = response.groups
            if found.error_code in COORDINATOR_MOVED:
                self.cluster.forget_coordinator(GROUP_COORDINATOR, group_id)
                raise RetriableError(found.error_code.name)
            if found.error_code != ErrorCode.none:
                raise KafkaError(found.error_code, found.error_message)
            out = {}
            for t in found.topics:
                for p in t.partitions:
                    if p.error_code != ErrorCode.none:
                        raise KafkaError(p.error_code, p.error_message)
                    out[int(p.partition_index)] = SharePartitionOffset(
                        int(p.partition_index), int(p.start_offset), int(getattr(p, "lag", -1))
                    )
            return out

        return await self.cluster.retry(attempt)

    async def share_group_lag(self, group_id: str, topic: str) -> int:
        """The group's total lag on ``topic``."""
        return sum(
            max(0, p.lag) for p in (await self.share_group_offsets(group_id, topic)).values()
        )
