"""KIP-1289: share acknowledgements staged in producer transactions complete on their markers.

Two places hold staged records, and a marker reaches both:

* The share coordinator's state (``__share_group_state``). The transaction enlisted the state
  partitions of its share partitions, so the transaction coordinator writes its COMMIT/ABORT
  markers there, and the share coordinator resolves the staged records as it replays them
  (``kemu.coordinator.share.txn_markers``) — whether the marker was written now, before a
  crash, or by recovery at start-up; whether the share partition is loaded or not.
* The loaded share-partition leaders (their in-memory windows).

The runtime service ``txn_share_acks`` listens to the transaction coordinator's markers (EndTxn,
a transaction timeout, a producer fenced by a new epoch, WriteTxnMarkers) and first has the
share coordinator replay them at once (``follow_markers``), then applies the outcome to every
loaded share partition holding TX_PENDING records of that producer whose state partition the
markers reached (the transaction enlisted it; a marker a tool wrote to other partitions alone
resolves nothing, spec §11.3's KafkaApisTest); each actor persists what it changed. A share
partition loaded later reads the resolved state.

Markers are matched by producer id and an epoch at least the staged one: under transaction
version 2 EndTxn bumps the epoch and the markers carry the bumped one (spec Q4). Which staged
epochs a marker resolves at each leader is fixed when it is written, before its transaction
completes: the producer's next transaction stages at the bumped epoch, possibly before a leader
has applied the marker.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import structlog

from kemu.broker.share.manager import share_partitions
from kemu.cluster.services import Service
from kemu.coordinator.share.service import SHARE_STATE_TOPIC, share_coordinator
from kemu.coordinator.transaction.coordinator import Markers
from kemu.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kemu.broker.share.actor import SharePartitionActor
    from kemu.cluster.context import Runtime

log = structlog.get_logger("kemu.share")

SERVICE = "txn_share_acks"
ENABLE_CONFIG = "kemu.kip1289.enable"


def enabled(runtime: Runtime) -> bool:
    return runtime.cluster.config.get_bool(ENABLE_CONFIG)


class TxnShareAcks:
    def __init__(self, runtime: Runtime) -> None:
        from kemu.coordinator.transaction.service import transaction_coordinator

        self.runtime = runtime
        self._tasks: set[asyncio.Task[None]] = set()
        transaction_coordinator(runtime).add_marker_listener(self.on_markers)

    def on_markers(self, markers: Markers) -> None:
        state_partitions = [i for topic, i in markers.partitions if topic == SHARE_STATE_TOPIC]
        if state_partitions:
            share_coordinator(self.runtime).follow_markers(state_partitions)
        # What the transaction staged, taken now, while it cannot stage more: the markers carry
        # the epoch EndTxn bumped to (transaction version 2), the very epoch the producer's next
        # transaction stages with once this one completes, possibly before every leader below
        # has applied them (spec Q4: resolve exactly what the transaction staged).
        staged = self._staged_under(markers, set(state_partitions))
        task = asyncio.get_running_loop().create_task(self.apply(markers, staged))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _staged_under(
        self, markers: Markers, state_partitions: set[int]
    ) -> list[tuple[SharePartitionActor, list[int]]]:
        """The loaded share partitions holding TX_PENDING records of the markers' producer at an
        epoch up to theirs, where the markers landed in their state partition, and those
        epochs. Only there: a marker written to other partitions alone (WriteTxnMarkers from a
        tool) resolves nothing."""
        if not state_partitions:
            return []  # records alone: not one actor's key to hash
        persister = share_coordinator(self.runtime)
        staged = []
        for actor in share_partitions(self.runtime).actors.values():
            core = actor.core
            if core is None or persister.partition_for(actor.key) not in state_partitions:
                continue
            epochs = sorted(
                epoch
                for producer_id, epoch in core.pending_transactions()
                if producer_id == markers.producer_id and epoch <= markers.producer_epoch
            )
            if epochs:
                staged.append((actor, epochs))
        return staged

    async def apply(
        self, markers: Markers, staged: list[tuple[SharePartitionActor, list[int]]]
    ) -> None:
        for actor, epochs in staged:
            for epoch in epochs:
                code = await actor.apply_marker(markers.producer_id, epoch, markers.commit)
                if code is not ErrorCode.none:
                    log.warning(
                        "txn_share_ack_marker_failed",
                        key=str(actor.key),
                        producer_id=markers.producer_id,
                        error=code.name,
                    )
        state_partitions = {i for topic, i in markers.partitions if topic == SHARE_STATE_TOPIC}
        if state_partitions:
            # a committed REJECT (or an abort at the delivery limit) of a share partition not
            # loaded here is ARCHIVING in the durable state: its dead letter (KIP-1191) is due
            await share_partitions(self.runtime).resume_dead_letters(sorted(state_partitions))

    async def drain(self) -> None:
        """Wait until every marker seen so far is applied (tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks))


TXN_SHARE_ACKS = Service(SERVICE, TxnShareAcks)


def txn_share_acks(runtime: Runtime) -> TxnShareAcks:
    return runtime.services.get(TXN_SHARE_ACKS)
