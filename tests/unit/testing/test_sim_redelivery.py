"""A record a share group hands out again after its ACCEPT, or the commit of the transaction
holding its acknowledgement, was confirmed is a violation whatever its delivery count
(``watch_share_fetches`` in ``workload.py``): any record from a ShareFetch sent after the
confirmation."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kemu.broker.handlers import REGISTRY, load_handlers
from kemu.testing.sim.run import Simulation
from kemu.testing.sim.workload import PIPE_GROUP, READER_GROUP, Ledger

SHARE_FETCH = 78


@pytest.mark.parametrize(
    ("group", "confirmed"),
    [(READER_GROUP, "its ACCEPT"), (PIPE_GROUP, "its transaction's commit")],
)
def test_an_answer_replayed_at_the_same_delivery_count_is_a_redelivery(
    monkeypatch: pytest.MonkeyPatch, group: str, confirmed: str
) -> None:
    """Every 4th ShareFetch of the group is answered with the last answer that acquired
    records, unchanged: records ACCEPTed (the reader) or committed (the pipelines) since, at
    the delivery count they had, which the check by delivery count alone let through."""
    load_handlers()
    real = REGISTRY[SHARE_FETCH]
    calls = 0
    last: list[Any] = []

    async def replaying(ctx: Any, request: Any) -> Any:
        nonlocal calls
        if request.group_id != group:
            return await real.function(ctx, request)
        calls += 1
        if calls % 4 == 0 and last:
            return last[0]
        answer = await real.function(ctx, request)
        topics = getattr(answer, "responses", ())
        if any(p.acquired_records for t in topics for p in t.partitions):
            last[:] = [answer]
        return answer

    monkeypatch.setitem(REGISTRY, SHARE_FETCH, dataclasses.replace(real, function=replaying))
    result = Simulation(1, 100).run()
    assert not result.ok
    assert any(
        f"{group}: ('input'," in v and f"by a ShareFetch sent after {confirmed}" in v
        for v in result.violations
    ), result.violations


def test_an_accept_sent_before_an_offsets_deletion_answered_is_not_held_against_kemu() -> None:
    """Seed 67 (on d507b02): the reader's ShareAcknowledge was sent just before the operator's
    DeleteShareGroupOffsets was answered, applied by the share-partition leader just before the
    coordinator applied the deletion, and confirmed just after the deletion's answer. The
    deletion undid the ACCEPT, so the records came again at delivery 1, as they may: the oracle
    held them as accepted and called it a redelivery."""
    ledger = Ledger()
    where = ("input", 1, 2316)
    before_deletion = ledger.clock  # the ACCEPT is sent
    ledger.forget_accepted()  # the deletion is answered: it applied
    ledger.confirm_accepted(before_deletion, [where])  # the ACCEPT's answer comes later
    assert where not in ledger.accepted
    after_deletion = ledger.clock  # an ACCEPT sent once the deletion was answered holds
    ledger.confirm_accepted(after_deletion, [where])
    assert where in ledger.accepted
