"""The refusal every group coordinator raises."""

from __future__ import annotations

from kemu.protocol.errors import ErrorCode


class GroupError(Exception):
    """A request the coordinator refuses, with the error code Kafka answers."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message
