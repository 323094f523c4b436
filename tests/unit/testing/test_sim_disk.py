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


def installed_over_a_durable_checkpoint(
    tmp_path: Path,
) -> tuple[DiskModel, Path, os.stat_result]:
    """A model installed over a directory whose ``checkpoint`` file is durable, and its stat."""
    disk = DiskModel(tmp_path)
    checkpoint = tmp_path / "checkpoint"
    checkpoint.write_bytes(b"durable")
    disk.baseline()
    found = os.stat(checkpoint)
    disk.install()
    return disk, checkpoint, found


def test_a_replaced_file_comes_back_with_its_own_content_whoever_gets_its_inode(
    tmp_path: Path,
) -> None:
    """ext4 gives a freed inode number to a later file when it likes, depending on what other
    processes allocate meanwhile: the model knew a replaced file's durable content by that
    number, and a later file synced under it changed what a power loss restored (seed 2001 x
    3000 lost 224 or 225 bytes at its power loss, run to run)."""
    disk, checkpoint, replaced = installed_over_a_durable_checkpoint(tmp_path)
    try:
        temporary = tmp_path / "checkpoint.tmp"
        temporary.write_bytes(b"newer")
        descriptor = os.open(temporary, os.O_RDONLY)
        os.fsync(descriptor)
        os.close(descriptor)
        os.replace(temporary, checkpoint)  # the directory is not synced: the old entry is durable
        # a later file given the freed inode number, and synced
        disk.contents[(replaced.st_dev, replaced.st_ino)] = b"a later file's"
        disk.lose_unsynced()
    finally:
        disk.uninstall()
    assert checkpoint.read_bytes() == b"durable"


def test_a_deleted_file_is_no_durable_entry_of_a_later_file_given_its_inode(
    tmp_path: Path,
) -> None:
    """A name deleted and created again since its directory's last sync goes at a power loss,
    whether or not the new file got the old one's inode number."""
    disk, checkpoint, deleted = installed_over_a_durable_checkpoint(tmp_path)
    try:
        os.unlink(checkpoint)
        assert (deleted.st_dev, deleted.st_ino) not in disk.listings[tmp_path].values()
    finally:
        disk.uninstall()
