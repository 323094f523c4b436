"""KIP-1289's two-RPC form (spec §2.7) on a 3-broker kemu started by the CLI:
AddShareAcknowledgementsToTxn at the transaction coordinator, then TxnShareAcknowledge at the
source partition's leader, then EndTxn — records resolve exactly as in the one-RPC form. Also:
the ``kemu.kip1289.enlist=explicit`` refusal, the request errors (nothing changes on any of
them), the configurable api keys and their start-up checks, and the ``share.version`` 3 gate as
ApiVersions and Kafka 4.4.0's ``kafka-features.sh describe`` show it.
"""

from __future__ import annotations

import shutil
import socket
import struct
import subprocess
import sys
import uuid
from typing import Any

import pytest

from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.testing.plugin import KemuProcess
from tests import REPO_ROOT
from tests.integration.kip1289.test_kip1289 import (
    AVAILABLE,
    TX_PENDING,
    ShareMember,
    TransactionalProducer,
    WireClient,
    delivery_states,
    setup,
    start_offset,
    wait_for_lag,
)

pytestmark = [pytest.mark.integration, pytest.mark.parity]

ADD, TXN_SHARE_ACK, API_VERSIONS = 96, 95, 18
LIB = REPO_ROOT / "bench" / ".cache" / "lib"
KIP = ["kemu.kip1289.enable=true", "share.coordinator.state.topic.num.partitions=3"]


def start(kemu_factory: type[KemuProcess], *overrides: str) -> KemuProcess:
    return kemu_factory(brokers=3, overrides=[*KIP, *overrides]).start()


def add_share_acks(
    txn: TransactionalProducer,
    member: ShareMember,
    *,
    node: int | None = None,
    transactional_id: str | None = "",
    producer_epoch: int | None = None,
    topic_id: uuid.UUID | None = None,
) -> Any:
    """AddShareAcknowledgementsToTxn for partition 0 of the member's topic, by default to the
    transaction coordinator with the producer's own ids."""
    module = wire.request_module(ADD, 0)
    topic = module.AddShareAcknowledgementsToTxnTopic(
        topic_id=topic_id or member.topic_id, partitions=(0,)
    )
    return txn.client.call(
        txn.coordinator if node is None else node,
        ADD,
        0,
        transactional_id=txn.transactional_id if transactional_id == "" else transactional_id,
        producer_id=txn.producer_id,
        producer_epoch=txn.producer_epoch if producer_epoch is None else producer_epoch,
        group_id=member.group,
        topics=(topic,),
    )


def partition_errors(response: Any) -> list[ErrorCode]:
    return [p.error_code for t in response.responses for p in t.partitions]


@pytest.fixture(params=["implicit", "explicit"])
def kemu(request: pytest.FixtureRequest, kemu_factory: type[KemuProcess]) -> KemuProcess:
    """A client written for the two-RPC form works in both enlistment modes."""
    return start(kemu_factory, f"kemu.kip1289.enlist={request.param}")


def test_two_rpc_commit_of_share_acks_alone(kemu: KemuProcess) -> None:
    """Nothing is produced in the transaction: the enlisted share-state partition alone makes
    it committable, and the commit resolves the staged record for good."""
    client, m1, m2 = setup(kemu, "two-commit")
    try:
        assert m1.fetch_until(1) == [(0, 0, 1)]
        txn = TransactionalProducer(client, "tx-two-commit")
        txn.init()
        added = add_share_acks(txn, m1)
        assert (added.error_code, added.error_message) == (ErrorCode.none, None)
        assert delivery_states(kemu, "two-commit")[-1] != TX_PENDING  # it stages nothing
        staged = txn.send_share_acks(m1, 0, 0)
        assert staged.error_code == ErrorCode.none
        assert partition_errors(staged) == [ErrorCode.none]
        assert delivery_states(kemu, "two-commit")[-1] == TX_PENDING
        assert m2.fetch(wait_ms=300) == []
        txn.end(commit=True)
        wait_for_lag(m1, 0)
        assert m2.fetch(wait_ms=300) == [] and m1.fetch(wait_ms=300) == []
        assert start_offset(kemu, "two-commit") == 1
    finally:
        client.close()


