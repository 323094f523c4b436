"""What a power loss keeps of the data directory: every file kemu writes, at its last sync.

kemu's files run on the real file system; this model learns what is durable by standing in for
the sync calls (``os.fsync``, and the segment log's ``datasync``) for the run's duration, and at
a power loss puts the directory back to that:

- ``.log`` segments (appended in place): cut back to their size at their last sync (0 for one
  never synced); at some power losses one of them keeps a torn write past that size (a proper
  prefix of what was being written: ``DiskModel._tear``), which a boot's recovery truncates.
  Sizes are tracked by inode, so a cleaned segment (synced as ``.log.cleaned``, then renamed to
  ``.swap`` and into place) keeps its synced size.
- every other file (``.index``, the log-start checkpoint, ``kemu-metadata.json``,
  ``kemu-group-configs.json``, ``kemu-producer-ids``, ACLs, credentials, quotas...): its content
  at its last ``fsync`` (by inode); a file never synced loses its content (it is emptied). What
  the first start-up left is durable (``baseline``); later boots get no such pass.
- directory entries: a file created or renamed into a directory is durable only once that
  directory is synced. At a power loss a name created since the directory's last sync goes, and
  a name replaced since (``os.replace`` of a synced temporary) points again to the file it
  named then, with that file's durable content. Segment files are left to the segment rule.

By default deletions are not undone (a deleted segment or checkpoint does not come back),
which is lenient. With ``undo_deletions`` (``--undo-deletions``) they are, as a strict POSIX
file system may do after a power loss:

- a file deleted since its directory's last sync comes back under its name, with its durable
  content (a segment: the bytes up to its synced size, kept when it is deleted);
- a directory removed since its parent's last sync comes back, with the files and
  subdirectories durable in it (a topic's partition directories after its deletion);
- a directory created since its parent's last sync goes, with all it holds.

A name renamed away (not deleted) does not come back: kemu syncs the directory after each
rename it relies on, with no crash point in between. Nothing here calls a real sync: the
simulation never needs the bytes on a platter.

Files are known by inode, and the file system gives a freed inode number to a later file when
it likes (on ext4, depending on what other processes allocate meanwhile): the number of a file
deleted or replaced is retired at once, what is remembered of it moving to a key no file has, so
that a power loss never depends on whether a later file got that number.
"""

from __future__ import annotations

import contextlib
import os
import random
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kemu.storage.segment_cleaning as segment_cleaning
import kemu.storage.segments as segments

FileKey = tuple[int, int]  # (device, inode); a retired file's: (RETIRED, a counter)
RETIRED = -1  # no device has this number
SEGMENT_SUFFIX = ".log"
# the segment files the cleaner writes before they are renamed into place as ``.log``
SEGMENT_SUFFIXES = (SEGMENT_SUFFIX, ".log.cleaned", ".swap")
TORN_WRITE_CHANCE = 0.5  # a power loss leaves a torn write at one segment's end


def _key(status: os.stat_result) -> FileKey:
    return (status.st_dev, status.st_ino)


