"""The simulated disk (kemu/testing/sim/disk.py): what a power loss keeps of segment files."""

from __future__ import annotations

import os
from pathlib import Path

from kemu.testing.sim.disk import DiskModel


def test_a_cleaned_segment_renamed_into_place_keeps_its_synced_size(tmp_path: Path) -> None:
    """Seed 10 x 2000 found it once the cleaner ran every second: the cleaner syncs a segment
    as ``.log.cleaned`` and renames it to ``.swap`` and then over the old ``.log``; the model
    counted that sync as a content's, not a segment's size, so a power loss emptied the cleaned
    segment and a group's committed offsets were gone after the restart."""
    disk = DiskModel(tmp_path)
    old = tmp_path / "00000000000000000000.log"
    old.write_bytes(b"old batches" * 10)
    disk.baseline()
    disk.install()
    try:
        cleaned = tmp_path / "00000000000000000000.log.cleaned"
        descriptor = os.open(cleaned, os.O_CREAT | os.O_WRONLY)
        os.write(descriptor, b"kept")
        os.fsync(descriptor)
        os.close(descriptor)
        swap = tmp_path / "00000000000000000000.00000000000000000010.swap"
        os.replace(cleaned, swap)
        os.fsync(directory := os.open(tmp_path, os.O_RDONLY))
        os.replace(swap, old)
        os.fsync(directory)
        os.close(directory)
        with old.open("ab") as unsynced:
            unsynced.write(b" and more")
        assert disk.lose_unsynced() == len(b" and more")
    finally:
        disk.uninstall()
    assert old.read_bytes() == b"kept"
