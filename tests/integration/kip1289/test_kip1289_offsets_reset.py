"""An operator's share-group offsets reset while a transaction holds staged acknowledgements
(docs/kip-1289.md, "TX_PENDING transitions": kemu's choice, KIP-1289 does not say).

AlterShareGroupOffsets re-initializes the share partition's state at the operator's start
offset and DeleteShareGroupOffsets deletes it; either drops the TX_PENDING records with the
rest, and the transaction's COMMIT or ABORT marker then finds nothing to resolve: the
transaction ends normally (its output records committed or aborted as usual), and the group
reads from where the operator put it, every record with a fresh delivery count, whichever way
the transaction ended. The reset is durable: a kemu SIGKILLed between the reset and the marker
comes back with it.

One kemu started by the CLI with ``--data-dir`` (3 brokers, ``kemu.kip1289.enable=true``,
``--json-logs`` so that the log can be read for errors), SIGKILLed and started again by the
restart cases. The share consumer and transactional producer are ``kemu.client``'s (as in
``test_kip1289_scenarios.py``); the resets are sent on the wire (no Python admin client has
AlterShareGroupOffsets or DeleteShareGroupOffsets) to the group's coordinator.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from kemu.client import ShareConsumer, ShareRecord, TransactionalProducer
from kemu.coordinator.share.keys import kafka_uuid
from kemu.protocol.errors import ErrorCode
from kemu.testing.plugin import KemuProcess
from kemu.testing.wire_client import WireClient
from tests.integration.kip1289.test_kip1289_scenarios import (
    ACKNOWLEDGED,
    COMPLETE,
    OVERRIDES,
    TX_PENDING,
    closing,
    committed_values,
    consumer_for,
    decode_share_state,
    poll_until,
    produce,
    producer_for,
    setup,
    stage,
    values,
    wait_for_lag,
)

pytestmark = [pytest.mark.integration, pytest.mark.process]

__all__ = ["closing"]  # the fixture, used by name

FIND_COORDINATOR, ALTER_OFFSETS, DELETE_OFFSETS, DESCRIBE_TRANSACTIONS = 10, 91, 92, 65
GROUP_KEY, TRANSACTION_KEY = 0, 1
RECORDS = 6
STAGED = (0, 1, 2, 3)  # ACCEPTed in the transaction; 4 and 5 are released when the member leaves
RESET_TO = 2  # the operator's start offset: in the middle of the staged records


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KemuProcess]:
    base = tmp_path_factory.mktemp("kip1289-offsets-reset")
    process = KemuProcess(
        brokers=3,
        data_dir=base / "data",
        overrides=OVERRIDES,
        log_path=base / "kemu.log",
        extra_args=["--json-logs"],
    ).start()
    yield process
    process.stop()


# --- the operator's requests, on the wire ---------------------------------------------------------


def coordinator_of(kemu: KemuProcess, key_type: int, key: str) -> tuple[WireClient, int]:
    """A client of ``kemu`` and the node id of the coordinator of ``key``."""
    client = WireClient(kemu.bootstrap)
    found = client.call(1, FIND_COORDINATOR, 4, key_type=key_type, coordinator_keys=(key,))
    [coordinator] = found.coordinators
    assert coordinator.error_code == ErrorCode.none, coordinator
    return client, coordinator.node_id


def alter_offsets(kemu: KemuProcess, group: str, topic: str, start_offset: int) -> Any:
    """AlterShareGroupOffsets of partition 0 of ``topic``; the response."""
    client, node = coordinator_of(kemu, GROUP_KEY, group)
    try:
        partition = client.nested(
            ALTER_OFFSETS,
            0,
            "AlterShareGroupOffsetsRequestPartition",
            partition_index=0,
            start_offset=start_offset,
        )
        entry = client.nested(
            ALTER_OFFSETS,
            0,
            "AlterShareGroupOffsetsRequestTopic",
            topic_name=topic,
            partitions=(partition,),
        )
        return client.call(node, ALTER_OFFSETS, 0, group_id=group, topics=(entry,))
    finally:
        client.close()


def delete_offsets(kemu: KemuProcess, group: str, topic: str) -> Any:
    """DeleteShareGroupOffsets of ``topic``; the response."""
    client, node = coordinator_of(kemu, GROUP_KEY, group)
    try:
        entry = client.nested(
            DELETE_OFFSETS, 0, "DeleteShareGroupOffsetsRequestTopic", topic_name=topic
        )
        return client.call(node, DELETE_OFFSETS, 0, group_id=group, topics=(entry,))
    finally:
        client.close()


def reset(kemu: KemuProcess, how: str, group: str, topic: str) -> None:
    """The operator's reset ``how`` ("alter" to ``RESET_TO``, or "delete"), answered NONE."""
    if how == "alter":
        answer = alter_offsets(kemu, group, topic, RESET_TO)
        assert answer.error_code == ErrorCode.none, answer
        [found] = answer.responses
        assert [p.error_code for p in found.partitions] == [ErrorCode.none], answer
    else:
        answer = delete_offsets(kemu, group, topic)
        assert answer.error_code == ErrorCode.none, answer
        assert [t.error_code for t in answer.responses] == [ErrorCode.none], answer


