"""ApiVersions: what each version answers, the v0 fallback body, ``--as-version`` caps and the
feature levels. Requests are encoded and responses decoded with kafka-python's codec, and the
broker version kafka-python infers from the answer is checked too."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from kemu.broker.handlers import ENABLED_BY, REGISTRY, HandlerSpec, api_versions, load_handlers
from kemu.cluster.context import RequestContext, Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.protocol.versions import KAFKA_RELEASES, caps_for_release
from kemu.storage.log import MemoryLog

API_VERSIONS = 18
NODE = BrokerNode(1, "127.0.0.1", 19092)


def make_runtime(max_versions: dict[int, int] | None = None) -> Runtime:
    load_handlers()
    cluster = Cluster(
        cluster_id="unit",
        nodes={1: NODE},
        config=BrokerConfig(),
        log_factory=lambda topic, index: MemoryLog(),
    )
    return Runtime(cluster=cluster, max_versions=max_versions)


async def ask(
    runtime: Runtime,
    version: int,
    name: str = "kafka-python",
    software_version: str = "3.0.12",
) -> ApiVersionsResponse:
    """Send an ApiVersions request through the handler; decode the answer independently."""
    message = ApiVersionsRequest(
        client_software_name=name, client_software_version=software_version
    )
    message.with_header(correlation_id=11, client_id="unit")
    frame = bytes(message.encode(version=version, header=True, framed=True))[4:]
    request = wire.decode_request(frame)
    context = RequestContext(NODE, runtime, request.header)
    body = api_versions.handle(context, request.body)
    answer = wire.encode_response_frame(API_VERSIONS, version, 11, body)[4:]
    decoded = ApiVersionsResponse.decode(answer, version=version, header=True)
    assert decoded.header.correlation_id == 11
    return decoded


def ranges(response: ApiVersionsResponse) -> dict[int, tuple[int, int]]:
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def served() -> dict[int, tuple[int, int]]:
    load_handlers()
    return {
        # Produce is advertised from v0, as Kafka 4.4 does, though v0-v2 are refused.
        key: (0 if key == 0 else spec.min_version, spec.max_version)
        for key, spec in REGISTRY.items()
        if key not in ENABLED_BY  # off by default
    }


@pytest.mark.parametrize("version", range(0, 5))
async def test_every_version_lists_exactly_what_is_served(version: int) -> None:
    response = await ask(make_runtime(), version)
    assert response.error_code == 0
    assert ranges(response) == served()
    assert ranges(response)[API_VERSIONS] == (0, 5)
    if version >= 1:
        assert response.throttle_time_ms == 0


async def test_served_apis_are_the_ones_clients_need() -> None:
    table = ranges(await ask(make_runtime(), 4))
    assert table[0] == (0, 13)  # Produce: from v0 as Kafka 4.4 advertises it ...
    assert REGISTRY[0].min_version == 3  # ... while the connection still refuses v0-v2
    assert table[1] == (4, 18)  # Fetch
    assert table[2][1] == 11  # ListOffsets
    assert table[3] == (0, 13)  # Metadata


async def test_kafka_python_infers_kafka_4_3() -> None:
    # DescribeLogDirs v5 is kafka-python's 4.3 marker; its table stops at 4.3
    table = ranges(await ask(make_runtime(), 4))
    assert infer_broker_version_from_api_versions(table) == (4, 3)


@pytest.mark.parametrize("version", [3, 4])
async def test_feature_levels(version: int) -> None:
    response = await ask(make_runtime(), version)
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    every = {
        f.name: (f.min_version, f.max_version)
        for f in (await ask(make_runtime(), 4)).supported_features
    }
    assert every["metadata.version"] == (
        api_versions.METADATA_VERSION_MIN,
        api_versions.METADATA_VERSION,
    )
    assert set(every) >= {
        "metadata.version",
        "kraft.version",
        "group.version",
        "share.version",
        "transaction.version",
    }
    if version >= 4:
        assert supported == every
    else:
        # Kafka 4.4 leaves features whose range starts at 0 out below v4 (KAFKA-17011).
        assert supported == {name: r for name, r in every.items() if r[0] > 0}
        assert set(supported) == {"metadata.version"}
    finalized = {
        f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features
    }
    # Kafka 4.4.0's finalized levels (a fresh --standalone format)
    assert finalized == {
        "eligible.leader.replicas.version": (1, 1),
        "group.version": (1, 1),
        "kraft.version": (1, 1),
        "metadata.version": (33, 33),
        "share.version": (1, 1),
        "streams.version": (1, 1),
        "transaction.version": (2, 2),
    }
    if version >= 4:  # and the ranges it advertises
        assert every == {
            "eligible.leader.replicas.version": (0, 1),
            "group.version": (0, 1),
            "kraft.version": (0, 1),
            "metadata.version": (7, 33),
            "share.version": (0, 2),
            "streams.version": (0, 1),
            "transaction.version": (0, 2),
        }
    for name, (low, high) in finalized.items():
        assert low == high
        assert every[name][0] <= high <= every[name][1]
    assert response.finalized_features_epoch == api_versions.FINALIZED_FEATURES_EPOCH
    assert response.zk_migration_ready is False


def spec(api_key: int, low: int, high: int) -> HandlerSpec:
    async def unused(ctx: RequestContext, request: object) -> None:
        return None

    return HandlerSpec(api_key, low, high, unused, "test")


def test_features_are_finalized_only_for_what_is_served(monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = make_runtime()
    for key in (68, 76, 26, 88):
        monkeypatch.delitem(REGISTRY, key, raising=False)
    always = {"eligible.leader.replicas.version": 1, "kraft.version": 1, "metadata.version": 33}
    assert dict(api_versions.finalized_features(runtime)) == always
    monkeypatch.setitem(REGISTRY, 68, spec(68, 0, 1))
    monkeypatch.setitem(REGISTRY, 76, spec(76, 1, 1))
    monkeypatch.setitem(REGISTRY, 26, spec(26, 0, 4))
    assert dict(api_versions.finalized_features(runtime)) == {
        **always,
        "group.version": 1,
        "share.version": 1,
    }
    monkeypatch.setitem(REGISTRY, 26, spec(26, 0, 5))
    assert dict(api_versions.finalized_features(runtime))["transaction.version"] == 2
    monkeypatch.setitem(REGISTRY, 88, spec(88, 0, 0))
    assert dict(api_versions.finalized_features(runtime))["streams.version"] == 1


@pytest.mark.parametrize(
    ("name", "software_version"), [("-bad name-", "1.0"), ("ok", ""), ("ok", "1.0 beta")]
)
async def test_bad_client_software_is_invalid_request(name: str, software_version: str) -> None:
    message = ApiVersionsRequest(
        client_software_name=name, client_software_version=software_version
    )
    message.with_header(correlation_id=12, client_id="unit")
    request = wire.decode_request(bytes(message.encode(version=3, header=True, framed=True))[4:])
    body = api_versions.handle(RequestContext(NODE, make_runtime(), request.header), request.body)
    # Kafka answers at the request's version (Java clients parse it so); kafka-python would read
    # any ApiVersions error as v0, so this one is decoded with kio.
    frame = wire.encode_response_frame(API_VERSIONS, 3, 12, body)[4:]
    answer = wire.decode_response(API_VERSIONS, 3, frame)[1]
    assert answer.error_code is ErrorCode.invalid_request
    assert answer.api_keys == ()  # as Kafka: no API list with this error


async def test_software_name_is_not_checked_before_v3() -> None:
    assert (await ask(make_runtime(), 2, name="-bad name-")).error_code == 0


@pytest.mark.parametrize("version", [6, 100, 32767])
def test_newer_request_is_not_decodable(version: int) -> None:
    frame = struct.pack(">hhih", API_VERSIONS, version, 5, -1) + b"\x00\x00\x00"
    with pytest.raises(wire.UnsupportedRequest) as raised:
        wire.decode_request(frame)
    assert raised.value.correlation_id == 5


def test_unsupported_version_answer_is_v0_and_lists_every_api() -> None:
    runtime = make_runtime()
    frame = api_versions.unsupported_version_frame(runtime, 99)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    # A client that sent v6 reads this as v0 (Kafka's rule); kafka-python does so for any error.
    for claimed in (0, 3, 4):
        decoded = ApiVersionsResponse.decode(frame[4:], version=claimed, header=True)
        assert decoded.header.correlation_id == 99
        assert decoded.error_code == ErrorCode.unsupported_version.value
        assert ranges(decoded) == served()
    # and the bytes are exactly a v0 body
    correlation_id, body = wire.decode_response(API_VERSIONS, 0, frame[4:])
    assert correlation_id == 99
    assert body.error_code is ErrorCode.unsupported_version
    assert {k.api_key for k in body.api_keys} == set(served())


async def test_as_version_caps_every_range() -> None:
    caps = caps_for_release("3.9")
    runtime = make_runtime(caps)
    table = ranges(await ask(runtime, 3))
    for key, (low, high) in served().items():
        cap = caps.get(key, -1)
        if cap < low:
            assert key not in table
        else:
            assert table[key] == (low, min(high, cap))
    assert table[0][1] == 11  # Produce as 3.9 served it
    assert table[1][1] == 17  # Fetch
    assert infer_broker_version_from_api_versions(table) == (3, 9)
    frame = api_versions.unsupported_version_frame(runtime, 1)
    assert ranges(ApiVersionsResponse.decode(frame[4:], version=0, header=True)) == table


@pytest.mark.parametrize("release", sorted(KAFKA_RELEASES))
async def test_kafka_python_recognises_every_mimicked_release(release: str) -> None:
    table = ranges(await ask(make_runtime(caps_for_release(release)), 3))
    expected = tuple(int(part) for part in release.split("."))
    inferred = infer_broker_version_from_api_versions(table)
    # The inference looks at one API per release; kemu serves a subset of the APIs, so it can
    # only be right when that API is one kemu serves. It must never claim a newer release.
    assert inferred <= expected


async def test_as_version_drops_apis_the_release_did_not_have() -> None:
    caps = {key: high for key, (_, high) in served().items() if key != 1}
    table = ranges(await ask(make_runtime(caps), 4))
    assert 1 not in table
    assert set(table) == set(served()) - {1}


async def ask_v5(
    cluster_id: str | None, node_id: int, name: str = "apache-kafka-java"
) -> tuple[bytes, Any]:
    """ApiVersions v5 (KIP-1242) through the handler, encoded and decoded with kemu's codec
    (kafka-python has no v5); returns the request's body bytes and the decoded answer."""
    runtime = make_runtime()
    request_class = wire.request_schema(API_VERSIONS, 5)
    body = wire.build(
        request_class,
        client_software_name=name,
        client_software_version="4.4.0",
        cluster_id=cluster_id,
        node_id=node_id,
    )
    frame = wire.encode_request_frame(body, correlation_id=7)[4:]
    request = wire.decode_request(frame)
    assert request.body == body
    context = RequestContext(NODE, runtime, request.header)
    answer = api_versions.handle(context, request.body)
    payload = wire.encode_response_frame(API_VERSIONS, 5, 7, answer)[4:]
    correlation_id, decoded = wire.decode_response(API_VERSIONS, 5, payload)
    assert correlation_id == 7
    return wire.encode_body(body), decoded


