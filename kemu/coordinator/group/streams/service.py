"""The streams-group part of the group coordinator's asyncio side (``service.py`` owns it).

It feeds ``StreamsGroupCoordinator`` the topics' partition counts, the group configs and the
clock, creates the internal topics a heartbeat found missing before that heartbeat is answered
(Kafka's ``KafkaApis`` hands them to its auto-topic-creation manager, once the heartbeat's
records are written), fires a group's timers when the service's timer asks (``fire``), and
keeps what ``__consumer_offsets`` holds of each group (``pending``: the records a change needs;
the service appends them with the rest of the operation's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import structlog

from kemu.cluster.context import Runtime
from kemu.cluster.model import TopicError
from kemu.coordinator.group.config import group_config_store
from kemu.coordinator.group.modern_group import TopicLookup, topic_hash_of
from kemu.coordinator.group.registry import GroupRegistry
from kemu.coordinator.group.streams.group import StreamsGroupCoordinator
from kemu.coordinator.group.streams.model import (
    StreamsGroup,
    StreamsHeartbeat,
    StreamsHeartbeatResult,
    StreamsSettings,
)
from kemu.coordinator.group.streams.records import (
    StreamsImageBuilder,
    StreamsRecord,
    diff,
    image_of,
)
from kemu.coordinator.group.streams.topology import MISSING_INTERNAL_TOPICS, TopicToCreate

log = structlog.get_logger("kemu.group")


# internal topics to create -> those the request's principal may not create
NotCreatable = Callable[[list[str]], list[str]]


class StreamsGroups:
    def __init__(self, runtime: Runtime, registry: GroupRegistry, topic_meta: TopicLookup) -> None:
        self.runtime = runtime
        self.topic_meta = topic_meta
        self.registry = registry
        self.coordinator = StreamsGroupCoordinator(registry, self.settings, self.topic_hash)
        # What __consumer_offsets holds of each group: the records written (the service
        # replays them here), and the ones loaded.
        self.log = StreamsImageBuilder()

    def settings(self, group_id: str) -> StreamsSettings:
        configs = group_config_store(self.runtime)
        config = self.runtime.cluster.config
        return StreamsSettings(
            session_timeout_ms=int(configs.value(group_id, "streams.session.timeout.ms")),
            heartbeat_interval_ms=int(configs.value(group_id, "streams.heartbeat.interval.ms")),
            num_standby_replicas=int(configs.value(group_id, "streams.num.standby.replicas")),
            max_size=config.get_int("group.streams.max.size"),
            initial_rebalance_delay_ms=int(
                configs.value(group_id, "streams.initial.rebalance.delay.ms")
            ),
            assignment_interval_ms=int(configs.value(group_id, "streams.assignment.interval.ms")),
            acceptable_recovery_lag=int(configs.value(group_id, "streams.acceptable.recovery.lag")),
            task_offset_interval_ms=int(configs.value(group_id, "streams.task.offset.interval.ms")),
        )

    def topic_hash(self, name: str) -> int:
        """Kafka's hash of an existing topic (the service's, with its cache)."""
        meta = self.topic_meta(name)
        return topic_hash_of(name, meta) if meta is not None else 0

    def partition_count(self, name: str) -> int | None:
        topic = self.runtime.cluster.topics.get(name)
        return None if topic is None else len(topic.partitions)

    def heartbeat(self, request: StreamsHeartbeat) -> StreamsHeartbeatResult:
        """The group's part of the heartbeat (its records are the service's to write)."""
        return self.coordinator.heartbeat(request, self.partition_count, self.runtime.clock_ms())

    def create_topics(
        self,
        group_id: str,
        result: StreamsHeartbeatResult,
        not_creatable: NotCreatable = lambda names: [],
    ) -> StreamsHeartbeatResult:
        """Create the internal topics the heartbeat found missing (or say in its status why
        none was)."""
        if not result.topics_to_create:
            return result
        refused = not_creatable([topic.name for topic in result.topics_to_create])
        if refused:
            # KafkaApis creates none of them and says why in the MISSING_INTERNAL_TOPICS status.
            return replace(result, status=_unauthorized_status(result.status, refused))
        for topic in result.topics_to_create:
            self._create(group_id, topic)
        return result

    def pending(self, group_id: str) -> list[StreamsRecord]:
        """The records that bring the log up to date with the group (tombstones when it is
        gone); once they are written the service replays them into ``log``."""
        found = self.coordinator.group(group_id)
        new = image_of(found) if found is not None else None
        old = self.log.images.get(group_id)
        return diff(old, new) if old is not None or new is not None else []

    def load(self, builder: StreamsImageBuilder, now_ms: int) -> None:
        """Groups replayed from __consumer_offsets, each member with a fresh session."""
        for group, image in builder.groups(now_ms, 0):
            timeout = self.settings(group.group_id).session_timeout_ms
            for member_id, member in group.members.items():
                group.members[member_id] = replace(member, session_deadline_ms=now_ms + timeout)
            self.coordinator.reload(group, self.partition_count)
            self.registry.put(group)
            self.log.images[group.group_id] = image

    def _create(self, group_id: str, topic: TopicToCreate) -> None:
        cluster = self.runtime.cluster
        if topic.name in cluster.topics:
            return
        replication = topic.replication_factor
        if replication <= 0:
            replication = cluster.config.get_int("default.replication.factor")
        replication = min(replication, len(cluster.nodes))
        try:
            cluster.create_topic(topic.name, topic.partitions, replication, dict(topic.configs))
        except TopicError as error:
            log.warning(
                "streams_internal_topic_not_created",
                group=group_id,
                topic=topic.name,
                error=error.code.name,
            )
            return
        log.info(
            "streams_internal_topic_created",
            group=group_id,
            topic=topic.name,
            partitions=topic.partitions,
        )

    def task_topics(self, group_id: str) -> dict[str, list[str]]:
        """Subtopology -> the topics whose partition p a task (subtopology, p) holds."""
        group = self.coordinator.group(group_id)
        if group is None or group.topology is None:
            return {}
        return {
            sub.subtopology_id: [
                *sub.input_topics(),
                *(t.name for t in sub.state_changelog_topics),
            ]
            for sub in group.topology.subtopologies
        }

    def next_deadline_ms(self) -> int | None:
        return self.coordinator.next_deadline_ms()

    def fire(self, group: StreamsGroup, now_ms: int) -> None:
        """One group's timers (its initial rebalance delay, its late members); the service
        writes what changed."""
        assigned, removed = self.coordinator.fire(group, now_ms, self.partition_count)
        if assigned:
            log.info("streams_delayed_assignment", group=group.group_id)
        for member_id in removed:
            log.info("streams_member_removed", group=group.group_id, member=member_id)


def _unauthorized_status(
    status: tuple[tuple[int, str], ...], refused: list[str]
) -> tuple[tuple[int, str], ...]:
    """Kafka's wording: appended to the MISSING_INTERNAL_TOPICS detail, or a status of its own."""
    note = f"Unauthorized to CREATE on topics {','.join(refused)}."
    if any(code == MISSING_INTERNAL_TOPICS for code, _ in status):
        return tuple(
            (code, f"{detail}; {note}" if code == MISSING_INTERNAL_TOPICS else detail)
            for code, detail in status
        )
    return (*status, (MISSING_INTERNAL_TOPICS, note))
