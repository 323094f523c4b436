"""KIP-1289 AddShareAcknowledgementsToTxn (spec §2.7), the configurable api keys and the
``share.version`` 3 gate, on an in-process 3-broker kemu through the wire."""

from __future__ import annotations

import dataclasses
import json
import re
import struct
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kemu.broker.handlers import check_wire_keys, moved_keys
from kemu.broker.handlers.api_versions import advertised, finalized_features, supported_features
from kemu.broker.server import KemuServer, ServerOptions
from kemu.broker.share.states import RecordState
from kemu.config.definitions import BrokerConfig, InvalidConfig
from kemu.coordinator.group.placement import TRANSACTION, coordinator_partition
from kemu.coordinator.transaction.service import transaction_coordinator
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.protocol.kip1289 import ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN_KEY as ADD
from kemu.protocol.kip1289 import TXN_SHARE_ACKNOWLEDGE_KEY as TXN_SHARE_ACK
from kemu.protocol.versions import caps_for_release
from kemu.testing.plugin import free_port_block
from tests.unit.broker.handlers.test_share_fetch import GROUP, Harness, partition_data
from tests.unit.broker.handlers.test_txn_share_acknowledge import (
    ACCEPT,
    acquire_three,
    init_producer,
    join,
    states,
    txn_ack,
)

pytestmark = pytest.mark.client

TXN = "tx"  # the transactional id test_txn_share_acknowledge's helpers use
DEFINITIONS = Path(wire.__file__).parent / "kip1289"
ENABLED = {"kemu.kip1289.enable": "true"}


async def start(overrides: dict[str, str]) -> Harness:
    server = KemuServer(
        ServerOptions(brokers=3, port=free_port_block(3), config=BrokerConfig(overrides))
    )
    now = [1_000_000]
    server.runtime.clock_ms = lambda: now[0]
    await server.start()
    server.cluster.create_topic("t", 3, 1)
    return Harness(server, now)


async def stop(harness: Harness) -> None:
    for client in harness.clients:
        client.writer.close()
    await harness.server.close()


@pytest.fixture
async def kemu() -> AsyncIterator[Harness]:
    harness = await start(ENABLED)
    try:
        yield harness
    finally:
        await stop(harness)


@pytest.fixture
async def explicit() -> AsyncIterator[Harness]:
    harness = await start({**ENABLED, "kemu.kip1289.enlist": "explicit"})
    try:
        yield harness
    finally:
        await stop(harness)


def add_request(
    topics: dict[uuid.UUID | None, tuple[int, ...]],
    pid: int,
    epoch: int,
    *,
    transactional_id: str | None = TXN,
    group: str = GROUP,
) -> Any:
    module = wire.request_module(ADD, 0)
    return module.AddShareAcknowledgementsToTxnRequest(
        transactional_id=transactional_id,
        producer_id=pid,
        producer_epoch=epoch,
        group_id=group,
        topics=tuple(
            module.AddShareAcknowledgementsToTxnTopic(topic_id=topic_id, partitions=partitions)
            for topic_id, partitions in topics.items()
        ),
    )


def coordinator_node(kemu: Harness) -> int:
    return coordinator_partition(kemu.server.cluster, TRANSACTION, TXN).leader_id


def transaction(kemu: Harness) -> Any:
    return transaction_coordinator(kemu.runtime).coordinator.transactions[TXN]


# --- protocol ---------------------------------------------------------------------------------


def _definition(name: str) -> Any:
    text = (DEFINITIONS / f"{name}.json").read_text()
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE))


def _snake(fields: list[Any]) -> list[str]:
    return [re.sub(r"(?<!^)(?=[A-Z])", "_", f["name"]).lower() for f in fields]


def test_dataclasses_follow_the_json_definitions() -> None:
    req = _definition("AddShareAcknowledgementsToTxnRequest")
    assert req["apiKey"] == ADD and req["validVersions"] == "0" and req["flexibleVersions"] == "0+"
    assert [f.name for f in dataclasses.fields(wire.request_schema(ADD, 0))] == _snake(
        req["fields"]
    )
    module = wire.request_module(ADD, 0)
    assert [f.name for f in dataclasses.fields(module.AddShareAcknowledgementsToTxnTopic)] == (
        _snake(req["fields"][-1]["fields"])
    )
    resp = _definition("AddShareAcknowledgementsToTxnResponse")
    assert [f.name for f in dataclasses.fields(wire.response_schema(ADD, 0))] == [
        "throttle_time",
        *_snake(resp["fields"])[1:],
    ]


