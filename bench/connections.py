"""``python -m bench.connections``: many concurrent client connections to one server.

    .venv/bin/python -m bench.connections                  # kemu
    .venv/bin/python -m bench.connections --server kafka   # Apache Kafka 4.4.0, same client

A lean asyncio client on ``kemu.protocol`` (everything on 127.0.0.1, one process) measures:

1. **10 connections** producing (acks=all, one 10-record batch of 100-byte records per request,
   one request in flight per connection) at ``--rate`` requests a second in total, for
   ``--seconds``: the produce latency percentiles.
2. **1,000 connections**: ``--idle`` idle ones (ApiVersions and Metadata, then silent) and
   ``--active`` producing at the same total rate, so the server does the same work with 100x the
   connections; the p99 should stay within 2x of phase 1. Every idle one must still answer an
   ApiVersions at the end.
3. **10,000 idle connections** (``--many``) opened and held: the server's RSS before and after,
   RSS per connection, and every connection answering an ApiVersions.

Latency is taken from each request's scheduled send time (not from when it was sent), so a
stalled server shows up in the figure instead of slowing the schedule down. Connections are
opened ``--connect-concurrency`` at a time; the time to open them all and the slowest handshake
are reported (an accept loop that stalls shows there). This process raises its own open-file
limit to the hard limit (``ulimit -Hn``) with ``resource.setrlimit``; the server is started before
that, with the limit it would have had anyway.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import statistics
import struct
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kemu.protocol import wire
from kemu.protocol.records import build_batch

PRODUCE, METADATA, API_VERSIONS = 0, 3, 18
VERSION = 12  # Produce and Metadata by topic name
TOPIC = "connections"
PARTITIONS = 10
API_VERSIONS_V0 = struct.pack(">hhih", API_VERSIONS, 0, 1, 5) + b"bench"


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _nested(api_key: int, class_name: str, **values: Any) -> Any:
    schema = wire.request_schema(api_key, VERSION)
    return wire.build(getattr(sys.modules[schema.__module__], class_name), **values)


def _millis(ms: int) -> Any:
    import datetime

    return datetime.timedelta(milliseconds=ms)


def metadata_frame() -> bytes:
    body = wire.build(
        wire.request_schema(METADATA, VERSION),
        topics=(_nested(METADATA, "MetadataRequestTopic", name=TOPIC),),
        allow_auto_topic_creation=True,
    )
    return wire.encode_request_frame(body, correlation_id=2)


def produce_frame(partition: int) -> bytes:
    batch = build_batch([(None, b"x" * 100)] * 10, timestamp_ms=int(time.time() * 1000))
    data = _nested(PRODUCE, "PartitionProduceData", index=partition, records=batch)
    topic = _nested(PRODUCE, "TopicProduceData", name=TOPIC, partition_data=(data,))
    body = wire.build(
        wire.request_schema(PRODUCE, VERSION), acks=-1, timeout=_millis(30_000), topic_data=(topic,)
    )
    return wire.encode_request_frame(body, correlation_id=0)


class Conn:
    """One client connection: frames out, whole frames in, one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.correlation = 100

    async def call(self, frame: bytes) -> bytes:
        self.writer.write(frame)
        size = struct.unpack(">i", await self.reader.readexactly(4))[0]
        return await self.reader.readexactly(size)

    def close(self) -> None:
        self.writer.close()


async def open_conn(host: str, port: int, metadata: bytes) -> tuple[Conn, float]:
    """Connect, ApiVersions, Metadata (as a client does before it idles or produces)."""
    began = time.monotonic()
    reader, writer = await asyncio.open_connection(host, port)
    conn = Conn(reader, writer)
    answer = await conn.call(_frame(API_VERSIONS_V0))
    if struct.unpack_from(">ih", answer, 0) != (1, 0):
        raise RuntimeError("ApiVersions failed")
    await conn.call(metadata)
    return conn, time.monotonic() - began


@dataclass
class Opened:
    conns: list[Conn]
    failures: dict[str, int]
    seconds: float
    slowest_s: float
    listen_overflows: int  # backlog-full drops while these were opened (system-wide)


async def open_many(host: str, port: int, count: int, concurrency: int) -> Opened:
    metadata = metadata_frame()
    gate = asyncio.Semaphore(concurrency)
    failures: dict[str, int] = {}

    async def one() -> tuple[Conn, float] | None:
        async with gate:
            try:
                return await asyncio.wait_for(open_conn(host, port, metadata), 60)
            except Exception as error:
                name = type(error).__name__
                failures[name] = failures.get(name, 0) + 1
                return None

    overflows = listen_overflows()
    began = time.monotonic()
    results = await asyncio.gather(*(one() for _ in range(count)))
    opened = [result for result in results if result is not None]
    return Opened(
        [conn for conn, _ in opened],
        failures,
        time.monotonic() - began,
        max((took for _, took in opened), default=0.0),
        listen_overflows() - overflows,
    )


