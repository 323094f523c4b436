"""kemu.client's IdempotentProducer (no transactions, five batches of a partition in flight)
against kemu (in-process): while fault rules (docs/control.md) delay, refuse, drop and tear
Produce requests, every acknowledged record is in the log once, at the offset it was answered,
in the order it was sent, and no record is there twice; a gap at the leader (an injected
OUT_OF_ORDER_SEQUENCE_NUMBER) makes the producer bump its epoch and renumber its batches."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.broker.refused_batches import RefusedBatches
from kemu.client import IdempotentProducer, KafkaError, RecordMetadata
from kemu.client.consumer import Consumer
from kemu.client.produce_pipeline import IdempotentPipeline
from kemu.protocol.errors import ErrorCode
from kemu.testing.inprocess import InProcessKemu
from tests import REPO_ROOT

pytestmark = pytest.mark.integration

FAULTS = [
    {"api": "produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": None, "fraction": 0.05},
    {"api": "produce", "kind": "latency", "latency_ms": 30, "count": None, "fraction": 0.1},
    {"api": "produce", "kind": "drop_before", "count": None, "fraction": 0.05},
    {"api": "produce", "kind": "drop_after", "count": None, "fraction": 0.05},
    {"api": "produce", "kind": "torn", "count": None, "fraction": 0.05},
]


def start(kemu_inprocess_factory: type[InProcessKemu], topic: str) -> InProcessKemu:
    kemu = kemu_inprocess_factory(brokers=1, with_control=True).start()
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=30)
    return kemu


async def read_back(bootstrap: str, topic: str, counts: dict[int, int]) -> dict[int, list[bytes]]:
    """Each partition's values from offset 0 up to ``counts[partition]`` records."""
    consumer = Consumer(bootstrap)
    await consumer.assign([(topic, p) for p in counts])
    read: dict[int, list[bytes]] = {p: [] for p in counts}
    while any(len(read[p]) < counts[p] for p in counts):
        for record in await consumer.poll(5.0):
            assert record.offset == len(read[record.partition])
            read[record.partition].append(record.value or b"")
    await consumer.close()
    return read


