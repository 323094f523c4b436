"""``python -m bench.fuzz``: every request schema kemu serves, fed mutated and truncated frames.

For every API key and version kemu advertises in ApiVersions (KIP-1289's two APIs included: they
are switched on here), valid requests are generated from the request's schema (kio's classes,
or kemu's own for KIP-1289): each field gets a value of its Kafka type, names and ids are often
those of the topics, groups and transactional ids that exist, record fields carry real record
batches. Each frame is then mutated at the byte level, in one of several ways chosen at random:

- ``valid``: sent as generated;
- ``flip``: a few bits flipped, or bytes overwritten, anywhere after the size prefix;
- ``truncate``: cut short, the size prefix then says what is left (the body ends early);
- ``extend``: random bytes appended inside the frame (trailing garbage after the body);
- ``length``: an int16/int32 somewhere in the body replaced by -1, 0, a huge or a negative number
  (string, bytes and array lengths);
- ``varint``: a run of 0xFF/0x80 bytes written somewhere (unterminated or oversized varints:
  compact lengths, tagged-field counts);
- ``header``: the api version or the header's client id length changed;
- ``size``: the size prefix made to disagree with the body (short or long).

Each frame goes to a fresh in-process ``Connection`` of a ``KemuServer`` (one process, three
brokers, a data dir; no sockets: the transport keeps what is written). A frame is tried when
``data_received`` has returned, its answer (if any) has been written or the connection closed,
or ``--answer-timeout`` seconds passed (a Fetch or ShareFetch may legitimately wait: it is then
counted as *waiting* and its connection closed, which must cancel it).

A **crash** is any of: an exception escaping ``data_received``, a ``handler_failed``,
``connection_failed`` or ``close_hook_failed`` log event (the handler raised: the client got
UNKNOWN_SERVER_ERROR instead of Kafka's error), an exception the event loop had to report
(a task nobody awaited failed), a task still running 5 s after its connection closed (a hang),
or the process not answering a valid ApiVersions/Metadata afterwards. Each is printed with its
api key, version, mutation, frame (hex) and traceback, and the run exits non-zero.

Prints frames tried, outcomes, per-key counts, crashes, and the maximum resident set size:

    .venv/bin/python -m bench.fuzz --frames 100000 --seed 1 --concurrency 256 --answer-timeout 0.2

``--sasl N`` adds N connections to SASL_PLAINTEXT and SASL_SSL listeners playing mutated
PLAIN, SCRAM and OAUTHBEARER exchanges and KIP-368 re-authentications (``bench/fuzz_sasl.py``);
``--records N`` adds N Produce requests whose batches are validly framed around mutated,
compressed or decompression-bomb contents (``bench/fuzz_records.py``). Each runs on a server of
its own; ``--frames 0`` skips the schema fuzzing.

Over TCP, ``tests/integration/broker/test_bad_input.py`` throws random and mutated frames at a kemu
subprocess through real sockets (fewer frames, ten request kinds); this is the same
``Connection`` code without the sockets, so it tries every schema many times a second.
``tests/unit/broker/test_malformed_frames.py`` runs a bounded, seeded version in ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import logging
import random
import resource
import struct
import sys
import tempfile
import time
import traceback
import typing
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from kemu.broker.connection import Connection
from kemu.broker.handlers import REGISTRY, load_handlers
from kemu.broker.server import KemuServer, ServerOptions
from kemu.config.definitions import BrokerConfig
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import build_batch

TOPICS = ("fuzz-a", "fuzz-b")
GROUPS = ("fuzz-group", "fuzz-share")
TRANSACTIONAL_IDS = ("fuzz-txn",)
CRASH_EVENTS = frozenset({"handler_failed", "connection_failed", "close_hook_failed"})
MUTATIONS = ("valid", "flip", "truncate", "extend", "length", "varint", "header", "size")
CONFIG = {
    "kemu.kip1289.enable": "true",
    "num.partitions": "3",
    "auto.create.topics.enable": "true",
    "group.share.enable": "true",
}
INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


# --- valid requests from the schemas ----------------------------------------------------------


@dataclass
class Known:
    """Names and ids that exist in the broker, so generated requests reach past the lookups."""

    topic_ids: list[uuid.UUID] = field(default_factory=list)
    batches: list[bytes] = field(default_factory=list)


class RequestGenerator:
    """Random instances of a kio request class, every field of its Kafka type."""

    def __init__(self, rng: random.Random, known: Known) -> None:
        self.rng = rng
        self.known = known

    def request(self, api_key: int, api_version: int) -> Any:
        return self.instance(wire.request_schema(api_key, api_version), depth=0)

    def instance(self, cls: type[Any], depth: int) -> Any:
        values = {
            item.name: self.value(item.type, item.metadata.get("kafka_type"), item.name, depth)
            for item in dataclasses.fields(cls)
        }
        return cls(**values)

    def value(self, kind: Any, kafka_type: str | None, name: str, depth: int) -> Any:
        rng = self.rng
        args = typing.get_args(kind)
        if type(None) in args:  # Optional: None now and then
            if rng.random() < 0.15:
                return None
            kind = next(arg for arg in args if arg is not type(None))
            args = typing.get_args(kind)
        if typing.get_origin(kind) is tuple:
            element = args[0]
            count = rng.choice((0, 1, 1, 1, 2, 3)) if depth < 4 else 0
            return tuple(self.value(element, kafka_type, name, depth + 1) for _ in range(count))
        if dataclasses.is_dataclass(kind):
            return self.instance(kind, depth + 1)  # type: ignore[arg-type]
        return self.scalar(kafka_type or "", name)

    def scalar(self, kafka_type: str, name: str) -> Any:
        rng = self.rng
        if kafka_type in INT_RANGES:
            low, high = INT_RANGES[kafka_type]
            roll = rng.random()
            if roll < 0.45:
                return rng.choice((0, 1, -1, 2, 3)) if low < 0 else rng.choice((0, 1, 2, 3))
            if roll < 0.8:
                return rng.randint(max(low, 0), min(high, 1000))
            if roll < 0.9:
                return rng.choice((low, high))
            return rng.randint(low, high)
        if kafka_type == "error_code":
            return ErrorCode(rng.choice((0, 0, 0, 3, 6, 15, 16, 27, 47)))
        if kafka_type in ("timedelta_i32", "timedelta_i64"):
            return datetime.timedelta(milliseconds=rng.choice((0, 0, 1, 10, 100)))
        if kafka_type == "string":
            return self.string(name)
        if kafka_type == "bytes":
            return rng.randbytes(rng.choice((0, 1, 8, 32)))
        if kafka_type == "records":
            if self.known.batches and rng.random() < 0.8:
                return rng.choice(self.known.batches)
            return rng.randbytes(rng.choice((0, 12, 61, 80)))
        if kafka_type == "uuid":
            if self.known.topic_ids and rng.random() < 0.7:
                return rng.choice(self.known.topic_ids)
            return uuid.UUID(int=0) if rng.random() < 0.5 else uuid.UUID(int=rng.getrandbits(128))
        if kafka_type == "bool":
            return rng.random() < 0.5
        if kafka_type == "float64":
            return rng.choice((0.0, 1.0, -1.0, float("inf"), float("nan"), 1e300))
        raise ValueError(f"no generator for Kafka type {kafka_type!r} ({name})")

    def string(self, name: str) -> str:
        rng = self.rng
        roll = rng.random()
        if roll < 0.1:
            return ""
        if roll < 0.2:
            return "".join(rng.choice("ab.-_ZéЖ\u0000/") for _ in range(rng.randint(1, 12)))
        if "topic" in name or name == "name":
            return rng.choice(TOPICS)
        if "transactional" in name:
            return rng.choice(TRANSACTIONAL_IDS)
        if "group" in name:
            return rng.choice(GROUPS)
        if "member" in name:
            return rng.choice(("", "member-1", str(uuid.UUID(int=rng.getrandbits(128)))))
        return rng.choice((*TOPICS, *GROUPS, "x"))


# --- byte-level mutations ---------------------------------------------------------------------


def mutate(frame: bytes, how: str, rng: random.Random) -> bytes:
    """``frame`` (size prefix included) changed as ``how`` says; the size prefix is kept
    honest except for ``size``."""
    data = bytearray(frame)
    body_start = 4
    if how == "valid":
        return frame
    if how == "flip":
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(body_start, len(data))
            if rng.random() < 0.5:
                data[at] ^= 1 << rng.randrange(8)
            else:
                data[at] = rng.randrange(256)
    elif how == "truncate":
        del data[rng.randrange(body_start + 1, len(data) + 1) :]
    elif how == "extend":
        data += rng.randbytes(rng.randint(1, 64))
    elif how == "length":
        at = rng.randrange(body_start, max(body_start + 1, len(data) - 1))
        width = rng.choice((2, 4))
        value = rng.choice((-1, 0, -(2**15), 2**15 - 1, 2**31 - 1, -(2**31), 1000, 2))
        packed = (
            struct.pack(">h", max(-(2**15), min(2**15 - 1, value)))
            if width == 2
            else struct.pack(">i", value)
        )
        data[at : at + width] = packed
    elif how == "varint":
        at = rng.randrange(body_start, len(data))
        run = bytes(rng.choice((0xFF, 0x80, 0xFE)) for _ in range(rng.randint(1, 10)))
        if rng.random() < 0.5:
            data[at : at + len(run)] = run
        else:
            data[at:at] = run
    elif how == "header":
        if rng.random() < 0.5 and len(data) >= 8:
            struct.pack_into(">h", data, 6, rng.choice((-1, 0, 1, 99, 2**15 - 1)))
        elif len(data) >= 16:
            struct.pack_into(">h", data, 12, rng.choice((-2, -1, 0, 200, 2**15 - 1)))
    elif how == "size":
        struct.pack_into(">i", data, 0, max(0, len(data) - 4 + rng.choice((-3, -1, 1, 5, 100))))
        return bytes(data)
    struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


# --- running frames ---------------------------------------------------------------------------


class _Transport:
    """An in-process transport: keeps written bytes, notes when the connection closes it."""

    def __init__(self, port: int) -> None:
        self.port = port  # the connection's peer: crash log lines name it
        self.written = 0
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", self.port) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def write(self, data: bytes) -> None:
        self.written += len(data)

    def writelines(self, data: Any) -> None:
        self.written += sum(len(chunk) for chunk in data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class _KeepingTransport(_Transport):
    """``_Transport`` keeping what is written, so a fuzzing script can read the answers."""

    def __init__(self, port: int) -> None:
        super().__init__(port)
        self.buffer = bytearray()

    def write(self, data: bytes) -> None:
        super().write(data)
        self.buffer += data

    def writelines(self, data: Any) -> None:
        for chunk in data:
            self.write(chunk)

    def has_frame(self) -> bool:
        return len(self.buffer) >= 4 and len(self.buffer) >= 4 + int.from_bytes(
            self.buffer[:4], "big"
        )


@dataclass
class Crash:
    kind: str
    api_key: int
    api_version: int
    mutation: str
    frame: bytes
    detail: str

    @property
    def signature(self) -> str:
        """Where it failed: the innermost frame of the traceback and the exception."""
        lines = [line.strip() for line in self.detail.strip().splitlines() if line.strip()]
        places = [line for line in lines if line.startswith("File ")]
        return f"{self.kind} {places[-1] if places else ''} {lines[-1] if lines else ''}"

    def describe(self) -> str:
        return (
            f"{self.kind}: {wire.api_name(self.api_key)} (key {self.api_key}) v{self.api_version}"
            f", {self.mutation}, frame {self.frame.hex()}\n{self.detail}"
        )


@dataclass
class Report:
    frames: int = 0
    per_key: Counter[int] = field(default_factory=Counter)
    per_version: Counter[tuple[int, int]] = field(default_factory=Counter)
    per_mutation: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    crashes: list[Crash] = field(default_factory=list)
    unencodable: Counter[tuple[int, int]] = field(default_factory=Counter)
    seconds: float = 0.0
    max_rss_kib: int = 0


class _CrashLog:
    """A structlog processor that keeps the crash events (with their traceback) and drops the
    rest (the fuzzer makes kemu log a warning per malformed frame)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []  # (peer, what happened)

    def __call__(self, _logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
        if event.get("event") in CRASH_EVENTS:
            detail = "".join(traceback.format_exception(*sys.exc_info()))
            self.events.append(
                (str(event.get("peer")), f"{event.get('event')} {event.get('api', '')}\n{detail}")
            )
        raise structlog.DropEvent


class Fuzzer:
    def __init__(self, server: KemuServer, seed: int, answer_timeout: float) -> None:
        self.server = server
        self.rng = random.Random(seed)
        self.answer_timeout = answer_timeout
        self.known = Known()
        self.generator = RequestGenerator(self.rng, self.known)
        self.crash_log = _CrashLog()
        self.loop_errors: list[str] = []
        self.report = Report()
        self.correlation = 0
        self.items: dict[str, tuple[int, int, str, bytes]] = {}  # peer -> the frame it sent
        self.versions = sorted(
            (key, version)
            for key, spec in REGISTRY.items()
            for version in range(spec.min_version, spec.max_version + 1)
        )

    def prepare(self) -> None:
        cluster = self.server.cluster
        for topic in TOPICS:
            if cluster.topics.get(topic) is None:
                cluster.create_topic(topic, 3, 1)
            self.known.topic_ids.append(cluster.topics[topic].topic_id)
        self.known.batches = [
            build_batch([(b"k", b"v")], timestamp_ms=int(time.time() * 1000)),
            build_batch([(None, b"v"), (b"k2", None)], timestamp_ms=0),
            build_batch(
                [(b"k", b"v")],
                timestamp_ms=0,
                producer_id=1000,
                producer_epoch=0,
                base_sequence=0,
            ),
            build_batch(
                [(b"k", b"v")],
                timestamp_ms=0,
                producer_id=1001,
                producer_epoch=0,
                base_sequence=0,
                transactional=True,
            ),
        ]
        structlog.configure(processors=[self.crash_log], cache_logger_on_first_use=False)
        asyncio.get_running_loop().set_exception_handler(self._loop_error)

    def _loop_error(self, _loop: Any, context: dict[str, Any]) -> None:
        error = context.get("exception")
        text = context.get("message", "")
        if error is not None:
            text += "\n" + "".join(traceback.format_exception(error))
        self.loop_errors.append(text)

    def frames(self, count: int) -> Iterator[tuple[int, int, str, bytes]]:
        """(api key, version, mutation, frame): versions in turn, so each gets its share."""
        for number in range(count):
            api_key, api_version = self.versions[number % len(self.versions)]
            how = self.rng.choice(MUTATIONS)
            try:
                body = self.generator.request(api_key, api_version)
                self.correlation += 1
                frame = wire.encode_request_frame(body, self.correlation, "fuzz")
            except Exception:
                # a generated value this version cannot carry (e.g. a null where the schema
                # has none): counted, and a neutral request stands in
                self.report.unencodable[(api_key, api_version)] += 1
                body = wire.build(wire.request_schema(api_key, api_version))
                frame = wire.encode_request_frame(body, self.correlation, "fuzz")
            yield api_key, api_version, how, mutate(frame, how, self.rng)

    async def run(self, count: int, concurrency: int) -> Report:
        began = time.monotonic()
        batch: list[tuple[int, int, str, bytes]] = []
        for item in self.frames(count):
            batch.append(item)
            if len(batch) >= concurrency:
                await self._try_all(batch)
                batch = []
        if batch:
            await self._try_all(batch)
        await self._still_serving()
        self.report.seconds = time.monotonic() - began
        self.report.max_rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return self.report

    async def _try_all(self, batch: list[tuple[int, int, str, bytes]]) -> None:
        tried = [self._try(*item) for item in batch]
        deadline = time.monotonic() + self.answer_timeout
        for connection, _transport, _item in tried:
            while connection._slots and not connection._closing and time.monotonic() < deadline:
                pending = [slot for slot in connection._slots if isinstance(slot, asyncio.Task)]
                if not pending:
                    break
                await asyncio.wait(pending, timeout=max(0.0, deadline - time.monotonic()))
                await asyncio.sleep(0)  # the scheduled flush
        for connection, transport, item in tried:
            self._settle(connection, transport, item)
        await self._reap(tried)

    def _try(
        self, api_key: int, api_version: int, how: str, frame: bytes
    ) -> tuple[Connection, _Transport, tuple[int, int, str, bytes]]:
        report = self.report
        report.frames += 1
        report.per_key[api_key] += 1
        report.per_version[(api_key, api_version)] += 1
        report.per_mutation[how] += 1
        item = (api_key, api_version, how, frame)
        node = self.server.cluster.nodes[self.rng.choice(list(self.server.cluster.nodes))]
        connection = Connection(node, self.server.runtime)
        transport = _Transport(report.frames)
        self.items[f"127.0.0.1:{report.frames}"] = item
        connection.connection_made(transport)  # type: ignore[arg-type]
        try:
            connection.data_received(frame)
            connection.eof_received()
        except Exception:
            self._crash("exception", item, traceback.format_exc())
        self._collect(item)
        return connection, transport, item

    def _settle(
        self, connection: Connection, transport: _Transport, item: tuple[int, int, str, bytes]
    ) -> None:
        pending = [
            slot for slot in connection._slots if isinstance(slot, asyncio.Task) and not slot.done()
        ]
        if pending:
            outcome = "waiting"
        elif transport.closed or connection._closing:
            outcome = "answered, closed" if transport.written else "closed"
        elif transport.written:
            outcome = "answered"
        else:
            outcome = "no answer"  # acks=0 Produce
        self.report.outcomes[outcome] += 1
        self._collect(item)

    async def _reap(self, tried: list[tuple[Connection, _Transport, Any]]) -> None:
        """Close every connection; whatever was still running must end within 5 s."""
        tasks: list[tuple[asyncio.Task[Any], tuple[int, int, str, bytes]]] = []
        for connection, _transport, item in tried:
            tasks.extend(
                (slot, item) for slot in connection._slots if isinstance(slot, asyncio.Task)
            )
            try:
                connection.connection_lost(None)
            except Exception:
                self._crash("exception", item, traceback.format_exc())
        if tasks:
            await asyncio.wait([task for task, _ in tasks], timeout=5)
        for task, item in tasks:
            if not task.done():
                self._crash("hang", item, "still running 5 s after its connection closed")
                task.cancel()
        await asyncio.sleep(0)
        for _connection, transport, item in tried:
            self._collect(item)
            self.items.pop(f"127.0.0.1:{transport.port}", None)

    def _collect(self, item: tuple[int, int, str, bytes]) -> None:
        while self.crash_log.events:
            peer, detail = self.crash_log.events.pop(0)
            self._crash("logged", self.items.get(peer, item), detail)
        while self.loop_errors:
            self._crash("loop", item, self.loop_errors.pop(0))

    def _crash(self, kind: str, item: tuple[int, int, str, bytes], detail: str) -> None:
        api_key, api_version, how, frame = item
        self.report.crashes.append(Crash(kind, api_key, api_version, how, frame, detail))

    async def _still_serving(self) -> None:
        """A valid ApiVersions and Metadata are answered after everything."""
        for api_key, api_version, body in (
            (18, 3, wire.build(wire.request_schema(18, 3))),
            (3, 12, wire.build(wire.request_schema(3, 12), topics=None)),
        ):
            frame = wire.encode_request_frame(body, 1, "fuzz")
            connection, transport, item = self._try(api_key, api_version, "valid", frame)
            self.report.frames -= 1  # not part of the fuzzing figures
            self.report.per_key[api_key] -= 1
            self.report.per_version[(api_key, api_version)] -= 1
            self.report.per_mutation["valid"] -= 1
            for _ in range(100):
                if transport.written:
                    break
                await asyncio.sleep(0.01)
            if not transport.written:
                self._crash("not serving", item, "no answer to a valid request after fuzzing")
            connection.connection_lost(None)


@contextlib.asynccontextmanager
async def fuzzing_server(data_dir: Path, config: dict[str, str] | None = None) -> Any:
    server = KemuServer(
        ServerOptions(
            brokers=3, port=0, data_dir=data_dir, config=BrokerConfig(dict(config or CONFIG))
        )
    )
    await server.start()
    load_handlers()
    try:
        yield server
    finally:
        await server.close()


async def fuzz(
    frames: int,
    seed: int,
    *,
    data_dir: Path,
    answer_timeout: float = 0.5,
    concurrency: int = 64,
) -> Report:
    """Run ``frames`` frames against a fresh in-process kemu on ``data_dir``."""
    logging_config = structlog.get_config()
    async with fuzzing_server(data_dir) as server:
        fuzzer = Fuzzer(server, seed, answer_timeout)
        fuzzer.prepare()
        try:
            return await fuzzer.run(frames, concurrency)
        finally:
            structlog.configure(**logging_config)


def print_report(report: Report, out: Callable[[str], None] = print) -> None:
    keys = sorted(report.per_key)
    versions = len(report.per_version)
    out(
        f"frames tried: {report.frames} over {len(keys)} API keys, {versions} (key, version) "
        f"pairs, in {report.seconds:.1f} s ({report.frames / max(report.seconds, 1e-9):.0f}/s)"
    )
    out("mutations: " + ", ".join(f"{k} {v}" for k, v in sorted(report.per_mutation.items())))
    out("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(report.outcomes.items())))
    out("per key: " + ", ".join(f"{wire.api_name(k)}({k}) {report.per_key[k]}" for k in keys))
    if report.unencodable:
        out(f"generated requests replaced by a neutral one: {sum(report.unencodable.values())}")
    out(f"max RSS: {report.max_rss_kib / 1024:.1f} MiB")
    out(f"crashes: {len(report.crashes)}")
    kinds: dict[str, list[Crash]] = {}
    for crash in report.crashes:
        kinds.setdefault(crash.signature, []).append(crash)
    for signature, crashes in kinds.items():
        pairs = sorted({(c.api_key, c.api_version) for c in crashes})
        out(f"--- {len(crashes)} x {signature}\n    (key, version): {pairs[:12]}")
        out(crashes[0].describe())


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz", description=__doc__)
    parser.add_argument("--frames", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--answer-timeout", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--sasl",
        type=int,
        default=0,
        metavar="N",
        help="also N connections to SASL listeners (bench/fuzz_sasl.py)",
    )
    parser.add_argument(
        "--records",
        type=int,
        default=0,
        metavar="N",
        help="also N Produce requests with mutated batch contents (bench/fuzz_records.py)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    crashes = 0
    if args.frames:
        with tempfile.TemporaryDirectory(prefix="kemu-fuzz-") as data_dir:
            report = asyncio.run(
                fuzz(
                    args.frames,
                    args.seed,
                    data_dir=Path(data_dir),
                    answer_timeout=args.answer_timeout,
                    concurrency=args.concurrency,
                )
            )
        print_report(report)
        crashes += len(report.crashes)
    if args.sasl:
        from bench.fuzz_sasl import fuzz_sasl, print_sasl_report

        with tempfile.TemporaryDirectory(prefix="kemu-fuzz-sasl-") as data_dir:
            sasl = asyncio.run(
                fuzz_sasl(
                    args.sasl,
                    args.seed,
                    data_dir=Path(data_dir),
                    answer_timeout=args.answer_timeout,
                )
            )
        print_sasl_report(sasl)
        crashes += len(sasl.crashes)
    if args.records:
        from bench.fuzz_records import fuzz_records, print_record_report

        with tempfile.TemporaryDirectory(prefix="kemu-fuzz-records-") as data_dir:
            records = asyncio.run(fuzz_records(args.records, args.seed, data_dir=Path(data_dir)))
        print_record_report(records)
        crashes += len(records.crashes)
    sys.exit(1 if crashes else 0)


if __name__ == "__main__":
    main()
