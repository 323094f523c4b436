"""The one namespace of group ids, shared by every group type (classic, consumer, share, ...).

Kafka keeps all groups of a coordinator in one map, so a group id belongs to exactly one type,
and a request of one protocol naming a group of another type gets a fixed error
(``WRONG_TYPE_ERRORS``, from Kafka's ``GroupMetadataManager``): e.g. a ShareGroupHeartbeat for a
consumer group's id gets GROUP_ID_NOT_FOUND, a JoinGroup for a share group's id
INCONSISTENT_GROUP_PROTOCOL. Each group type stores its groups here; ListGroups and DeleteGroups
work on whatever is registered. Another group type only has to satisfy ``Group``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from kemu.protocol.errors import ErrorCode

# api key -> Kafka's answer when the named group exists with a type the API does not serve
# (a classic JoinGroup also accepts an empty consumer group, which it converts).
WRONG_TYPE_ERRORS: dict[int, ErrorCode] = {
    8: ErrorCode.group_id_not_found,  # OffsetCommit ("Group ... is not a consumer group.")
    9: ErrorCode.group_id_not_found,  # OffsetFetch
    11: ErrorCode.inconsistent_group_protocol,  # JoinGroup
    12: ErrorCode.unknown_member_id,  # Heartbeat
    13: ErrorCode.unknown_member_id,  # LeaveGroup
    14: ErrorCode.unknown_member_id,  # SyncGroup
    47: ErrorCode.group_id_not_found,  # OffsetDelete
    68: ErrorCode.group_id_not_found,  # ConsumerGroupHeartbeat
    69: ErrorCode.group_id_not_found,  # ConsumerGroupDescribe
    76: ErrorCode.group_id_not_found,  # ShareGroupHeartbeat
    77: ErrorCode.group_id_not_found,  # ShareGroupDescribe
    88: ErrorCode.group_id_not_found,  # StreamsGroupHeartbeat
    89: ErrorCode.group_id_not_found,  # StreamsGroupDescribe
}


class Group(Protocol):
    """What ListGroups and DeleteGroups need from a group of any type."""

    @property
    def group_id(self) -> str: ...

    @property
    def group_type(self) -> str:
        """Kafka's lower-case ``GroupType``: classic, consumer, share or streams."""
        ...

    @property
    def protocol_type(self) -> str: ...

    @property
    def state_name(self) -> str:
        """The state as ListGroups and the describe APIs spell it (Empty, Stable, ...)."""
        ...

    def is_empty(self) -> bool: ...


DeletionListener = Callable[[Group], None]


class GroupRegistry:
    def __init__(self) -> None:
        self._groups: dict[str, Group] = {}
        self.deletion_listeners: list[DeletionListener] = []

    def get(self, group_id: str) -> Group | None:
        return self._groups.get(group_id)

    def put(self, group: Group) -> None:
        self._groups[group.group_id] = group

    def remove(self, group_id: str) -> Group | None:
        """Forget a group and tell the listeners (e.g. committed offsets go with it)."""
        group = self._groups.pop(group_id, None)
        if group is not None:
            for listener in list(self.deletion_listeners):
                listener(group)
        return group

    def restore(self, group_id: str, group: Group | None) -> None:
        """Put back what ``group_id`` named before an operation whose records were not written
        (None: nothing), telling no listener: nothing happened."""
        if group is None:
            self._groups.pop(group_id, None)
        else:
            self._groups[group_id] = group

    def unload(self, group_id: str) -> Group | None:
        """Forget a group without telling the listeners: its coordinator moved and will load it
        again from ``__consumer_offsets`` (nothing about it is deleted)."""
        return self._groups.pop(group_id, None)

    def __iter__(self) -> Iterator[Group]:
        return iter(list(self._groups.values()))

    def __len__(self) -> int:
        return len(self._groups)

    def wrong_type(self, group_id: str, api_key: int, served_types: set[str]) -> ErrorCode | None:
        """Kafka's error when ``group_id`` exists with a type outside ``served_types``."""
        group = self._groups.get(group_id)
        if group is None or group.group_type in served_types:
            return None
        return WRONG_TYPE_ERRORS.get(api_key, ErrorCode.group_id_not_found)
