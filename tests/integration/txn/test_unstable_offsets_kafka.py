"""OffsetFetch while a transaction holds TxnOffsetCommit offsets, on the wire, on kemu and on a
real Kafka 4.4.0 (bench's jars; skipped without them).

A transactional producer commits an offset of partition 0 for a group (TxnOffsetCommit v5,
transaction version 2, no AddOffsetsToTxn), and before its EndTxn a fetch asks for the group's
offsets of partitions 0 and 1:

- with ``require_stable`` (v7, and v9 for one group of several), partition 0 answers
  UNSTABLE_OFFSET_COMMIT with offset -1, partition 1 its committed offset; the group's error and
  v7's top-level error stay NONE (the Java consumer, read_committed, asks again);
- without it, partition 0 answers the offset committed before the transaction;
- after EndTxn commit the transaction's offset, after an abort the one before, in both forms.

TxnOffsetCommit v3 from a producer that sent no AddOffsetsToTxn is INVALID_TXN_STATE, and the
offset stays stable (kemu had taken it, and then left it pending for good).

Until this was compared kemu had kept the offsets in memory until the commit, answered the
last committed offset to a fetch that required stable offsets, and lost them at a restart.
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
    client_with_topic,
    coordinator_ready,
    end_txn,
    init_producer_id,
    serve,
    until_ready,
)

pytestmark = [pytest.mark.integration, pytest.mark.parity]

OFFSET_COMMIT, OFFSET_FETCH, TXN_OFFSET_COMMIT = 8, 9, 28
TOPIC = "unstable-offsets"
BEFORE, IN_TRANSACTION, OTHER = 3, 7, 2
# (error, offset) of partitions 0 and 1, and the group's error
Answer = tuple[tuple[str, int], tuple[str, int], str]


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with serve(
        request,
        tmp_path_factory,
        name="unstable-offsets",
        kemu_overrides=SHARE_GROUPS.kemu_overrides(),
    ) as started:
        yield started


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[WireClient]:
    with client_with_topic(server, TOPIC, "unstable-offsets", partitions=2) as made:
        yield made


def commit_plain(client: WireClient, group: str) -> None:
    """OffsetCommit v8 (a simple group) of partitions 0 and 1."""
    module = wire.request_module(OFFSET_COMMIT, 8)
    partitions = tuple(
        module.OffsetCommitRequestPartition(
            partition_index=index,
            committed_offset=offset,
            committed_leader_epoch=-1,
            committed_metadata="",
        )
        for index, offset in ((0, BEFORE), (1, OTHER))
    )
    answer = until_ready(
        lambda: client.call(
            1,
            OFFSET_COMMIT,
            8,
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=(module.OffsetCommitRequestTopic(name=TOPIC, partitions=partitions),),
        ),
        lambda r: (
            r.topics[0].partitions[0].error_code
            not in (ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator)
        ),
    )
    assert [p.error_code for p in answer.topics[0].partitions] == [ErrorCode.none] * 2


def txn_offset_commit(
    client: WireClient,
    transactional_id: str,
    group: str,
    ids: tuple[int, int],
    version: int = 5,
) -> str:
    """TxnOffsetCommit of partition 0 at ``IN_TRANSACTION``; its answer's error name (v5, of
    transaction version 2, adds the group's partition to the transaction itself)."""
    module = wire.request_module(TXN_OFFSET_COMMIT, version)
    partition = module.TxnOffsetCommitRequestPartition(
        partition_index=0,
        committed_offset=IN_TRANSACTION,
        committed_leader_epoch=-1,
        committed_metadata="",
    )
    answer = client.call(
        1,
        TXN_OFFSET_COMMIT,
        version,
        transactional_id=transactional_id,
        group_id=group,
        producer_id=ids[0],
        producer_epoch=ids[1],
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=(module.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=(partition,)),),
    )
    return ErrorCode(answer.topics[0].partitions[0].error_code).name


def _partitions(topics: Any) -> tuple[tuple[str, int], tuple[str, int]]:
    [topic] = topics
    found = {
        p.partition_index: (ErrorCode(p.error_code).name, p.committed_offset)
        for p in topic.partitions
    }
    return found[0], found[1]


def fetch_v7(client: WireClient, group: str, *, stable: bool) -> Answer:
    module = wire.request_module(OFFSET_FETCH, 7)
    answer = client.call(
        1,
        OFFSET_FETCH,
        7,
        group_id=group,
        topics=(module.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=(0, 1)),),
        require_stable=stable,
    )
    return (*_partitions(answer.topics), ErrorCode(answer.error_code).name)


def fetch_v9(client: WireClient, group: str, *, stable: bool) -> Answer:
    module = wire.request_module(OFFSET_FETCH, 9)
    topics = (module.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=(0, 1)),)
    answer = client.call(
        1,
        OFFSET_FETCH,
        9,
        groups=(
            module.OffsetFetchRequestGroup(
                group_id=group, member_id=None, member_epoch=-1, topics=topics
            ),
        ),
        require_stable=stable,
    )
    [found] = answer.groups
    return (*_partitions(found.topics), ErrorCode(found.error_code).name)


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_offsets_held_by_an_open_transaction_are_unstable(client: WireClient, commit: bool) -> None:
    run = uuid.uuid4().hex[:8]
    group, transactional_id = f"g-{run}", f"tx-{run}"
    coordinator_ready(client, 0, group)
    commit_plain(client, group)
    ids = init_producer_id(client, transactional_id, datetime.timedelta(seconds=60))
    assert txn_offset_commit(client, transactional_id, group, ids) == "none"
    unstable = (("unstable_offset_commit", -1), ("none", OTHER), "none")
    last = (("none", BEFORE), ("none", OTHER), "none")
    open_answers = {
        "v7 stable": fetch_v7(client, group, stable=True),
        "v9 stable": fetch_v9(client, group, stable=True),
        "v7": fetch_v7(client, group, stable=False),
        "v9": fetch_v9(client, group, stable=False),
    }
    assert open_answers == {"v7 stable": unstable, "v9 stable": unstable, "v7": last, "v9": last}
    error, _epoch = end_txn(client, transactional_id, *ids, commit=commit)
    assert error == ErrorCode.none
    ended = (("none", IN_TRANSACTION if commit else BEFORE), ("none", OTHER), "none")
    # Kafka completes the offsets when its marker is written, a moment after EndTxn's answer
    until_ready(lambda: fetch_v9(client, group, stable=True), lambda answer: answer == ended)
    assert fetch_v7(client, group, stable=True) == fetch_v9(client, group, stable=False) == ended


def test_v3_without_add_offsets_to_txn_is_invalid_txn_state(client: WireClient) -> None:
    """Below v5 the group's partition must already be in the transaction (AddOffsetsToTxn):
    Kafka answers INVALID_TXN_STATE and writes nothing, so no offset is left pending."""
    run = uuid.uuid4().hex[:8]
    group, transactional_id = f"g-{run}", f"tx-{run}"
    coordinator_ready(client, 0, group)
    commit_plain(client, group)
    ids = init_producer_id(client, transactional_id, datetime.timedelta(seconds=60))
    assert txn_offset_commit(client, transactional_id, group, ids, 3) == "invalid_txn_state"
    assert fetch_v9(client, group, stable=True) == (("none", BEFORE), ("none", OTHER), "none")
