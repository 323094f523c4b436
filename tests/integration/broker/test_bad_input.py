"""Bad input against a live kemu, over raw sockets.

The guarantees: a frame that cannot be a Kafka request closes that connection only, with one
structured log line naming the peer; other connections and the process carry on (a real client
keeps producing and consuming through it); bad records and bad topic or partition names get
Kafka's per-partition error codes and leave the log untouched; no memory or file descriptors
pile up across many malformed connections.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
import struct
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from confluent_kafka import Consumer, Producer, TopicPartition
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.testing.plugin import KemuProcess

pytestmark = [pytest.mark.integration, pytest.mark.process]

MAX_REQUEST_BYTES = 262_144
PARTITIONS = 3
TIMEOUT = 15.0


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KemuProcess]:
    log_path = tmp_path_factory.mktemp("bad-input") / "kemu.log"
    process = KemuProcess(
        brokers=3,
        log_path=log_path,
        overrides=[
            f"socket.request.max.bytes={MAX_REQUEST_BYTES}",
            f"num.partitions={PARTITIONS}",
        ],
        extra_args=["--json-logs"],
    ).start()
    yield process
    process.stop()


# --- a tiny raw client -----------------------------------------------------------------------


def address(broker: str) -> tuple[str, int]:
    host, port = broker.rsplit(":", 1)
    return host, int(port)


def connect(broker: str) -> socket.socket:
    sock = socket.create_connection(address(broker), timeout=TIMEOUT)
    sock.settimeout(TIMEOUT)
    return sock


def peer_name(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"{host}:{port}"


def read_exactly(sock: socket.socket, count: int) -> bytes:
    chunks = []
    while count:
        chunk = sock.recv(count)
        if not chunk:
            raise ConnectionError("closed by kemu")
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket) -> bytes:
    (size,) = wire.SIZE.unpack(read_exactly(sock, 4))
    return read_exactly(sock, size)


def call(sock: socket.socket, body: Any, correlation_id: int = 1) -> Any:
    sock.sendall(wire.encode_request_frame(body, correlation_id, "bad-input-test"))
    got, response = wire.decode_response(body.__api_key__, body.__version__, read_frame(sock))
    assert got == correlation_id
    return response


def request(api_key: int, version: int, **fields: Any) -> Any:
    return wire.build(wire.request_schema(api_key, version), **fields)


def nested(api_key: int, version: int, class_name: str, /, **fields: Any) -> Any:
    module = sys.modules[wire.request_schema(api_key, version).__module__]
    return wire.build(getattr(module, class_name), **fields)


def api_versions_request(version: int = 3) -> Any:
    return request(18, version, client_software_name="kemu-test", client_software_version="1")


def metadata_request(topics: list[str] | None, version: int = 12) -> Any:
    entries = (
        None
        if topics is None
        else tuple(nested(3, version, "MetadataRequestTopic", name=t) for t in topics)
    )
    return request(3, version, topics=entries, allow_auto_topic_creation=True)


def produce_request(
    topic: str, partitions: dict[int, bytes | None], *, acks: int = -1, version: int = 9
) -> Any:
    data = tuple(
        nested(0, version, "PartitionProduceData", index=index, records=records)
        for index, records in partitions.items()
    )
    return request(
        0,
        version,
        acks=acks,
        timeout=datetime.timedelta(seconds=10),
        transactional_id=None,
        topic_data=(nested(0, version, "TopicProduceData", name=topic, partition_data=data),),
    )


def list_offsets_request(topic: str, partitions: list[int], version: int = 7) -> Any:
    entries = tuple(
        nested(2, version, "ListOffsetsPartition", partition_index=p, timestamp=-1)
        for p in partitions
    )
    return request(
        2,
        version,
        replica_id=-1,
        topics=(nested(2, version, "ListOffsetsTopic", name=topic, partitions=entries),),
    )


def fetch_request(topic: str, partition: int, offset: int = 0, version: int = 12) -> Any:
    fetch_partition = nested(
        1,
        version,
        "FetchPartition",
        partition=partition,
        fetch_offset=offset,
        partition_max_bytes=1 << 20,
        current_leader_epoch=-1,
        last_fetched_epoch=-1,
        log_start_offset=-1,
    )
    return request(
        1,
        version,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=10),
        min_bytes=1,
        max_bytes=1 << 20,
        session_id=0,
        session_epoch=-1,
        topics=(nested(1, version, "FetchTopic", topic=topic, partitions=(fetch_partition,)),),
    )


def batch(count: int = 2, *, magic_patch: int | None = None, corrupt_crc: bool = False) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 16,
    )
    now = int(time.time() * 1000)
    for i in range(count):
        builder.append(i, timestamp=now, key=b"k%d" % i, value=b"v%d" % i, headers=[])
    data = bytearray(builder.build())
    if magic_patch is not None:
        data[16] = magic_patch
    if corrupt_crc:
        data[-1] ^= 0x55
    return bytes(data)


class Topology:
    """Which broker leads which partition of a topic (auto-created through Metadata)."""

    def __init__(self, kemu: KemuProcess, topic: str) -> None:
        with connect(kemu.first_broker) as sock:
            deadline = time.monotonic() + TIMEOUT
            while True:
                response = call(sock, metadata_request([topic]))
                (found,) = response.topics
                if found.error_code is ErrorCode.none and found.partitions:
                    break
                assert time.monotonic() < deadline, found
                time.sleep(0.1)
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
        self.topic = topic
        self.topic_id: uuid.UUID = found.topic_id
        self.leaders = {p.partition_index: brokers[p.leader_id] for p in found.partitions}

    def high_watermark(self, partition: int) -> int:
        with connect(self.leaders[partition]) as sock:
            response = call(sock, list_offsets_request(self.topic, [partition]))
        (result,) = response.topics[0].partitions
        assert result.error_code is ErrorCode.none
        return int(result.offset)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --- the log -----------------------------------------------------------------------------------


def log_events(kemu: KemuProcess) -> list[dict[str, Any]]:
    assert kemu.log_path is not None
    events = []
    for line in Path(kemu.log_path).read_text().splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict):
                events.append(event)
    return events


def events_for(kemu: KemuProcess, peer: str) -> list[dict[str, Any]]:
    return [e for e in log_events(kemu) if e.get("peer") == peer]


def wait_for_events(kemu: KemuProcess, peer: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + TIMEOUT
    while not events_for(kemu, peer) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # a second line, if kemu wrote one, would be right behind the first
    return events_for(kemu, peer)


def closed_by_kemu(sock: socket.socket) -> bool:
    try:
        while True:
            if not sock.recv(65536):
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def still_serving(kemu: KemuProcess, witness: socket.socket | None = None) -> None:
    """The process is alive and answers on an old connection and on a new one."""
    assert kemu.process is not None and kemu.process.poll() is None
    if witness is not None:
        assert call(witness, api_versions_request(), 2).error_code is ErrorCode.none
    for broker in kemu.bootstrap.split(","):
        with connect(broker) as fresh:
            assert call(fresh, api_versions_request(), 3).error_code is ErrorCode.none


# --- malformed frames close one connection ----------------------------------------------------


def header(api_key: int, version: int, correlation_id: int = 7, client_id: bytes = b"x") -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


def framed(payload: bytes) -> bytes:
    return wire.SIZE.pack(len(payload)) + payload


BAD_FRAMES: dict[str, tuple[bytes, str]] = {
    "negative size": (struct.pack(">i", -1), "malformed_frame"),
    "most negative size": (struct.pack(">i", -(2**31)), "malformed_frame"),
    "zero size": (struct.pack(">i", 0), "malformed_frame"),
    "size above socket.request.max.bytes": (
        struct.pack(">i", MAX_REQUEST_BYTES + 1) + b"\x00" * 64,
        "malformed_frame",
    ),
    "largest size": (struct.pack(">i", 2**31 - 1), "malformed_frame"),
    "frame shorter than a header": (framed(b"\x00\x03\x00"), "malformed_frame"),
    "header cut inside the client id": (
        framed(struct.pack(">hhih", 3, 4, 1, 200) + b"abc"),
        "malformed_frame",
    ),
    "undecodable body": (framed(header(3, 4) + b"\xff\xff\xff\xf0garbage"), "malformed_frame"),
    "invalid utf-8 client id": (
        framed(header(3, 4, client_id=b"\xff\xfe") + struct.pack(">i", -1) + b"\x01"),
        "malformed_frame",
    ),
    "compact array of four billion topics": (
        framed(header(3, 12) + b"\x00" + b"\xff\xff\xff\xff\x0f" + b"\x00\x00\x00"),
        "malformed_frame",
    ),
    "compact array of four billion produce partitions": (
        framed(
            header(0, 9)
            + b"\x00\x00"
            + struct.pack(">hi", -1, 1000)
            + b"\x02\x02t"
            + b"\xff\xff\xff\xff\x0f"
        ),
        "malformed_frame",
    ),
    "unknown api key": (framed(header(9999, 0) + b"\x00" * 8), "unsupported_request"),
    "negative api key": (framed(header(-3, 0) + b"\x00" * 8), "unsupported_request"),
    "produce v2 (removed in Kafka 4)": (framed(header(0, 2) + b"\x00" * 8), "unsupported_request"),
    "metadata v14": (framed(header(3, 14) + b"\x00" * 8), "unsupported_request"),
    "fetch v99": (framed(header(1, 99) + b"\x00" * 8), "unsupported_request"),
}


@pytest.mark.parametrize("name", list(BAD_FRAMES))
def test_bad_frame_closes_only_its_connection(kemu: KemuProcess, name: str) -> None:
    data, event = BAD_FRAMES[name]
    with connect(kemu.first_broker) as witness, connect(kemu.first_broker) as bad:
        assert call(witness, api_versions_request(), 1).error_code is ErrorCode.none
        peer = peer_name(bad)
        bad.sendall(data)
        assert closed_by_kemu(bad), "kemu kept a connection open after a bad frame"
        events = wait_for_events(kemu, peer)
        assert [e["event"] for e in events] == [event], events
        assert events[0]["level"] == "warning"
        still_serving(kemu, witness)


def test_truncated_frame_is_logged_when_the_peer_gives_up(kemu: KemuProcess) -> None:
    with connect(kemu.first_broker) as bad:
        peer = peer_name(bad)
        bad.sendall(struct.pack(">i", 100) + header(3, 4)[:5])
        bad.shutdown(socket.SHUT_WR)
        assert closed_by_kemu(bad)
    events = wait_for_events(kemu, peer)
    assert [(e["event"], e["reason"]) for e in events] == [("malformed_frame", "truncated frame")]
    still_serving(kemu)


def test_api_without_a_handler_closes_the_connection(kemu: KemuProcess) -> None:
    with connect(kemu.first_broker) as sock:
        advertised = {k.api_key for k in call(sock, api_versions_request()).api_keys}
    candidates = [
        key
        for key in range(0, 100)
        if key not in advertised and (found := wire.known_versions(key)) and found[0] == 0
    ]
    assert candidates, "every API kio knows is served"
    key = candidates[-1]
    with connect(kemu.first_broker) as bad:
        peer = peer_name(bad)
        bad.sendall(framed(header(key, 0) + b"\x00" * 16))
        assert closed_by_kemu(bad)
    events = wait_for_events(kemu, peer)
    assert [(e["event"], e["api_key"]) for e in events] == [("unsupported_request", key)]
    still_serving(kemu)


def test_a_good_request_before_the_bad_frame_does_not_keep_the_connection(
    kemu: KemuProcess,
) -> None:
    with connect(kemu.first_broker) as bad:
        good = wire.encode_request_frame(api_versions_request(), 1, "x")
        bad.sendall(good + struct.pack(">i", -5))
        assert closed_by_kemu(bad)
    still_serving(kemu)


@pytest.mark.parametrize("version", [6, 9, 32767])
def test_newer_api_versions_gets_a_v0_answer_and_the_connection_stays(
    kemu: KemuProcess, version: int
) -> None:
    with connect(kemu.first_broker) as sock:
        peer = peer_name(sock)
        sock.sendall(framed(header(18, version, correlation_id=55) + b"\x00" * 3))
        correlation_id, body = wire.decode_response(18, 0, read_frame(sock))
        assert correlation_id == 55
        assert body.error_code is ErrorCode.unsupported_version
        ranges = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        assert ranges[18] == (0, 5)  # v5 since Kafka 4.4 (ClusterId/NodeId)
        assert {0, 1, 2, 3} <= set(ranges)
        # the client retries with a version from the list, on the same connection
        retried = call(sock, api_versions_request(4), 56)
        assert retried.error_code is ErrorCode.none
    assert events_for(kemu, peer) == []


# --- bad records and names get Kafka's error codes -------------------------------------------


def produce_to_leader(
    topology: Topology, partition: int, records: bytes | None, **kwargs: Any
) -> Any:
    with connect(topology.leaders[partition]) as sock:
        response = call(sock, produce_request(topology.topic, {partition: records}, **kwargs))
    ((result,),) = [t.partition_responses for t in response.responses]
    return result


@pytest.mark.parametrize(
    ("records", "code"),
    [
        (batch(corrupt_crc=True), ErrorCode.corrupt_message),
        (batch(magic_patch=1), ErrorCode.invalid_record),
        (batch(magic_patch=0), ErrorCode.invalid_record),
        (batch(magic_patch=5), ErrorCode.corrupt_message),
        (batch()[:-3], ErrorCode.invalid_record),  # no complete batch
        (batch() + batch(), ErrorCode.invalid_record),  # Produce v3+: exactly one batch
        (b"", ErrorCode.invalid_record),
        (None, ErrorCode.invalid_record),
        (b"\x00" * 12, ErrorCode.corrupt_message),  # batch size 0
    ],
    ids=[
        "crc",
        "magic1",
        "magic0",
        "magic5",
        "truncated",
        "two-batches",
        "empty",
        "null",
        "zero-length",
    ],
)
def test_bad_records_are_refused_and_nothing_is_appended(
    kemu: KemuProcess, records: bytes | None, code: ErrorCode
) -> None:
    topology = Topology(kemu, unique("bad-records"))
    good = produce_to_leader(topology, 0, batch(3))
    assert (good.error_code, good.base_offset) == (ErrorCode.none, 0)
    before = topology.high_watermark(0)
    assert before == 3
    result = produce_to_leader(topology, 0, records)
    assert result.error_code is code
    assert result.base_offset == -1
    assert topology.high_watermark(0) == before
    with connect(topology.leaders[0]) as sock:
        fetched = call(sock, fetch_request(topology.topic, 0))
    (data,) = fetched.responses[0].partitions
    assert data.high_watermark == before
    assert len(data.records) == len(batch(3))


def test_a_bad_partition_does_not_spoil_the_others_in_the_request(kemu: KemuProcess) -> None:
    topology = Topology(kemu, unique("mixed"))
    shared = [p for p in range(PARTITIONS) if topology.leaders[p] == topology.leaders[0]]
    others = [p for p in range(PARTITIONS) if p not in shared]
    assert others, "partitions should be led by different brokers"
    with connect(topology.leaders[0]) as sock:
        response = call(
            sock,
            produce_request(
                topology.topic,
                {0: batch(corrupt_crc=True), others[0]: batch(2), 99: batch(1)},
            ),
        )
    results = {r.index: r for r in response.responses[0].partition_responses}
    assert results[0].error_code is ErrorCode.corrupt_message
    assert results[others[0]].error_code is ErrorCode.not_leader_or_follower
    assert results[99].error_code is ErrorCode.unknown_topic_or_partition
    assert topology.high_watermark(0) == 0
    assert topology.high_watermark(others[0]) == 0


def test_not_leader_at_every_version(kemu: KemuProcess) -> None:
    topology = Topology(kemu, unique("not-leader"))
    elsewhere = next(b for b in kemu.bootstrap.split(",") if b != topology.leaders[0])
    with connect(elsewhere) as sock:
        for version in range(3, 14):
            body = produce_request(topology.topic, {0: batch()}, version=version)
            if version >= 13:
                data = nested(0, version, "PartitionProduceData", index=0, records=batch())
                topic = nested(
                    0,
                    version,
                    "TopicProduceData",
                    topic_id=topology.topic_id,
                    partition_data=(data,),
                )
                body = request(
                    0, version, acks=-1, timeout=datetime.timedelta(seconds=5), topic_data=(topic,)
                )
            (result,) = call(sock, body, version).responses[0].partition_responses
            assert result.error_code is ErrorCode.not_leader_or_follower, version
            if version >= 10:
                assert (
                    result.current_leader.leader_id
                    == int(topology.leaders[0].rsplit(":", 1)[1])
                    - int(kemu.first_broker.rsplit(":", 1)[1])
                    + 1
                )
        for version in range(4, 13):
            (data,) = (
                call(sock, fetch_request(topology.topic, 0, version=version))
                .responses[0]
                .partitions
            )
            assert data.error_code is ErrorCode.not_leader_or_follower, version
    assert topology.high_watermark(0) == 0


@pytest.mark.parametrize(
    "name", ["bad name", "bad/name", "", ".", "..", "x" * 250, "ümlaut", "tab\tname"]
)
def test_invalid_topic_names(kemu: KemuProcess, name: str) -> None:
    with connect(kemu.first_broker) as sock:
        for version in (4, 9, 12):
            response = call(sock, metadata_request([name], version=version), version)
            (topic,) = response.topics
            assert topic.error_code is ErrorCode.invalid_topic_exception, (version, topic)
            assert topic.partitions == ()
        listed = call(sock, metadata_request(None)).topics
        assert name not in {t.name for t in listed}
        produced = call(sock, produce_request(name, {0: batch()}))
        assert produced.responses[0].partition_responses[0].error_code is (
            ErrorCode.unknown_topic_or_partition
        )
        offsets = call(sock, list_offsets_request(name, [0]))
        assert offsets.topics[0].partitions[0].error_code is (ErrorCode.unknown_topic_or_partition)
        fetched = call(sock, fetch_request(name, 0))
        assert fetched.responses[0].partitions[0].error_code is (
            ErrorCode.unknown_topic_or_partition
        )
    still_serving(kemu)


@pytest.mark.parametrize("partition", [PARTITIONS, 99, -1, 2**31 - 1])
def test_partition_out_of_range(kemu: KemuProcess, partition: int) -> None:
    topology = Topology(kemu, unique("range"))
    for broker in kemu.bootstrap.split(","):
        with connect(broker) as sock:
            produced = call(sock, produce_request(topology.topic, {partition: batch()}))
            assert produced.responses[0].partition_responses[0].error_code is (
                ErrorCode.unknown_topic_or_partition
            )
            offsets = call(sock, list_offsets_request(topology.topic, [partition]))
            assert offsets.topics[0].partitions[0].error_code is (
                ErrorCode.unknown_topic_or_partition
            )
            fetched = call(sock, fetch_request(topology.topic, partition))
            assert fetched.responses[0].partitions[0].error_code is (
                ErrorCode.unknown_topic_or_partition
            )


def test_unknown_topic_id_and_invalid_acks(kemu: KemuProcess) -> None:
    topology = Topology(kemu, unique("ids"))
    with connect(topology.leaders[0]) as sock:
        data = nested(0, 13, "PartitionProduceData", index=0, records=batch())
        body = request(
            0,
            13,
            acks=-1,
            timeout=datetime.timedelta(seconds=5),
            transactional_id=None,
            topic_data=(
                nested(0, 13, "TopicProduceData", topic_id=uuid.uuid4(), partition_data=(data,)),
            ),
        )
        (result,) = call(sock, body).responses[0].partition_responses
        assert result.error_code is ErrorCode.unknown_topic_id
        for acks in (2, -2, 5):
            result = produce_to_leader(topology, 0, batch(), acks=acks)
            assert result.error_code is ErrorCode.invalid_required_acks
    assert topology.high_watermark(0) == 0


# --- the process survives anything -------------------------------------------------------------


def valid_frames(topic: str) -> list[bytes]:
    return [
        wire.encode_request_frame(body, 9, "fuzz")
        for body in (
            api_versions_request(3),
            api_versions_request(0),
            metadata_request([topic]),
            metadata_request([topic], version=1),
            produce_request(topic, {0: batch()}),
            produce_request(topic, {1: batch(1)}, version=3, acks=1),
            fetch_request(topic, 0),
            fetch_request(topic, 1, version=4),
            list_offsets_request(topic, [0, 1]),
            list_offsets_request(topic, [2], version=1),
        )
    ]


def throw(kemu: KemuProcess, broker: str, data: bytes) -> None:
    """Send bytes, read whatever comes back for a moment, hang up."""
    with connect(broker) as sock:
        sock.settimeout(0.3)
        with contextlib.suppress(OSError):
            sock.sendall(data)
            while sock.recv(65536):
                pass


@st.composite
def mutated_frames(draw: st.DrawFn, frames: list[bytes]) -> bytes:
    frame = bytearray(draw(st.sampled_from(frames)))
    for _ in range(draw(st.integers(0, 6))):
        position = draw(st.integers(0, len(frame) - 1))
        frame[position] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        frame = frame[: draw(st.integers(0, len(frame)))]
    if draw(st.booleans()):
        frame += draw(st.binary(max_size=32))
    if draw(st.booleans()):  # keep the size prefix honest, so the body gets decoded
        struct.pack_into(">i", frame, 0, len(frame) - 4) if len(frame) >= 4 else None
    return bytes(frame)


def test_kemu_never_dies_on_random_or_mutated_frames(kemu: KemuProcess) -> None:
    topic = unique("fuzz")
    Topology(kemu, topic)
    frames = valid_frames(topic)
    brokers = kemu.bootstrap.split(",")
    anything = st.one_of(
        st.binary(max_size=200),
        st.binary(max_size=200).map(lambda b: framed(b)),
        st.binary(min_size=8, max_size=200).map(lambda b: framed(header(3, 12) + b)),
        mutated_frames(frames),
        st.lists(mutated_frames(frames), min_size=2, max_size=4).map(b"".join),
    )

    @settings(
        max_examples=int(os.environ.get("KEMU_FUZZ_EXAMPLES", "250")),
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(anything, st.sampled_from(brokers))
    def fuzz(data: bytes, broker: str) -> None:
        throw(kemu, broker, data)
        assert kemu.process is not None and kemu.process.poll() is None

    fuzz()
    still_serving(kemu)
    crashes = [e for e in log_events(kemu) if e["event"] in ("handler_failed", "connection_failed")]
    assert crashes == [], crashes[:3]


def process_status(kemu: KemuProcess) -> tuple[int, int]:
    """(resident set in KiB, open file descriptors) of the kemu process."""
    assert kemu.process is not None
    pid = kemu.process.pid
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


BAD_CONNECTIONS = 2000


def settle(kemu: KemuProcess, fds: int) -> tuple[int, int]:
    deadline = time.monotonic() + TIMEOUT
    status = process_status(kemu)
    while status[1] > fds and time.monotonic() < deadline:
        time.sleep(0.1)
        status = process_status(kemu)
    return status


def test_many_malformed_connections_leave_nothing_behind(
    kemu: KemuProcess, record_property: Any
) -> None:
    kinds = [data for data, _ in BAD_FRAMES.values()]
    broker = kemu.first_broker

    def one_round(count: int) -> None:
        for i in range(count):
            with connect(broker) as sock:
                with contextlib.suppress(OSError):
                    sock.sendall(kinds[i % len(kinds)])
                closed_by_kemu(sock)

    one_round(200)  # warm-up: caches, allocator arenas
    rss_before, fds_before = settle(kemu, 0)
    one_round(BAD_CONNECTIONS)
    rss_after, fds_after = settle(kemu, fds_before)
    growth = rss_after - rss_before
    record_property("rss_kib_before", rss_before)
    record_property("rss_kib_after", rss_after)
    record_property("fds_before", fds_before)
    record_property("fds_after", fds_after)
    print(
        f"\n{BAD_CONNECTIONS} malformed connections: RSS {rss_before} KiB -> {rss_after} KiB "
        f"({growth:+d} KiB), open fds {fds_before} -> {fds_after}"
    )
    assert fds_after <= fds_before
    assert growth < 8 * 1024, f"RSS grew by {growth} KiB over {BAD_CONNECTIONS} bad connections"
    still_serving(kemu)


# --- and a real client works through all of it ----------------------------------------------


def test_real_client_keeps_working_while_bad_connections_come_and_go(kemu: KemuProcess) -> None:
    topic = unique("survivor")
    Topology(kemu, topic)
    producer = Producer({"bootstrap.servers": kemu.bootstrap, "linger.ms": 0})
    consumer = Consumer(
        {"bootstrap.servers": kemu.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    kinds = [data for data, _ in BAD_FRAMES.values()]
    brokers = kemu.bootstrap.split(",")
    sent: dict[tuple[int, bytes], int] = {}
    try:
        for i in range(60):
            producer.produce(topic, key=b"key-%d" % i, value=b"value-%d" % i, partition=i % 3)
            throw(kemu, brokers[i % len(brokers)], kinds[i % len(kinds)])
            producer.poll(0)
            sent[(i % 3, b"key-%d" % i)] = i
        assert producer.flush(TIMEOUT) == 0
        received: dict[tuple[int, bytes], bytes] = {}
        deadline = time.monotonic() + 30
        while len(received) < len(sent) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            received[(message.partition(), message.key())] = message.value()
    finally:
        consumer.close()
    assert received == {key: b"value-%d" % i for key, i in sent.items()}
