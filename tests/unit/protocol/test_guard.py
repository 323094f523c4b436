"""The compact-array guard in front of kio's native reader.

Two promises: no valid request is ever refused (every flexible request schema kio has,
filled by kio's own hypothesis strategies, passes and decodes), and no declared count can
make the reader allocate more than the frame can hold (which would abort the process: that
part runs in a child process so a miss shows up as a failure, not a dead test session).
"""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.index import api_key_map
from kio.static.primitive import Records

from kemu.protocol import wire
from kemu.protocol.guard import ImplausibleRequest, check_request
from kemu.protocol.wire import MalformedFrame

HUGE = b"\xff\xff\xff\xff\x0f"  # unsigned varint 2**32 - 1: a compact count of 2**32 - 2
FETCH_V12_FIXED = struct.pack(">iiiibii", -1, 100, 1, 100, 0, 0, -1)  # replica .. session epoch

# kio registers strategies for its types except the opaque record batches
st.register_type_strategy(Records, st.binary(max_size=300))


def flexible_request_schemas() -> list[tuple[int, int]]:
    found = []
    for api_key in sorted(api_key_map):
        versions = wire.known_versions(api_key)
        assert versions is not None
        for version in range(versions[0], versions[1] + 1):
            try:
                schema = wire.request_schema(api_key, version)
            except Exception:
                continue
            if schema.__flexible__:
                found.append((api_key, version))
    return found


FLEXIBLE = flexible_request_schemas()


def frame_of(body: Any, client_id: str | None = "guard") -> bytes:
    return wire.encode_request_frame(body, 17, client_id)[4:]


def header(api_key: int, version: int) -> bytes:
    return struct.pack(">hhih", api_key, version, 1, 1) + b"c" + b"\x00"


def test_there_is_something_to_guard() -> None:
    assert len(FLEXIBLE) > 150
    assert (1, 18) in FLEXIBLE and (0, 13) in FLEXIBLE and (3, 13) in FLEXIBLE


@pytest.mark.parametrize(("api_key", "version"), FLEXIBLE)
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_every_valid_flexible_request_passes(api_key: int, version: int, data: Any) -> None:
    schema = wire.request_schema(api_key, version)
    body = data.draw(st.from_type(schema))
    client_id = data.draw(st.none() | st.text(max_size=20))
    frame = frame_of(body, client_id)
    check_request(schema, frame, header_has_tags=True)
    try:
        decoded = wire.decode_request(frame)
    except MalformedFrame as refused:
        # kio's strategies can make durations its own reader cannot take back
        assert "timedelta" in str(refused)
        return
    assert decoded.body == body
    assert decoded.header.client_id == client_id


@pytest.mark.parametrize(
    ("name", "frame"),
    [
        ("metadata topics", header(3, 12) + HUGE + b"\x00\x00\x00"),
        ("produce topics", header(0, 9) + b"\x00" + struct.pack(">hi", -1, 100) + HUGE),
        (
            "produce partitions of the second topic",
            header(0, 9)
            + b"\x00"
            + struct.pack(">hi", -1, 100)
            + b"\x03"  # two topics
            + b"\x02a\x01\x00"  # topic "a", no partitions, no tags
            + b"\x02b"
            + HUGE,
        ),
        (
            "fetch forgotten partitions (int32 array)",
            header(1, 12)
            + FETCH_V12_FIXED
            + b"\x01"  # no topics
            + b"\x02\x02a"  # one forgotten topic "a"
            + HUGE,
        ),
        (
            "tagged struct in the header's place",
            header(1, 16)[:-1] + b"\x01\x00" + HUGE,  # header tag 0 declaring a size of 4 GiB
        ),
        ("api versions in header tags", header(18, 3)[:-1] + HUGE),
    ],
)
def test_impossible_counts_are_refused(name: str, frame: bytes) -> None:
    with pytest.raises(MalformedFrame):
        wire.decode_request(frame)


def test_a_count_that_fits_only_at_one_byte_per_element_is_refused_for_bigger_elements() -> None:
    # Fetch v12 topics: each FetchTopic takes at least 3 bytes; 10 of them cannot fit in 12.
    body = header(1, 12) + FETCH_V12_FIXED
    with pytest.raises(ImplausibleRequest, match="10 elements"):
        check_request(wire.request_schema(1, 12), body + b"\x0b" + b"\x00" * 12, True)