def test_two_rpc_abort_redelivers(kemu: KemuProcess) -> None:
    client, m1, m2 = setup(kemu, "two-abort")
    try:
        assert m1.fetch_until(1) == [(0, 0, 1)]
        txn = TransactionalProducer(client, "tx-two-abort")
        txn.init()
        assert add_share_acks(txn, m1).error_code == ErrorCode.none
        assert partition_errors(txn.send_share_acks(m1, 0, 0)) == [ErrorCode.none]
        txn.end(commit=False)
        assert m2.fetch_until(1) == [(0, 0, 2)]
        assert m2.lag() == 1
        assert delivery_states(kemu, "two-abort")[-1] == AVAILABLE
    finally:
        client.close()


def test_repeating_the_enlistment_is_none(kemu: KemuProcess) -> None:
    client, m1, _ = setup(kemu, "two-repeat")
    try:
        assert m1.fetch_until(1) == [(0, 0, 1)]
        txn = TransactionalProducer(client, "tx-two-repeat")
        txn.init()
        for _ in range(3):
            assert add_share_acks(txn, m1).error_code == ErrorCode.none
        assert partition_errors(txn.send_share_acks(m1, 0, 0)) == [ErrorCode.none]
        assert add_share_acks(txn, m1).error_code == ErrorCode.none  # after staging too
        txn.end(commit=True)
        wait_for_lag(m1, 0)
    finally:
        client.close()


def test_explicit_mode_refuses_acks_not_enlisted(kemu_factory: type[KemuProcess]) -> None:
    kemu = start(kemu_factory, "kemu.kip1289.enlist=explicit")
    client, m1, m2 = setup(kemu, "explicit")
    try:
        assert m1.fetch_until(1) == [(0, 0, 1)]
        txn = TransactionalProducer(client, "tx-explicit")
        txn.init()
        refused = txn.send_share_acks(m1, 0, 0)
        assert refused.error_code == ErrorCode.none
        [partition] = [p for t in refused.responses for p in t.partitions]
        assert partition.error_code == ErrorCode.invalid_txn_state and partition.error_message
        assert TX_PENDING not in delivery_states(kemu, "explicit")  # nothing staged
        assert m1.lag() == 1
        assert add_share_acks(txn, m1).error_code == ErrorCode.none
        assert partition_errors(txn.send_share_acks(m1, 0, 0)) == [ErrorCode.none]
        txn.end(commit=True)
        wait_for_lag(m1, 0)
        assert m2.fetch(wait_ms=300) == []
    finally:
        client.close()


def test_request_errors_change_nothing(kemu_factory: type[KemuProcess]) -> None:
    kemu = start(kemu_factory)
    client, m1, m2 = setup(kemu, "errors")
    try:
        assert m1.fetch_until(1) == [(0, 0, 1)]
        txn = TransactionalProducer(client, "tx-errors")
        txn.init()
        elsewhere = next(node for node in client.addresses if node != txn.coordinator)
        cases = [
            (add_share_acks(txn, m1, node=elsewhere), ErrorCode.not_coordinator),
            (add_share_acks(txn, m1, topic_id=uuid.uuid4()), ErrorCode.unknown_topic_id),
            (add_share_acks(txn, m1, transactional_id=None), ErrorCode.invalid_request),
            (
                add_share_acks(txn, m1, producer_epoch=txn.producer_epoch + 1),
                ErrorCode.producer_fenced,
            ),
        ]
        for response, code in cases:
            assert response.error_code == code, response
            assert response.error_message
        # a newer producer of the same transactional id fences this one
        successor = TransactionalProducer(client, "tx-errors")
        successor.init()
        fenced = add_share_acks(txn, m1)
        assert fenced.error_code == ErrorCode.producer_fenced
        assert TX_PENDING not in delivery_states(kemu, "errors")
        # nothing was staged: the record is still m1's to acknowledge, in the successor's txn
        assert m1.lag() == 1 and m2.fetch(wait_ms=300) == []
        assert add_share_acks(successor, m1).error_code == ErrorCode.none
        assert partition_errors(successor.send_share_acks(m1, 0, 0)) == [ErrorCode.none]
        successor.end(commit=True)
        wait_for_lag(m1, 0)
    finally:
        client.close()


# --- keys, versions and the feature gate --------------------------------------------------------


def raw_call(address: tuple[str, int], body: Any, wire_key: int, version: int = 0) -> Any:
    """Send ``body`` with ``wire_key`` and ``version`` in its header; None when the broker
    closes the connection instead of answering."""
    frame = bytearray(wire.encode_request_frame(body, 1, "kip1289-test"))
    struct.pack_into(">hh", frame, 4, wire_key, version)
    with socket.create_connection(address, timeout=15) as sock:
        sock.sendall(bytes(frame))
        head = sock.recv(4)
        if not head:
            return None
        size = struct.unpack(">i", head)[0]
        payload = b""
        while len(payload) < size:
            payload += sock.recv(size - len(payload))
    return wire.decode_response(type(body).__api_key__, type(body).__version__, payload)[1]


