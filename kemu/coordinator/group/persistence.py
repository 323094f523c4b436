"""Share groups survive a restart when kemu has a data directory, as Kafka's do (it keeps them
in ``__consumer_offsets``): members keep their ids, epochs and assignments, so running share
consumers carry on heartbeating instead of being told their group is gone.

The file holds every share group as JSON and is rewritten (atomically, fsynced) only when a
group's membership, epochs, assignment or initialized partitions change, never for a plain
heartbeat. Session deadlines are not stored: a restored member gets a fresh session.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from kemu.coordinator.group.assignor import TopicPartition
from kemu.coordinator.group.share_group import ShareGroup, ShareMember, TopicMeta

STORE_FILE = "kemu-share-groups.json"


def _partitions(partitions: frozenset[TopicPartition]) -> list[list[Any]]:
    return [[str(topic_id), index] for topic_id, index in sorted(partitions)]


def _restore_partitions(data: list[list[Any]]) -> frozenset[TopicPartition]:
    return frozenset((uuid.UUID(topic_id), int(index)) for topic_id, index in data)


def group_to_json(group: ShareGroup) -> dict[str, Any]:
    return {
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignment_timestamp_ms": group.assignment_timestamp_ms,
        "members": {
            member.member_id: {
                "member_epoch": member.member_epoch,
                "previous_member_epoch": member.previous_member_epoch,
                "rack_id": member.rack_id,
                "client_id": member.client_id,
                "client_host": member.client_host,
                "subscribed_topic_names": sorted(member.subscribed_topic_names),
                "assigned": _partitions(member.assigned),
            }
            for member in group.members.values()
        },
        "target": {member: _partitions(target) for member, target in group.target.items()},
        "subscribed_metadata": {
            name: [str(meta.topic_id), meta.partitions]
            for name, meta in group.subscribed_metadata.items()
        },
        "initialized": {
            str(topic_id): sorted(partitions) for topic_id, partitions in group.initialized.items()
        },
    }


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


class ShareGroupStore:
    """The share groups file; ``update`` writes only when something durable changed."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.saved: dict[str, dict[str, Any]] = {}
        if path is not None and path.exists():
            self.saved = json.loads(path.read_text())

    def load(self, session_deadline_ms: int) -> list[ShareGroup]:
        return [
            group_from_json(group_id, data, session_deadline_ms)
            for group_id, data in self.saved.items()
        ]

    def update(self, group_id: str, group: ShareGroup | None) -> None:
        """Record the group's current state (None: it was deleted)."""
        if self.path is None:
            return
        if group is None:
            if self.saved.pop(group_id, None) is not None:
                self._write()
            return
        state = group_to_json(group)
        if self.saved.get(group_id) != state:
            self.saved[group_id] = state
            self._write()

    def _write(self) -> None:
        assert self.path is not None
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(self.saved, sort_keys=True))
        with open(temporary, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)
