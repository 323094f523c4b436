"""Producer id allocation: increasing ids that never repeat, even across restarts.

Like Kafka's controller, ids are handed out from reserved blocks: the upper bound of the current
block is written to the data dir before any id from it is used, so a restart (even after
SIGKILL) continues after the block and at worst leaves a gap. Without a data dir the ids simply
count up from 0 for the life of the process.

``ProducerIdBlocks`` is the sans-IO core; ``ProducerIds`` adds the tiny file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from kemu.cluster.services import Service
from kemu.storage.durable import fsync_directory

if TYPE_CHECKING:
    from kemu.cluster.context import Runtime

BLOCK_SIZE = 1000
FILE_NAME = "kemu-producer-ids"


class ProducerIdBlocks:
    """Hands out ids from ``[next_id, reserved_until)``; asks for a new block when it runs out."""

    def __init__(self, reserved_until: int = 0, block_size: int = BLOCK_SIZE) -> None:
        self.next_id = reserved_until
        self.reserved_until = reserved_until
        self.block_size = block_size

    def allocate(self) -> tuple[int, int | None]:
        """The next id, and the new reservation bound that must be persisted before it is used
        (None while the current block lasts)."""
        reserve: int | None = None
        if self.next_id >= self.reserved_until:
            self.reserved_until = self.next_id + self.block_size
            reserve = self.reserved_until
        allocated = self.next_id
        self.next_id += 1
        return allocated, reserve


class ProducerIds:
    def __init__(self, data_dir: Path | None) -> None:
        self.path = data_dir / FILE_NAME if data_dir is not None else None
        self.blocks = ProducerIdBlocks(self._load())

    def _load(self) -> int:
        if self.path is None or not self.path.exists():
            return 0
        text = self.path.read_text().strip()
        return int(text) if text else 0

    def allocate(self) -> int:
        producer_id, reserve = self.blocks.allocate()
        if reserve is not None and self.path is not None:
            self._persist(reserve)
        return producer_id

    def _persist(self, reserved_until: int) -> None:
        assert self.path is not None
        temporary = self.path.with_suffix(".tmp")
        with open(temporary, "w") as handle:
            handle.write(f"{reserved_until}\n")
            handle.flush()
            os.fsync(handle.fileno())
        temporary.replace(self.path)
        # the rename itself is durable only once the directory is synced (a power loss)
        fsync_directory(self.path.parent)


PRODUCER_IDS = Service("producer_ids", lambda runtime: ProducerIds(runtime.cluster.data_dir))


def producer_ids(runtime: Runtime) -> ProducerIds:
    """The process-wide allocator (a runtime service)."""
    return runtime.services.get(PRODUCER_IDS)