def transaction_state(kemu: KemuProcess, transactional_id: str) -> str:
    """DescribeTransactions' state of ``transactional_id``."""
    client, node = coordinator_of(kemu, TRANSACTION_KEY, transactional_id)
    try:
        answer = client.call(node, DESCRIBE_TRANSACTIONS, 0, transactional_ids=(transactional_id,))
    finally:
        client.close()
    [found] = answer.transaction_states
    assert found.error_code == ErrorCode.none, found
    state: str = found.transaction_state
    return state


# --- what kemu holds and logged -------------------------------------------------------------------


def persisted(kemu: KemuProcess, group: str, record: ShareRecord) -> dict[str, Any] | None:
    """The replayed ``__share_group_state`` of ``record``'s share partition, None once deleted."""
    wanted = (group, kafka_uuid(record.topic_id), record.partition)
    found = [
        e["state"]
        for e in decode_share_state(kemu)
        if "state" in e
        and (e["state"]["groupId"], e["state"]["topicId"], e["state"]["partition"]) == wanted
    ]
    assert len(found) <= 1, found
    return found[0] if found else None


def delivery_states(state: dict[str, Any]) -> dict[int, int]:
    """offset -> persisted delivery state, for the offsets the state's batches hold."""
    return {
        offset: int(batch["deliveryState"])
        for batch in state["stateBatches"]
        for offset in range(batch["firstOffset"], batch["lastOffset"] + 1)
    }


def logged_problems(kemu: KemuProcess) -> list[dict[str, Any]]:
    """The log's errors, and the warning a marker that failed at a share partition gives; kemu
    is still running."""
    assert kemu.process is not None and kemu.process.poll() is None
    assert kemu.log_path is not None
    problems = []
    for line in kemu.log_path.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        fields = json.loads(line)
        if fields.get("level") in ("error", "critical") or fields.get("event") == (
            "txn_share_ack_marker_failed"
        ):
            problems.append(fields)
    return problems


# --- the scenario -------------------------------------------------------------------------------


async def staged_then_left(
    kemu: KemuProcess, closing: list[Any], how: str, name: str
) -> tuple[TransactionalProducer, list[ShareRecord]]:
    """Topic and group ``name`` with ``RECORDS`` records; a member ACCEPTs ``STAGED`` in the
    open transaction of ``tx-<name>`` (which also writes one record to ``<name>-out``); the
    reset ``how`` is refused while it is in the group (NON_EMPTY_GROUP), and it leaves. The
    producer and the records."""
    setup(kemu, name, output=True)
    produce(kemu, name, [f"record-{o}".encode() for o in range(RECORDS)])
    consumer = await consumer_for(kemu, name)
    producer = await producer_for(kemu, f"tx-{name}")
    closing += [consumer, producer]
    records = await poll_until(consumer, RECORDS)
    assert [(o, count) for o, _, count in values(records)] == [(o, 1) for o in range(RECORDS)]
    producer.begin_transaction()
    await producer.send(f"{name}-out", b"derived", partition=0)
    await stage(producer, consumer, *(records[o] for o in STAGED))
    refused = (
        alter_offsets(kemu, name, name, RESET_TO)
        if how == "alter"
        else delete_offsets(kemu, name, name)
    )
    assert refused.error_code == ErrorCode.non_empty_group, refused
    await consumer.close()  # the group must be empty for a reset
    state = persisted(kemu, name, records[0])
    assert state is not None
    assert {o: s for o, s in delivery_states(state).items() if o in STAGED} == dict.fromkeys(
        STAGED, TX_PENDING
    )
    assert transaction_state(kemu, f"tx-{name}") == "Ongoing"
    return producer, records


def check_reset_state(kemu: KemuProcess, how: str, name: str, record: ShareRecord) -> None:
    """What the reset left in ``__share_group_state``: the operator's start offset and no
    records (Alter), or no state at all (Delete); no TX_PENDING either way."""
    state = persisted(kemu, name, record)
    if how == "alter":
        assert state is not None
        assert (state["startOffset"], state["stateBatches"]) == (RESET_TO, [])
    else:
        assert state is None


