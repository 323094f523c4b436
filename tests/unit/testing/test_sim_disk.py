"""The simulated disk (kemu/testing/sim/disk.py): what a power loss keeps of segment files."""

from __future__ import annotations

import os
import random
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


def test_the_cleaners_synced_segments_keep_their_synced_size(tmp_path: Path) -> None:
    """The model syncs ``.log.cleaned`` and ``.swap`` files as segments (their size), but a
    power loss told segments by ``path.suffix == ".log"``: both were taken for other files with
    no durable content, and emptied (found by an audit, never by a seed: no power loss fell
    while the cleaner held such files)."""
    disk = DiskModel(tmp_path)
    disk.install()
    try:
        cleaned = tmp_path / "00000000000000000000.log.cleaned"
        swap = tmp_path / "00000000000000000100.00000000000000000200.swap"
        for path, size in ((cleaned, 500), (swap, 1000)):
            descriptor = os.open(path, os.O_CREAT | os.O_WRONLY)
            os.write(descriptor, b"x" * size)
            os.fsync(descriptor)
            os.write(descriptor, b"unsynced")
            os.close(descriptor)
        os.fsync(directory := os.open(tmp_path, os.O_RDONLY))
        os.close(directory)
        assert disk.lose_unsynced() == 2 * len(b"unsynced")
    finally:
        disk.uninstall()
    assert (cleaned.stat().st_size, swap.stat().st_size) == (500, 1000)


def test_a_power_loss_may_leave_a_torn_write_past_the_synced_size(tmp_path: Path) -> None:
    """With every append synced (``kemu.log.flush=always``) nothing is unsynced: the torn
    write is a proper prefix of the last batch synced, never a whole one, past the durable
    size; recovery must truncate it."""
    batch = (0).to_bytes(8, "big") + (20).to_bytes(4, "big") + b"b" * 20  # 32 bytes
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"")
    disk = DiskModel(tmp_path)
    disk.baseline()
    disk.install()
    torn = []
    try:
        for seed in range(20):
            descriptor = os.open(segment, os.O_WRONLY | os.O_APPEND)
            os.write(descriptor, batch + batch)  # two batches, one sync
            os.fsync(descriptor)
            os.close(descriptor)
            durable = segment.stat().st_size
            disk.lose_unsynced(tear=random.Random(seed))
            torn.append(disk.torn)
            tail = segment.read_bytes()[durable:]
            assert tail == batch[: len(tail)] and len(tail) < len(batch)
            os.truncate(segment, durable)  # as recovery does
    finally:
        disk.uninstall()
    assert 0 in torn and any(torn)


def test_only_a_partitions_active_segment_is_torn(tmp_path: Path) -> None:
    """A torn write is one under way, to the last segment: seed 34 x 300 (crash-point rate
    0.03) tore a rolled segment of ``__transaction_state-0`` synced earlier, and recovery, as
    Kafka's, truncated the log there (its end went back from 249 to 221)."""
    batch = (0).to_bytes(8, "big") + (20).to_bytes(4, "big") + b"b" * 20
    rolled, active = tmp_path / "00000000000000000000.log", tmp_path / "00000000000000000001.log"
    disk = DiskModel(tmp_path)
    disk.install()
    torn = []
    try:
        for seed in range(20):
            for segment in (rolled, active):  # both synced since the last power loss
                descriptor = os.open(segment, os.O_CREAT | os.O_WRONLY | os.O_APPEND)
                os.write(descriptor, batch)
                os.fsync(descriptor)
                os.close(descriptor)
            os.fsync(directory := os.open(tmp_path, os.O_RDONLY))
            os.close(directory)
            durable = rolled.stat().st_size
            disk.lose_unsynced(tear=random.Random(seed))
            torn.append(disk.torn)
            assert rolled.stat().st_size == durable
            os.truncate(active, disk.synced[(active.stat().st_dev, active.stat().st_ino)])
    finally:
        disk.uninstall()
    assert any(torn)


def _sync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    os.fsync(descriptor)
    os.close(descriptor)


