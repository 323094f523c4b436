"""Reading kemu's own JSON files in the data directory (the topic catalogue, group configs, ACLs,
credentials, quotas, client-metrics subscriptions): a file that cannot be read or is damaged
(empty, truncated, not what kemu writes) raises ``DataFileError``, whose message is the one line
``kemu serve`` prints: the file, what is wrong with it and what to do about it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

# What a decoder meets in JSON that is valid but not the layout kemu wrote.
_LAYOUT_ERRORS = (KeyError, IndexError, TypeError, ValueError, AttributeError)


class DataFileError(Exception):
    """A data file kemu keeps cannot be read; the message is one line for whoever starts kemu."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path} {problem}")
        self.path = path


def read_data_file(path: Path, remedy: str, decode: Callable[[Any], T]) -> T | None:
    """``decode`` of the JSON in ``path``, or None when there is no such file.

    ``remedy`` ends the message of a damaged file: how to start again (restore it from a
    backup, or what removing it loses). Raises ``DataFileError``."""
    try:
        text = path.read_bytes().decode()
    except FileNotFoundError:
        return None
    except OSError as error:
        reason = error.strerror or str(error)
        raise DataFileError(path, f"cannot be read: {reason}") from None
    except UnicodeDecodeError as error:
        raise _damaged(path, f"not UTF-8 text (byte {error.start})", remedy) from None
    if not text.strip():
        raise _damaged(path, "empty", remedy)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}"
        raise _damaged(path, f"not JSON ({error.msg}: {where})", remedy) from None
    try:
        return decode(document)
    except _LAYOUT_ERRORS as error:
        found = f"{type(error).__name__}: {error}"
        raise _damaged(path, f"not the layout kemu writes ({found})", remedy) from None


def _damaged(path: Path, problem: str, remedy: str) -> DataFileError:
    return DataFileError(path, f"is damaged: {problem}; {remedy}")
