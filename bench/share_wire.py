"""The share-window scaling run through the wire: kemu serving, a lean share consumer in Python.

For each window W a fresh ``kemu serve`` (on disk, as ``bench.run`` starts it) gets
``group.share.partition.max.record.locks=W`` and a topic of ``records`` small records in 10-record
batches. One share-group member (raw ShareGroupHeartbeat and ShareFetch requests) acquires until
W records are in flight, then each ShareFetch acknowledges (ACCEPT, piggy-backed) the oldest
``step`` records and acquires ``step`` new ones, so the window stays at W. The figure is kemu's
CPU time per acquired+acknowledged record, read from /proc (other load on the machine barely
moves it), plus the wall-clock rate. Two acknowledgement shapes:

* range: one AcknowledgementBatch per step (the oldest ``step`` records);
* record: one AcknowledgementBatch per record, as a client acknowledging records one by one
  sends them.
"""

from __future__ import annotations

import collections
import contextlib
import socket
import struct
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kemu.protocol import wire
from kemu.protocol.records import build_batch

PRODUCE, METADATA, INCREMENTAL_ALTER_CONFIGS = 0, 3, 44
SHARE_GROUP_HEARTBEAT, SHARE_FETCH = 76, 78
GROUP_RESOURCE, SET, ACCEPT = 32, 0, 1
BATCH_RECORDS = 10
GROUP = "bench-window"
TOPIC = "bench-window"


@dataclass(frozen=True)
class WireResult:
    window: int
    shape: str
    records: int  # acquired and acknowledged in the measured steps
    cpu_us_per_record: float
    records_per_s: float
    requests: int


