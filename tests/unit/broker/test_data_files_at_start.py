"""kemu reads every data file of its own at start, before it listens: a damaged one stops the
start with ``DataFileError`` naming it (never a later request's UNKNOWN_SERVER_ERROR), and leaves
the data dir unlocked for the next start."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from kemu.broker.server import DATA_FILE_READERS
from kemu.cluster.model import METADATA_FILE
from kemu.coordinator.group.config import CONFIG_STORE, STORE_FILE
from kemu.storage.data_files import DataFileError
from kemu.testing.inprocess import InProcessKemu

DATA_FILES = [METADATA_FILE, *(file_name for file_name, _, _ in DATA_FILE_READERS)]


@pytest.mark.parametrize("content", ['{"truncat', "[1]"], ids=["truncated", "not-the-layout"])
@pytest.mark.parametrize("file_name", DATA_FILES)
def test_a_damaged_data_file_stops_the_start_and_frees_the_data_dir(
    kemu_inprocess_factory: type[InProcessKemu], tmp_path: Path, file_name: str, content: str
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / file_name).write_text(content)
    with pytest.raises(DataFileError) as raised:
        kemu_inprocess_factory(brokers=1, data_dir=data_dir).start()
    assert str(raised.value).startswith(f"{data_dir / file_name} is damaged: ")
    assert "restore it from a backup" in str(raised.value)

    (data_dir / file_name).unlink()  # the remedy the line offers (but for the catalogue)
    assert kemu_inprocess_factory(brokers=1, data_dir=data_dir).start().bootstrap


def test_the_topic_catalogue_says_removing_it_loses_every_topic(
    kemu_inprocess_factory: type[InProcessKemu], tmp_path: Path
) -> None:
    (tmp_path / METADATA_FILE).write_text("")
    with pytest.raises(DataFileError, match=r"removing it would lose every topic"):
        kemu_inprocess_factory(brokers=1, data_dir=tmp_path).start()


def test_a_group_configs_file_is_read_before_any_request(
    kemu_inprocess_factory: type[InProcessKemu], tmp_path: Path
) -> None:
    (tmp_path / STORE_FILE).write_text('{"g": {"share.record.lock.duration.ms": "15000"}}')
    kemu = kemu_inprocess_factory(brokers=1, data_dir=tmp_path).start()
    store = kemu.call(lambda: kemu.runtime.services.built(CONFIG_STORE))
    assert store is not None
    assert store.get_overrides("g") == {"share.record.lock.duration.ms": "15000"}


def test_each_data_file_is_the_one_its_module_reads() -> None:
    constants = {
        "kemu.coordinator.group.config": "STORE_FILE",
        "kemu.coordinator.group.share.legacy": "LEGACY_FILE",
        "kemu.broker.security.acls": "FILE_NAME",
        "kemu.broker.security.credentials": "FILE_NAME",
        "kemu.cluster.client_metrics": "FILE_NAME",
        "kemu.cluster.client_quotas": "FILE_NAME",
    }
    for file_name, module_name, reader in DATA_FILE_READERS:
        module = importlib.import_module(module_name)
        assert getattr(module, constants[module_name]) == file_name
        assert callable(getattr(module, reader))
    assert set(constants) == {module for _, module, _ in DATA_FILE_READERS}
