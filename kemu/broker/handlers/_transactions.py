"""Helpers shared by the transaction handlers (not a handler module: no API key)."""

from __future__ import annotations

import datetime

from kemu.protocol.errors import ErrorCode


def for_version(error: ErrorCode, version: int, first_fenced_version: int) -> ErrorCode:
    """Kafka answers PRODUCER_FENCED (KIP-588) only from the request version that knows it, and
    INVALID_PRODUCER_EPOCH to older clients."""
    if error is ErrorCode.producer_fenced and version < first_fenced_version:
        return ErrorCode.invalid_producer_epoch
    return error


def millis(value: datetime.timedelta | int) -> int:
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    return int(value)
