"""A timestamp Kafka sends as -1 for "none" in a field its schema does not make nullable (the
TransactionStartTimeMs of DescribeTransactions for a transaction that is not open) decodes as
None, as Java's ``TransactionDescription.transactionStartTimeMs()`` is then empty; kio alone
refused it ("Cannot parse negative timestamp"). kemu encodes the field as Kafka does."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from kemu.coordinator.transaction.coordinator import TransactionMetadata
from kemu.coordinator.transaction.service import transaction_coordinator
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.protocol.unset_timestamps import readable
from tests.unit.broker.handlers.test_admin_handlers import Broker

DESCRIBE_TRANSACTIONS = 65
TXN = "tx-retry-0a67f6dc"
# DescribeTransactions v0 from a real Kafka 4.4.0 (correlation id 7): TXN Empty, producer id 0,
# epoch 1, timeout 60 s, start time -1 (recorded 2026-12-06 with the parity test's wire client)
KAFKA_EMPTY = bytes.fromhex(
    "00000007" "00" "00000000" "02" "0000" "12" + TXN.encode().hex() + "06" + b"Empty".hex()
    + "0000ea60" "ffffffffffffffff" "0000000000000000" "0001" "01" "00" "00"
)  # fmt: skip


def test_kafkas_describe_of_an_empty_transaction_decodes_with_no_start_time() -> None:
    correlation, response = wire.decode_response(DESCRIBE_TRANSACTIONS, 0, KAFKA_EMPTY)
    assert correlation == 7
    [state] = response.transaction_states
    assert state.error_code == ErrorCode.none
    assert (state.transactional_id, state.transaction_state) == (TXN, "Empty")
    assert state.transaction_start_time is None
    assert state.transaction_timeout == datetime.timedelta(seconds=60)
    assert (state.producer_id, state.producer_epoch, state.topics) == (0, 1, ())


def test_a_start_time_decodes_as_before() -> None:
    started = KAFKA_EMPTY.replace(b"\xff" * 8, (1_700_000_000_123).to_bytes(8, "big"))
    [state] = wire.decode_response(DESCRIBE_TRANSACTIONS, 0, started)[1].transaction_states
    assert state.transaction_start_time == datetime.datetime(
        2023, 11, 14, 22, 13, 20, 123_000, tzinfo=datetime.UTC
    )


def test_kemu_encodes_an_empty_transaction_as_kafka(monkeypatch: pytest.MonkeyPatch) -> None:
    broker = Broker()
    coordinator = transaction_coordinator(broker.runtime).coordinator
    coordinator.transactions[TXN] = TransactionMetadata(TXN, 0, 1, 60_000, last_update_ms=5)
    payloads: list[bytes] = []
    decode = wire.decode_response

    def recording(api_key: int, api_version: int, payload: bytes) -> tuple[int, Any]:
        payloads.append(payload)
        return decode(api_key, api_version, payload)

    monkeypatch.setattr(wire, "decode_response", recording)
    described = broker.send(broker.request(DESCRIBE_TRANSACTIONS, 0, transactional_ids=(TXN,)))
    [state] = described.transaction_states
    assert state.transaction_start_time is None
    [payload] = payloads
    assert payload[4:] == KAFKA_EMPTY[4:]  # all but the correlation id: the start time is -1


def test_schemas_without_such_a_field_are_read_as_they_are() -> None:
    for api_key, version in ((0, 13), (1, 17), (3, 12), (22, 5), (66, 1)):
        schema = wire.response_schema(api_key, version)
        assert readable(schema) is schema
    produce = wire.response_schema(0, 13)  # its LogAppendTimeMs is nullable already
    assert readable(produce) is produce
    describe = wire.response_schema(DESCRIBE_TRANSACTIONS, 0)
    assert readable(describe) is not describe
    assert readable(describe).__api_key__ == DESCRIBE_TRANSACTIONS