def test_request_and_response_round_trip() -> None:
    body = add_request({uuid.uuid4(): (0, 2)}, 42, 3, transactional_id=None)
    decoded = wire.decode_request(wire.encode_request_frame(body, 5)[4:])
    assert decoded.body == body and decoded.header.api_key == ADD
    assert wire.api_name(ADD) == "add_share_acknowledgements_to_txn"
    response = wire.build(
        wire.response_schema(ADD, 0), error_code=ErrorCode.unknown_topic_id, error_message="x"
    )
    frame = wire.encode_response_frame(ADD, 0, 9, response)
    assert wire.decode_response(ADD, 0, frame[4:]) == (9, response)


def test_a_frame_decodes_as_the_api_it_is_served_as() -> None:
    body = add_request({uuid.uuid4(): (1,)}, 42, 3)
    frame = bytearray(wire.encode_request_frame(body, 5)[4:])
    struct.pack_into(">h", frame, 0, 200)  # the key on the wire
    decoded = wire.decode_request(bytes(frame), ADD)
    assert decoded.body == body and decoded.header.api_key == ADD


# --- configured keys --------------------------------------------------------------------------


def test_default_keys_move_nothing() -> None:
    config = BrokerConfig({})
    check_wire_keys(config)
    assert moved_keys(config) == {}


def test_a_moved_key_leaves_its_default_unserved() -> None:
    config = BrokerConfig({"kemu.kip1289.add.api.key": "200"})
    check_wire_keys(config)
    assert moved_keys(config) == {200: ADD, ADD: None}
    swapped = BrokerConfig(
        {"kemu.kip1289.add.api.key": "95", "kemu.kip1289.txn.share.ack.api.key": "96"}
    )
    check_wire_keys(swapped)
    assert moved_keys(swapped) == {95: ADD, 96: TXN_SHARE_ACK}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"kemu.kip1289.add.api.key": "18"},
            "Invalid value 18 for configuration kemu.kip1289.add.api.key: api key 18 is "
            "api_versions, which kemu serves",
        ),
        (
            {"kemu.kip1289.txn.share.ack.api.key": "79"},
            "Invalid value 79 for configuration kemu.kip1289.txn.share.ack.api.key: api key 79 "
            "is share_acknowledge, which kemu serves",
        ),
        (
            {"kemu.kip1289.add.api.key": "95"},
            "Invalid value 95 for configuration kemu.kip1289.add.api.key: "
            "kemu.kip1289.txn.share.ack.api.key has the same api key",
        ),
        (
            {"kemu.kip1289.add.api.key": "40000"},
            "Invalid value 40000 for configuration kemu.kip1289.add.api.key: Value must be no "
            "more than 32767",
        ),
    ],
)
def test_a_key_kemu_serves_or_a_taken_key_is_refused(
    overrides: dict[str, str], message: str
) -> None:
    with pytest.raises(InvalidConfig) as refused:
        check_wire_keys(BrokerConfig(overrides))
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "kemu.kip1289.enlist=sometimes",
            "Invalid value sometimes for configuration kemu.kip1289.enlist: String must be one "
            "of: implicit, explicit",
        ),
        (
            "kemu.kip1289.add.api.key=-1",
            "Invalid value -1 for configuration kemu.kip1289.add.api.key: Value must be at least 0",
        ),
        (
            "kemu.kip1289.add.api.key=x",
            "Invalid value x for configuration kemu.kip1289.add.api.key: Not a number of type "
            "SHORT",
        ),
    ],
)
def test_bad_values_are_refused_as_kafka_words_it(override: str, message: str) -> None:
    with pytest.raises(InvalidConfig) as refused:
        BrokerConfig.load(None, [override])
    assert str(refused.value) == message


