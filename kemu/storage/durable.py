"""Making a file system change survive a power loss, beyond the file's own fsync."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_directory(directory: Path) -> None:
    """Sync ``directory`` itself, so that a name created or renamed into it survives a power
    loss (as Kafka's ``Utils.atomicMoveWithFallback`` does after its rename)."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
