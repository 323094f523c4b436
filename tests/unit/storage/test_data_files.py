"""The reader of kemu's own JSON files in the data dir: a missing file is None, and each way a
file can be damaged or unreadable is one ``DataFileError`` line naming the file, what is wrong
and the remedy given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kemu.storage.data_files import DataFileError, read_data_file

REMEDY = "restore it from a backup"


def topics(document: dict[str, Any]) -> list[str]:
    return [str(name) for name in document["topics"]]


def test_a_file_is_decoded_and_a_missing_one_is_none(tmp_path: Path) -> None:
    path = tmp_path / "kemu-test.json"
    assert read_data_file(path, REMEDY, topics) is None
    path.write_text('{"topics": ["a", "b"]}')
    assert read_data_file(path, REMEDY, topics) == ["a", "b"]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "empty"),
        (b" \n", "empty"),
        (b'{"topics": ["a"', "not JSON (Expecting ',' delimiter: line 1 column 16)"),
        (b"\x00\x00\x00\x00", "not JSON (Expecting value: line 1 column 1)"),
        (b'{"topics": ["\xff"]}', "not UTF-8 text (byte 13)"),
        (b"[]", "not the layout kemu writes (TypeError: list indices must be integers"),
        (b'{"topic": []}', "not the layout kemu writes (KeyError: 'topics')"),
    ],
    ids=["empty", "blank", "truncated", "zeroed", "not-utf8", "a-list", "a-key-missing"],
)
def test_a_damaged_file_is_named_with_its_problem_and_remedy(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "kemu-test.json"
    path.write_bytes(content)
    with pytest.raises(DataFileError) as raised:
        read_data_file(path, REMEDY, topics)
    message = str(raised.value)
    assert message.startswith(f"{path} is damaged: {problem}"), message
    assert message.endswith(f"; {REMEDY}")
    assert "\n" not in message
    assert raised.value.path == path
    assert raised.value.__cause__ is None  # the message says it all


def test_a_file_that_cannot_be_read_says_why(tmp_path: Path) -> None:
    path = tmp_path / "kemu-test.json"
    path.mkdir()
    with pytest.raises(DataFileError) as raised:
        read_data_file(path, REMEDY, topics)
    assert str(raised.value) == f"{path} cannot be read: Is a directory"
