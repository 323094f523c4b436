"""A streams group's topology (KIP-1071) and its configuration against the cluster's topics.
Sans-IO.

A member joining a streams group sends the application's topology: subtopologies, each with its
source topics, the repartition topics it reads (``repartition_source_topics``) and writes
(``repartition_sink_topics``), its state changelog topics and its copartition groups (indexes into
its source and repartition source topics). ``configure`` decides what Kafka's
``InternalTopicManager.configureTopics`` decides from the topology and the topics that exist:

* a missing source topic: status MISSING_SOURCE_TOPICS, no tasks;
* repartition topics without a fixed partition count take the largest partition count of the
  topics read by the subtopologies that write to them (``RepartitionTopics``); topics of one
  copartition group must have the same count, flexible repartition topics in the group take it
  (``CopartitionedTopicsEnforcer``), else INCORRECTLY_PARTITIONED_TOPICS;
* a subtopology has as many tasks as its largest source (or repartition source) topic has
  partitions, and its changelog topics as many partitions as it has tasks (``ChangelogTopics``);
* an internal (repartition or changelog) topic that exists with another partition count:
  INCORRECTLY_PARTITIONED_TOPICS; internal topics that do not exist: MISSING_INTERNAL_TOPICS with
  the topics to create (the broker creates them, as Kafka's ``KafkaApis`` does).

Only a configuration without status is ready: its tasks are assigned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

# StreamsGroupHeartbeatResponse.Status codes (Kafka 4.4)
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5

PartitionCount = Callable[[str], int | None]


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: int = 0  # 0: decided by the coordinator
    replication_factor: int = 0  # 0: the broker default
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class CopartitionGroup:
    source_topics: tuple[int, ...] = ()
    source_topic_regex: tuple[int, ...] = ()
    repartition_source_topics: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[CopartitionGroup, ...] = ()

    def input_topics(self) -> list[str]:
        return [*self.source_topics, *(t.name for t in self.repartition_source_topics)]

    def copartition_sets(self) -> list[set[str]]:
        sets = []
        sources = self.source_topics
        repartition = [t.name for t in self.repartition_source_topics]
        for group in self.copartition_groups:
            names = {sources[i] for i in group.source_topics if i < len(sources)}
            names |= {
                repartition[i] for i in group.repartition_source_topics if i < len(repartition)
            }
            sets.append(names)
        return sets


@dataclass(frozen=True, slots=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]

    def normalized(self) -> Topology:
        """Order-insensitive form, for comparing the topology of two members."""
        return Topology(
            self.epoch, tuple(sorted(self.subtopologies, key=lambda s: s.subtopology_id))
        )

    def subtopology(self, subtopology_id: str) -> Subtopology | None:
        for sub in self.subtopologies:
            if sub.subtopology_id == subtopology_id:
                return sub
        return None


@dataclass(frozen=True, slots=True)
class TopicToCreate:
    name: str
    partitions: int
    replication_factor: int  # -1: the broker default
    configs: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class ConfiguredTopology:
    epoch: int
    tasks: dict[str, int] = field(default_factory=dict)  # subtopology -> number of tasks
    partitions: dict[str, int] = field(default_factory=dict)  # every topic of the topology
    to_create: tuple[TopicToCreate, ...] = ()
    status: tuple[int, str] | None = None

    @property
    def ready(self) -> bool:
        return self.status is None

    @property
    def has_subtopologies(self) -> bool:
        """Kafka describes the subtopologies unless the configuration failed outright."""
        return bool(self.tasks)


class TopicConfigurationError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def invalid_topology_reason(topology: Topology) -> str | None:
    """Kafka's ``throwIfInvalidTopology`` (STREAMS_INVALID_TOPOLOGY): changelog topics have no
    partition count of their own; plus what makes a topology unusable: duplicate subtopology ids,
    a subtopology without input."""
    seen: set[str] = set()
    for sub in topology.subtopologies:
        if sub.subtopology_id in seen:
            return f"Duplicate subtopology id {sub.subtopology_id}."
        seen.add(sub.subtopology_id)
        for info in sub.state_changelog_topics:
            if info.partitions != 0:
                return (
                    f"Changelog topic {info.name} must have an undefined partition count, "
                    f"but it is set to {info.partitions}."
                )
        if not sub.input_topics() and not sub.source_topic_regex:
            return f"Subtopology {sub.subtopology_id} has no source topics."
    return None


def _summary(names: set[str] | list[str]) -> str:
    return ", ".join(sorted(names))


def configure(topology: Topology, partition_count: PartitionCount) -> ConfiguredTopology:
    try:
        return _configure(topology, partition_count)
    except TopicConfigurationError as error:
        return ConfiguredTopology(topology.epoch, status=(error.status, str(error)))


def _configure(topology: Topology, partition_count: PartitionCount) -> ConfiguredTopology:
    missing = {
        name
        for sub in topology.subtopologies
        for name in sub.source_topics
        if partition_count(name) is None
    }
    if missing:
        raise TopicConfigurationError(
            MISSING_SOURCE_TOPICS, f"Source topics {_summary(missing)} are missing."
        )
    decided: dict[str, int] = {}

    def count(name: str) -> int | None:
        existing = partition_count(name)
        return existing if existing is not None else decided.get(name)

    # Repartition topics: fixed counts first, then from the subtopologies writing to them.
    flexible: set[str] = set()
    fixed: set[str] = set()
    for sub in topology.subtopologies:
        for info in sub.repartition_source_topics:
            if info.partitions > 0:
                decided[info.name] = info.partitions
                fixed.add(info.name)
            else:
                flexible.add(info.name)
    writers: dict[str, list[Subtopology]] = {}
    for sub in topology.subtopologies:
        for name in sub.repartition_sink_topics:
            writers.setdefault(name, []).append(sub)
    progress = True
    while progress:
        progress = False
        for name in sorted(flexible):
            if count(name) is not None:
                continue
            upstream = [
                count(topic) for writer in writers.get(name, []) for topic in writer.input_topics()
            ]
            known = [c for c in upstream if c is not None]
            if known and len(known) == len(upstream):
                decided[name] = max(known)
                progress = True
    undecided = sorted(name for name in flexible if count(name) is None)
    if undecided:
        raise TopicConfigurationError(
            MISSING_SOURCE_TOPICS,
            f"Cannot decide the number of partitions of repartition topics {_summary(undecided)}.",
        )
    # Copartitioning.
    for sub in topology.subtopologies:
        for names in sub.copartition_sets():
            if len(names) < 2:
                continue
            not_flexible = {n: count(n) for n in names if n not in flexible or n in fixed}
            sizes = {c for c in not_flexible.values() if c is not None}
            if len(sizes) > 1:
                raise TopicConfigurationError(
                    INCORRECTLY_PARTITIONED_TOPICS,
                    f"Following topics do not have the same number of partitions: "
                    f"[{_summary([f'{n}={c}' for n, c in not_flexible.items()])}]",
                )
            target = (
                sizes.pop() if sizes else max(c for c in (count(n) for n in names) if c is not None)
            )
            for name in names:
                if name in flexible and name not in fixed and partition_count(name) is None:
                    decided[name] = target
    # Tasks and changelogs.
    tasks: dict[str, int] = {}
    partitions: dict[str, int] = {}
    wanted: dict[str, TopicToCreate] = {}
    for sub in topology.subtopologies:
        counts = [count(name) or 0 for name in sub.input_topics()]
        n_tasks = max(counts, default=0)
        tasks[sub.subtopology_id] = n_tasks
        for name in sub.input_topics():
            partitions[name] = count(name) or 0
        for info in sub.repartition_source_topics:
            wanted[info.name] = _to_create(info, decided.get(info.name, count(info.name) or 0))
        for info in sub.state_changelog_topics:
            wanted[info.name] = _to_create(info, n_tasks)
            partitions[info.name] = n_tasks
    to_create = []
    for name, topic in sorted(wanted.items()):
        existing = partition_count(name)
        if existing is None:
            to_create.append(topic)
        elif existing != topic.partitions:
            raise TopicConfigurationError(
                INCORRECTLY_PARTITIONED_TOPICS,
                f"Existing topic {name} has different number of partitions: expected "
                f"{topic.partitions}, found {existing}",
            )
    status = None
    if to_create:
        status = (
            MISSING_INTERNAL_TOPICS,
            f"Internal topics are missing: [{_summary([t.name for t in to_create])}]",
        )
    return ConfiguredTopology(topology.epoch, tasks, partitions, tuple(to_create), status)


def _to_create(info: TopicInfo, partitions: int) -> TopicToCreate:
    return TopicToCreate(
        info.name,
        partitions,
        info.replication_factor if info.replication_factor > 0 else -1,
        info.configs,
    )
