"""Operator actions on one share partition, for the control plane (``docs/control.md``).

Each runs inside the partition's actor (its mailbox, so no fetch or acknowledgement interleaves),
on the loaded ``SharePartitionCore``, and writes its ``Effects`` through the share coordinator
like any other operation, so the durable state and waiting fetches see it at once:

- ``dump``: the spans of the window [SPSO, SPEO) with every field (state, delivery count, owner,
  lock deadline, staged producer id/epoch and outcome states);
- ``expire_locks``: the acquisition locks of one member (or all) pass their deadline now: the
  records go back to AVAILABLE (ARCHIVED at the delivery limit) exactly as on a lock timeout;
- ``set_range``: records [first, last] become AVAILABLE (release) or ARCHIVED (archive);
  TX_PENDING records are left to their transaction, terminal ones stay.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from kemu.broker.share.actor import SharePartitionActor
from kemu.broker.share.partition import SharePartitionCore
from kemu.broker.share.settings import share_settings
from kemu.broker.share.spans import NO_DEADLINE, NOT_STAGED, Span
from kemu.broker.share.states import RecordState
from kemu.broker.share.window import Effects, disown
from kemu.cluster.partition import Partition
from kemu.protocol.errors import ErrorCode


class AdminError(ValueError):
    """The action cannot apply (nothing changed)."""


def describe_span(span: Span) -> dict[str, Any]:
    described: dict[str, Any] = {
        "first_offset": span.first,
        "last_offset": span.last,
        "state": span.state.name,
        "delivery_count": span.delivery_count,
    }
    if span.member is not None:
        described["member_id"] = span.member
    if span.deadline != NO_DEADLINE:
        described["lock_deadline_ms"] = span.deadline
    if span.staged_pid != NOT_STAGED:
        described["staged_producer_id"] = span.staged_pid
        described["staged_producer_epoch"] = span.staged_epoch
        described["staged_commit_state"] = _state_name(span.staged_commit)
        described["staged_abort_state"] = _state_name(span.staged_abort)
    return described


def _state_name(value: int) -> str | None:
    if value == NOT_STAGED:
        return None
    try:
        return RecordState(value).name
    except ValueError:
        return str(value)


def dump(core: SharePartitionCore) -> dict[str, Any]:
    return {
        "start_offset": core.start,
        "end_offset": core.end,
        "in_flight": core.in_flight,
        "delivery_complete_count": core.delivery_complete_count,
        "state_epoch": core.state_epoch,
        "leader_epoch": core.leader_epoch,
        "spans": [describe_span(span) for span in core.window._spans.spans],
    }


def expire_locks(core: SharePartitionCore, member: str | None, now_ms: int) -> tuple[int, Effects]:
    """Expire the acquisition locks of ``member`` (None: every member) now; returns how many
    records were ACQUIRED under them."""
    count = 0
    for span in core.window._spans.spans:
        if span.state is RecordState.ACQUIRED and (member is None or span.member == member):
            span.deadline = now_ms
            heapq.heappush(core.window._locks, (now_ms, span.first, span.last))
            count += span.size
    return count, core.expire_locks(now_ms)


def set_range(
    core: SharePartitionCore, first: int, last: int, target: RecordState
) -> tuple[int, Effects]:
    """Move the non-terminal, non-TX_PENDING records of [first, last] to ``target`` (AVAILABLE
    or ARCHIVED); returns how many records moved."""
    if target not in (RecordState.AVAILABLE, RecordState.ARCHIVED):
        raise AdminError(f"records can be released or archived, not moved to {target.name}")
    if first > last:
        raise AdminError(f"first_offset {first} is after last_offset {last}")
    if core.start == core.end:  # "[30, 29]" would read as a typo
        raise AdminError(
            f"[{first}, {last}] is not inside the in-flight window: it is empty, at offset "
            f"{core.start} (no record fetched and not yet done)"
        )
    if first < core.start or last >= core.end:
        raise AdminError(
            f"[{first}, {last}] is not inside the in-flight window [{core.start}, {core.end - 1}]"
        )
    core.window._begin()
    spans = core.window._spans
    start, stop = spans.isolate(first, last)
    moved = 0
    for span in spans.spans[start:stop]:
        state = span.state
        if state.is_terminal or state in (RecordState.TX_PENDING, RecordState.ARCHIVING):
            continue
        if state is target:
            continue
        if target is RecordState.ARCHIVED and state is RecordState.AVAILABLE:
            core.window._move(span, RecordState.ACQUIRED, "admin archive")
        core.window._move(
            span, target, "admin " + ("release" if target is RecordState.AVAILABLE else "archive")
        )
        disown(span)
        core.window._mark(span.first, span.last)
        moved += span.size
    spans.coalesce(start, stop)
    return moved, core.window._finish()


async def run(
    actor: SharePartitionActor,
    partition: Partition,
    action: Callable[[SharePartitionCore], tuple[Any, Effects | None]],
) -> Any:
    """Load the actor's state if needed, run ``action`` on its core under its mailbox and write
    the effects; returns the action's result."""
    settings = share_settings(actor.runtime, actor.key.group_id)
    async with actor._mailbox:
        code = await actor._load(partition, settings)
        if code is not ErrorCode.none:
            raise AdminError(f"the share partition state could not be loaded: {code.name}")
        assert actor.core is not None
        result, effects = action(actor.core)
        if effects is not None:
            code = await actor._commit(effects)
            if code is not ErrorCode.none:
                raise AdminError(f"the share coordinator refused the write: {code.name}")
        return result
