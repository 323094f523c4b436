"""Copies of a group to put back when an operation's records are not written (Kafka reverts
its timeline snapshot the same way). Sans-IO.

A KIP-848-style group's members, targets and topologies are frozen values an operation
replaces, never changes, so copying the containers that hold them is enough (the sets in a
dict too: a share group's initialized partitions). A classic group's members are changed in
place, so each member is copied; the waiters they hold are shared (a restored member still
parks the same request).
"""

from __future__ import annotations

import copy
from dataclasses import fields, replace
from typing import Any, TypeVar

from kemu.coordinator.group.classic.model import ClassicGroup
from kemu.coordinator.group.consumer.group import ConsumerGroup
from kemu.coordinator.group.registry import Group
from kemu.coordinator.group.share.group import ShareGroup
from kemu.coordinator.group.streams.model import StreamsGroup


def snapshot(group: Group | None) -> Group | None:
    """A copy of ``group`` that no later operation on ``group`` changes."""
    if isinstance(group, ClassicGroup):
        return classic_snapshot(group)
    if not isinstance(group, ConsumerGroup | ShareGroup | StreamsGroup):
        return group
    copied = copy.copy(group)
    for name, value in vars(group).items():
        if isinstance(value, dict):
            setattr(copied, name, {k: _container_copy(v) for k, v in value.items()})
        elif isinstance(value, set | list):
            setattr(copied, name, copy.copy(value))
    return copied


def classic_snapshot(group: ClassicGroup) -> ClassicGroup:
    copied = copy.copy(group)
    copied.members = {member_id: copy.copy(m) for member_id, m in group.members.items()}
    copied.static_members = dict(group.static_members)
    copied.pending_members = dict(group.pending_members)
    copied.pending_sync = set(group.pending_sync)
    return copied


def _container_copy(value: object) -> object:
    return copy.copy(value) if isinstance(value, set | list | dict) else value


# Of each KIP-848-style type, what its records hold (the rest only memory holds: the
# subscribed topics as last seen, timers, a configured topology, ...), and what of a member
# only memory holds (its session and revocation deadlines).
DURABLE_FIELDS: dict[type, frozenset[str]] = {
    ConsumerGroup: frozenset(
        {"group_id", "group_epoch", "metadata_hash", "assignment_epoch"}
        | {"assignment_timestamp_ms", "members", "target", "resolved_regexes"}
    ),
    ShareGroup: frozenset(
        {"group_id", "group_epoch", "metadata_hash", "assignment_epoch"}
        | {"assignment_timestamp_ms", "members", "target", "initialized", "initializing"}
        | {"deleting"}
    ),
    StreamsGroup: frozenset(
        {"group_id", "group_epoch", "metadata_hash", "assignment_epoch"}
        | {"assignment_timestamp_ms", "members", "target", "topology"}
        | {"validated_topology_epoch", "assignment_configs"}
    ),
}
MEMBER_MEMORY_FIELDS = ("session_deadline_ms", "revocation_deadline_ms")

G = TypeVar("G", ConsumerGroup, ShareGroup, StreamsGroup)


def with_memory_state(replayed: G, ran: G) -> G:
    """``replayed`` (a group rebuilt from its records) with what only memory holds taken from
    ``ran`` (the group as the operation that wrote those records left it)."""
    members: dict[str, Any] = replayed.members
    for member_id, member in list(members.items()):
        source = ran.members.get(member_id)
        if source is not None:
            kept = {name: getattr(source, name) for name in MEMBER_MEMORY_FIELDS}
            if isinstance(replayed, ShareGroup):
                kept.pop("revocation_deadline_ms")  # a share member never revokes
            members[member_id] = replace(member, **kept)
    durable = DURABLE_FIELDS[type(ran)]
    for item in fields(type(ran)):
        if item.name not in durable:
            setattr(replayed, item.name, getattr(ran, item.name))
    return replayed
