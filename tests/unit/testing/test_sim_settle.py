"""The settling's end condition (``Simulation._caught_up``): it asks first about the value that
held it back at its last call, so each case here also compares it with the definition over
whole sets, recomputed at every call."""

from __future__ import annotations

from kemu.testing.sim.exactly_once import DeadLetterSeen, caught_up
from kemu.testing.sim.run import Simulation
from kemu.testing.sim.workload import (
    INPUT,
    OUTPUT,
    PLAIN,
    Ledger,
    Verifier,
    put_counted,
    transform,
)


def by_sets(ledger: Ledger) -> bool:
    """The end condition, from whole sets."""
    seen = ledger.seen
    inputs = set(seen.get(INPUT, {}).values())
    dead = [DeadLetterSeen(p, o, v, h) for (p, o), (v, h) in ledger.dead_letters.items()]
    plain = {
        v for (_, t, _), answered in ledger.acknowledged.items() if t == PLAIN for _, v in answered
    }
    return (
        ledger.produced <= inputs
        and plain <= set(seen.get(PLAIN, {}).values())
        and caught_up(inputs, set(seen.get(OUTPUT, {}).values()), dead, ())
        and inputs <= set(ledger.group_seen.values())
    )


class World:
    def __init__(self) -> None:
        self.simulation = Simulation(1, 1)
        self.ledger = self.simulation.ledger
        self.verifier = Verifier("verifier", "", self.ledger, None)  # type: ignore[arg-type]

    def read(self, topic: str, partition: int, offset: int, value: bytes) -> None:
        self.verifier._see(topic, partition, offset, value)

    def hand_out(self, partition: int, offset: int, value: bytes) -> None:
        put_counted(self.ledger.group_seen, self.ledger.group_values, (partition, offset), value)

    def caught_up(self) -> bool:
        answer = self.simulation._caught_up()
        assert answer == by_sets(self.ledger)
        return answer


def test_put_counted_counts_each_value_once_per_record_holding_it() -> None:
    records: dict[tuple[int, int], bytes] = {}
    values: dict[bytes, int] = {}
    put_counted(records, values, (0, 0), b"a")
    put_counted(records, values, (0, 1), b"a")
    assert values == {b"a": 2}
    put_counted(records, values, (0, 1), b"b")  # replaced: one record fewer holds a
    assert values == {b"a": 1, b"b": 1}
    put_counted(records, values, (0, 0), b"b")
    assert values == {b"b": 2} and records == {(0, 0): b"b", (0, 1): b"b"}


def test_settled_once_every_value_is_read_piped_and_handed_out() -> None:
    world = World()
    ledger = world.ledger
    assert world.caught_up()  # nothing produced yet
    ledger.produced |= {b"v1", b"v2"}
    assert not world.caught_up()  # committed, not read yet
    world.read(INPUT, 0, 0, b"v1")
    world.read(INPUT, 1, 0, b"v2")
    assert not world.caught_up()  # not piped
    world.read(OUTPUT, 0, 0, transform(b"v2"))
    assert not world.caught_up()  # v1 not piped, neither handed out
    world.read(OUTPUT, 2, 0, transform(b"v1"))
    world.hand_out(0, 0, b"v1")
    assert not world.caught_up()  # v2 not handed out to a group member
    world.hand_out(1, 0, b"v2")
    assert world.caught_up()
    ledger.acknowledged[("plain-1", PLAIN, 0)] = [(0, b"p1")]
    assert not world.caught_up()
    world.read(PLAIN, 0, 0, b"p1")
    assert world.caught_up()


def test_a_dead_letter_stands_for_its_output() -> None:
    world = World()
    world.ledger.produced.add(b"v1")
    world.read(INPUT, 0, 0, b"v1")
    world.hand_out(0, 0, b"v1")
    assert not world.caught_up()
    world.ledger.dead_letters[(0, 0)] = (b"v1", ())
    assert world.caught_up()


def test_a_value_waited_for_whose_record_is_replaced_is_no_longer_waited_for() -> None:
    world = World()
    world.read(INPUT, 0, 0, b"v1")
    world.hand_out(0, 0, b"v1")
    assert not world.caught_up()  # v1 not piped
    world.read(INPUT, 0, 0, b"v2")  # the record at 0/0 now holds v2
    world.read(OUTPUT, 0, 0, transform(b"v2"))
    assert not world.caught_up()  # v2 not handed out
    world.hand_out(0, 0, b"v2")
    assert world.caught_up()