def _write_synced(path: Path, content: bytes) -> None:
    descriptor = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
    os.write(descriptor, content)
    os.fsync(descriptor)
    os.close(descriptor)


def test_deletions_stand_by_default(tmp_path: Path) -> None:
    """The default model is lenient: a deleted file stays deleted, synced directory or not."""
    disk, checkpoint, _ = installed_over_a_durable_checkpoint(tmp_path)
    try:
        checkpoint.unlink()
        disk.lose_unsynced()
    finally:
        disk.uninstall()
    assert not checkpoint.exists() and disk.restored == 0


def test_a_deletion_no_directory_sync_made_durable_is_undone(tmp_path: Path) -> None:
    """``undo_deletions``: a file and a segment deleted since their directory's last sync come
    back at a power loss, with their durable content (a segment's synced bytes, not its
    unsynced tail); once the directory is synced, a deletion holds."""
    checkpoint = tmp_path / "checkpoint"
    checkpoint.write_bytes(b"durable")
    segment = tmp_path / "00000000000000000000.log"
    disk = DiskModel(tmp_path, undo_deletions=True)
    disk.baseline()
    disk.install()
    try:
        _write_synced(segment, b"synced batches")
        with segment.open("ab") as unsynced:
            unsynced.write(b" unsynced")
        _sync_directory(tmp_path)
        checkpoint.unlink()
        segment.unlink()
        disk.lose_unsynced()
        assert (checkpoint.read_bytes(), segment.read_bytes()) == (b"durable", b"synced batches")
        assert disk.restored == 2
        with segment.open("ab") as unsynced:  # the segment came back with its synced size
            unsynced.write(b" again")
        disk.lose_unsynced()
        assert segment.read_bytes() == b"synced batches"
        checkpoint.unlink()
        segment.unlink()
        _sync_directory(tmp_path)
        disk.lose_unsynced()
    finally:
        disk.uninstall()
    assert not checkpoint.exists() and not segment.exists() and disk.restored == 0


def installed_over_a_partition(tmp_path: Path, checkpoint: bytes) -> tuple[DiskModel, Path]:
    """An ``undo_deletions`` model installed over a durable ``topic-0`` directory holding a
    ``checkpoint`` file, and that directory."""
    partition = tmp_path / "topic-0"
    partition.mkdir()
    (partition / "checkpoint").write_bytes(checkpoint)
    disk = DiskModel(tmp_path, undo_deletions=True)
    disk.baseline()
    disk.install()
    return disk, partition


def test_a_removed_directory_comes_back_until_its_parent_is_synced(tmp_path: Path) -> None:
    """A topic's partition directory, its files deleted and the directory removed with no sync
    of the data directory since: a power loss brings it back with its durable files."""
    disk, partition = installed_over_a_partition(tmp_path, b"start 5")
    try:
        segment = partition / "00000000000000000005.log"
        _write_synced(segment, b"records")
        _sync_directory(partition)
        for path in (segment, partition / "checkpoint"):
            path.unlink()
        partition.rmdir()
        disk.lose_unsynced()
        assert sorted(path.name for path in partition.iterdir()) == [segment.name, "checkpoint"]
        assert segment.read_bytes() == b"records" and disk.restored == 3
        for path in list(partition.iterdir()):
            path.unlink()
        partition.rmdir()
        _sync_directory(tmp_path)
        disk.lose_unsynced()
    finally:
        disk.uninstall()
    assert not partition.exists()


def test_a_directory_made_since_its_parents_sync_goes(tmp_path: Path) -> None:
    """A directory made over a removed one of the same name, its parent not synced since: the
    power loss takes the new one and brings the old one back."""
    disk, partition = installed_over_a_partition(tmp_path, b"old topic")
    try:
        (partition / "checkpoint").unlink()
        partition.rmdir()
        partition.mkdir()
        _write_synced(partition / "checkpoint", b"new topic")
        _sync_directory(partition)
        (tmp_path / "other-0").mkdir()
        disk.lose_unsynced()
    finally:
        disk.uninstall()
    assert (partition / "checkpoint").read_bytes() == b"old topic"
    assert not (tmp_path / "other-0").exists()