async def test_v5_request_bytes_follow_kafka_44s_schema() -> None:
    # v4's two compact strings, then ClusterId (compact nullable string) and NodeId (int32),
    # then the empty tagged-field buffer
    raw, _ = await ask_v5("unit", 1, name="j")
    assert raw == b"\x02j\x064.4.0\x05unit\x00\x00\x00\x01\x00"
    raw, _ = await ask_v5(None, -1, name="j")
    assert raw == b"\x02j\x064.4.0\x00\xff\xff\xff\xff\x00"


@pytest.mark.parametrize(("cluster_id", "node_id"), [(None, -1), ("unit", 1)])
async def test_v5_without_ids_or_with_this_brokers_ids_lists_the_apis_and_features(
    cluster_id: str | None, node_id: int
) -> None:
    _, answer = await ask_v5(cluster_id, node_id)
    assert answer.error_code is ErrorCode.none
    assert {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys} == served()
    features = {f.name: (f.min_version, f.max_version) for f in answer.supported_features}
    assert features["kraft.version"][0] == 0  # v4+: ranges starting at 0 are listed
    assert {f.name for f in answer.finalized_features} >= {"metadata.version"}


@pytest.mark.parametrize(("cluster_id", "node_id"), [("other", 1), ("unit", 2), ("", 1)])
async def test_v5_for_another_cluster_or_node_is_rebootstrap_required(
    cluster_id: str, node_id: int
) -> None:
    # KIP-1242: the client's bootstrap address now reaches another cluster or node
    _, answer = await ask_v5(cluster_id, node_id)
    assert answer.error_code is ErrorCode.rebootstrap_required
    assert answer.api_keys == ()


@pytest.mark.parametrize(("cluster_id", "node_id"), [("unit", -1), (None, 1)])
async def test_v5_with_one_id_without_the_other_is_invalid_request(
    cluster_id: str | None, node_id: int
) -> None:
    _, answer = await ask_v5(cluster_id, node_id)
    assert answer.error_code is ErrorCode.invalid_request
    assert answer.api_keys == ()


def test_request_error_order_matches_kafka() -> None:
    # isValid (pairing, then the software pattern) comes before the cluster check
    class Request:
        client_software_name = "bad name"
        client_software_version = "1"
        cluster_id = "other"
        node_id = 1

    assert api_versions.request_error(Request(), 5, "unit", 1) is ErrorCode.invalid_request
    # before v5 the ids are not read, whatever the body holds
    Request.client_software_name = "ok"
    assert api_versions.request_error(Request(), 4, "unit", 1) is None
    assert api_versions.request_error(Request(), 5, "unit", 1) is ErrorCode.rebootstrap_required
