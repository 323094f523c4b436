"""The long run's journal: one JSON line per finished seed, and the fingerprint of what ran.

A run of 1,000 seeds x 10,000 steps takes days of CPU; it is run in slices (``--journal``,
``--budget-minutes``) and summed (``--report``). A line is counted only under the fingerprint it
was written with: a sha256 over kemu's sources (every ``.py`` and ``.json`` of the package, by
path), the run's options, ``PYTHONHASHSEED``, the Python version and kio's (the wire codec). A
seed's trace depends on nothing else, so two lines with the same fingerprint and seed describe
the same run, wherever and whenever it ran (a run under ``python -O`` is refused: it would strip
the asserts of the share-window invariants). Each line is appended, flushed and fsynced on its
own: a killed run loses only the seeds in flight, and a line torn by the kill is skipped when
read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import kemu
from kemu.testing.sim.seeds import Options, Outcome

JOURNAL_FORMAT = 1
SOURCE_SUFFIXES = (".py", ".json")  # the package's code and the schemas and catalogues it loads


def sources_digest(package: Path | None = None) -> str:
    """sha256 over the package's sources: each file's path, length and bytes, sorted by path."""
    root = package if package is not None else Path(kemu.__file__).parent
    files = sorted(
        (path.relative_to(root.parent).as_posix(), path)
        for path in root.rglob("*")
        if path.suffix in SOURCE_SUFFIXES and "__pycache__" not in path.parts and path.is_file()
    )
    digest = hashlib.sha256()
    for name, path in files:
        data = path.read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


# Options that only choose what is printed; every other one (an option added later too) is
# part of the fingerprint
PRINTING_OPTIONS = frozenset({"trace", "tail"})


def run_options(options: Options) -> dict[str, Any]:
    """What a seed's run depends on among the options, with the defaults resolved: the fault
    rates in place of ``no_faults`` and ``crash_point_rate``, the cleaner backoff in place of
    None."""
    from kemu.testing.sim.run import SIM_CLEANER_BACKOFF_MS

    chosen = {
        name: value
        for name, value in dataclasses.asdict(options).items()
        if name not in PRINTING_OPTIONS
    }
    del chosen["no_faults"], chosen["crash_point_rate"]  # both are in the rates
    chosen["rates"] = dataclasses.asdict(options.rates())
    if chosen["cleaner_backoff_ms"] is None:
        chosen["cleaner_backoff_ms"] = SIM_CLEANER_BACKOFF_MS
    return chosen


@dataclass(frozen=True)
class Fingerprint:
    sources: str
    options: dict[str, Any]
    hash_seed: str | None
    python: str
    kio: str

    @classmethod
    def of(cls, options: Options, sources: str | None = None) -> Fingerprint:
        return cls(
            sources if sources is not None else sources_digest(),
            run_options(options),
            os.environ.get("PYTHONHASHSEED"),
            f"{platform.python_implementation()} {platform.python_version()}",
            metadata.version("kio"),
        )

    @property
    def digest(self) -> str:
        text = json.dumps(dataclasses.asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


# what the report adds up or compares, checked when read (bool is an int to isinstance)
_CHECKED_TYPES: dict[str, tuple[type, ...]] = {
    "seed": (int,),
    "ok": (bool,),
    "steps": (int,),
    "virtual_ms": (int,),
    "cpu_s": (int, float),
    "wall_s": (int, float),
    "faults": (dict,),
    "fingerprint": (str,),
    "trace": (str,),
    "finished": (str,),
}


@dataclass(frozen=True)
class Record:
    """One journal line: a finished seed, what it did, and what ran it."""

    seed: int
    ok: bool
    steps_asked: int
    steps: int
    virtual_ms: int
    faults: dict[str, int]
    cpu_s: float
    wall_s: float
    trace: str  # the trace's sha256
    violation: str | None
    failed_step: int | None
    fingerprint: str
    sources: str
    options: dict[str, Any]
    hash_seed: str | None
    python: str
    kio: str
    finished: str  # UTC, ISO 8601
    format: int = JOURNAL_FORMAT
    extra: dict[str, Any] = field(default_factory=dict)  # keys this version does not know

    @classmethod
    def of(cls, outcome: Outcome, fingerprint: Fingerprint, finished: str) -> Record:
        return cls(
            seed=outcome.seed,
            ok=outcome.ok,
            steps_asked=outcome.steps_asked,
            steps=outcome.steps,
            virtual_ms=outcome.virtual_ms,
            faults=dict(sorted(outcome.faults.items())),
            cpu_s=round(outcome.cpu_s, 3),
            wall_s=round(outcome.wall_s, 3),
            trace=outcome.digest,
            violation=outcome.violation,
            failed_step=outcome.failed_step,
            fingerprint=fingerprint.digest,
            sources=fingerprint.sources,
            options=fingerprint.options,
            hash_seed=fingerprint.hash_seed,
            python=fingerprint.python,
            kio=fingerprint.kio,
            finished=finished,
        )

    def to_line(self) -> str:
        fields = dataclasses.asdict(self)
        extra = fields.pop("extra")
        return json.dumps({**extra, **fields}, separators=(",", ":")) + "\n"

    @classmethod
    def from_line(cls, line: str) -> Record:
        """Raises ValueError (json.JSONDecodeError is one) on a line that is not a record."""
        fields = json.loads(line)
        if not isinstance(fields, dict):
            raise ValueError("not a JSON object")
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        missing = known - fields.keys() - {"format"}
        if missing:
            raise ValueError(f"missing {', '.join(sorted(missing))}")
        for name, kinds in _CHECKED_TYPES.items():
            if not isinstance(fields[name], kinds) or isinstance(fields[name], bool) != (
                bool in kinds
            ):
                raise ValueError(f"{name} is {fields[name]!r}")
        extra = {key: value for key, value in fields.items() if key not in known}
        try:
            return cls(**{key: fields[key] for key in known if key in fields}, extra=extra)
        except TypeError as error:
            raise ValueError(str(error)) from error


@dataclass
class Journal:
    """The records read from a journal file, and how many of its lines were not records (a
    line torn by a kill, or damaged)."""

    records: list[Record]
    unreadable: int = 0

    @classmethod
    def read(cls, path: Path) -> Journal:
        journal = cls([])
        if not path.exists():
            return journal
        with path.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if not line.strip():
                    continue
                try:
                    journal.records.append(Record.from_line(line))
                except ValueError:
                    journal.unreadable += 1
        return journal

    def done(self, fingerprint: str) -> dict[int, Record]:
        """The seeds recorded under ``fingerprint`` (the first record of a seed counts)."""
        seeds: dict[int, Record] = {}
        for record in self.records:
            if record.fingerprint == fingerprint:
                seeds.setdefault(record.seed, record)
        return seeds


def append(path: Path, record: Record) -> None:
    """One line, appended in one write, flushed and fsynced; a file whose last line was torn
    (no newline) gets one first, so the new record stays a line of its own."""
    created = not path.exists()
    with path.open("a+b") as journal:
        journal.seek(0, os.SEEK_END)
        if journal.tell() > 0:
            journal.seek(-1, os.SEEK_END)
            torn = journal.read(1) != b"\n"
        else:
            torn = False
        journal.write((("\n" if torn else "") + record.to_line()).encode())
        journal.flush()
        os.fsync(journal.fileno())
    if created:  # the new file's name, durable too
        directory = os.open(path.resolve().parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
