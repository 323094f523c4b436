"""KIP-1289 across restarts: TX_PENDING records come back staged and every way a transaction
can end still resolves them (issue 8 point 2, spec §5.5 and §7).

A 3-broker kemu with ``--data-dir`` (started by the CLI, as a user starts it). Records are
staged in three transactions; kemu is then SIGKILLed or stopped cleanly and started again from
the same directory. After the restart the first transaction is committed by its surviving
producer, the second is fenced by a new producer with the same transactional id, and the third
runs out its transaction timeout. No committed record is delivered again, every aborted one is,
and the committed outcome is what ``__share_group_state`` holds (ACKNOWLEDGED for ACCEPT,
ARCHIVED for REJECT while an earlier record is still in flight).

Then the recovery of a transaction that was prepared when kemu died: ``KEMU_CRASH_AT`` makes
kemu SIGKILL itself right after PREPARE_COMMIT/PREPARE_ABORT is durable; the restarted
transaction coordinator completes the transaction and the share coordinator resolves what it
staged. (The crash right after the markers are written is the deterministic simulation's,
tests/unit/testing/test_sim_eos.py.)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.protocol.errors import ErrorCode
from kemu.testing.plugin import KemuProcess
from tests.integration.kip1289.test_kip1289 import (
    ShareMember,
    TransactionalProducer,
    WireClient,
    decode_share_state,
    wait_for_lag,
)

pytestmark = [pytest.mark.integration, pytest.mark.process]

ACCEPT, REJECT = 1, 3
AVAILABLE, ACKNOWLEDGED, ARCHIVED, TX_PENDING = 0, 2, 4, 5
OVERRIDES = ["kemu.kip1289.enable=true", "share.coordinator.state.topic.num.partitions=3"]


class Transaction(TransactionalProducer):
    """The test's transactional producer, with a chosen timeout and mixed acknowledge types."""

    def __init__(self, client: WireClient, transactional_id: str, timeout_ms: int = 60_000):
        super().__init__(client, transactional_id)
        self.timeout_ms = timeout_ms

    def init(self, timeout_ms: int | None = None) -> None:
        super().init(self.timeout_ms if timeout_ms is None else timeout_ms)

    def stage(self, member: ShareMember, first: int, last: int, *types: int) -> None:
        response = self.send_share_acks(member, first, last, types)
        assert response.error_code == ErrorCode.none, response
        codes = [p.error_code for t in response.responses for p in t.partitions]
        assert codes == [ErrorCode.none], response


def start_kemu(kemu_factory: type[KemuProcess], data_dir: Path, **env: str) -> KemuProcess:
    return kemu_factory(brokers=3, data_dir=data_dir, overrides=OVERRIDES, env=env).start()