def first_offset(how: str) -> int:
    """Where the group reads after the reset: the operator's start offset, or (deleted) the
    group's ``share.auto.offset.reset``, earliest here."""
    return RESET_TO if how == "alter" else 0


async def check_reads_from_the_reset(
    kemu: KemuProcess, closing: list[Any], how: str, name: str
) -> tuple[ShareConsumer, list[ShareRecord]]:
    """A new member gets every record from the reset's offset on, each delivered for the first
    time since the reset; the member and the records."""
    successor = await consumer_for(kemu, name)
    closing.append(successor)
    again = await poll_until(successor, RECORDS - first_offset(how))
    assert values(again) == [
        (o, f"record-{o}".encode(), 1) for o in range(first_offset(how), RECORDS)
    ]
    return successor, again


async def finish(
    kemu: KemuProcess, successor: ShareConsumer, name: str, held: list[ShareRecord]
) -> None:
    """The new member accepts what it ``held`` (each still its own: every acknowledgement is
    NONE): the group is done, nothing comes again."""
    for record in held:
        successor.acknowledge(record)
    assert set((await successor.commit()).values()) == {None}
    assert await wait_for_lag(kemu, name, name, 0) == 0
    assert await successor.poll(0.5) == []
    state = persisted(kemu, name, held[0])
    assert state is not None
    complete = {
        o: delivery_states(state).get(o, COMPLETE if o < state["startOffset"] else None)
        for o in range(held[0].offset, RECORDS)
    }
    # (the persisted start offset may still be behind them: a later write moves it)
    assert set(complete.values()) <= {ACKNOWLEDGED, COMPLETE}, json.dumps(state)


async def end(kemu: KemuProcess, producer: TransactionalProducer, name: str, commit: bool) -> None:
    """The transaction ends as any other: NONE, its output committed or aborted."""
    if commit:
        await producer.commit_transaction()
    else:
        await producer.abort_transaction()
    assert transaction_state(kemu, f"tx-{name}") == (
        "CompleteCommit" if commit else "CompleteAbort"
    )
    assert await committed_values(kemu, f"{name}-out") == ([b"derived"] if commit else [])


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
@pytest.mark.parametrize("how", ["alter", "delete"])
async def test_a_reset_drops_staged_records_and_the_marker_finds_nothing(
    kemu: KemuProcess, closing: list[Any], how: str, commit: bool
) -> None:
    """The reset drops the TX_PENDING records; a new member joins before the transaction ends
    and gets the records from the reset's offset, each for the first time (2 and 3 among them,
    which the transaction had ACCEPTed); the marker then changes nothing, not even those two,
    which the member still holds: its own acknowledgements complete the group."""
    name = f"reset-{how}-{'commit' if commit else 'abort'}"
    producer, records = await staged_then_left(kemu, closing, how, name)
    reset(kemu, how, name, name)
    check_reset_state(kemu, how, name, records[0])
    successor, held = await check_reads_from_the_reset(kemu, closing, how, name)
    before = persisted(kemu, name, records[0])
    assert before is not None
    assert before["startOffset"] == first_offset(how)
    assert TX_PENDING not in delivery_states(before).values()
    await end(kemu, producer, name, commit)
    assert persisted(kemu, name, records[0]) == before  # the marker changed nothing
    await finish(kemu, successor, name, held)
    assert logged_problems(kemu) == []


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
@pytest.mark.parametrize("how", ["alter", "delete"])
async def test_a_reset_survives_a_sigkill_before_the_marker(
    kemu: KemuProcess, closing: list[Any], how: str, commit: bool
) -> None:
    """kemu is SIGKILLed after the reset and started again from its data dir: the reset is
    what comes back (no TX_PENDING resurrected), the surviving producer ends its transaction,
    and a new member then gets the records from the reset's offset, each for the first time."""
    name = f"reset-{how}-sigkill-{'commit' if commit else 'abort'}"
    producer, records = await staged_then_left(kemu, closing, how, name)
    reset(kemu, how, name, name)
    kemu.kill()
    kemu.start()
    check_reset_state(kemu, how, name, records[0])
    assert transaction_state(kemu, f"tx-{name}") == "Ongoing"
    await end(kemu, producer, name, commit)
    check_reset_state(kemu, how, name, records[0])
    successor, held = await check_reads_from_the_reset(kemu, closing, how, name)
    await finish(kemu, successor, name, held)
    assert logged_problems(kemu) == []
