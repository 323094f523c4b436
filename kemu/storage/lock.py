"""The data directory's ``.lock``: one kemu process per ``--data-dir``, as Kafka locks a log dir.

The lock is an exclusive ``flock`` on ``<data dir>/.lock``, taken without waiting and held for the
life of the process. The kernel drops it when the file descriptor closes, so a process that exits,
crashes or is SIGKILLed never leaves a stale lock behind (the file itself stays; its presence means
nothing). The file holds the owner's pid, for a person wondering who has the directory.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = ".lock"


class DataDirLocked(Exception):
    """Another process holds the data directory's lock."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        super().__init__(
            f"Failed to acquire lock on file {LOCK_FILE} in {directory}. A kemu (or Kafka) "
            "instance in another process or thread is using this directory."
        )


class DataDirLock:
    """An exclusive lock on a data directory, held until ``release()`` or process exit."""

    def __init__(self, directory: Path, fd: int) -> None:
        self.directory = directory
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, directory: Path) -> DataDirLock:
        """Lock ``directory`` (which must exist) or raise DataDirLocked at once."""
        # os.open's descriptors are not inherited by child processes (PEP 446), so a subprocess
        # kemu starts cannot keep the lock alive after kemu itself is gone.
        fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirLocked(directory.resolve()) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return cls(directory, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the last descriptor drops the flock
