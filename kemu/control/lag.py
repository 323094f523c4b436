"""Offsets and lag, computed from kemu's state when asked (``/state`` and ``/metrics``).

- A group's committed offset lags the partition's log end offset (kemu's high watermark: there
  is no replication) by ``log end - committed``, as ``kafka-consumer-groups.sh --describe``
  computes it. Every group with committed offsets counts (classic, consumer, streams, and the
  "simple" groups of assign()-only consumers); partitions with no committed offset have no lag.
- A share partition's lag is ``high watermark - SPSO - records already finished inside the
  window`` (acknowledged or archived above SPSO, Kafka's DeliveryCompleteCount), as
  DescribeShareGroupOffsets and ``kafka-share-groups.sh --describe`` give it. Only share
  partitions whose state is loaded on their leader are counted (a share partition nobody has
  fetched from since start has no live window to read).
"""

from __future__ import annotations

from dataclasses import dataclass

from kemu.broker.share.manager import share_partitions
from kemu.broker.share.partition import SharePartitionCore
from kemu.cluster.context import Runtime
from kemu.coordinator.group.service import GROUP_COORDINATOR, GroupCoordinatorService


@dataclass(frozen=True, slots=True)
class ConsumerLag:
    group: str
    topic: str
    partition: int
    committed_offset: int
    log_end_offset: int

    @property
    def lag(self) -> int:
        return max(0, self.log_end_offset - self.committed_offset)


@dataclass(frozen=True, slots=True)
class ShareLag:
    group: str
    topic: str
    partition: int
    start_offset: int  # SPSO
    end_offset: int  # SPEO
    high_watermark: int
    delivery_complete_count: int

    @property
    def lag(self) -> int:
        return max(0, self.high_watermark - self.start_offset - self.delivery_complete_count)

    @property
    def backlog(self) -> int:
        """Records past SPEO that no consumer has fetched yet."""
        return max(0, self.high_watermark - self.end_offset)


def group_service(runtime: Runtime) -> GroupCoordinatorService | None:
    """The group coordinator if it runs (never started here just to be looked at)."""
    return runtime.services.built(GROUP_COORDINATOR)


def consumer_lags(runtime: Runtime) -> list[ConsumerLag]:
    """Every committed offset of a partition that exists, by group, topic, partition."""
    coordinator = group_service(runtime)
    store = getattr(coordinator, "offsets", None)
    if store is None:
        return []
    cluster = runtime.cluster
    found = []
    for group_id in sorted(store.group_ids()):
        for (topic, index), committed in store.of_group(group_id).items():
            partition = cluster.partition(topic, index)
            if partition is None:
                continue
            found.append(
                ConsumerLag(group_id, topic, index, committed.offset, partition.high_watermark)
            )
    return found


def share_lags(runtime: Runtime) -> list[ShareLag]:
    """Every loaded share partition, by group, topic, partition."""
    return [lag for lag, _ in share_windows(runtime)]


def share_windows(runtime: Runtime) -> list[tuple[ShareLag, SharePartitionCore]]:
    """Every loaded share partition's lag with its live window, by group, topic, partition."""
    cluster = runtime.cluster
    found = []
    for key, actor in share_partitions(runtime).actors.items():
        core = actor.core
        topic = cluster.topics_by_id.get(key.topic_id)
        if core is None or topic is None:
            continue
        partition = cluster.partition(topic.name, key.partition)
        if partition is None:
            continue
        lag = ShareLag(
            key.group_id,
            topic.name,
            key.partition,
            core.start,
            core.end,
            partition.high_watermark,
            core.delivery_complete_count,
        )
        found.append((lag, core))
    return sorted(found, key=lambda found: (found[0].group, found[0].topic, found[0].partition))
