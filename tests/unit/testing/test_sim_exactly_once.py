"""The simulation's end-to-end check of the KIP-1289 pipelines (kemu/testing/sim/exactly_once.py):
every committed input value is, exactly once, either transformed in the output or in the
pipelines' dead-letter queue, archived at the delivery limit. The DLQ records here are the ones
kemu's own writer (``write_dead_letters``) makes, read back from the DLQ partition as the
simulation's verifier reads them; each broken case is one the check must report."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kemu.broker.share import actor, window
from kemu.broker.share.dead_letter import TOPIC_ENABLE, write_dead_letters
from kemu.broker.share.partition import (
    CAUSE_DELIVERY_LIMIT,
    CAUSE_REJECTED,
    DeadLetter,
    SharePartitionConfig,
)
from kemu.broker.share.settings import ShareSettings
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.protocol.record_reader import iter_records
from kemu.protocol.records import build_batch, read_header
from kemu.storage.log import MemoryLog
from kemu.testing.sim.chaos import FaultRates
from kemu.testing.sim.exactly_once import DeadLetterSeen, caught_up, pipeline_once
from kemu.testing.sim.run import Result, Simulation
from kemu.testing.sim.workload import DLQ, INPUT, PIPE_DELIVERY_LIMIT, PIPE_GROUP, transform

LIMIT = PIPE_DELIVERY_LIMIT
VALUES = [b"producer-1-1", b"producer-1-2", b"producer-1-3"]
# the committed input records: input partition 1, offsets 0-2
INPUTS = {(1, offset): value for offset, value in enumerate(VALUES)}


def dead_letters(*letters: DeadLetter, group: str = PIPE_GROUP) -> list[DeadLetterSeen]:
    """``letters`` written by kemu's DLQ writer for input partition 1 (holding ``VALUES``), as
    the simulation's verifier reads them back."""
    cluster = Cluster(
        cluster_id="unit",
        nodes={1: BrokerNode(1, "127.0.0.1", 19092)},
        config=BrokerConfig({}),
        log_factory=lambda topic, index: MemoryLog(),
    )
    source = cluster.create_topic(INPUT, 3, 1, persist=False).partitions[1]
    batch = build_batch([(None, value) for value in VALUES], timestamp_ms=1, headers=None)
    source.append([(read_header(batch), batch)], now_ms=1)
    cluster.create_topic(DLQ, 3, 1, {TOPIC_ENABLE: "true"}, persist=False)
    settings = ShareSettings(
        SharePartitionConfig(dlq_enabled=True, delivery_count_limit=LIMIT),
        dlq_topic=DLQ,
        dlq_copy_record=True,
    )
    outcome = write_dead_letters(cluster, group, source, settings, letters, now_ms=2)
    assert outcome.problem is None
    return [
        DeadLetterSeen(partition.index, record.offset, record.value, record.headers)
        for partition in cluster.topics[DLQ].partitions
        for _, batch in partition.log.batches(0, partition.high_watermark)
        for record in iter_records(batch)
    ]


def check(
    outputs: Sequence[bytes],
    letters: Sequence[DeadLetterSeen] = (),
    *,
    excused: frozenset[bytes] = frozenset(),
    committed: frozenset[tuple[str, int, int]] = frozenset(),
    delivered: dict[tuple[str, int, int], int] | None = None,
) -> list[str]:
    return pipeline_once(
        INPUTS,
        outputs,
        letters,
        excused=excused,
        committed=committed,
        delivered=delivered or {},
        limit=LIMIT,
    )


def at_limit(offset: int) -> DeadLetter:
    return DeadLetter(offset, offset, LIMIT, CAUSE_DELIVERY_LIMIT)


def test_every_value_output_once_passes() -> None:
    assert check([transform(v) for v in VALUES]) == []


def test_a_record_archived_at_the_delivery_limit_is_excused() -> None:
    letters = dead_letters(at_limit(1))
    assert len(letters) == 1 and letters[0].partition == 1  # source partition % 3
    delivered = {(INPUT, 1, 1): LIMIT}
    assert check([transform(VALUES[0]), transform(VALUES[2])], letters, delivered=delivered) == []
    assert caught_up(VALUES, [transform(VALUES[0]), transform(VALUES[2])], letters, ())


def test_a_value_in_neither_the_output_nor_the_dlq_is_missing() -> None:
    found = check([transform(VALUES[0]), transform(VALUES[2])])
    assert found == [
        "pipeline output is not its input once: 1 missing (e.g. [b'out-producer-1-2']), "
        "0 extra (e.g. [])"
    ]
    assert not caught_up(VALUES, [transform(VALUES[0]), transform(VALUES[2])], [], ())


def test_a_value_both_output_and_dead_lettered_is_reported() -> None:
    found = check([transform(v) for v in VALUES], dead_letters(at_limit(1)))
    assert found == ["1 input values both output and dead-lettered, e.g. [b'producer-1-2']"]