async def test_served_and_advertised_at_the_configured_key() -> None:
    harness = await start({**ENABLED, "kemu.kip1289.add.api.key": "200"})
    try:
        keys = {key for key, _, _ in advertised(harness.runtime)}
        assert 200 in keys and TXN_SHARE_ACK in keys and ADD not in keys
        node = coordinator_node(harness)
        client = await harness.client(node)
        frame = bytearray(wire.encode_request_frame(add_request({}, 1, 0), 1))
        struct.pack_into(">h", frame, 4, 200)
        client.writer.write(bytes(frame))
        size = wire.SIZE.unpack(await client.reader.readexactly(4))[0]
        _, response = wire.decode_response(ADD, 0, await client.reader.readexactly(size))
        assert response.error_code == ErrorCode.invalid_request  # served: empty Topics
        assert response.error_message == "Topics must not be empty"
        old = await harness.client(node)
        old.writer.write(wire.encode_request_frame(add_request({}, 1, 0), 1))
        assert await old.reader.read(4) == b""  # 96 is not served any more: closed
    finally:
        await stop(harness)


# --- feature levels (spec §8) -----------------------------------------------------------------


async def test_share_version_3_is_finalized_exactly_when_both_rpcs_are_served(
    kemu: Harness,
) -> None:
    assert dict((n, (lo, hi)) for n, lo, hi in supported_features(kemu.runtime))[
        "share.version"
    ] == (0, 3)
    finalized = dict(finalized_features(kemu.runtime))
    assert finalized["share.version"] == 3 and finalized["transaction.version"] == 2
    off = await start({})
    try:
        keys = {key for key, _, _ in advertised(off.runtime)}
        assert TXN_SHARE_ACK not in keys and ADD not in keys
        assert dict(finalized_features(off.runtime))["share.version"] == 1
        supported = {n: (lo, hi) for n, lo, hi in supported_features(off.runtime)}
        assert supported["share.version"] == (0, 2)  # Kafka 4.4.0's range (SV_2: DLQs)
        client = await off.client(coordinator_node(off))
        client.writer.write(wire.encode_request_frame(add_request({}, 1, 0), 1))
        assert await client.reader.read(4) == b""  # not served: the connection closes
    finally:
        await stop(off)
    kemu.runtime.max_versions = caps_for_release("4.1")  # a release without KIP-1289
    assert dict(finalized_features(kemu.runtime))["share.version"] == 1


# --- AddShareAcknowledgementsToTxn ------------------------------------------------------------


async def test_enlists_the_state_partitions_idempotently(kemu: Harness) -> None:
    _, _, pid, epoch = await acquire_three(kemu)
    coordinator = await kemu.client(coordinator_node(kemu))
    tid = kemu.topic_id("t")
    for _ in range(2):
        response = await coordinator.call(add_request({tid: (0, 1)}, pid, epoch))
        assert response.error_code == ErrorCode.none and response.error_message is None
    meta = transaction(kemu)
    assert meta.share_partitions == {(GROUP, tid, 0), (GROUP, tid, 1)}
    assert {topic for topic, _ in meta.partitions} == {"__share_group_state"}
    assert set(states(kemu).values()) == {RecordState.ACQUIRED}  # it stages nothing


async def test_bad_requests_are_refused_and_change_nothing(kemu: Harness) -> None:
    _, _, pid, epoch = await acquire_three(kemu)
    node = coordinator_node(kemu)
    coordinator = await kemu.client(node)
    other = await kemu.client(next(n for n in kemu.server.cluster.nodes if n != node))
    tid = kemu.topic_id("t")
    cases = [
        (
            coordinator,
            add_request({tid: (0,)}, pid, epoch, transactional_id=None),
            "invalid_request",
        ),
        (coordinator, add_request({tid: (0,)}, pid, epoch, transactional_id=""), "invalid_request"),
        (other, add_request({tid: (0,)}, pid, epoch), "not_coordinator"),
        (coordinator, add_request({}, pid, epoch), "invalid_request"),
        (coordinator, add_request({tid: ()}, pid, epoch), "invalid_request"),
        (coordinator, add_request({tid: (0,)}, pid, epoch, group=""), "invalid_request"),
        (coordinator, add_request({uuid.uuid4(): (0,)}, pid, epoch), "unknown_topic_id"),
        (coordinator, add_request({None: (0,)}, pid, epoch), "unknown_topic_id"),
        (coordinator, add_request({tid: (0, 3)}, pid, epoch), "unknown_topic_or_partition"),
        (coordinator, add_request({tid: (0,)}, pid + 1, epoch), "invalid_producer_id_mapping"),
        (coordinator, add_request({tid: (0,)}, pid, epoch + 1), "producer_fenced"),
    ]
    for client, body, code in cases:
        response = await client.call(body)
        assert response.error_code == ErrorCode[code], (body, response)
        assert response.error_message
    assert transaction(kemu).partitions == set() and transaction(kemu).share_partitions == set()