class DiskModel:
    """Which bytes of the data directory a power loss would keep (see the module docstring)."""

    def __init__(self, root: Path, *, undo_deletions: bool = False) -> None:
        self.root = root
        self.undo_deletions = undo_deletions
        self._root_name = str(root)
        self._root_prefix = os.path.join(self._root_name, "")
        self.synced: dict[FileKey, int] = {}  # segment inode -> durable size
        self.last_sync: dict[FileKey, int] = {}  # segment inode -> durable size before that
        self.torn = 0  # bytes of torn writes the last power loss left (``lose_unsynced``)
        self.contents: dict[FileKey, bytes] = {}  # other file inode -> durable content
        self.listings: dict[Path, dict[str, FileKey]] = {}  # directory -> durable entries
        self.syncs = 0
        self.retired = 0
        # with undo_deletions: directory -> its durable subdirectories (name -> key); a removed
        # directory's durable entries, by its retired key; the names the last power loss brought
        # back (files and directories)
        self.subdirectories: dict[Path, dict[str, FileKey]] = {}
        self.removed: dict[FileKey, tuple[dict[str, FileKey], dict[str, FileKey]]] = {}
        self.restored = 0
        # the directories (``topic-index``) whose segment the last power loss cut
        self.cut: set[str] = set()
        self._original: list[tuple[Any, str, Callable[..., None]]] = []

    def install(self) -> None:
        # every module of the segment log that syncs, each holding its own name for it
        for module in (segments, segment_cleaning):
            self._original.append((module, "datasync", module.datasync))
            module.datasync = self._fsync  # type: ignore[attr-defined]
        self._original.append((os, "fsync", os.fsync))
        setattr(os, "fsync", self._fsync)  # noqa: B010 - typeshed's signature is narrower
        # A deleted file's inode is reused by the next file created, which would inherit its
        # durable size or content: a power loss then depended on the file system's inode
        # allocation, not on the seed (found once small segments were deleted during runs).
        for name in ("unlink", "remove"):
            original = getattr(os, name)
            self._original.append((os, name, original))
            setattr(os, name, self._forgetting(original))
        for name in ("replace", "rename"):  # a segment renamed over another frees that inode
            original = getattr(os, name)
            self._original.append((os, name, original))
            setattr(os, name, self._forgetting_replaced(original))
        if self.undo_deletions:
            self._original.append((os, "rmdir", os.rmdir))
            setattr(os, "rmdir", self._burying(os.rmdir))  # noqa: B010

    def uninstall(self) -> None:
        for module, name, original in self._original:
            setattr(module, name, original)
        self._original = []

    def _forgetting(self, delete: Callable[..., None]) -> Callable[..., None]:
        def deleting(path: Any, *args: Any, **kwargs: Any) -> None:
            with contextlib.suppress(OSError):
                status = os.stat(path, dir_fd=kwargs.get("dir_fd"), follow_symlinks=False)
                if not self.undo_deletions:
                    self.contents.pop(_key(status), None)  # it never comes back
                elif kwargs.get("dir_fd") is None:
                    self._keep_durable_segment(Path(os.path.realpath(path)), _key(status))
                self.synced.pop(_key(status), None)
                self.last_sync.pop(_key(status), None)
                self._retire(_key(status))  # with undo_deletions, its durable content moves
            delete(path, *args, **kwargs)

        return deleting

    def _forgetting_replaced(self, move: Callable[..., None]) -> Callable[..., None]:
        def moving(source: Any, destination: Any, *args: Any, **kwargs: Any) -> None:
            with contextlib.suppress(OSError):
                replaced = _key(os.stat(destination, dir_fd=kwargs.get("dst_dir_fd")))
                if replaced != _key(os.stat(source, dir_fd=kwargs.get("src_dir_fd"))):
                    if str(destination).endswith(SEGMENT_SUFFIX):
                        self.synced.pop(replaced, None)
                        self.last_sync.pop(replaced, None)
                    else:  # its content is kept: a power loss may bring it back
                        self._retire(replaced)
            move(source, destination, *args, **kwargs)

        return moving

    def _keep_durable_segment(self, path: Path, key: FileKey) -> None:
        """A segment being deleted under a durable name: keep its durable bytes, which a power
        loss before its directory's next sync brings back (``_retire`` moves them along)."""
        size = self.synced.get(key, 0)
        if size and self.listings.get(path.parent, {}).get(path.name) == key:
            with path.open("rb") as segment:
                self.contents[key] = segment.read(size)

    def _burying(self, rmdir: Callable[..., None]) -> Callable[..., None]:
        def removing(path: Any, *args: Any, **kwargs: Any) -> None:
            with contextlib.suppress(OSError):
                if kwargs.get("dir_fd") is None:
                    status = os.stat(path, follow_symlinks=False)
                    self._retire_directory(Path(os.path.realpath(path)), _key(status))
            rmdir(path, *args, **kwargs)

        return removing

    def _retire_directory(self, directory: Path, key: FileKey) -> None:
        """``directory`` (``key``) is being removed: what is durable of it (its entries) moves
        to a retired key, named by its parent's durable entry if it has one."""
        self.retired += 1
        retired = (RETIRED, self.retired)
        files = self.listings.pop(directory, {})
        subdirectories = self.subdirectories.pop(directory, {})
        named = self.subdirectories.get(directory.parent, {})
        if named.get(directory.name) == key:
            named[directory.name] = retired
            self.removed[retired] = (files, subdirectories)

    def _retire(self, key: FileKey) -> None:
        """``key``'s inode is being freed: what is remembered of it (its durable content, the
        durable directory entries naming it) moves to a key no later file can have."""
        self.retired += 1
        retired = (RETIRED, self.retired)
        content = self.contents.pop(key, None)
        if content is not None:
            self.contents[retired] = content
        for entries in self.listings.values():
            for name, entry in entries.items():
                if entry == key:
                    entries[name] = retired

    def _fsync(self, target: Any) -> None:
        descriptor = target if isinstance(target, int) else target.fileno()
        self.syncs += 1
        status = os.fstat(descriptor)
        try:
            name = os.readlink(f"/proc/self/fd/{descriptor}")
        except OSError:
            return
        # strings, not Paths: a segment append under kemu.log.flush=always syncs every batch
        if name != self._root_name and not name.startswith(self._root_prefix):
            return
        if stat.S_ISDIR(status.st_mode):
            directory = Path(name)
            if self.undo_deletions:
                self._forget_unnamed(directory)
            self.listings[directory], directories = self._scan(directory)
            if self.undo_deletions:
                self.subdirectories[directory] = directories
        elif name.endswith(SEGMENT_SUFFIXES):
            # a cleaned segment is synced as ``.log.cleaned``: its size follows its inode to
            # the ``.log`` name it gets (before, its sync counted as a content's, and a power
            # loss after a cleaning emptied the cleaned segment)
            key = _key(status)
            self.last_sync[key] = self.synced.get(key, 0)
            self.synced[key] = status.st_size
        else:
            with contextlib.suppress(OSError):
                self.contents[_key(status)] = Path(name).read_bytes()

    @staticmethod
    def _scan(directory: Path) -> tuple[dict[str, FileKey], dict[str, FileKey]]:
        """``directory``'s files and subdirectories, each name with its key."""
        files, directories = {}, {}
        with contextlib.suppress(OSError):
            for entry in os.scandir(directory):
                if entry.is_file(follow_symlinks=False):
                    files[entry.name] = _key(entry.stat(follow_symlinks=False))
                elif entry.is_dir(follow_symlinks=False):
                    directories[entry.name] = _key(entry.stat(follow_symlinks=False))
        return files, directories

    @classmethod
    def _entries(cls, directory: Path) -> dict[str, FileKey]:
        return cls._scan(directory)[0]

    @classmethod
    def _directories(cls, directory: Path) -> dict[str, FileKey]:
        return cls._scan(directory)[1]

    def _forget_unnamed(self, directory: Path) -> None:
        """``directory`` is being synced: what its durable entries kept of deleted files and
        removed directories no longer named is no longer needed."""
        for key in self.listings.get(directory, {}).values():
            if key[0] == RETIRED:
                self.contents.pop(key, None)
        for key in self.subdirectories.get(directory, {}).values():
            if key[0] == RETIRED:
                self._forget_removed(key)

    def _forget_removed(self, key: FileKey) -> None:
        files, subdirectories = self.removed.pop(key, ({}, {}))
        for file_key in files.values():
            if file_key[0] == RETIRED:
                self.contents.pop(file_key, None)
        for directory_key in subdirectories.values():
            if directory_key[0] == RETIRED:
                self._forget_removed(directory_key)

    def _files(self) -> list[Path]:
        return sorted(path for path in self.root.rglob("*") if path.is_file())

    def baseline(self) -> None:
        """After the run's first start-up: everything on disk now is durable. One walk of the
        directory (a boot's: the listing of each directory, each file's status from it)."""
        directories = [self.root]
        for directory in directories:  # grows with the subdirectories found
            entries: dict[str, FileKey] = {}
            with contextlib.suppress(OSError):
                for entry in os.scandir(directory):
                    if entry.is_dir(follow_symlinks=False):
                        directories.append(Path(entry.path))
                    elif entry.is_file(follow_symlinks=False):
                        status = entry.stat(follow_symlinks=False)
                        entries[entry.name] = _key(status)
                        if entry.name.endswith(SEGMENT_SUFFIXES):
                            self.synced[_key(status)] = status.st_size
                        else:
                            with contextlib.suppress(OSError):
                                self.contents[_key(status)] = Path(entry.path).read_bytes()
            self.listings[directory] = entries
            if self.undo_deletions:
                self.subdirectories[directory] = self._directories(directory)

    def lose_unsynced(self, tear: random.Random | None = None) -> int:
        """Put the directory back to what was durable; returns the bytes lost (and notes in
        ``cut`` the partitions whose records it may have taken). With ``tear``, one segment
        written since its last power loss may keep a torn write (``_tear``)."""
        self.restored = 0
        lost = self._undo_directories(self.root) if self.undo_deletions else 0
        lost += self._undo_entries()
        self.cut = set()
        self.torn = 0
        written: list[tuple[Path, FileKey, bytes]] = []
        for path in self._files():
            status = path.stat()
            if path.name.endswith(SEGMENT_SUFFIXES):  # as _fsync tells them
                key = _key(status)
                durable_size = self.synced.get(key, 0)
                unsynced = b""
                if status.st_size > durable_size:
                    lost += status.st_size - durable_size
                    if tear is not None:
                        with path.open("rb") as segment:
                            segment.seek(durable_size)
                            unsynced = segment.read()
                    os.truncate(path, durable_size)
                    self.cut.add(path.parent.name)
                if path.name.endswith(SEGMENT_SUFFIX) and (unsynced or key in self.last_sync):
                    written.append((path, key, unsynced))
                continue
            content = self.contents.get(_key(status), b"")
            current = path.read_bytes()
            if current != content:
                lost += max(len(current) - len(content), 0) or 1
                path.write_bytes(content)
                self.contents[_key(path.stat())] = content
        # only a partition's active (last) segment is being written: a torn write past the end
        # of a rolled one cannot happen (and recovery would truncate the log there)
        active = {path.parent: path for path in self._files() if path.name.endswith(SEGMENT_SUFFIX)}
        written = [entry for entry in written if active.get(entry[0].parent) == entry[0]]
        if tear is not None and written and tear.random() < TORN_WRITE_CHANCE:
            self.torn = self._tear(*tear.choice(written), tear)
        self.last_sync.clear()
        return lost

    def _tear(self, path: Path, key: FileKey, unsynced: bytes, tear: random.Random) -> int:
        """A write under way at the power loss reached the disk in part: past the segment's
        durable size, a proper prefix of its unsynced tail or, with none (every append synced
        under ``kemu.log.flush=always``), of what its last sync made durable (a batch written
        again, torn). A boot's recovery must truncate it. Returns the bytes written."""
        if not unsynced:
            start, end = self.last_sync.get(key, 0), self.synced.get(key, 0)
            with path.open("rb") as segment:
                segment.seek(start)
                unsynced = segment.read(end - start)
            # never a whole batch again (its length at bytes 8-12 of its header): no disk
            # leaves a valid copy of old data behind
            if len(unsynced) >= 12:
                unsynced = unsynced[: 12 + int.from_bytes(unsynced[8:12], "big", signed=True)]
        if len(unsynced) < 2:
            return 0
        partial = unsynced[: tear.randrange(1, len(unsynced))]
        with path.open("ab") as segment:
            segment.write(partial)
        return len(partial)

    def _undo_directories(self, directory: Path) -> int:
        """With ``undo_deletions``, from ``directory`` down: directories created since their
        parent's last sync go; removed ones come back; deleted files come back (``restored``
        counts the names). Returns the bytes the directories that went held."""
        lost = 0
        durable = self.subdirectories.get(directory, {})
        present = self._directories(directory)
        for name, key in sorted(present.items()):
            if durable.get(name) != key:  # made since the last sync, maybe over a removed one
                lost += self._remove_tree(directory / name)
        for name, key in sorted(durable.items()):
            child = directory / name
            if key[0] == RETIRED:
                files, subdirectories = self.removed.pop(key, ({}, {}))
                os.mkdir(child)
                self.restored += 1
                self.listings[child], self.subdirectories[child] = files, subdirectories
                durable[name] = _key(os.stat(child))
            elif present.get(name) != key:
                continue  # renamed away (kemu does not): not modelled
            lost += self._undo_directories(child)
        self._restore_files(directory)
        return lost

    def _restore_files(self, directory: Path) -> None:
        """Files deleted from ``directory`` since its last sync come back, durable content."""
        entries = self.listings.get(directory)
        if entries is None:
            return
        for name, key in sorted(entries.items()):
            path = directory / name
            if key[0] != RETIRED or path.exists():
                continue  # a name replaced since is _undo_entries' to restore
            content = self.contents.pop(key, b"")
            path.write_bytes(content)
            self.restored += 1
            restored = _key(path.stat())
            entries[name] = restored
            if name.endswith(SEGMENT_SUFFIXES):
                self.synced[restored] = len(content)
            else:
                self.contents[restored] = content

    def _remove_tree(self, directory: Path) -> int:
        """Remove ``directory`` (never synced into its parent) with the originals of the
        calls the model stands in for: no retiring, nothing remembered of it."""
        removed = 0
        for path in sorted(directory.iterdir()):
            if path.is_dir() and not path.is_symlink():
                removed += self._remove_tree(path)
            else:
                status = path.stat()
                removed += status.st_size
                for remembered in (self.synced, self.last_sync, self.contents):
                    remembered.pop(_key(status), None)
                self._call_original("unlink", path)
        self.listings.pop(directory, None)
        self.subdirectories.pop(directory, None)
        self._call_original("rmdir", directory)
        return removed

    def _call_original(self, name: str, path: Path) -> None:
        originals = {n: f for module, n, f in self._original if module is os}
        originals.get(name, getattr(os, name))(path)

    def _undo_entries(self) -> int:
        """Names created or replaced since their directory's last sync (segments aside)."""
        lost = 0
        for directory, durable in sorted(self.listings.items()):
            for name, key in sorted(self._entries(directory).items()):
                if name.endswith(SEGMENT_SUFFIX) or durable.get(name) == key:
                    continue
                path = directory / name
                lost += path.stat().st_size
                path.unlink()
                before = durable.get(name)
                if before is not None:
                    # the replaced file comes back with what it held durably
                    content = self.contents.get(before, b"")
                    path.write_bytes(content)
                    self.contents[_key(path.stat())] = content
            self.listings[directory] = self._entries(directory)
        return lost
