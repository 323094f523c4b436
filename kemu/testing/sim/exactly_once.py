"""The pipelines' end-to-end check: every committed input value is, exactly once, either in the
output (transformed) or in the pipeline group's dead-letter queue, never both, never neither.

A share group promises exactly once only for the records it does not give up on: a record whose
last delivery (``share.delivery.count.limit``) is released, expires or is staged in a
transaction that aborts is archived, as Kafka archives it. The simulation gives the pipelines'
group a DLQ topic (KIP-1191) with ``errors.deadletterqueue.copy.record.enable``, so each such
record is written there, and the verifier reads it like the output. A DLQ record is excused
only when what the harness knows agrees with it, not on kemu's word alone:

- it names the group, the ``input`` topic and a committed input record (one the verifier read,
  read_committed), and carries that record's value;
- its delivery count is the limit the harness set, and its message is Kafka's delivery-limit
  one (``Offset delivery count exceeded the threshold.``); a REJECT's message, or any other
  reason, is a violation (the pipelines never REJECT);
- no pipeline was handed the record at a higher delivery count than the one archived, and none
  saw the transaction holding its ACCEPT commit (that record is acknowledged, never archived);
- no input record is in the DLQ twice (kemu looks in the DLQ partition before it writes a
  recovered dead letter again, where Kafka may write it twice).

An input value in neither the output nor the DLQ is excused only when an operator's
data-partition abort took its output (``Ledger.tool_aborted``); a record archived for any other
reason (an operator moving the group's start offset, a DLQ write that failed) is reported.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Mapping, Sequence
from dataclasses import dataclass

from kemu.testing.sim.workload import INPUT, PIPE_GROUP, transform

# Kafka 4.4.0's DLQ record headers and messages (KIP-1191), spelt out rather than imported from
# the code under test
H_TOPIC = "__dlq.errors.topic"
H_PARTITION = "__dlq.errors.partition"
H_OFFSET = "__dlq.errors.offset"
H_GROUP = "__dlq.errors.group"
H_DELIVERY_COUNT = "__dlq.errors.delivery.count"
H_MESSAGE = "__dlq.errors.message"
DELIVERY_LIMIT_MESSAGE = b"Offset delivery count exceeded the threshold."


@dataclass(frozen=True, slots=True)
class DeadLetterSeen:
    """A record the verifier read from the DLQ topic."""

    partition: int
    offset: int
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]

    def header(self, name: str) -> bytes | None:
        return next((value for key, value in self.headers if key == name), None)

    def source(self) -> tuple[int, int] | None:
        """The (input partition, offset) it names, or None when it names no input record."""
        if self.header(H_TOPIC) != INPUT.encode() or self.header(H_GROUP) != PIPE_GROUP.encode():
            return None
        try:
            return int(self.header(H_PARTITION) or b""), int(self.header(H_OFFSET) or b"")
        except ValueError:
            return None


def dead_letter_problem(
    letter: DeadLetterSeen,
    inputs: Mapping[tuple[int, int], bytes],
    committed: Collection[tuple[str, int, int]],
    delivered: Mapping[tuple[str, int, int], int],
    limit: int,
) -> str | None:
    """Why ``letter`` is not a record the pipelines' group archived at its delivery limit, or
    None when everything the harness knows agrees that it is."""
    where = f"DLQ record {letter.partition}/{letter.offset}"
    source = letter.source()
    if source is None:
        return f"{where} names no {PIPE_GROUP} record of {INPUT}: {letter.headers}"
    if source not in inputs:
        return f"{where} names {INPUT} {source}, not a committed input record"
    if letter.value != inputs[source]:
        return f"{where} holds {letter.value!r}, not {INPUT} {source}'s {inputs[source]!r}"
    message, count = letter.header(H_MESSAGE), letter.header(H_DELIVERY_COUNT)
    if message != DELIVERY_LIMIT_MESSAGE or count != str(limit).encode():
        return (
            f"{where}: {INPUT} {source} archived for another reason than the delivery limit "
            f"{limit}: {message!r}, delivery count {count!r}"
        )
    key = (INPUT, *source)
    if key in committed:
        return f"{where}: {INPUT} {source} archived after its transaction committed"
    if delivered.get(key, 0) > limit:
        return f"{where}: {INPUT} {source} was delivered {delivered[key]} times, above {limit}"
    return None


def pipeline_once(
    inputs: Mapping[tuple[int, int], bytes],
    outputs: Sequence[bytes],
    dead_letters: Sequence[DeadLetterSeen],
    *,
    excused: Collection[bytes],
    committed: Collection[tuple[str, int, int]],
    delivered: Mapping[tuple[str, int, int], int],
    limit: int,
) -> list[str]:
    """The violations of "each committed input value once in the output or the DLQ".

    ``inputs``: the committed input records (partition, offset) -> value; ``outputs``: the
    committed output values; ``excused``: output values an operator's abort took;
    ``committed``: the input records whose pipeline transaction was answered committed;
    ``delivered``: the highest delivery count a pipeline was handed each record at; ``limit``:
    the group's ``share.delivery.count.limit`` as the harness set it."""
    found = []
    archived: dict[tuple[int, int], DeadLetterSeen] = {}
    wrong = []
    for letter in dead_letters:
        problem = dead_letter_problem(letter, inputs, committed, delivered, limit)
        if problem is not None:
            wrong.append(problem)
            continue
        source = letter.source()
        assert source is not None  # no problem: it names an input record
        if source in archived:
            wrong.append(
                f"{INPUT} {source} is in the DLQ twice (at {archived[source].partition}/"
                f"{archived[source].offset} and {letter.partition}/{letter.offset})"
            )
        archived[source] = letter
    if wrong:
        found.append(f"{len(wrong)} DLQ records not excused: {'; '.join(wrong[:3])}")
    dead = {inputs[source] for source in archived}
    expected = {transform(value) for value in inputs.values()}
    produced = set(outputs)
    both = sorted(value for value in dead if transform(value) in produced)
    if both:
        found.append(f"{len(both)} input values both output and dead-lettered, e.g. {both[:3]}")
    missing = sorted(expected - produced - set(excused) - {transform(value) for value in dead})
    extra = sorted(produced - expected)
    if missing or extra:
        found.append(
            f"pipeline output is not its input once: {len(missing)} missing "
            f"(e.g. {missing[:3]}), {len(extra)} extra (e.g. {extra[:3]})"
        )
    return found


def caught_up(
    inputs: Collection[bytes],
    outputs: Collection[bytes],
    dead_letters: Sequence[DeadLetterSeen],
    excused: Collection[bytes],
) -> bool:
    """Every committed input value is in the output, in the DLQ or excused (the settling
    waits for this, then ``pipeline_once`` judges)."""
    dead = {letter.value for letter in dead_letters}
    excused, outputs = set(excused), set(outputs)
    return not any(pipeline_owes(value, outputs, dead, excused) for value in inputs)


def pipeline_owes(
    value: bytes,
    outputs: Container[bytes],
    dead: Container[bytes | None],
    excused: Container[bytes],
) -> bool:
    """Whether committed input ``value`` is still in none of the output (transformed), the DLQ
    values or the excused output values."""
    if value in dead:
        return False
    out = transform(value)
    return out not in excused and out not in outputs