async def all_answer(conns: list[Conn], concurrency: int) -> int:
    """How many of ``conns`` answer an ApiVersions now."""
    gate = asyncio.Semaphore(concurrency)

    async def ping(conn: Conn) -> bool:
        async with gate:
            try:
                answer = await asyncio.wait_for(conn.call(_frame(API_VERSIONS_V0)), 60)
            except Exception:
                return False
            return bool(struct.unpack_from(">ih", answer, 0) == (1, 0))

    return sum(await asyncio.gather(*(ping(conn) for conn in conns)))


@dataclass
class Latencies:
    scheduled: list[float]  # ms from each request's scheduled send time to its answer
    sent: list[float]  # ms from when it was actually sent


async def produce_load(conns: list[Conn], rate: float, seconds: float) -> Latencies:
    """Each connection produces at ``rate / len(conns)`` requests a second, one in flight."""
    per_conn_interval = len(conns) / rate
    latencies = Latencies([], [])
    errors: list[int] = []

    async def run(index: int, conn: Conn) -> None:
        template = bytearray(produce_frame(index % PARTITIONS))
        scheduled = time.monotonic() + random.uniform(0, per_conn_interval)
        end = time.monotonic() + seconds
        while scheduled < end:
            pause = scheduled - time.monotonic()
            if pause > 0:
                await asyncio.sleep(pause)
            conn.correlation += 1
            struct.pack_into(">i", template, 8, conn.correlation)
            sent = time.monotonic()
            answer = await conn.call(bytes(template))
            answered = time.monotonic()
            latencies.scheduled.append((answered - scheduled) * 1000)
            latencies.sent.append((answered - sent) * 1000)
            _, response = wire.decode_response(PRODUCE, VERSION, answer)
            code = response.responses[0].partition_responses[0].error_code
            if code != 0:
                errors.append(int(code))
            scheduled += per_conn_interval

    await asyncio.gather(*(run(index, conn) for index, conn in enumerate(conns)))
    if errors:
        raise RuntimeError(f"{len(errors)} produce errors, e.g. {errors[:5]}")
    return latencies


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def describe(latencies: Latencies) -> str:
    scheduled, sent = latencies.scheduled, latencies.sent
    return (
        f"{len(scheduled)} requests, from schedule p50 {statistics.median(scheduled):.2f} ms "
        f"p99 {percentile(scheduled, 0.99):.2f} ms max {max(scheduled):.2f} ms, from send p50 "
        f"{statistics.median(sent):.2f} ms p99 {percentile(sent, 0.99):.2f} ms"
    )


def raise_fd_limit() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def listen_overflows() -> int:
    """The kernel's count of connections dropped because a listen backlog was full (all
    sockets of the network namespace: other work on the machine adds to it)."""
    lines = Path("/proc/net/netstat").read_text().splitlines()
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        fields = dict(zip(names.split(), values.split(), strict=False))
        if "ListenOverflows" in fields:
            return int(fields["ListenOverflows"])
    return 0


