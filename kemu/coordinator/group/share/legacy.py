"""The share-groups file of a kemu from before share groups were records in
``__consumer_offsets`` (``share.records``): read once at start, when a data directory still has
one, so that its groups are written as records and the file dropped (``service``).

The file held every share group as JSON: per group its epochs, assignment time, members (ids,
epochs, client details, subscriptions, assigned partitions), target, subscribed topics' ids and
partition counts, and initialized share partitions.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from kemu.coordinator.group.assignor import TopicPartition
from kemu.coordinator.group.modern_group import TopicMeta
from kemu.coordinator.group.share.group import ShareGroup, ShareMember
from kemu.storage.data_files import read_data_file

if TYPE_CHECKING:
    from kemu.cluster.context import Runtime

log = structlog.get_logger("kemu.group")

LEGACY_FILE = "kemu-share-groups.json"
LEGACY_REMEDY = (
    "restore it from a backup, or remove it to start without the share groups it kept (their "
    "members join again)"
)


def _partitions(partitions: frozenset[TopicPartition]) -> list[list[Any]]:
    return [[str(topic_id), index] for topic_id, index in sorted(partitions)]


def _restore_partitions(data: list[list[Any]]) -> frozenset[TopicPartition]:
    return frozenset((uuid.UUID(topic_id), int(index)) for topic_id, index in data)


def group_from_json(group_id: str, data: dict[str, Any], session_deadline_ms: int) -> ShareGroup:
    members = {
        member_id: ShareMember(
            member_id=member_id,
            member_epoch=int(member["member_epoch"]),
            previous_member_epoch=int(member["previous_member_epoch"]),
            rack_id=member["rack_id"],
            client_id=member["client_id"],
            client_host=member["client_host"],
            subscribed_topic_names=frozenset(member["subscribed_topic_names"]),
            assigned=_restore_partitions(member["assigned"]),
            session_deadline_ms=session_deadline_ms,
        )
        for member_id, member in data["members"].items()
    }
    return ShareGroup(
        group_id=group_id,
        group_epoch=int(data["group_epoch"]),
        assignment_epoch=int(data["assignment_epoch"]),
        assignment_timestamp_ms=int(data.get("assignment_timestamp_ms", 0)),  # older files: 0
        members=members,
        target={m: _restore_partitions(t) for m, t in data["target"].items()},
        subscribed_metadata={
            name: TopicMeta(uuid.UUID(topic_id), int(count))
            for name, (topic_id, count) in data["subscribed_metadata"].items()
        },
        initialized={
            uuid.UUID(topic_id): set(partitions)
            for topic_id, partitions in data["initialized"].items()
        },
    )


def load_legacy_share_groups(path: Path) -> list[ShareGroup]:
    """The share groups of an old file (sessions are the loader's to set), none without one;
    raises ``DataFileError``."""
    return read_data_file(path, LEGACY_REMEDY, _decode_share_groups) or []


def check_share_groups_file(runtime: Runtime) -> None:
    """Read the old file at start (``kemu.broker.server``), so that a damaged one stops kemu
    before it listens; the group coordinator migrates it when it is created."""
    data_dir = runtime.cluster.data_dir
    if data_dir is not None:
        load_legacy_share_groups(data_dir / LEGACY_FILE)


def migrate_share_groups_file(
    data_dir: Path | None,
    known: Callable[[str], bool],
    put: Callable[[ShareGroup], None],
    write: Callable[[str], bool],
) -> None:
    """Share groups kept by a kemu of before the records: read once, each not ``known`` (the
    log's groups win) ``put`` and ``write``-n as records, the file dropped once all are."""
    path = data_dir / LEGACY_FILE if data_dir is not None else None
    if path is None or not path.exists():
        return
    written = True
    for group in load_legacy_share_groups(path):
        if known(group.group_id):
            continue
        put(group)
        written = write(group.group_id) and written
    if written:
        path.unlink()
        log.info("share_groups_file_migrated", path=str(path))


def _decode_share_groups(saved: dict[str, dict[str, Any]]) -> list[ShareGroup]:
    return [group_from_json(group_id, data, 0) for group_id, data in saved.items()]