async def test_explicit_mode_stages_only_enlisted_partitions(explicit: Harness) -> None:
    client, member_epoch, pid, epoch = await acquire_three(explicit)
    tid = explicit.topic_id("t")
    acks = {0: [(0, 0, [ACCEPT])]}
    refused = await client.call(txn_ack(tid, acks, pid, epoch, member_epoch=member_epoch))
    assert refused.error_code == ErrorCode.none
    assert partition_data(refused, 0).error_code == ErrorCode.invalid_txn_state
    assert partition_data(refused, 0).error_message
    assert set(states(explicit).values()) == {RecordState.ACQUIRED}
    assert transaction(explicit).partitions == set()  # nothing enlisted either
    fenced = await client.call(txn_ack(tid, acks, pid, epoch + 1, member_epoch=member_epoch))
    assert fenced.error_code == ErrorCode.producer_fenced
    coordinator = await explicit.client(coordinator_node(explicit))
    added = await coordinator.call(add_request({tid: (0,)}, pid, epoch))
    assert added.error_code == ErrorCode.none
    staged = await client.call(txn_ack(tid, acks, pid, epoch, member_epoch=member_epoch))
    assert partition_data(staged, 0).error_code == ErrorCode.none
    assert states(explicit)[0] is RecordState.TX_PENDING


async def test_explicit_enlistment_is_per_partition_and_producer_epoch(explicit: Harness) -> None:
    client, member_epoch, pid, epoch = await acquire_three(explicit)
    tid = explicit.topic_id("t")
    coordinator = await explicit.client(coordinator_node(explicit))
    assert (await coordinator.call(add_request({tid: (1,)}, pid, epoch))).error_code == 0
    refused = await client.call(
        txn_ack(tid, {0: [(0, 0, [ACCEPT])]}, pid, epoch, member_epoch=member_epoch)
    )
    assert partition_data(refused, 0).error_code == ErrorCode.invalid_txn_state
    assert set(states(explicit).values()) == {RecordState.ACQUIRED}


async def test_implicit_mode_still_enlists_by_itself(kemu: Harness) -> None:
    client, member_epoch, pid, epoch = await acquire_three(kemu)
    tid = kemu.topic_id("t")
    staged = await client.call(
        txn_ack(tid, {0: [(0, 0, [ACCEPT])]}, pid, epoch, member_epoch=member_epoch)
    )
    assert partition_data(staged, 0).error_code == ErrorCode.none
    assert transaction(kemu).share_partitions == {(GROUP, tid, 0)}


async def test_no_share_partition_is_needed_but_the_group_must_exist(kemu: Harness) -> None:
    """Enlistment names share partitions, whether or not one was ever fetched from; a share
    group that does not exist is GROUP_ID_NOT_FOUND (spec Q7: TxnShareAcknowledge's codes) and
    enlists nothing."""
    coordinator = await kemu.client(coordinator_node(kemu))
    pid, epoch = await init_producer(coordinator)
    tid = kemu.topic_id("t")
    unknown = await coordinator.call(add_request({tid: (2,)}, pid, epoch, group="nobody"))
    assert unknown.error_code == ErrorCode.group_id_not_found
    assert unknown.error_message == "Share group nobody does not exist"
    assert transaction(kemu).share_partitions == set()
    await join(kemu, "m1")
    response = await coordinator.call(add_request({tid: (2,)}, pid, epoch))
    assert response.error_code == ErrorCode.none
    assert transaction(kemu).share_partitions == {(GROUP, tid, 2)}
