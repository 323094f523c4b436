"""The cluster model every virtual broker shares: nodes, topics, partitions and their leaders.

One kemu process runs N virtual brokers (node ids 1..N) over this one model. Partition leaders
are spread round-robin over the nodes, starting at a different node for each topic as Kafka's
replica placement does.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from kemu.cluster import seeded
from kemu.cluster.crash_points import crash_point
from kemu.cluster.partition import Partition
from kemu.config.definitions import BrokerConfig, TopicConfig
from kemu.protocol.errors import ErrorCode
from kemu.storage.data_files import read_data_file
from kemu.storage.durable import fsync_directory
from kemu.storage.log import PartitionLog

LEGAL_TOPIC_CHARS = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME_LENGTH = 249
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_STATE_TOPIC = "__share_group_state"
INTERNAL_TOPICS = frozenset({"__consumer_offsets", TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC})

# Kafka's controller refuses an operation that would write more records than this (one per
# partition when creating topics or partitions).
MAX_RECORDS_PER_USER_OP = 10_000
EXCESSIVE_BATCH_MESSAGE = "Unable to perform excessively large batch operation."

LogFactory = Callable[[str, int], PartitionLog]
METADATA_FILE = "kemu-metadata.json"  # the topic catalogue and dynamic broker configs
METADATA_REMEDY = "restore it from a backup (removing it would lose every topic and its records)"
NO_LEADER = -1  # an offline partition's leader (Kafka's Metadata says -1)
# told (partition, previous leader) after a partition's leader changed: coordinators and share
# partitions that moved reload their state from the log (kemu/broker/failover.py)
LeaderListener = Callable[[Partition, int], None]
# a partition's log directory: ``<topic>-<index>``, holding segment files or nothing yet. The
# suffixes are segment_files.py's and segment_summary.py's (``*.log.cleaned`` ends in
# ``.cleaned``; a write in progress in ``.tmp``), spelt here so that a start does not import
# the segment modules before a partition is read (tests/unit/cli/test_start_path.py)
_PARTITION_DIRECTORY = re.compile(r"[a-zA-Z0-9._-]+-[0-9]+")
LOG_FILE_SUFFIXES = frozenset({".log", ".index", ".swap", ".scan", ".cleaned", ".tmp"})

log = structlog.get_logger("kemu.cluster")


@dataclass(frozen=True, slots=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(slots=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: list[Partition]
    config: TopicConfig
    replication_factor: int
    is_internal: bool = False


class TopicError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def topic_name_problem(name: str) -> str | None:
    """Why Kafka would refuse ``name`` as a topic name (its own wording), or None."""
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return (
            f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_LENGTH}"
        )
    if not LEGAL_TOPIC_CHARS.fullmatch(name):
        return (
            f"'{name}' contains one or more characters other than ASCII alphanumerics, "
            "'.', '_' and '-'"
        )
    return None


def validate_topic_name(name: str) -> None:
    problem = topic_name_problem(name)
    if problem is not None:
        raise TopicError(ErrorCode.invalid_topic_exception, f"Topic name is invalid: {problem}")


@dataclass
class Cluster:
    cluster_id: str
    nodes: dict[int, BrokerNode]
    config: BrokerConfig
    log_factory: LogFactory
    data_dir: Path | None = None
    topics: dict[str, Topic] = field(default_factory=dict)
    topics_by_id: dict[uuid.UUID, Topic] = field(default_factory=dict)
    # virtual brokers stopped by the control plane (kemu/cluster/failover.py); never persisted:
    # a new process starts every broker
    stopped: set[int] = field(default_factory=set)
    # an offline partition's last in-sync replica: Kafka's controller never empties an ISR
    last_in_sync: dict[tuple[str, int], int] = field(default_factory=dict)
    leader_listeners: list[LeaderListener] = field(default_factory=list)
    _placement_cursor: int = 0

    def __post_init__(self) -> None:
        # Kafka 4.4's controller, with eligible leader replicas enabled (the default), writes a
        # cluster-wide min.insync.replicas (its static value) when it first becomes active
        # (ConfigurationControlManager.maybeGenerateElrSafetyRecords): topics then show it as
        # a DYNAMIC_DEFAULT_BROKER_CONFIG synonym. A data dir's saved value wins over this one.
        static = self.config.static.get("min.insync.replicas", "1")
        self.config.dynamic.setdefault("min.insync.replicas", static)

    @property
    def controller_id(self) -> int:
        return min(self.live_node_ids or self.node_ids)

    @property
    def live_node_ids(self) -> list[int]:
        """The brokers running (not stopped), in id order."""
        return [n for n in sorted(self.nodes) if n not in self.stopped]

    def in_sync(self, partition: Partition) -> list[int]:
        """The partition's in-sync replicas: kemu keeps one copy of each log, so every replica
        of a running broker is in sync, and a stopped broker's is not; an offline partition
        keeps its last in-sync replica, as Kafka's controller never empties an ISR."""
        if partition.leader_id == NO_LEADER:
            last = self.last_in_sync.get((partition.topic_name, partition.index))
            return [] if last is None else [last]
        return [r for r in partition.replicas if r not in self.stopped]

    @property
    def node_ids(self) -> list[int]:
        return sorted(self.nodes)

    def partition(self, topic: str, index: int) -> Partition | None:
        found = self.topics.get(topic)
        if found is None or not 0 <= index < len(found.partitions):
            return None
        return found.partitions[index]

    def all_partitions(self) -> Iterator[Partition]:
        for topic in self.topics.values():
            yield from topic.partitions

    def _first_running(self, replicas: list[int]) -> int:
        """A new partition's leader: its first replica on a running broker."""
        return next((r for r in replicas if r not in self.stopped), NO_LEADER)

    def _place(self, count: int, replication_factor: int) -> list[list[int]]:
        node_ids = self.node_ids
        start = self._placement_cursor % len(node_ids)
        self._placement_cursor += 1
        return [
            [node_ids[(start + p + r) % len(node_ids)] for r in range(replication_factor)]
            for p in range(count)
        ]

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str] | None = None,
        *,
        topic_id: uuid.UUID | None = None,
        assignments: list[list[int]] | None = None,
        persist: bool = True,
    ) -> Topic:
        validate_topic_name(name)
        if name in self.topics:
            raise TopicError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        if num_partitions <= 0:
            raise TopicError(
                ErrorCode.invalid_partitions, "Number of partitions must be larger than 0."
            )
        if replication_factor <= 0:
            raise TopicError(
                ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0."
            )
        if replication_factor > len(self.nodes):
            raise TopicError(
                ErrorCode.invalid_replication_factor,
                f"Unable to replicate the partition {replication_factor} time(s): The target "
                f"replication factor of {replication_factor} cannot be reached because only "
                f"{len(self.nodes)} broker(s) are registered or some brokers have all their log "
                "directories cordoned.",  # Kafka 4.4's text (KIP-1066)
            )
        placement = assignments or self._place(num_partitions, replication_factor)
        topic = Topic(
            name=name,
            topic_id=topic_id or seeded.new_uuid(),
            partitions=[],
            config=TopicConfig(self.config, configs),
            replication_factor=replication_factor,
            is_internal=name in INTERNAL_TOPICS,
        )
        for index, replicas in enumerate(placement):
            topic.partitions.append(
                Partition(
                    name,
                    topic.topic_id,
                    index,
                    self._first_running(replicas),
                    replicas,
                    self._new_log(name, index) if persist else self.log_factory(name, index),
                )
            )
        self.apply_log_configs(topic)
        self.topics[name] = topic
        self.topics_by_id[topic.topic_id] = topic
        if persist:
            # a crash here leaves logs no catalogued topic owns: removed at the next start
            crash_point("topic.logs_created")
            self.save_metadata()
        return topic

    def add_partitions(
        self, name: str, total: int, assignments: list[list[int]] | None = None
    ) -> None:
        topic = self.topics[name]
        placement = assignments or self._place(
            total - len(topic.partitions), topic.replication_factor
        )
        for offset, replicas in enumerate(placement):
            index = len(topic.partitions)
            del offset
            topic.partitions.append(
                Partition(
                    name,
                    topic.topic_id,
                    index,
                    self._first_running(replicas),
                    replicas,
                    self._new_log(name, index),
                )
            )
        self.apply_log_configs(topic)
        self.save_metadata()

    def _new_log(self, name: str, index: int) -> PartitionLog:
        """The log of a partition that did not exist before: files left behind by an earlier
        topic of the same name (a crash mid-delete or mid-create) must not leak into it."""
        if self.data_dir is not None:
            _remove_tree(self.data_dir / f"{name}-{index}")
        return self.log_factory(name, index)

    def apply_log_configs(self, topic: Topic) -> None:
        """Hand a topic's segment settings to its logs (on creation and on config changes).

        A compacted topic rolls its active segment once ``max.compaction.lag.ms`` is reached if
        that comes before ``segment.ms`` (Kafka's ``LogConfig.maxSegmentMs``), so that the
        cleaner can reach its records in time.
        """
        segment_ms = topic.config.get_int("segment.ms")
        if "compact" in (topic.config.get("cleanup.policy") or ""):
            segment_ms = min(segment_ms, topic.config.get_int("max.compaction.lag.ms"))
        for partition in topic.partitions:
            partition.log.configure(
                segment_bytes=topic.config.get_int("segment.bytes"),
                segment_ms=segment_ms,
                index_interval_bytes=topic.config.get_int("index.interval.bytes"),
            )

    def move_leader(self, partition: Partition, leader: int) -> None:
        """Make ``leader`` (one of the partition's replicas) its leader, with a new leader epoch:
        clients still on the old one get NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH and refresh
        their metadata. kemu keeps one copy of each log, so nothing moves but the leadership.
        ``NO_LEADER`` makes it offline. The leader listeners are told afterwards."""
        if leader == partition.leader_id:
            return
        previous = partition.leader_id
        partition.leader_id = leader
        partition.leader_epoch += 1
        partition.notify()
        self.save_metadata()
        for listener in list(self.leader_listeners):
            listener(partition, previous)

    def reassign(self, partition: Partition, replicas: list[int]) -> None:
        """Give the partition a new replica set, completed at once (every replica is in sync by
        construction); as Kafka's controller does when a reassignment completes, a leader that
        is not among the new replicas hands over to the first of them."""
        partition.replicas = list(replicas)
        if partition.leader_id not in replicas:
            self.move_leader(partition, replicas[0])
        else:
            self.save_metadata()

    def delete_topic(self, name: str) -> Topic:
        """Forget the topic, durably, then remove its logs: as Kafka's controller commits the
        deletion to the metadata log before the brokers delete the logs, a crash in between
        leaves only logs no topic owns (removed at the next start), never a topic still
        catalogued whose logs are gone."""
        topic = self.topics.pop(name)
        del self.topics_by_id[topic.topic_id]
        for partition in topic.partitions:
            partition.log.close()
            partition.notify()
        self.save_metadata()
        crash_point("topic.deleted")
        if self.data_dir is not None:
            for partition in topic.partitions:
                _remove_tree(self.data_dir / f"{name}-{partition.index}")
        return topic

    # --- persistence of the topic catalogue (the logs persist themselves) ----------------------

    def save_metadata(self) -> None:
        if self.data_dir is None:
            return
        catalogue = {
            "cluster_id": self.cluster_id,
            "broker_configs": {
                "default": self.config.dynamic,
                "nodes": {str(n): c for n, c in self.config.node_dynamic.items() if c},
            },
            "topics": [
                {
                    "name": topic.name,
                    "topic_id": str(topic.topic_id),
                    "replication_factor": topic.replication_factor,
                    "configs": topic.config.overrides,
                    "replicas": [p.replicas for p in topic.partitions],
                    "leader_epochs": [p.leader_epoch for p in topic.partitions],
                    "leaders": [p.leader_id for p in topic.partitions],
                }
                for topic in self.topics.values()
            ],
        }
        path = self.data_dir / METADATA_FILE
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(catalogue, indent=1))
        with open(temporary, "rb+") as handle:
            os.fsync(handle.fileno())
        temporary.replace(path)
        # the rename itself is durable only once the directory is synced (a power loss)
        fsync_directory(path.parent)

    def load_metadata(self) -> None:
        """The topic catalogue of the data dir, if it has one; raises ``DataFileError``."""
        if self.data_dir is None:
            return
        catalogue = read_data_file(
            self.data_dir / METADATA_FILE, METADATA_REMEDY, _SavedCatalogue.decode
        )
        if catalogue is None:
            return
        self.cluster_id = catalogue.cluster_id or self.cluster_id
        self.config.dynamic.update(catalogue.default_configs)
        for node, configs in catalogue.node_configs.items():
            self.config.node_dynamic[node] = configs
        self._remove_stray_logs(
            {
                f"{entry.name}-{index}"
                for entry in catalogue.topics
                for index in range(len(entry.replicas))
            }
        )
        for entry in catalogue.topics:
            replicas = [
                [r for r in rs if r in self.nodes] or [self.node_ids[0]] for rs in entry.replicas
            ]
            topic = self.create_topic(
                entry.name,
                len(replicas),
                min(entry.replication_factor, len(self.nodes)),
                entry.configs,
                topic_id=entry.topic_id,
                assignments=replicas,
                persist=False,
            )
            for partition, epoch in zip(topic.partitions, entry.leader_epochs, strict=False):
                partition.leader_epoch = epoch
            for partition, leader in zip(topic.partitions, entry.leaders, strict=False):
                if leader in partition.replicas:
                    partition.leader_id = leader

    def _remove_stray_logs(self, catalogued: set[str]) -> None:
        """Remove the partition logs of the data dir that no catalogued topic owns: left by a
        crash between a topic's deletion and the removal of its logs, or between the creation
        of its logs and its entry in the catalogue (as Kafka removes stray logs at start). A
        directory counts as a partition log by its name and its content (``*.log`` files, or
        nothing)."""
        assert self.data_dir is not None
        for child in sorted(self.data_dir.iterdir()):
            if (
                child.is_dir()
                and child.name not in catalogued
                and _PARTITION_DIRECTORY.fullmatch(child.name)
                and all(
                    entry.is_file() and entry.suffix in LOG_FILE_SUFFIXES
                    for entry in child.iterdir()
                )
            ):
                _remove_tree(child)
                log.warning("stray_partition_log_removed", directory=child.name)