def create_topic(kemu: KemuProcess, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(timeout=15)


def produce(kemu: KemuProcess, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": kemu.bootstrap, "linger.ms": 50})
    for index in range(count):
        producer.produce(topic, value=f"record-{index}".encode(), partition=0)
    assert producer.flush(15) == 0


def joined(kemu: KemuProcess, group: str, member_id: str) -> tuple[WireClient, ShareMember]:
    client = WireClient(kemu.bootstrap)
    return client, ShareMember(client, group, group, member_id)


def offsets(ranges: list[tuple[int, int, int]]) -> dict[int, int]:
    """offset -> delivery count."""
    return {o: count for first, last, count in ranges for o in range(first, last + 1)}


def fetch_offsets(member: ShareMember, count: int, timeout_s: float = 30.0) -> dict[int, int]:
    got: dict[int, int] = {}
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        got.update(offsets(member.fetch(wait_ms=500)))
    return got


def persisted(kemu: KemuProcess, group: str) -> dict[str, Any]:
    [state] = [
        e["state"] for e in decode_share_state(kemu) if e.get("state", {}).get("groupId") == group
    ]
    return state


def persisted_state_of(state: dict[str, Any], offset: int) -> int | None:
    for batch in state["stateBatches"]:
        if batch["firstOffset"] <= offset <= batch["lastOffset"]:
            return int(batch["deliveryState"])
    return None


def restart(kemu: KemuProcess, how: str) -> None:
    if how == "sigkill":
        kemu.kill()
    else:
        kemu.stop()
    kemu.start()


@pytest.mark.parametrize("how", ["sigkill", "clean-stop"])
def test_staged_records_resolve_after_a_restart_however_their_transaction_ends(
    kemu_factory: type[KemuProcess], tmp_path: Path, how: str
) -> None:
    group = f"restart-{how}"
    kemu = start_kemu(kemu_factory, tmp_path / "data")
    create_topic(kemu, group)
    client, member = joined(kemu, group, "m1")
    assert member.fetch() == []  # the session is open before the records exist
    produce(kemu, group, 10)
    assert fetch_offsets(member, 10) == {o: 1 for o in range(10)}
    committed = Transaction(client, f"{group}-commit")
    fenced = Transaction(client, f"{group}-fenced")
    timed_out = Transaction(client, f"{group}-timeout", timeout_ms=10_000)
    for txn in (committed, fenced, timed_out):
        txn.init()
    committed.stage(member, 1, 3, ACCEPT, ACCEPT, REJECT)
    fenced.stage(member, 4, 6, ACCEPT)
    timed_out.stage(member, 7, 9, ACCEPT)
    before = persisted(kemu, group)
    assert [persisted_state_of(before, o) for o in range(1, 10)] == [TX_PENDING] * 9
    client.close()

    restart(kemu, how)

    client, member = joined(kemu, group, "m2")
    try:
        after = persisted(kemu, group)
        assert [persisted_state_of(after, o) for o in (1, 4)] == [TX_PENDING] * 2
        # (the third may have timed out already on a slow machine: then it is AVAILABLE)
        assert persisted_state_of(after, 7) in (TX_PENDING, AVAILABLE)
        # the surviving producer commits (same producer id and epoch as before the restart)
        committed.client = client
        committed.end(commit=True)
        # a new producer with the fenced one's transactional id aborts its transaction
        Transaction(client, f"{group}-fenced").init()
        # the third transaction times out; offset 0 (acquired, never staged) comes back too
        again = fetch_offsets(member, 7)
        # (offset 0's count depends on whether its session was closed before kemu went away)
        assert sorted(again) == [0, 4, 5, 6, 7, 8, 9] and again[0] >= 1
        assert {o: again[o] for o in range(4, 10)} == {o: 2 for o in range(4, 10)}
        assert member.fetch(wait_ms=300) == []  # 1-3 committed: never again
        # offset 0 is still in flight, so the committed outcome is kept as states
        state = persisted(kemu, group)
        assert state["startOffset"] == 0
        assert [persisted_state_of(state, o) for o in (1, 2, 3)] == [
            ACKNOWLEDGED,
            ACKNOWLEDGED,
            ARCHIVED,
        ]
        assert persisted_state_of(state, 4) != TX_PENDING
        finish = Transaction(client, f"{group}-finish")
        finish.init()
        finish.stage(member, 0, 0, ACCEPT)
        finish.stage(member, 4, 9, ACCEPT)
        finish.end(commit=True)
        wait_for_lag(member, 0)
        assert persisted(kemu, group)["startOffset"] == 10
    finally:
        client.close()


# A crash right after the markers are written (txn.markers_written) is the simulation's
# (tests/unit/testing/test_sim_eos.py, seeds 15 and 18); this one SIGKILLs the process.
@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
@pytest.mark.parametrize("crash_at", ["txn.prepared"])
def test_a_transaction_prepared_when_kemu_died_is_completed_at_start_up(
    kemu_factory: type[KemuProcess], tmp_path: Path, crash_at: str, commit: bool
) -> None:
    group = f"prepared-{crash_at.replace('.', '-')}-{'commit' if commit else 'abort'}"
    kemu = start_kemu(kemu_factory, tmp_path / "data", KEMU_CRASH_AT=crash_at)
    create_topic(kemu, group)
    client, member = joined(kemu, group, "m1")
    assert member.fetch() == []
    produce(kemu, group, 3)
    assert fetch_offsets(member, 3) == {0: 1, 1: 1, 2: 1}
    txn = Transaction(client, f"{group}-txn")
    txn.init()
    txn.stage(member, 0, 2, ACCEPT)
    with pytest.raises(OSError):  # kemu SIGKILLs itself in the middle of EndTxn
        txn.end(commit=commit)
    client.close()
    assert kemu.process is not None and kemu.process.wait(15) != 0

    kemu.env = {}
    kemu.start()

    client, member = joined(kemu, group, "m2")
    try:
        if commit:
            wait_for_lag(member, 0)
            assert member.fetch(wait_ms=500) == []
            assert persisted(kemu, group)["startOffset"] == 3
        else:
            assert fetch_offsets(member, 3) == {0: 2, 1: 2, 2: 2}
        # the transaction is over: its producer may start the next one
        assert txn.producer_epoch >= 0
    finally:
        client.close()


def test_a_retried_stage_after_a_lost_response_is_none(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    """Spec Q5: a client that lost the answer sends the same stage again: NONE both times."""
    group = "retried-stage"
    kemu = start_kemu(kemu_factory, tmp_path / "data")
    create_topic(kemu, group)
    client, member = joined(kemu, group, "m1")
    try:
        assert member.fetch() == []
        produce(kemu, group, 2)
        assert fetch_offsets(member, 2) == {0: 1, 1: 1}
        txn = Transaction(client, f"{group}-txn")
        txn.init()
        txn.stage(member, 0, 1, ACCEPT)
        txn.stage(member, 0, 1, ACCEPT)  # the retry: NONE, nothing changes
        txn.end(commit=True)
        wait_for_lag(member, 0)
    finally:
        client.close()


def test_a_stage_that_was_durable_when_kemu_died_commits_after_the_restart(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    group = "staged-then-died"
    kemu = start_kemu(kemu_factory, tmp_path / "data", KEMU_CRASH_AT="share.staged")
    create_topic(kemu, group)
    client, member = joined(kemu, group, "m1")
    assert member.fetch() == []
    produce(kemu, group, 2)
    assert fetch_offsets(member, 2) == {0: 1, 1: 1}
    txn = Transaction(client, f"{group}-txn")
    txn.init()
    with pytest.raises(OSError):  # durable, then SIGKILL before the answer
        txn.stage(member, 0, 1, ACCEPT)
    client.close()
    assert kemu.process is not None and kemu.process.wait(15) != 0
    kemu.env = {}
    kemu.start()
    client, member = joined(kemu, group, "m2")
    try:
        assert [persisted_state_of(persisted(kemu, group), o) for o in (0, 1)] == [TX_PENDING] * 2
        assert member.fetch(wait_ms=300) == []  # pending: not delivered
        txn.client = client
        txn.end(commit=True)
        wait_for_lag(member, 0)
        assert member.fetch(wait_ms=300) == []
    finally:
        client.close()


def test_an_explicit_enlistment_survives_a_restart(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    """``kemu.kip1289.enlist=explicit``: AddShareAcknowledgementsToTxn before the crash is
    enough for a TxnShareAcknowledge after it (kemu's tag 100 in __transaction_state)."""
    from tests.integration.kip1289.test_kip1289_two_rpc import add_share_acks

    group = "explicit-restart"
    kemu = kemu_factory(
        brokers=3,
        data_dir=tmp_path / "data",
        overrides=[*OVERRIDES, "kemu.kip1289.enlist=explicit"],
    ).start()
    create_topic(kemu, group)
    client, member = joined(kemu, group, "m1")
    assert member.fetch() == []
    produce(kemu, group, 2)
    txn = Transaction(client, f"{group}-txn")
    txn.init()
    assert add_share_acks(txn, member).error_code == ErrorCode.none
    client.close()

    restart(kemu, "sigkill")

    client, member = joined(kemu, group, "m2")
    try:
        assert fetch_offsets(member, 2) == {0: 1, 1: 1}
        txn.client = client
        txn.stage(member, 0, 1, ACCEPT)  # enlisted before the restart: accepted
        txn.end(commit=True)
        wait_for_lag(member, 0)
    finally:
        client.close()