def api_versions(client: WireClient) -> Any:
    return client.call(
        1, API_VERSIONS, 4, client_software_name="kip1289-test", client_software_version="1"
    )


def keys_and_features(client: WireClient) -> tuple[set[int], dict[str, int]]:
    response = api_versions(client)
    finalized = {f.name: f.max_version_level for f in response.finalized_features}
    return {k.api_key for k in response.api_keys}, finalized


def test_feature_levels_and_keys_follow_the_kip_flag(kemu_factory: type[KemuProcess]) -> None:
    on = WireClient(start(kemu_factory).bootstrap)
    off = WireClient(kemu_factory(brokers=3).start().bootstrap)
    try:
        keys, finalized = keys_and_features(on)
        assert {ADD, TXN_SHARE_ACK} <= keys
        assert finalized["share.version"] == 3 and finalized["transaction.version"] == 2
        keys, finalized = keys_and_features(off)
        assert not {ADD, TXN_SHARE_ACK} & keys
        assert finalized["share.version"] == 1 and finalized["transaction.version"] == 2
        body = wire.build(wire.request_schema(ADD, 0), transactional_id="t", group_id="g")
        assert raw_call(off.addresses[1], body, ADD) is None  # not served: closed
        assert raw_call(on.addresses[1], body, ADD, version=1) is None  # no v1: closed
    finally:
        on.close()
        off.close()


def test_the_keys_are_configurable(kemu_factory: type[KemuProcess]) -> None:
    kemu = start(
        kemu_factory, "kemu.kip1289.add.api.key=200", "kemu.kip1289.txn.share.ack.api.key=201"
    )
    client = WireClient(kemu.bootstrap)
    try:
        keys, finalized = keys_and_features(client)
        assert {200, 201} <= keys and not {ADD, TXN_SHARE_ACK} & keys
        assert finalized["share.version"] == 3
        coordinator = client.coordinator(1, "tx-keys")
        body = wire.build(wire.request_schema(ADD, 0), transactional_id="tx-keys", group_id="g")
        answered = raw_call(client.addresses[coordinator], body, 200)
        assert answered.error_code == ErrorCode.invalid_request  # served there: no Topics
        assert raw_call(client.addresses[coordinator], body, ADD) is None
    finally:
        client.close()


@pytest.mark.parametrize(
    ("override", "line"),
    [
        (
            "kemu.kip1289.add.api.key=18",
            "kemu: Invalid value 18 for configuration kemu.kip1289.add.api.key: api key 18 is "
            "api_versions, which kemu serves",
        ),
        (
            "kemu.kip1289.txn.share.ack.api.key=96",
            "kemu: Invalid value 96 for configuration kemu.kip1289.add.api.key: "
            "kemu.kip1289.txn.share.ack.api.key has the same api key",
        ),
        (
            "kemu.kip1289.enlist=sometimes",
            "kemu: Invalid value sometimes for configuration kemu.kip1289.enlist: String must "
            "be one of: implicit, explicit",
        ),
    ],
)
def test_bad_key_or_mode_is_refused_at_start_up(override: str, line: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kemu.cli", "serve", "--port", "1", "--override", override],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [line]
    assert done.stdout == ""


@pytest.mark.java
def test_kafka_features_describe_shows_share_version_3(kemu_factory: type[KemuProcess]) -> None:
    if shutil.which("java") is None or not list(LIB.glob("kafka-tools-*.jar")):
        pytest.skip("needs java and Kafka's jars in bench/.cache/lib (make bench fetches them)")
    kemu = start(kemu_factory)
    done = subprocess.run(
        [
            "java",
            "-Xmx256M",
            "-cp",
            f"{LIB}/*",
            "org.apache.kafka.tools.FeatureCommand",
            "--bootstrap-server",
            kemu.first_broker,
            "describe",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    features = {
        words[1]: dict(zip(words[2::2], words[3::2], strict=False))
        for words in (line.split() for line in done.stdout.splitlines())
        if words[:1] == ["Feature:"]
    }
    assert features["share.version"]["SupportedMaxVersion:"] == "3"
    assert features["share.version"]["FinalizedVersionLevel:"] == "3"
    assert features["transaction.version"]["FinalizedVersionLevel:"] == "2"
