"""Kafka error codes (re-exported from kio so nothing outside ``kemu.protocol`` imports kio)."""

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode"]
