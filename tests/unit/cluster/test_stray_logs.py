"""The start's removal of stray partition logs (``Cluster._remove_stray_logs``): a directory
named as a partition the catalogue does not name, holding only segment files or nothing, goes;
a catalogued partition's, a directory holding anything else, and everything in a data dir
without a catalogue stay. Its list of segment-file suffixes is spelt out in ``model.py`` (so
that a start imports no segment module) and must not fall behind the storage modules'."""

from __future__ import annotations

from pathlib import Path

from kemu.cluster.model import LOG_FILE_SUFFIXES, BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.storage import segment_files, segment_summary
from kemu.storage.log import MemoryLog


def cluster_on(data_dir: Path) -> Cluster:
    return Cluster(
        cluster_id="strays",
        nodes={1: BrokerNode(1, "127.0.0.1", 19191)},
        config=BrokerConfig({}),
        log_factory=lambda topic, index: MemoryLog(),
        data_dir=data_dir,
    )


def directories(data_dir: Path, files: dict[str, list[str]]) -> None:
    for name, contents in files.items():
        (data_dir / name).mkdir()
        for file_name in contents:
            (data_dir / name / file_name).write_bytes(b"")


def test_a_start_removes_only_the_partition_logs_no_topic_owns(tmp_path: Path) -> None:
    first = cluster_on(tmp_path)
    first.create_topic("kept-1", 2, 1)  # its directories: kept-1-0, kept-1-1 (catalogued)
    directories(
        tmp_path,
        {
            "kept-1-0": ["00000000000000000000.log"],
            "gone-0": ["00000000000000000000.log", "00000000000000000000.index"],
            "gone-1": [],
            "cleaning-0": ["00000000000000000000.log.cleaned", "00000000000000000000.5.swap"],
            "notes-2024": ["readme.txt"],  # not only segment files: not kemu's to remove
            "tls": ["ca.pem"],
        },
    )
    cluster_on(tmp_path).load_metadata()
    left = sorted(p.name for p in tmp_path.iterdir() if p.is_dir())
    assert left == ["kept-1-0", "notes-2024", "tls"]


def test_a_data_dir_without_a_catalogue_is_left_alone(tmp_path: Path) -> None:
    directories(tmp_path, {"orphan-0": ["00000000000000000000.log"]})
    cluster_on(tmp_path).load_metadata()
    assert (tmp_path / "orphan-0").is_dir()


def test_the_suffixes_cover_the_storage_modules() -> None:
    written = {
        segment_files.LOG_SUFFIX,
        segment_files.INDEX_SUFFIX,
        segment_files.SWAP_SUFFIX,
        "." + segment_files.CLEANED_SUFFIX.rsplit(".", 1)[1],
        segment_summary.SUMMARY_SUFFIX,
    }
    assert written <= LOG_FILE_SUFFIXES
