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


def as_partition_writer(error: ErrorCode) -> ErrorCode:
    """A request that enlists partitions as it writes them (Produce under transaction version 2,
    TxnOffsetCommit, KIP-1289's share acknowledgements) learns a stale or future producer epoch
    as Kafka's partition leaders do, from the transaction verification: INVALID_PRODUCER_EPOCH,
    never PRODUCER_FENCED, whether a newer InitProducerId or the coordinator's timeout abort
    bumped the epoch (Kafka 4.4.0 answers both so). The Java producer aborts after it on a
    Produce; EndTxn then tells a zombie PRODUCER_FENCED."""
    if error is ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    return error


def millis(value: datetime.timedelta | int) -> int:
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    return int(value)
