"""The start's removal of stray partition logs (``Cluster._remove_stray_logs``) knows every
file a partition's directory can hold: its list is spelt out in ``model.py`` (so that a start
imports no segment module), and must not fall behind the storage modules'."""

from __future__ import annotations

from kemu.cluster.model import LOG_FILE_SUFFIXES
from kemu.storage import segment_files, segment_summary


def test_the_suffixes_cover_the_storage_modules() -> None:
    written = {
        segment_files.LOG_SUFFIX,
        segment_files.INDEX_SUFFIX,
        segment_files.SWAP_SUFFIX,
        "." + segment_files.CLEANED_SUFFIX.rsplit(".", 1)[1],
        segment_summary.SUMMARY_SUFFIX,
    }
    assert written <= LOG_FILE_SUFFIXES
