"""An in-memory transport for driving a broker ``Connection`` without sockets.

Unit tests and in-process benchmarks hand it to ``Connection.connection_made`` and feed frames
to ``data_received``; it records each write (one entry per ``write``/``writelines`` call, so a
test can see how answers were batched) unless ``record`` is off, when it only counts bytes.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any


class RecordingTransport(asyncio.Transport):
    def __init__(self, *, record: bool = True, peer: tuple[str, int] = ("127.0.0.1", 50000)):
        super().__init__()
        self.record = record
        self.peer = peer
        self.writes: list[bytes] = []
        self.bytes_written = 0
        self.closed = False
        self.reading = True

    # --- what a test reads back ---------------------------------------------------------------

    @property
    def written(self) -> bytes:
        return b"".join(self.writes)

    def frames(self) -> list[bytes]:
        """The size-prefixed frames written so far, without their size prefix."""
        written = self.written
        found, position = [], 0
        while position < len(written):
            (size,) = struct.unpack_from(">i", written, position)
            found.append(written[position + 4 : position + 4 + size])
            position += 4 + size
        return found

    # --- asyncio.Transport --------------------------------------------------------------------

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.peer if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def write(self, data: Any) -> None:
        self.bytes_written += len(data)
        if self.record:
            self.writes.append(bytes(data))

    def writelines(self, list_of_data: Any) -> None:
        chunk = b"".join(bytes(data) for data in list_of_data)
        self.bytes_written += len(chunk)
        if self.record:
            self.writes.append(chunk)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True
