"""Producer id, epoch and sequence checks: the same hand-built Produce and WriteTxnMarkers requests
to kemu and to a real Kafka 4.4.0 (bench's jars; skipped without them), the same answers.
``EXPECTED`` is what Kafka 4.4.0 answered (recorded 2026-12-06); each step's producer id is a new
one (InitProducerId), so the steps are independent. The case-by-case table is in
``kemu.cluster.producer_state``; its unit tests: tests/unit/cluster/test_producer_state.py.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.testing.kafka import SHARE_GROUPS
from kemu.testing.wire_client import WireClient
from tests.integration.txn.wire_parity import (
    Server,
    add_partition,
    client_with_topic,
    init_producer_id,
    produce,
    serve,
    until_ready,
)

pytestmark = [pytest.mark.integration, pytest.mark.parity]

DELETE_RECORDS, WRITE_MARKERS = 21, 27
TOPIC = "sequence-parity"
MAX_SEQUENCE = 2**31 - 1

NONE = ErrorCode.none
OUT_OF_ORDER = ErrorCode.out_of_order_sequence_number
STALE_EPOCH = ErrorCode.invalid_producer_epoch

# step -> the answers, in order, Kafka 4.4.0 gives to its requests (``"dup"``: NONE with the
# base offset of the batch it repeats)
EXPECTED: dict[str, list[object]] = {
    # an idempotent producer unknown to the partition may start at any sequence
    "unknown_producer_any_sequence": [NONE],
    "same_epoch_gap": [NONE, OUT_OF_ORDER],
    "duplicate_answers_original_offset": [NONE, NONE, "dup"],
    "duplicate_window_is_five_batches": [NONE] * 6 + [OUT_OF_ORDER, "dup"],
    "new_epoch_starts_at_zero": [NONE, OUT_OF_ORDER, NONE],
    "stale_epoch": [NONE, NONE, STALE_EPOCH],
    "sequence_wraps": [NONE, NONE],
    "epoch_minus_one_unchecked": [NONE, NONE],
    # produce v12 (transaction version 2): a transactional producer new here starts at 0
    "tv2_unknown_producer_starts_at_zero": [OUT_OF_ORDER, NONE],
    "tv1_unknown_producer_any_sequence": [NONE],
    "non_transactional_in_transaction": [NONE, ErrorCode.invalid_txn_state],
    # a refused attempt's lowest sequence outlives it (Kafka's VerificationStateEntry)
    "tv1_refused_attempt_holds_lowest_sequence": [NONE, NONE, NONE, OUT_OF_ORDER, OUT_OF_ORDER],
    # WriteTxnMarkers (v1: transaction version 0, v2 with 2)
    "marker_below_epoch": [NONE, STALE_EPOCH, NONE],
    "tv2_marker_equal_epoch": [NONE, NONE, NONE, STALE_EPOCH],
    "marker_coordinator_fenced": [NONE, ErrorCode.transaction_coordinator_fenced, NONE],
    "marker_new_epoch_restarts_sequences": [NONE, NONE, OUT_OF_ORDER, NONE],
    # DeleteRecords (as retention) to the end of the log keeps the producer's state
    "state_outlives_deleted_records": [NONE, NONE, OUT_OF_ORDER, "dup", NONE],
    # below v12 the client adds the partition first (AddPartitionsToTxn), else v11 and v10:
    "tv1_transactional_without_add_partitions": [
        ErrorCode.transaction_abortable,
        ErrorCode.invalid_txn_state,
    ],
}


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with serve(
        request,
        tmp_path_factory,
        name="sequence-parity",
        kemu_overrides=SHARE_GROUPS.kemu_overrides(),
    ) as started:
        yield started


class Wire:
    """Hand-built requests to the single broker (node 1), which coordinates everything."""

    def __init__(self, client: WireClient) -> None:
        self.client = client
        self.offsets: list[int] = []  # base offset of each successful produce

    def init(self, transactional_id: str | None = None) -> tuple[int, int]:
        return init_producer_id(self.client, transactional_id, datetime.timedelta(seconds=60))

    def produce(
        self,
        producer_id: int,
        epoch: int,
        sequence: int,
        *,
        count: int = 1,
        version: int = 11,
        transactional_id: str | None = None,
        transactional: bool = False,
    ) -> object:
        """The error code, or ``"dup"`` for NONE at the base offset of an earlier batch."""
        result = produce(
            self.client,
            TOPIC,
            producer_id,
            epoch,
            sequence,
            version=version,
            count=count,
            transactional_id=transactional_id,
            transactional=transactional,
        )
        error = ErrorCode(result.error_code)
        if error is ErrorCode.none:
            offset = int(result.base_offset)
            if offset in self.offsets:
                return "dup"
            self.offsets.append(offset)
        return error

    def delete_records(self, before: int) -> ErrorCode:
        module = wire.request_module(DELETE_RECORDS, 2)
        partition = module.DeleteRecordsPartition(partition_index=0, offset=before)
        answer = self.client.call(
            1,
            DELETE_RECORDS,
            2,
            topics=(module.DeleteRecordsTopic(name=TOPIC, partitions=(partition,)),),
            timeout=datetime.timedelta(seconds=10),
        )
        return ErrorCode(answer.topics[0].partitions[0].error_code)

    def add_partition(self, transactional_id: str, producer_id: int, epoch: int) -> None:
        until_ready(
            lambda: add_partition(self.client, TOPIC, transactional_id, producer_id, epoch),
            lambda error: error == ErrorCode.none,
        )

    def marker(
        self,
        producer_id: int,
        epoch: int,
        *,
        version: int = 1,
        transaction_version: int = 0,
        coordinator_epoch: int = 0,
    ) -> ErrorCode:
        module = wire.request_module(WRITE_MARKERS, version)
        fields: dict[str, Any] = (
            {"transaction_version": transaction_version} if version >= 2 else {}
        )
        marker = module.WritableTxnMarker(
            producer_id=producer_id,
            producer_epoch=epoch,
            transaction_result=False,
            topics=(module.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=(0,)),),
            coordinator_epoch=coordinator_epoch,
            **fields,
        )
        answer = self.client.call(1, WRITE_MARKERS, version, markers=(marker,))
        return ErrorCode(answer.markers[0].topics[0].partitions[0].error_code)


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[Wire]:
    with client_with_topic(server, TOPIC, "sequence-parity") as raw:
        yield Wire(raw)


def steps(w: Wire) -> dict[str, list[object]]:
    out: dict[str, list[object]] = {}
    run = uuid.uuid4().hex[:8]

    pid, e = w.init()
    out["unknown_producer_any_sequence"] = [w.produce(pid, e, 17)]

    pid, e = w.init()
    out["same_epoch_gap"] = [w.produce(pid, e, 0, count=3), w.produce(pid, e, 4)]

    pid, e = w.init()
    out["duplicate_answers_original_offset"] = [
        w.produce(pid, e, 0, count=2),
        w.produce(pid, e, 2),
        w.produce(pid, e, 0, count=2),
    ]

    pid, e = w.init()
    window = [w.produce(pid, e, sequence) for sequence in range(6)]
    out["duplicate_window_is_five_batches"] = [*window, w.produce(pid, e, 0), w.produce(pid, e, 1)]

    pid, e = w.init()
    out["new_epoch_starts_at_zero"] = [
        w.produce(pid, e, 0, count=5),
        w.produce(pid, e + 1, 5),
        w.produce(pid, e + 1, 0),
    ]

    pid, e = w.init()
    out["stale_epoch"] = [w.produce(pid, e + 1, 0), w.produce(pid, e + 1, 1), w.produce(pid, e, 2)]

    pid, e = w.init()
    out["sequence_wraps"] = [w.produce(pid, e, MAX_SEQUENCE), w.produce(pid, e, 0)]

    pid, _ = w.init()
    out["epoch_minus_one_unchecked"] = [w.produce(pid, -1, 3), w.produce(pid, -1, 9)]

    txn = f"tv2-{run}"
    pid, e = w.init(txn)
    out["tv2_unknown_producer_starts_at_zero"] = [
        w.produce(pid, e, 3, version=12, transactional_id=txn, transactional=True),
        w.produce(pid, e, 0, version=12, transactional_id=txn, transactional=True),
    ]

    txn = f"tv1-{run}"
    pid, e = w.init(txn)
    w.add_partition(txn, pid, e)
    out["tv1_unknown_producer_any_sequence"] = [
        w.produce(pid, e, 3, transactional_id=txn, transactional=True)
    ]

    txn = f"mixed-{run}"
    pid, e = w.init(txn)
    w.add_partition(txn, pid, e)
    out["non_transactional_in_transaction"] = [
        w.produce(pid, e, 0, transactional_id=txn, transactional=True),
        w.produce(pid, e, 1, transactional_id=txn),
    ]

    # Idempotent batches first (sequences 0-3), then a transaction whose first batch (sequence
    # 2) is out of order: its verification keeps 2 as the lowest sequence, so sequence 4, in
    # order, is refused too.
    txn = f"lowest-{run}"
    pid, e = w.init(txn)
    first = [w.produce(pid, e, 0, count=2), w.produce(pid, e, 2, count=2)]
    w.add_partition(txn, pid, e)
    out["tv1_refused_attempt_holds_lowest_sequence"] = [
        *first,
        w.produce(pid, e, 4, count=1),  # idempotent, in order: the state moves to 4
        w.produce(pid, e, 3, transactional_id=txn, transactional=True),
        w.produce(pid, e, 5, transactional_id=txn, transactional=True),
    ]

    pid, e = w.init()
    out["marker_below_epoch"] = [
        w.produce(pid, e + 2, 0),
        w.marker(pid, e + 1),
        w.marker(pid, e + 2),
    ]

    # transaction version 2: an epoch equal to the partition's is a retry while no transaction
    # of the producer is open here, stale while one is
    txn = f"tv2-marker-{run}"
    pid, e = w.init(txn)
    w.add_partition(txn, pid, e)
    out["tv2_marker_equal_epoch"] = [
        w.produce(pid, e, 0),  # idempotent: no transaction open here
        w.marker(pid, e, version=2, transaction_version=2),
        w.produce(pid, e, 1, transactional_id=txn, transactional=True),
        w.marker(pid, e, version=2, transaction_version=2),
    ]

    pid, e = w.init()
    out["marker_coordinator_fenced"] = [
        w.marker(pid, e, coordinator_epoch=5),
        w.marker(pid, e, coordinator_epoch=4),
        w.marker(pid, e, coordinator_epoch=6),
    ]

    pid, e = w.init()
    out["marker_new_epoch_restarts_sequences"] = [
        w.produce(pid, e, 0, count=3),
        w.marker(pid, e + 1, version=2, transaction_version=2),
        w.produce(pid, e + 1, 3),
        w.produce(pid, e + 1, 0),
    ]

    pid, e = w.init()
    written = w.produce(pid, e, 0, count=3)
    out["state_outlives_deleted_records"] = [
        written,
        w.delete_records(w.offsets[-1] + 3),
        w.produce(pid, e, 7),
        w.produce(pid, e, 0, count=3),  # its offset is below the log start now
        w.produce(pid, e, 3),
    ]

    txn = f"no-add-{run}"
    pid, e = w.init(txn)
    out["tv1_transactional_without_add_partitions"] = [
        w.produce(pid, e, 0, transactional_id=txn, transactional=True),
        w.produce(pid, e, 0, version=10, transactional_id=txn, transactional=True),
    ]
    return out


def test_sequence_and_epoch_answers_are_kafkas(client: Wire) -> None:
    assert steps(client) == EXPECTED