class ShareClient:
    """One connection; requests are built with kemu's own encoder at any version."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation = 0

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        self.correlation += 1
        body = wire.build(wire.request_schema(api_key, version), **fields)
        self.sock.sendall(wire.encode_request_frame(body, self.correlation, "bench-window"))
        size = struct.unpack(">i", self._read(4))[0]
        correlation, response = wire.decode_response(api_key, version, self._read(size))
        if correlation != self.correlation:
            raise RuntimeError(f"answer {correlation} to request {self.correlation}")
        return response

    def nested(self, api_key: int, version: int, class_name: str, **fields: Any) -> Any:
        schema = wire.request_schema(api_key, version)
        return wire.build(getattr(sys.modules[schema.__module__], class_name), **fields)

    def _read(self, count: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < count:
            chunk = self.sock.recv(count - len(chunks))
            if not chunk:
                raise ConnectionError("kemu closed the connection")
            chunks += chunk
        return bytes(chunks)

    def close(self) -> None:
        self.sock.close()


def _millis(ms: int) -> Any:
    import datetime

    return datetime.timedelta(milliseconds=ms)


def fill_topic(client: ShareClient, records: int, value_size: int) -> uuid.UUID:
    """Create the topic (auto-created by Metadata) and produce ``records`` records."""
    meta = client.call(
        METADATA,
        12,
        topics=(client.nested(METADATA, 12, "MetadataRequestTopic", name=TOPIC, topic_id=None),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    topic_id = meta.topics[0].topic_id
    batch = build_batch([(None, b"v" * value_size)] * BATCH_RECORDS, timestamp_ms=0)
    partition = client.nested(PRODUCE, 12, "PartitionProduceData", index=0, records=batch)
    data = client.nested(PRODUCE, 12, "TopicProduceData", name=TOPIC, partition_data=(partition,))
    for _ in range(records // BATCH_RECORDS):
        answer = client.call(PRODUCE, 12, acks=1, timeout=_millis(30_000), topic_data=(data,))
        code = answer.responses[0].partition_responses[0].error_code
        if code != 0:
            raise RuntimeError(f"produce failed: {code!r}")
    return topic_id  # type: ignore[no-any-return]


def start_from_earliest(client: ShareClient) -> None:
    config = client.nested(
        INCREMENTAL_ALTER_CONFIGS,
        1,
        "AlterableConfig",
        name="share.auto.offset.reset",
        config_operation=SET,
        value="earliest",
    )
    resource = client.nested(
        INCREMENTAL_ALTER_CONFIGS,
        1,
        "AlterConfigsResource",
        resource_type=GROUP_RESOURCE,
        resource_name=GROUP,
        configs=(config,),
    )
    answer = client.call(INCREMENTAL_ALTER_CONFIGS, 1, resources=(resource,), validate_only=False)
    if answer.responses[0].error_code != 0:
        raise RuntimeError(f"group config refused: {answer.responses[0].error_code!r}")


def join(client: ShareClient, member: str) -> None:
    answer = client.call(
        SHARE_GROUP_HEARTBEAT,
        1,
        group_id=GROUP,
        member_id=member,
        member_epoch=0,
        rack_id=None,
        subscribed_topic_names=(TOPIC,),
    )
    if answer.error_code != 0 or answer.assignment is None:
        raise RuntimeError(f"join failed: {answer.error_code!r}")


class Member:
    """One share session on partition 0: acquired ranges in order, oldest first."""

    def __init__(self, client: ShareClient, topic_id: uuid.UUID, member: str) -> None:
        self.client = client
        self.topic_id = topic_id
        self.member = member
        self.epoch = 0
        self.held: collections.deque[list[int]] = collections.deque()  # [first, last]
        self.in_flight = 0
        self.requests = 0

    def fetch(self, acknowledge: list[tuple[int, int]], max_records: int) -> int:
        """Send the acknowledgements (ACCEPT), acquire up to ``max_records``; returns how many."""
        client = self.client
        acks = tuple(
            client.nested(
                SHARE_FETCH,
                1,
                "AcknowledgementBatch",
                first_offset=first,
                last_offset=last,
                acknowledge_types=(ACCEPT,),
            )
            for first, last in acknowledge
        )
        partition = client.nested(
            SHARE_FETCH, 1, "FetchPartition", partition_index=0, acknowledgement_batches=acks
        )
        topic = client.nested(
            SHARE_FETCH, 1, "FetchTopic", topic_id=self.topic_id, partitions=(partition,)
        )
        answer = client.call(
            SHARE_FETCH,
            1,
            group_id=GROUP,
            member_id=self.member,
            share_session_epoch=self.epoch,
            max_wait=_millis(500),
            min_bytes=1,
            max_bytes=64 << 20,
            max_records=max_records,
            batch_size=max_records,
            topics=(topic,),
            forgotten_topics_data=(),
        )
        self.requests += 1
        self.epoch += 1
        if answer.error_code != 0:
            raise RuntimeError(f"ShareFetch failed: {answer.error_code!r}")
        data = answer.responses[0].partitions[0]
        if data.error_code != 0 or data.acknowledge_error_code != 0:
            raise RuntimeError(
                f"ShareFetch partition: {data.error_code!r}, ack {data.acknowledge_error_code}"
            )
        count = 0
        for acquired in data.acquired_records:
            self.held.append([acquired.first_offset, acquired.last_offset])
            count += acquired.last_offset - acquired.first_offset + 1
        self.in_flight += count
        return count

    def oldest(self, count: int) -> list[tuple[int, int]]:
        """Take the oldest ``count`` held records off the window, as (first, last) ranges."""
        taken: list[tuple[int, int]] = []
        while count:
            head = self.held[0]
            last = min(head[1], head[0] + count - 1)
            taken.append((head[0], last))
            count -= last - head[0] + 1
            if last == head[1]:
                self.held.popleft()
            else:
                head[0] = last + 1
        self.in_flight -= sum(last - first + 1 for first, last in taken)
        return taken


def measure(
    window: int, *, steps: int, step: int, value_size: int = 100, profile: Path | None = None
) -> list[WireResult]:
    """Both shapes at ``window``, each on a fresh kemu (one share group per server)."""
    from bench.probe import cpu_seconds
    from bench.servers import KemuServer

    results = []
    for shape in ("range", "record"):
        root = Path(tempfile.mkdtemp(prefix=f"share-wire-{window}-"))
        server = KemuServer(
            root,
            partitions=1,
            overrides=(
                f"group.share.partition.max.record.locks={window}",
                f"group.share.max.partition.max.record.locks={max(window, 2000)}",
            ),
        )
        server.start()
        try:
            client = ShareClient("127.0.0.1", server.port)
            topic_id = fill_topic(client, window + (steps + 2) * step, value_size)
            start_from_earliest(client)
            member = uuid.uuid4().hex
            join(client, member)
            reader = Member(client, topic_id, member)
            while reader.in_flight < window:
                if not reader.fetch([], window - reader.in_flight):
                    raise RuntimeError(f"the window stopped at {reader.in_flight} of {window}")
            requests_before = reader.requests
            cpu, started = cpu_seconds(server.pid), time.monotonic()
            with _maybe_profile(profile, server.pid, f"share-wire-{window}-{shape}"):
                for _ in range(steps):
                    ranges = reader.oldest(step)
                    if shape == "record":
                        ranges = [(o, o) for first, last in ranges for o in range(first, last + 1)]
                    if reader.fetch(ranges, step) != step:
                        raise RuntimeError("a step acquired fewer records than it acknowledged")
            cpu_s, wall_s = cpu_seconds(server.pid) - cpu, time.monotonic() - started
            done = steps * step
            results.append(
                WireResult(
                    window,
                    shape,
                    done,
                    cpu_s / done * 1e6,
                    done / wall_s,
                    reader.requests - requests_before,
                )
            )
            client.close()
        finally:
            server.stop()
            import shutil

            shutil.rmtree(root, ignore_errors=True)
    return results


def _maybe_profile(
    directory: Path | None, pid: int, name: str
) -> contextlib.AbstractContextManager[None]:
    if directory is None:
        return contextlib.nullcontext()
    from bench.profiling import recording

    return recording(pid, directory / f"{name}.txt", rate=500)


def iterate_windows(windows: tuple[int, ...], **kwargs: Any) -> Iterator[WireResult]:
    for window in windows:
        yield from measure(window, **kwargs)
