"""KIP-1289: share acknowledgements staged in producer transactions complete on their markers.

The runtime service ``txn_share_acks`` listens to the transaction coordinator's markers (EndTxn,
a transaction timeout, a producer fenced by a new epoch, WriteTxnMarkers, recovery at load) and
applies the outcome to every loaded share partition holding TX_PENDING records of that
producer: commit applies the staged ACCEPT/REJECT, abort makes them AVAILABLE again. The actors
persist the result through the share coordinator before anyone sees it.

Markers are matched by producer id and an epoch at least the staged one: under transaction
version 2 EndTxn bumps the epoch and the markers carry the bumped one (spec Q4).

Omission: a share partition not loaded in memory when the marker passes (its actor dropped the
core after a failed write) keeps its persisted TX_PENDING records; the share coordinator does
not resolve them by itself yet.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import structlog

from kemu.broker.share.manager import share_partitions
from kemu.coordinator.transaction.coordinator import Markers
from kemu.protocol.errors import ErrorCode

if TYPE_CHECKING:
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
        task = asyncio.get_running_loop().create_task(self.apply(markers))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def apply(self, markers: Markers) -> None:
        for actor in list(share_partitions(self.runtime).actors.values()):
            core = actor.core
            if core is None:
                continue
            staged = sorted(
                epoch
                for producer_id, epoch in core.pending_transactions()
                if producer_id == markers.producer_id and epoch <= markers.producer_epoch
            )
            for epoch in staged:
                code = await actor.apply_marker(markers.producer_id, epoch, markers.commit)
                if code is not ErrorCode.none:
                    log.warning(
                        "txn_share_ack_marker_failed",
                        key=str(actor.key),
                        producer_id=markers.producer_id,
                        error=code.name,
                    )

    async def drain(self) -> None:
        """Wait until every marker seen so far is applied (tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks))


def txn_share_acks(runtime: Runtime) -> TxnShareAcks:
    service: TxnShareAcks = runtime.service(SERVICE, TxnShareAcks)
    return service
