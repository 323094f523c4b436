"""What the group coordinator needs from the layer above it, as ports the broker provides.

The group coordinator decides that a share-group member is gone (it left, or its session
expired) and that an admin rewrote a group's share state; the share-partition leaders that act
on it live in the broker (``kemu/broker/share/manager.py``). The coordinator cannot import them,
so it declares the ``ShareLeaders`` port and the broker's ``SharePartitionManager`` provides
itself as ``SHARE_LEADERS`` when it is created. None is provided while no share partition was
ever used: then no leader holds anything to release or forget.
"""

from __future__ import annotations

import uuid
from typing import Protocol

from kemu.cluster.services import Service


class ShareLeaders(Protocol):
    """The share-partition leaders, as the group coordinator tells them what it decided."""

    async def release_member(self, group_id: str, member_id: str) -> None:
        """The member left the group: release the records it holds."""

    def forget_group(self, group_id: str, topic_ids: set[uuid.UUID] | None = None) -> None:
        """The group's share state was deleted or rewritten (None: every topic): reload it."""


SHARE_LEADERS: Service[ShareLeaders] = Service("share_leaders")