def test_a_rejected_record_is_not_excused() -> None:
    letters = dead_letters(DeadLetter(1, 1, 2, CAUSE_REJECTED))
    found = check([transform(VALUES[0]), transform(VALUES[2])], letters)
    assert len(found) == 2
    assert "archived for another reason than the delivery limit 5" in found[0]
    assert "b'Offset rejected by client.'" in found[0]
    assert "1 missing (e.g. [b'out-producer-1-2'])" in found[1]


def test_a_rejected_record_at_the_limit_is_not_excused_either() -> None:
    letters = dead_letters(DeadLetter(1, 1, LIMIT, CAUSE_REJECTED))
    found = check([transform(VALUES[0]), transform(VALUES[2])], letters)
    assert "archived for another reason" in found[0]


def test_the_limit_message_below_the_limit_is_not_excused() -> None:
    letters = dead_letters(DeadLetter(1, 1, LIMIT - 2, CAUSE_DELIVERY_LIMIT))
    found = check([transform(VALUES[0]), transform(VALUES[2])], letters)
    assert "delivery count b'3'" in found[0] and "missing" in found[1]


def test_a_record_dead_lettered_after_its_transaction_committed_is_reported() -> None:
    letters = dead_letters(at_limit(1))
    outputs = [transform(VALUES[0]), transform(VALUES[2])]
    found = check(outputs, letters, committed=frozenset({(INPUT, 1, 1)}))
    assert "archived after its transaction committed" in found[0]


def test_a_record_delivered_above_the_limit_is_reported() -> None:
    letters = dead_letters(at_limit(1))
    outputs = [transform(VALUES[0]), transform(VALUES[2])]
    found = check(outputs, letters, delivered={(INPUT, 1, 1): LIMIT + 1})
    assert "was delivered 6 times, above 5" in found[0]


def test_another_groups_or_an_uncommitted_records_dead_letter_is_reported() -> None:
    outputs = [transform(VALUES[0]), transform(VALUES[2])]
    found = check(outputs, dead_letters(at_limit(1), group="readers"))
    assert "names no pipe record of input" in found[0]
    letters = dead_letters(at_limit(1))
    inputs = {where: value for where, value in INPUTS.items() if where != (1, 1)}
    found = pipeline_once(
        inputs, outputs, letters, excused=(), committed=(), delivered={}, limit=LIMIT
    )
    assert "names input (1, 1), not a committed input record" in found[0]


def test_a_dead_letter_without_the_records_value_is_reported() -> None:
    [letter] = dead_letters(at_limit(1))
    emptied = DeadLetterSeen(letter.partition, letter.offset, None, letter.headers)
    found = check([transform(VALUES[0]), transform(VALUES[2])], [emptied])
    assert "holds None, not input (1, 1)'s b'producer-1-2'" in found[0]


def test_a_record_dead_lettered_twice_is_reported() -> None:
    [letter] = dead_letters(at_limit(1))
    again = DeadLetterSeen(letter.partition, letter.offset + 1, letter.value, letter.headers)
    found = check([transform(VALUES[0]), transform(VALUES[2])], [letter, again])
    assert found == ["1 DLQ records not excused: input (1, 1) is in the DLQ twice (at 1/0 and 1/1)"]


def test_an_operators_abort_excuses_its_values_and_no_other() -> None:
    outputs = [transform(VALUES[0])]
    excused = frozenset({transform(VALUES[1])})
    found = check(outputs, excused=excused)
    assert "1 missing (e.g. [b'out-producer-1-3'])" in found[0]
    assert check(outputs, dead_letters(at_limit(2)), excused=excused) == []


def test_an_output_value_no_input_holds_is_extra() -> None:
    found = check([*(transform(v) for v in VALUES), b"out-producer-9-9"])
    assert "1 extra (e.g. [b'out-producer-9-9'])" in found[0]


# --- in a whole run: seed 40 at ten times the crash-point rate dead-letters records at the limit,
# three times (16 until crash points stopped firing while settling, 19 until the data topics had
# small segments and cold share partitions were snapshotted every 2 s, 14 until stalls and shorter
# lock, session and transaction timeouts, 21 until consumer-group members stalled too, 25 until
# CI once ran it without reaching its one dead letter: picked again over seeds 1-40 for the most)


def run_with_a_dead_letter() -> Result:
    return Simulation(40, 300, rates=FaultRates(crash_point=0.03)).run()


def test_a_run_whose_records_kemu_archives_for_another_reason_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # kemu labels its delivery-limit dead letters as rejected: no longer excused
    monkeypatch.setattr(window, "CAUSE_DELIVERY_LIMIT", "Offset rejected by client.")
    result = run_with_a_dead_letter()
    assert not result.ok
    assert any("archived for another reason" in v for v in result.violations), result.violations


def test_a_run_whose_dead_letters_are_never_written_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    # kemu archives at the limit without writing the DLQ record (as after a refused write)
    monkeypatch.setattr(actor, "write_dead_letters", lambda *args: None)
    result = run_with_a_dead_letter()
    assert not result.ok
    assert any("missing" in v for v in result.violations), result.violations
