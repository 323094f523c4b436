"""Random interleavings of produce / acquire / acknowledge / expire / leave / stage (its write
done or refused) / commit / abort / failover against SharePartitionCore, checked against an
independent model of what each client was told.

Properties: no record is handed to two members at once; the core's owners and staged records
are exactly the model's; the start offset only ever passes terminal records; the persisted
deltas, replayed through the persister's ``merge_batches``, equal the core's own view (and a
core reloaded from them sees the same); and after the clients go away every record in the log
can still be delivered and completed (none is lost).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kemu.broker.share.partition import AcquireMode, Effects, SharePartitionCore
from kemu.broker.share.spans import SpanList
from kemu.broker.share.states import AckType, RecordState
from kemu.coordinator.share.persister import PersistedBatch, PersistedState, merge_batches
from kemu.protocol.errors import ErrorCode
from tests.unit.share_helpers import FakeLog, ack, acquire, new_core, normalised

LOCK_MS = 100
MEMBERS = st.sampled_from(["a", "b", "c"])
ACK_TYPES = st.sampled_from([t for t in AckType])


class SharePartitionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.log = FakeLog()
        self.batch_end = 0  # one past the last offset any batch holds
        self.now = 0
        self.held: dict[int, tuple[str, int]] = {}  # offset -> (member, lock deadline)
        self.staged: dict[int, tuple[int, int]] = {}  # offset -> (producer id, epoch)
        self.next_producer = 1
        self.core = self._watched(new_core(lock_ms=LOCK_MS, limit=2, max_in_flight=40))
        self.persisted_start = self.core.start
        self.persisted: tuple[PersistedBatch, ...] = ()

    def _watched(self, core: SharePartitionCore) -> SharePartitionCore:
        """Fail the moment the start offset would pass a record that is not terminal."""
        watched = _TerminalOnlyDrops()
        watched.spans = core.window._spans.spans
        core.window._spans = watched
        return core

    def _apply(self, effects: Effects) -> None:
        if effects.durable:
            self.persisted = merge_batches(self.persisted, effects.batches, effects.start_offset)
            self.persisted_start = max(self.persisted_start, effects.start_offset)

    # --- rules ----------------------------------------------------------------------------------

    @rule(
        sizes=st.lists(st.integers(1, 6), min_size=1, max_size=3),
        skipped=st.integers(0, 2),
        kind=st.sampled_from(["plain", "plain", "aborted", "control"]),
    )
    def produce(self, sizes: list[int], skipped: int, kind: str) -> None:
        self.log.skip(skipped)  # offsets compaction took away
        for size in sizes:
            if kind == "aborted":
                base = self.log.append(size, transactional=True, producer_id=9)
                self.log.aborted.append((9, base, base + size - 1))
            elif kind == "control":
                self.log.append_control(9)
            else:
                self.log.append(size)
        self.batch_end = self.log.end

    @rule(
        member=MEMBERS,
        max_records=st.integers(1, 20),
        batch_size=st.integers(1, 10),
        record_limit=st.booleans(),
        read_committed=st.booleans(),
    )
    def fetch(
        self,
        member: str,
        max_records: int,
        batch_size: int,
        record_limit: bool,
        read_committed: bool,
    ) -> None:
        result = acquire(
            self.core,
            self.log,
            member,
            self.now,
            max_records=max_records,
            batch_size=batch_size,
            mode=AcquireMode.RECORD_LIMIT if record_limit else AcquireMode.BATCH_OPTIMIZED,
            read_committed=read_committed,
            aborted=self.log.aborted,
        )
        if record_limit:
            assert result.count <= max_records
        previous = -1
        for acquired in result.acquired:
            assert previous < acquired.first_offset <= acquired.last_offset
            previous = acquired.last_offset
            for offset in range(acquired.first_offset, acquired.last_offset + 1):
                assert offset not in self.held, f"{offset} handed to {member}, held by another"
                assert offset not in self.staged
                self.held[offset] = (member, self.now + LOCK_MS)
        self._apply(result.effects)

    @rule(member=MEMBERS, data=st.data())
    def acknowledge(self, member: str, data: st.DataObject) -> None:
        batches = self._draw_batches(member, data, ACK_TYPES)
        before = self.core.spans()
        expected_ok = self._all_held_by(member, batches)
        result = self.core.acknowledge(member, batches, self.now)
        assert (result.error == ErrorCode.none) == expected_ok, (result, batches)
        if result.error != ErrorCode.none:
            assert self.core.spans() == before and not result.effects.durable
            return
        for batch in batches:
            for offset, kind in _offsets(batch):
                if offset < self.core.start and offset not in self.held:
                    continue
                if kind == AckType.RENEW:
                    self.held[offset] = (member, self.now + LOCK_MS)
                else:
                    self.held.pop(offset, None)
        self._apply(result.effects)

    @rule(elapsed=st.integers(1, 150))
    def tick(self, elapsed: int) -> None:
        self.now += elapsed
        self._apply(self.core.expire_locks(self.now))
        self.held = {o: h for o, h in self.held.items() if h[1] > self.now}

    @rule(member=MEMBERS)
    def leave(self, member: str) -> None:
        self._apply(self.core.release_member(member, self.now))
        self.held = {o: h for o, h in self.held.items() if h[0] != member}

    @rule(member=MEMBERS, data=st.data())
    def stage(self, member: str, data: st.DataObject) -> None:
        batches = self._draw_batches(
            member, data, st.sampled_from([AckType.ACCEPT, AckType.REJECT, AckType.GAP])
        )
        producer = (self.next_producer, 0)
        self.next_producer += 1
        expected_ok = self._all_held_by(member, batches) and all(
            batch.first_offset >= self.core.start for batch in batches
        )  # a transaction refuses complete records (staging.py ``_complete_part``)
        result = self.core.stage(member, producer[0], producer[1], batches, self.now)
        assert (result.error == ErrorCode.none) == expected_ok, (result, batches)
        if result.error != ErrorCode.none:
            return
        for batch in batches:
            for offset, _kind in _offsets(batch):
                if self.held.pop(offset, None) is not None:
                    self.staged[offset] = producer  # gaps too (spec Q8)
        self._apply(result.effects)

    @rule(member=MEMBERS, data=st.data())
    def stage_refused(self, member: str, data: st.DataObject) -> None:
        """The stage's write is refused for a passing reason: taken back, nothing written; the
        member holds what it held, under the same locks (the model does not change)."""
        batches = self._draw_batches(
            member, data, st.sampled_from([AckType.ACCEPT, AckType.REJECT, AckType.GAP])
        )
        producer = (self.next_producer, 0)
        self.next_producer += 1
        before = self._locks()
        result = self.core.stage(member, producer[0], producer[1], batches, self.now)
        self.core.revert_stage(producer[0], producer[1], result.staged)
        assert self._locks() == before

    def _locks(self) -> list[tuple[Any, ...]]:
        return [
            (*span, lock.deadline)
            for span, lock in zip(self.core.spans(), self.core.window._spans.spans, strict=True)
        ]

    @precondition(lambda self: bool(self.staged))
    @rule(data=st.data(), commit=st.booleans())
    def end_transaction(self, data: st.DataObject, commit: bool) -> None:
        producer = data.draw(st.sampled_from(sorted(set(self.staged.values()))))
        self._apply(self.core.apply_marker(producer[0], producer[1], commit, self.now))
        self.staged = {o: p for o, p in self.staged.items() if p != producer}

    @rule()
    def fail_over(self) -> None:
        """A new leader loads the persisted state; acquisitions are forgotten (a record held for
        its last delivery is archived: that delivery ended), stages kept."""
        state = PersistedState(0, self.persisted_start, batches=self.persisted)
        core, effects = SharePartitionCore.from_persisted(state, self.core.config, reset_offset=0)
        limit = self.core.config.delivery_count_limit
        expected = tuple(
            b._replace(delivery_state=int(RecordState.ARCHIVED))
            if b.delivery_state == int(RecordState.AVAILABLE) and b.delivery_count >= limit
            else b
            for b in self.core.persisted_view()
        )
        start = loaded_start(self.core.start, expected)
        assert core.start == start
        assert normalised(core.start, core.persisted_view()) == normalised(start, expected)
        self.core = self._watched(core)
        self._apply(effects)
        self.held = {}

    # --- checks ---------------------------------------------------------------------------------

    @invariant()
    def window_is_consistent(self) -> None:
        self.core.check_invariants()
        assert self.core.end <= max(self.batch_end, self.core.start)

    @invariant()
    def owners_are_what_clients_were_told(self) -> None:
        core = self.core
        for offset in range(core.start, core.end):
            state = core.state_of(offset)
            if state is RecordState.ACQUIRED:
                assert self.held.get(offset, ("?",))[0] == core.owner_of(offset), offset
            else:
                assert offset not in self.held, (offset, state)
            assert (state is RecordState.TX_PENDING) == (offset in self.staged), offset

    @invariant()
    def persisted_deltas_replay_to_the_cores_view(self) -> None:
        # As Kafka, a write carries the start offset from before its own move (the move is
        # written by the next write): loading passes the completed records at the start.
        start = loaded_start(self.persisted_start, self.persisted)
        assert start == self.core.start
        assert normalised(start, self.persisted) == normalised(
            self.core.start, self.core.persisted_view()
        )

    def teardown(self) -> None:
        """No record is lost: once clients are gone, everything can be delivered and completed."""
        core = self.core
        self.now += 10 * LOCK_MS
        core.expire_locks(self.now)
        for producer in set(self.staged.values()):
            core.apply_marker(producer[0], producer[1], False, self.now)
        for _ in range(1000):
            result = acquire(core, self.log, "drain", self.now, max_records=1000)
            if not result.count:
                break
            batches = [ack(r.first_offset, r.last_offset, AckType.ACCEPT) for r in result.acquired]
            assert core.acknowledge("drain", batches, self.now).error == ErrorCode.none
        core.check_invariants()
        assert core.start == core.end == max(self.batch_end, core.start), core.spans()

    # --- helpers --------------------------------------------------------------------------------

    def _draw_batches(
        self, member: str, data: st.DataObject, types: st.SearchStrategy[Any]
    ) -> list[Any]:
        mine = sorted(o for o, (m, _) in self.held.items() if m == member)
        low, high = max(self.core.start - 2, 0), self.core.end + 2
        pool = mine if mine and data.draw(st.booleans()) else list(range(low, high + 1))
        chosen = sorted(set(data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=6))))
        runs: list[list[int]] = []
        for offset in chosen:
            if runs and runs[-1][-1] + 1 == offset and data.draw(st.booleans()):
                runs[-1].append(offset)
            elif not runs or runs[-1][-1] < offset - 1 or data.draw(st.booleans()):
                runs.append([offset])
            else:
                runs[-1].append(offset)
        batches = []
        for run in runs:
            if data.draw(st.booleans()):
                kinds = (int(data.draw(types)),)
            else:
                kinds = tuple(int(data.draw(types)) for _ in run)
            batches.append(ack(run[0], run[-1], *kinds))
        return batches

    def _all_held_by(self, member: str, batches: list[Any]) -> bool:
        for batch in batches:
            if batch.last_offset < self.core.start:
                continue  # complete records: skipped, as Kafka does
            for offset in range(max(batch.first_offset, self.core.start), batch.last_offset + 1):
                if self.held.get(offset, ("",))[0] != member:
                    return False
        return True


class _TerminalOnlyDrops(SpanList):
    def drop_prefix(self, count: int) -> None:
        for span in self.spans[:count]:
            assert span.state.is_terminal, f"start offset passed {span}"
        super().drop_prefix(count)


def _offsets(batch: Any) -> list[tuple[int, int]]:
    count = batch.last_offset - batch.first_offset + 1
    kinds = batch.types if len(batch.types) == count else batch.types * count
    return [(batch.first_offset + i, kinds[i]) for i in range(count)]


SharePartitionMachine.TestCase.settings = settings(
    max_examples=400,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestSharePartitionMachine = pytest.mark.slow(SharePartitionMachine.TestCase)  # make test only


def loaded_start(start: int, batches: tuple[PersistedBatch, ...]) -> int:
    """Where a leader loading (start, batches) starts: past the completed records at the start."""
    for batch in merge_batches((), batches, start):
        if batch.first_offset > start or RecordState(batch.delivery_state) not in TERMINAL:
            break
        start = batch.last_offset + 1
    return start


TERMINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