@dataclass(frozen=True, slots=True)
class _SavedTopic:
    name: str
    topic_id: uuid.UUID
    replication_factor: int
    configs: dict[str, str]
    replicas: list[list[int]]
    leader_epochs: list[int]
    leaders: list[int]


@dataclass(frozen=True, slots=True)
class _SavedCatalogue:
    """``kemu-metadata.json`` as ``save_metadata`` writes it (older files lack some fields)."""

    cluster_id: str | None
    default_configs: dict[str, str]
    node_configs: dict[int, dict[str, str]]
    topics: list[_SavedTopic]

    @staticmethod
    def decode(catalogue: dict[str, Any]) -> _SavedCatalogue:
        broker_configs = catalogue.get("broker_configs", {})
        return _SavedCatalogue(
            cluster_id=catalogue.get("cluster_id"),
            default_configs=dict(broker_configs.get("default", {})),
            node_configs={
                int(node): dict(configs)
                for node, configs in broker_configs.get("nodes", {}).items()
            },
            topics=[
                _SavedTopic(
                    name=str(entry["name"]),
                    topic_id=uuid.UUID(entry["topic_id"]),
                    replication_factor=int(entry["replication_factor"]),
                    configs=dict(entry["configs"]),
                    replicas=[[int(r) for r in rs] for rs in entry["replicas"]],
                    leader_epochs=[int(e) for e in entry.get("leader_epochs", [])],
                    leaders=[int(n) for n in entry.get("leaders", [])],
                )
                for entry in catalogue["topics"]
            ],
        )


def _remove_tree(path: Path) -> None:
    if not path.exists():
        return
    for child in path.iterdir():
        if child.is_dir():
            _remove_tree(child)
        else:
            child.unlink()
    path.rmdir()
