"""RebalanceListener: what a ``GroupConsumer`` tells its application when partitions come and go,
as Java's ``ConsumerRebalanceListener`` does under the consumer group protocol (KIP-848).

Kafka 4.4.0's consumer (``AbstractMembershipManager``, ``ConsumerMembershipManager``) runs the
callbacks on the application's thread, inside ``poll()``, and the member waits for them:

- ``on_partitions_revoked``: partitions the coordinator takes away, before they are released.
  The member keeps them, and the coordinator keeps them from their next owner, until the callback
  returns, so a commit made in it (``commit()``, or a transaction with
  ``send_offsets_to_transaction``) is the member's, at its current epoch. Never with an empty list.
- ``on_partitions_assigned``: after every reconciliation, with the partitions added (possibly
  none). Their positions are the group's committed offsets (or ``auto_offset_reset``); a
  ``seek()`` in the callback moves them before anything is fetched.
- ``on_partitions_lost``: the member was fenced, or its session ended (FENCED_MEMBER_EPOCH,
  UNKNOWN_MEMBER_ID), or its group was deleted under it: its partitions may be another's already,
  so nothing may be committed for them. The member rejoins only after the callback returns. By
  default it calls ``on_partitions_revoked``, as Java's. Never with an empty list.

``close()`` runs ``on_partitions_revoked`` with what the member still owns before it leaves.
An exception from a callback comes out of ``poll()`` (or ``close()``), and the reconciliation is
tried again at the next ``poll()``.
"""

from __future__ import annotations

Partition = tuple[str, int]


class RebalanceListener:
    """Subclass and override what the application needs; every method may be a no-op."""

    async def on_partitions_revoked(self, partitions: list[Partition]) -> None:
        """``partitions`` (sorted) are being taken away; they are still the member's."""

    async def on_partitions_assigned(self, partitions: list[Partition]) -> None:
        """``partitions`` (sorted, maybe none) were added; ``seek()`` may move their positions."""

    async def on_partitions_lost(self, partitions: list[Partition]) -> None:
        """``partitions`` (sorted) are no longer the member's and may be another's already."""
        await self.on_partitions_revoked(partitions)