def test_count_check_uses_the_smallest_element() -> None:
    # A fetch partition is 32 fixed bytes and a tag buffer; 2 partitions need 66 bytes.
    schema = wire.request_schema(1, 12)
    prefix = header(1, 12) + FETCH_V12_FIXED
    one_topic = b"\x02" + b"\x02a" + b"\x03"
    partition = b"\x00" * 32 + b"\x00"
    tail = b"\x01" + b"\x01" + b"\x00"  # topic tags, forgotten topics, rack id ""
    ok = prefix + one_topic + partition * 2 + b"\x00" + tail + b"\x00"
    check_request(schema, ok, True)
    assert len(wire.decode_request(ok).body.topics[0].partitions) == 2
    with pytest.raises(ImplausibleRequest):
        check_request(schema, prefix + one_topic + partition, True)


def test_truncated_and_overlong_lengths_are_refused() -> None:
    schema = wire.request_schema(3, 12)
    with pytest.raises(ImplausibleRequest):
        check_request(schema, header(3, 12) + b"\x02\x7fabc", True)  # name of 126 bytes
    with pytest.raises(ImplausibleRequest):
        check_request(schema, header(3, 12)[:-1], True)  # ends before the header's tags
    with pytest.raises(ImplausibleRequest):
        check_request(schema, header(3, 12) + b"\x80\x80\x80\x80\x80\x01", True)  # long varint


@pytest.mark.process  # a child process: an abort must not take the test run with it
def test_mutated_frames_never_abort_the_process() -> None:
    """Thousands of mutated flexible frames through the real decoder, in a child process."""
    script = textwrap.dedent(
        """
        import random, struct, sys
        import warnings
        from hypothesis import strategies as st
        from kio.static.primitive import Records
        from kemu.protocol import wire
        warnings.simplefilter("ignore")
        st.register_type_strategy(Records, st.binary(max_size=300))
        from kemu.protocol.wire import MalformedFrame, UnsupportedRequest
        schemas = [tuple(map(int, pair.split(":"))) for pair in sys.argv[1].split(",")]
        rng = random.Random(1234)
        frames = []
        for api_key, version in schemas:
            schema = wire.request_schema(api_key, version)
            for _ in range(2):
                body = st.from_type(schema).example()
                frames.append(wire.encode_request_frame(body, 1, "fuzz")[4:])
        tried = 0
        for _ in range(20000):
            frame = bytearray(rng.choice(frames))
            for _ in range(rng.randint(1, 4)):
                position = rng.randrange(len(frame))
                frame[position] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)])
            if rng.random() < 0.3:
                cut = rng.randrange(8, len(frame) + 1)
                frame = frame[:cut] + (b"\\xff\\xff\\xff\\xff\\x0f" if rng.random() < 0.5 else b"")
            try:
                wire.decode_request(bytes(frame))
            except (MalformedFrame, UnsupportedRequest):
                pass
            tried += 1
        print(tried)
        """
    )
    chosen = [pair for pair in FLEXIBLE if pair[0] in (0, 1, 2, 3, 8, 9, 11, 14, 18, 19, 22, 78)]
    argument = ",".join(f"{key}:{version}" for key, version in chosen)
    result = subprocess.run(
        [sys.executable, "-c", script, argument], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "20000"


def legacy_request_schemas() -> list[tuple[int, int]]:
    found = []
    for api_key in sorted(api_key_map):
        versions = wire.known_versions(api_key)
        assert versions is not None
        for version in range(versions[0], versions[1] + 1):
            try:
                schema = wire.request_schema(api_key, version)
            except Exception:
                continue
            if not schema.__flexible__:
                found.append((api_key, version))
    return found


@pytest.mark.parametrize(("api_key", "version"), legacy_request_schemas())
@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_every_valid_legacy_request_passes_the_null_check(
    api_key: int, version: int, data: Any
) -> None:
    body = data.draw(st.from_type(wire.request_schema(api_key, version)))
    try:
        decoded = wire.decode_request(frame_of(body))
    except MalformedFrame as refused:
        assert "timedelta" in str(refused)  # as above: kio's strategies, not the null check
        return
    assert decoded.body == body


def test_a_null_array_is_malformed_in_flexible_and_legacy_requests() -> None:
    """ListOffsets whose topic declares its partitions as a null array: kio's reader yields
    None, which the handler cannot iterate; Kafka's parser refuses it."""
    flexible = (
        struct.pack(">ib", -1, 0)  # replica id, isolation level
        + b"\x02"  # one topic
        + b"\x02t"
        + b"\x00"  # partitions: null (compact)
        + b"\x00\x00"  # the topic's tags, the body's tags
    )
    with pytest.raises(MalformedFrame, match="null array"):
        wire.decode_request(header(2, 7) + flexible)
    legacy = (
        struct.pack(">ib", -1, 0)
        + struct.pack(">i", 1)  # one topic
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">i", -1)  # partitions: null (int32 -1)
    )
    with pytest.raises(MalformedFrame, match="null array"):
        wire.decode_request(struct.pack(">hhih", 2, 5, 1, 1) + b"c" + legacy)
