"""The few admin calls a share pipeline needs: a group's configs (IncrementalAlterConfigs on the
GROUP resource, e.g. ``share.auto.offset.reset=earliest``) and a share group's start offsets and
lag (DescribeShareGroupOffsets, v1 for KIP-1226's Lag)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from kemu.client.backoff import Backoff
from kemu.client.cluster import GROUP_COORDINATOR, ClusterClient, RetriableError
from kemu.client.errors import COORDINATOR_MOVED, KafkaError
from kemu.protocol.errors import ErrorCode

DESCRIBE_SHARE_GROUP_OFFSETS = 90
INCREMENTAL_ALTER_CONFIGS = 44
GROUP_RESOURCE = 32  # ConfigResource.Type.GROUP
SET = 0  # AlterConfigOp.OpType.SET


@dataclass(frozen=True, slots=True)
class SharePartitionOffset:
    partition: int
    start_offset: int
    lag: int  # -1 when the broker does not know it (v0, or no state yet)


class Admin:
    def __init__(
        self,
        bootstrap: str,
        client_id: str = "kemu-admin",
        *,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.cluster = ClusterClient(bootstrap, client_id, backoff=backoff, rng=rng)

    async def __aenter__(self) -> Admin:
        await self.cluster.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.cluster.close()

    async def set_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """Set a group's dynamic configs (``kafka-configs --alter --entity-type groups``), e.g.
        ``{"share.auto.offset.reset": "earliest"}`` before a share group's first member joins,
        so that it reads what the topic already holds."""
        if not self.cluster.nodes:
            await self.cluster.start()

        async def attempt() -> None:
            if not self.cluster.nodes:
                await self.cluster.refresh_metadata(())
            if not self.cluster.nodes:
                raise RetriableError("no broker known yet")
            node = min(self.cluster.nodes)
            version = await self.cluster.version(INCREMENTAL_ALTER_CONFIGS, 1, node)
            nested = self.cluster.nested
            entries = tuple(
                nested(
                    INCREMENTAL_ALTER_CONFIGS,
                    version,
                    "AlterableConfig",
                    name=name,
                    config_operation=SET,
                    value=value,
                )
                for name, value in configs.items()
            )
            resource = nested(
                INCREMENTAL_ALTER_CONFIGS,
                version,
                "AlterConfigsResource",
                resource_type=GROUP_RESOURCE,
                resource_name=group_id,
                configs=entries,
            )
            response = await self.cluster.call(
                node,
                INCREMENTAL_ALTER_CONFIGS,
                version,
                resources=(resource,),
                validate_only=False,
            )
            for answer in response.responses:
                if answer.error_code != ErrorCode.none:
                    raise KafkaError(answer.error_code, answer.error_message)

        await self.cluster.retry(attempt)

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
