"""``python -m bench.loadgen``: kemu's CPU cost per produce request and per fetched MiB.

A lean Python client pipelines identical Produce requests (one batch of ``--batch-records``
records per request, ``--in-flight`` outstanding, like the Java producer with one partition),
then fetches everything back. The figure that matters is the server's CPU time per request, read
from /proc, which other load on the machine barely moves; the JVM tools in ``bench.run`` are
the end-to-end measure.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kemu.protocol import wire
from kemu.protocol.records import build_batch

PRODUCE, FETCH, METADATA = 0, 1, 3
VERSION = 12  # by topic name: the load generator needs no topic ids


def _nested(api_key: int, class_name: str, **values: Any) -> Any:
    schema = wire.request_schema(api_key, VERSION)
    return wire.build(getattr(sys.modules[schema.__module__], class_name), **values)


def _request(api_key: int, **values: Any) -> Any:
    return wire.build(wire.request_schema(api_key, VERSION), **values)


class Client:
    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = bytearray()

    def send(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def receive(self) -> bytes:
        while True:
            if len(self.buffer) >= 4:
                size = struct.unpack_from(">i", self.buffer, 0)[0]
                if len(self.buffer) >= 4 + size:
                    payload = bytes(self.buffer[4 : 4 + size])
                    del self.buffer[: 4 + size]
                    return payload
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buffer += chunk

    def call(self, api_key: int, body: Any, correlation_id: int) -> Any:
        self.send(wire.encode_request_frame(body, correlation_id))
        return wire.decode_response(api_key, VERSION, self.receive())[1]


def produce_frame(topic: str, records: int, record_size: int) -> bytes:
    value = b"x" * record_size
    batch = build_batch([(None, value)] * records, timestamp_ms=int(time.time() * 1000))
    partition = _nested(PRODUCE, "PartitionProduceData", index=0, records=batch)
    topic_data = _nested(PRODUCE, "TopicProduceData", name=topic, partition_data=(partition,))
    body = _request(PRODUCE, acks=-1, timeout=_timedelta(30_000), topic_data=(topic_data,))
    return wire.encode_request_frame(body, correlation_id=0)


def _timedelta(ms: int) -> Any:
    import datetime

    return datetime.timedelta(milliseconds=ms)


def produce(client: Client, frame: bytes, requests: int, in_flight: int) -> None:
    template = bytearray(frame)
    sent = received = 0
    while received < requests:
        while sent < requests and sent - received < in_flight:
            struct.pack_into(">i", template, 8, sent + 1)  # correlation id after size+key+version
            client.send(bytes(template))
            sent += 1
        _, response = wire.decode_response(PRODUCE, VERSION, client.receive())
        code = response.responses[0].partition_responses[0].error_code
        if code != 0:
            raise RuntimeError(f"produce failed: {code!r}")
        received += 1


def fetch_all(client: Client, topic: str, end_offset: int, records_per_batch: int) -> int:
    offset = 0
    fetched = 0
    correlation_id = 1_000_000
    while offset < end_offset:
        partition = _nested(
            FETCH, "FetchPartition", partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
        )
        fetch_topic = _nested(FETCH, "FetchTopic", topic=topic, partitions=(partition,))
        body = _request(
            FETCH,
            max_wait=_timedelta(500),
            replica_id=-1,
            max_bytes=50 << 20,
            min_bytes=1,
            session_id=0,
            session_epoch=-1,
            topics=(fetch_topic,),
        )
        correlation_id += 1
        response = client.call(FETCH, body, correlation_id)
        records = response.responses[0].partitions[0].records or b""
        if not records:
            raise RuntimeError(f"fetch at {offset} returned nothing")
        fetched += len(records)
        offset += _records_in(records)
    return fetched


def _records_in(records: bytes) -> int:
    count = 0
    position = 0
    while position + 61 <= len(records):
        length = struct.unpack_from(">i", records, position + 8)[0]
        count += struct.unpack_from(">i", records, position + 57)[0]
        position += 12 + length
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.loadgen", description=__doc__)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--batch-records", type=int, default=15)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--in-flight", type=int, default=5)
    parser.add_argument("--memory", action="store_true", help="kemu without --data-dir")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy both phases into DIR")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)

    from bench.probe import cpu_split
    from bench.servers import KemuServer

    root = Path(tempfile.mkdtemp(prefix="loadgen-"))
    server = KemuServer(root, partitions=1)
    if args.memory:
        server.in_memory = True
    server.start()
    try:
        client = Client("127.0.0.1", server.port)
        topic = "loadgen"
        meta = _request(
            METADATA,
            topics=(_nested(METADATA, "MetadataRequestTopic", name=topic),),
            allow_auto_topic_creation=True,
        )
        client.call(METADATA, meta, 1)
        frame = produce_frame(topic, args.batch_records, args.record_size)
        phases: list[tuple[str, float, float, float]] = []
        cpu, started = server.cpu_seconds(), time.monotonic()
        split = cpu_split(server.pid)
        with _maybe_profile(args.profile, server.pid, "produce"):
            produce(client, frame, args.requests, args.in_flight)
        after = cpu_split(server.pid)
        user, system = after[0] - split[0], after[1] - split[1]
        phases.append(("produce", server.cpu_seconds() - cpu, time.monotonic() - started, 0.0))
        cpu, started = server.cpu_seconds(), time.monotonic()
        with _maybe_profile(args.profile, server.pid, "fetch"):
            fetched = fetch_all(client, topic, args.requests * args.batch_records, 1)
        phases.append(("fetch", server.cpu_seconds() - cpu, time.monotonic() - started, fetched))
        memory = server.memory()
    finally:
        server.stop()
        if not args.keep:
            import shutil

            shutil.rmtree(root, ignore_errors=True)  # ~500 MiB of log per run
    produce_cpu, produce_wall = phases[0][1], phases[0][2]
    fetch_cpu, fetch_wall, fetched_bytes = phases[1][1], phases[1][2], phases[1][3]
    mib = fetched_bytes / (1 << 20)
    print(
        f"produce: {args.requests} requests in {produce_wall:.2f}s "
        f"({args.requests / produce_wall:,.0f} req/s), "
        f"server CPU {produce_cpu:.2f}s = {produce_cpu / args.requests * 1e6:.0f} us/request "
        f"({user / args.requests * 1e6:.0f} user + {system / args.requests * 1e6:.0f} system)"
    )
    print(
        f"fetch: {mib:,.0f} MiB in {fetch_wall:.2f}s ({mib / fetch_wall:,.0f} MiB/s), "
        f"server CPU {fetch_cpu:.2f}s = {fetch_cpu / mib * 1e3:.2f} ms/MiB"
    )
    print(f"server RSS {memory.rss_mb:.0f} MiB, peak {memory.peak_mb:.0f} MiB")
    return 0


def _maybe_profile(directory: Path | None, pid: int, phase: str) -> Any:
    import contextlib

    if directory is None:
        return contextlib.nullcontext()
    from bench.profiling import recording

    return recording(pid, directory / f"loadgen-{phase}.txt", rate=500)


if __name__ == "__main__":
    sys.exit(main())