async def test_pipelined_idempotent_batches_are_written_once_in_order_under_faults(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    kemu = start(kemu_inprocess_factory, "idem")
    producer = IdempotentProducer(kemu.bootstrap, max_in_flight=5, delivery_timeout=20)
    # One record per partition first, so that the faults also meet batches of a producer the
    # partitions know (sequence checked) and not only its first ones (any sequence taken).
    first = await asyncio.gather(*(producer.send("idem", b"first", partition=p) for p in (0, 1)))
    for rule in FAULTS:
        kemu.control.add_fault(**rule)
    acknowledged: list[tuple[int, bytes, int]] = [(a.partition, b"first", a.offset) for a in first]
    for round_ in range(12):
        values = [b"r%02d-%02d" % (round_, n) for n in range(10)]
        sends = [producer.send("idem", value, partition=n % 2) for n, value in enumerate(values)]
        answers = await asyncio.gather(*sends, return_exceptions=True)
        acknowledged += [
            (a.partition, v, a.offset)
            for a, v in zip(answers, values, strict=True)
            if isinstance(a, RecordMetadata)
        ]
    injected = sum(int(rule["fired"]) for rule in kemu.control.faults())
    kemu.control.clear_faults()
    await producer.close()
    assert injected >= 5
    assert len(acknowledged) > 100

    ends = {p: 1 + max(o for q, _, o in acknowledged if q == p) for p in (0, 1)}
    read = await read_back(kemu.bootstrap, "idem", ends)
    for partition in (0, 1):
        mine = [(v, o) for q, v, o in acknowledged if q == partition]
        assert all(read[partition][o] == v for v, o in mine)  # where it was answered
        offsets = [o for _, o in mine]
        assert offsets == sorted(offsets)  # in send order
        assert len(set(read[partition])) == len(read[partition])  # nothing twice


async def test_a_gap_at_the_leader_bumps_the_epoch_and_renumbers_the_batches(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    kemu = start(kemu_inprocess_factory, "gap")
    producer = IdempotentProducer(kemu.bootstrap, max_in_flight=5)
    await producer.send("gap", b"v0", partition=0)
    assert (producer.producer_epoch, producer.epoch_bumps) == (0, 0)
    # The next batch is answered OUT_OF_ORDER_SEQUENCE_NUMBER without being appended: the
    # leader lacks the sequence right after the last acknowledged one, so the producer bumps
    # its epoch (KIP-360) and sends it and the four behind it from sequence 0.
    kemu.control.add_fault(api="produce", error="OUT_OF_ORDER_SEQUENCE_NUMBER", count=1)
    values = [b"v%d" % n for n in range(1, 6)]
    answers = await asyncio.gather(*(producer.send("gap", v, partition=0) for v in values))
    assert [a.offset for a in answers] == [1, 2, 3, 4, 5]
    assert (producer.producer_epoch, producer.epoch_bumps) == (1, 1)
    await producer.send("gap", b"v6", partition=0)  # the new epoch goes on in sequence
    await producer.close()
    read = await read_back(kemu.bootstrap, "gap", {0: 7})
    assert read[0] == [b"v%d" % n for n in range(7)]


async def test_a_refused_first_batch_is_not_overtaken_by_the_one_behind_it(
    kemu_inprocess_factory: type[InProcessKemu], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leader takes any first sequence from a producer it has no state for (as Kafka does). A
    refusal that is over by the next request (Kafka's leader just elected, as a topic is
    created) must not let the second batch be appended before the first, which then could
    never be (OUT_OF_ORDER_SEQUENCE_NUMBER on every retry): the second is not on the wire
    before the first is answered. kemu's fault stage normally refuses the batches pipelined
    behind a refused one; here it forgets them, as such a leader does."""
    monkeypatch.setattr(RefusedBatches, "note", lambda self, body, error, rule_id: None)
    kemu = start(kemu_inprocess_factory, "first")
    kemu.control.add_fault(
        api="produce", error="NOT_LEADER_OR_FOLLOWER", latency_ms=100, count=1, partition=0
    )
    producer = IdempotentProducer(kemu.bootstrap, max_in_flight=5, delivery_timeout=10)
    values = [b"v%d" % n for n in range(10)]
    answers = await asyncio.gather(*(producer.send("first", v, partition=0) for v in values))
    assert [a.offset for a in answers] == list(range(10))
    assert producer.epoch_bumps == 0
    await producer.close()
    assert kemu.control.faults() == []  # the refusal happened
    assert (await read_back(kemu.bootstrap, "first", {0: 10}))[0] == values


async def test_a_batch_the_leader_has_passed_fails_at_once(
    kemu_inprocess_factory: type[InProcessKemu], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same refusal when the leader has lost the producer's state (the producer pipelines):
    the batches behind the refused one are appended first, and the refused one, which can never
    be appended in order, fails at its first OUT_OF_ORDER_SEQUENCE_NUMBER, not at its delivery
    timeout; nothing is written twice or bumped."""
    monkeypatch.setattr(RefusedBatches, "note", lambda self, body, error, rule_id: None)
    monkeypatch.setattr(
        IdempotentPipeline,
        "leader_knows_producer",
        property(lambda s: True, lambda s, v: None),
        raising=False,
    )
    kemu = start(kemu_inprocess_factory, "passed")
    kemu.control.add_fault(
        api="produce", error="NOT_LEADER_OR_FOLLOWER", latency_ms=100, count=1, partition=0
    )
    producer = IdempotentProducer(kemu.bootstrap, max_in_flight=5, delivery_timeout=60)
    values = [b"v%d" % n for n in range(10)]
    sends = [producer.send("passed", v, partition=0) for v in values]
    first, *rest = await asyncio.gather(*sends, return_exceptions=True)
    assert isinstance(first, KafkaError)
    assert first.error == ErrorCode.out_of_order_sequence_number
    assert [a.offset for a in rest if isinstance(a, RecordMetadata)] == list(range(9))
    assert producer.epoch_bumps == 0
    await producer.send("passed", b"after", partition=0)  # the partition goes on in sequence
    await producer.close()
    assert (await read_back(kemu.bootstrap, "passed", {0: 10}))[0] == [*values[1:], b"after"]


async def test_the_documented_idempotent_producer_runs(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    """docs/client.md's IdempotentProducer block, as written there."""
    kemu = start(kemu_inprocess_factory, "prices")
    doc = (REPO_ROOT / "docs" / "client.md").read_text()
    fence = "```python run-by=tests/integration/clients/test_client_idempotent_produce.py\n"
    namespace: dict[str, Any] = {}
    exec(compile(doc.split(fence)[1].split("```")[0], "docs/client.md", "exec"), namespace)
    prices = [b"%d" % n for n in range(20)]
    assert await namespace["publish"](kemu.bootstrap, prices) == list(range(20))
    assert (await read_back(kemu.bootstrap, "prices", {0: 20}))[0] == prices