def fd_count(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


async def measure(args: argparse.Namespace, server: Any) -> None:
    from bench.probe import memory_of

    host, port = "127.0.0.1", server.port

    def state() -> str:
        return f"server RSS {memory_of(server.pid).rss_mb:.1f} MiB, fds {fd_count(server.pid)}"

    async def load(conns: list[Conn]) -> tuple[Latencies, float]:
        """Latencies, and server CPU microseconds per request (which other load on the
        machine barely moves)."""
        cpu = server.cpu_seconds()
        latencies = await produce_load(conns, args.rate, args.seconds)
        return latencies, (server.cpu_seconds() - cpu) / len(latencies.sent) * 1e6

    # a warm-up: the topic exists and every handler kemu lazily imports is in
    # (Kafka creates the topic asynchronously: produce fails until its partitions have leaders)
    for attempt in range(60):
        warm = await open_many(host, port, 1, 1)
        try:
            await produce_load(warm.conns, 20, 1.0)
            break
        except RuntimeError:
            if attempt == 59:
                raise
            await asyncio.sleep(1)
        finally:
            for conn in warm.conns:
                conn.close()
    print(f"at start: {state()}", flush=True)

    if args.warmup_seconds:  # the JVM compiles its hot paths; kemu imports nothing more
        warm = await open_many(host, port, 10, 10)
        await produce_load(warm.conns, args.rate, args.warmup_seconds)
        for conn in warm.conns:
            conn.close()
    ratios: list[float] = []
    sent_ratios: list[float] = []
    for round_number in range(1, args.rounds + 1):
        base = await open_many(host, port, 10, 10)
        base_latencies, base_cpu = await load(base.conns)
        for conn in base.conns:
            conn.close()
        print(
            f"round {round_number}: 10 connections at {args.rate:g} req/s: "
            f"{describe(base_latencies)}, server CPU {base_cpu:.0f} us/request",
            flush=True,
        )
        idle = await open_many(host, port, args.idle, args.connect_concurrency)
        active = await open_many(host, port, args.active, args.connect_concurrency)
        total = len(idle.conns) + len(active.conns)
        failures = {**idle.failures, **active.failures}
        print(
            f"round {round_number}: {total} connections open (failures {failures}) in "
            f"{idle.seconds + active.seconds:.1f} s, slowest handshake "
            f"{max(idle.slowest_s, active.slowest_s) * 1000:.0f} ms, listen overflows "
            f"{idle.listen_overflows + active.listen_overflows}; {state()}",
            flush=True,
        )
        many_latencies, many_cpu = await load(active.conns)
        ratio = percentile(many_latencies.scheduled, 0.99) / percentile(
            base_latencies.scheduled, 0.99
        )
        sent_ratio = percentile(many_latencies.sent, 0.99) / percentile(base_latencies.sent, 0.99)
        ratios.append(ratio)
        sent_ratios.append(sent_ratio)
        answered = await all_answer(idle.conns, args.connect_concurrency)
        print(
            f"round {round_number}: {len(active.conns)} of {total} producing at {args.rate:g} "
            f"req/s: {describe(many_latencies)}, server CPU {many_cpu:.0f} us/request; p99 "
            f"{ratio:.2f}x (from send {sent_ratio:.2f}x) the 10-connection one; idle ones "
            f"answering {answered}/"
            f"{len(idle.conns)}",
            flush=True,
        )
        for conn in idle.conns + active.conns:
            conn.close()
        await asyncio.sleep(args.settle_seconds)  # let the server see the closes
    print(
        f"p99 ratio, median of {len(ratios)} rounds: {statistics.median(ratios):.2f}x from "
        f"schedule, {statistics.median(sent_ratios):.2f}x from send",
        flush=True,
    )

    before = memory_of(server.pid).rss_mb
    fds_before = fd_count(server.pid)
    many = await open_many(host, port, args.many, args.connect_concurrency)
    await asyncio.sleep(args.settle_seconds)
    after = memory_of(server.pid).rss_mb
    fds_after = fd_count(server.pid)
    answered = await all_answer(many.conns, args.connect_concurrency)
    per_conn_kib = (after - before) * 1024 / max(1, len(many.conns))
    print(
        f"{len(many.conns)} idle connections held (failures {many.failures}), opened in "
        f"{many.seconds:.1f} s, slowest handshake {many.slowest_s * 1000:.0f} ms, listen "
        f"overflows {many.listen_overflows}; server fds {fds_before} -> {fds_after}; RSS "
        f"{before:.1f} -> {after:.1f} MiB = {per_conn_kib:.1f} KiB per connection; answering "
        f"{answered}/{len(many.conns)}; peak RSS {memory_of(server.pid).peak_mb:.1f} MiB",
        flush=True,
    )
    for conn in many.conns:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.connections", description=__doc__)
    parser.add_argument("--server", choices=("kemu", "kafka"), default="kemu")
    parser.add_argument("--rate", type=float, default=500.0, help="produce requests/s in total")
    parser.add_argument("--seconds", type=float, default=20.0, help="each produce phase")
    parser.add_argument("--idle", type=int, default=900)
    parser.add_argument("--active", type=int, default=100)
    parser.add_argument("--many", type=int, default=10_000, help="idle connections, phase 3")
    parser.add_argument("--connect-concurrency", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="10- then 1,000-connection runs")
    parser.add_argument("--warmup-seconds", type=float, default=10.0)
    parser.add_argument(
        "--settle-seconds",
        type=float,
        default=2.0,
        help="wait after closing or opening connections before counting the server's fds/RSS",
    )
    args = parser.parse_args(argv)

    from bench.servers import make_server

    root = Path(tempfile.mkdtemp(prefix="connections-"))
    server = make_server(args.server, root / args.server, PARTITIONS)
    server.start()  # before raising our limit: the server keeps the one it would have had
    try:
        limit = raise_fd_limit()
        server_limit = _server_fd_limit(server.pid)
        print(f"{args.server}: client open-file limit {limit}, server's {server_limit}")
        try:
            import uvloop

            uvloop.run(measure(args, server))
        except ImportError:
            asyncio.run(measure(args, server))
    finally:
        server.stop()
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    return 0


def _server_fd_limit(pid: int) -> str:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return "/".join(line.split()[3:5])  # soft/hard
    return "?"


if __name__ == "__main__":
    sys.exit(main())
