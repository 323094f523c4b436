"""The in-flight window of a share partition as a sorted list of uniform offset ranges.

A share partition tracks state for every offset in [SPSO, SPEO). Offsets are acquired,
acknowledged and released a log batch (or more) at a time, so the window is kept as *spans*:
maximal ranges whose records share one state, delivery count, owner, lock deadline and staged
transaction. A change to part of a span splits it; equal neighbours are merged back, so a
window of uniform batches costs one object per batch, not one per record.

Invariant: the spans are contiguous and cover the window exactly (``spans[0].first == start``,
``spans[i].last + 1 == spans[i + 1].first``, ``spans[-1].last + 1 == end``).
"""

from __future__ import annotations

import bisect
from operator import attrgetter

from kemu.broker.share.states import RecordState

NO_DEADLINE = -1
NOT_STAGED = -1


class Span:
    """Offsets [first, last] that are in one uniform state."""

    __slots__ = (
        "deadline",
        "delivery_count",
        "first",
        "last",
        "member",
        "staged_abort",
        "staged_ack",
        "staged_commit",
        "staged_epoch",
        "staged_pid",
        "state",
    )

    def __init__(
        self,
        first: int,
        last: int,
        state: RecordState,
        delivery_count: int = 0,
        member: str | None = None,
        deadline: int = NO_DEADLINE,
        staged_pid: int = NOT_STAGED,
        staged_epoch: int = NOT_STAGED,
        staged_ack: int = NOT_STAGED,
        staged_commit: int = NOT_STAGED,
        staged_abort: int = NOT_STAGED,
    ) -> None:
        self.first = first
        self.last = last
        self.state = state
        self.delivery_count = delivery_count
        self.member = member
        self.deadline = deadline
        self.staged_pid = staged_pid
        self.staged_epoch = staged_epoch
        self.staged_ack = staged_ack
        # KIP-1289: the states the transaction's commit and abort give (fixed when staged)
        self.staged_commit = staged_commit
        self.staged_abort = staged_abort

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def same_as(self, other: Span) -> bool:
        """Whether the two spans are indistinguishable apart from their offsets."""
        return (
            self.state == other.state
            and self.delivery_count == other.delivery_count
            and self.member == other.member
            and self.deadline == other.deadline
            and self.staged_pid == other.staged_pid
            and self.staged_epoch == other.staged_epoch
            and self.staged_ack == other.staged_ack
            and self.staged_commit == other.staged_commit
            and self.staged_abort == other.staged_abort
        )

    def clone(self, first: int, last: int) -> Span:
        return Span(
            first,
            last,
            self.state,
            self.delivery_count,
            self.member,
            self.deadline,
            self.staged_pid,
            self.staged_epoch,
            self.staged_ack,
            self.staged_commit,
            self.staged_abort,
        )

    def clear_stage(self) -> None:
        self.staged_pid = self.staged_epoch = self.staged_ack = NOT_STAGED
        self.staged_commit = self.staged_abort = NOT_STAGED

    def __repr__(self) -> str:
        owner = f" {self.member}" if self.member else ""
        return f"Span({self.first}-{self.last} {self.state.name} x{self.delivery_count}{owner})"


_FIRST = attrgetter("first")


class SpanList:
    """Sorted, contiguous spans with split-on-demand and merge-back."""

    __slots__ = ("spans",)

    def __init__(self) -> None:
        self.spans: list[Span] = []

    def __len__(self) -> int:
        return len(self.spans)

    def index_of(self, offset: int) -> int:
        """Index of the span holding ``offset`` (the caller knows it is inside the window)."""
        return bisect.bisect_right(self.spans, offset, key=_FIRST) - 1

    def first_index_at_or_after(self, offset: int) -> int:
        """Index of the span holding ``offset``, or of the first span after it."""
        index = bisect.bisect_right(self.spans, offset, key=_FIRST) - 1
        if index < 0:
            return 0
        if self.spans[index].last < offset:
            return index + 1
        return index

    def split_at(self, offset: int) -> int:
        """Make ``offset`` the first offset of a span; return that span's index.

        ``offset`` may be one past the last span (returns ``len``)."""
        spans = self.spans
        if not spans or offset > spans[-1].last:
            return len(spans)
        index = bisect.bisect_right(spans, offset, key=_FIRST) - 1
        if index < 0:
            return 0
        span = spans[index]
        if span.first == offset:
            return index
        tail = span.clone(offset, span.last)
        span.last = offset - 1
        spans.insert(index + 1, tail)
        return index + 1

    def isolate(self, first: int, last: int) -> tuple[int, int]:
        """Split so that [first, last] is exactly spans[i:j]; return (i, j)."""
        start = self.split_at(first)
        stop = self.split_at(last + 1)
        return start, stop

    def coalesce(self, start: int, stop: int) -> None:
        """Merge equal neighbours among spans[start - 1 : stop + 1]."""
        spans = self.spans
        low = max(start - 1, 0)
        high = min(stop, len(spans) - 1)
        index = high
        while index > low:
            left, right = spans[index - 1], spans[index]
            if left.same_as(right):
                left.last = right.last
                del spans[index]
            index -= 1

    def append(self, span: Span) -> None:
        spans = self.spans
        if spans and spans[-1].same_as(span) and spans[-1].last + 1 == span.first:
            spans[-1].last = span.last
        else:
            spans.append(span)

    def drop_prefix(self, count: int) -> None:
        del self.spans[:count]
