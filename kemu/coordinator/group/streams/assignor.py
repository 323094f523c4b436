"""The streams group task assignor: the rules of Kafka 4.4.0's default ``StickyTaskAssignor``
("sticky"). Sans-IO.

Tasks are (subtopology id, partition). Members belong to processes (``process_id``: one Kafka
Streams instance may run several members, one per stream thread); a process's load is its task
count over its member count. What a member brings in is its *current* assignment (not the
previous target, as Kafka's ``TargetAssignmentBuilder`` hands the assignor) and the changelog
offsets it last reported (heartbeat ``TaskOffsets``).

Active tasks, with a quota of ceil(tasks / members) per member (recomputed as members fill up):

1. in (partition, subtopology) order, a task stays with the member that runs it now, while that
   member is under its quota;
2. then a task goes to the best member already holding its state, under its quota: members with
   it as a standby first, then members that only reported offsets for it (a restarted instance
   with the state on disk, under a new member id), most caught-up (highest offset) first;
3. the rest, in (subtopology, partition) order, go to the least loaded process and within it to
   its least loaded member, whatever the quota.

Standby tasks (``num.standby.replicas`` copies of each stateful task, never on a process that
already holds the task), with a quota of ceil((tasks + stateful tasks x replicas) / members): to
the previous active owner, then to the previous standby / state holders as above, under the
quota; the copies left over go to the least loaded processes that do not hold the task (fewer when
there are not enough processes, as Kafka, which logs a warning).

Warm-up tasks: none. Kafka 4.4.0's assignor returns only active and standby tasks, and the
``AssignmentRefiner`` that would turn a move of a stateful task into a warm-up first returns the
target unchanged in 4.4.0 (``streams.num.warmup.replicas`` and ``streams.acceptable.recovery.lag``
exist as configs but place nothing). A task therefore moves at once, and the new owner restores
its state before processing.

Ties that Kafka leaves to hash order (processes and members of equal load, members claiming the
same task) are broken here by process id and member id, so an assignment is reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import structlog

Task = tuple[str, int]
Tasks = frozenset[Task]

log = structlog.get_logger("kemu.group")


@dataclass(frozen=True, slots=True)
class TaskTuple:
    active: Tasks = frozenset()
    standby: Tasks = frozenset()
    warmup: Tasks = frozenset()

    def all(self) -> Tasks:
        return self.active | self.standby | self.warmup

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)


EMPTY = TaskTuple()


@dataclass(frozen=True, slots=True)
class AssignMember:
    member_id: str
    process_id: str
    # The tasks the member holds now (Kafka: the member's current assignment).
    previous: TaskTuple = EMPTY
    # Changelog offset sums it last reported, per task (Kafka's MemberTaskOffsets.taskOffsets).
    task_offsets: Mapping[Task, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Process:
    process_id: str
    member_counts: dict[str, int] = field(default_factory=dict)
    held: set[Task] = field(default_factory=set)

    @property
    def load(self) -> float:
        return sum(self.member_counts.values()) / len(self.member_counts)

    def least_loaded_member(self) -> str:
        return min(self.member_counts, key=lambda m: (self.member_counts[m], m))


class _Quota:
    """Kafka's per-member quota: ceil(remaining tasks / members still below it), recomputed each
    time a member reaches it."""

    def __init__(self, tasks: int, members: int) -> None:
        self.tasks = tasks
        self.members = members
        self.per_member = _ceil_div(tasks, members)

    def note(self, member_count: int) -> None:
        if member_count == self.per_member:
            self.members -= 1
            self.tasks -= member_count
            self.per_member = _ceil_div(self.tasks, self.members)


class _Assignment:
    def __init__(self, members: list[AssignMember], active_tasks: int, total_tasks: int) -> None:
        self.process_of = {m.member_id: m.process_id for m in members}
        self.processes: dict[str, _Process] = {}
        for m in members:
            self.processes.setdefault(m.process_id, _Process(m.process_id)).member_counts[
                m.member_id
            ] = 0
        self.active: dict[str, set[Task]] = {m.member_id: set() for m in members}
        self.standby: dict[str, set[Task]] = {m.member_id: set() for m in members}
        self.active_quota = _Quota(active_tasks, len(members))
        self.total_quota = _Quota(total_tasks, len(members))

    def count(self, member_id: str) -> int:
        return self.processes[self.process_of[member_id]].member_counts[member_id]

    def holds(self, member_id: str, task: Task) -> bool:
        return task in self.processes[self.process_of[member_id]].held

    def add(self, member_id: str, task: Task, *, active: bool) -> int:
        process = self.processes[self.process_of[member_id]]
        process.held.add(task)
        process.member_counts[member_id] += 1
        (self.active if active else self.standby)[member_id].add(task)
        return process.member_counts[member_id]

    def least_loaded_process(self, excluding: Task | None = None) -> _Process | None:
        candidates = [
            p for p in self.processes.values() if excluding is None or excluding not in p.held
        ]
        if not candidates:
            return None
        return min(candidates, key=lambda p: (p.load, p.process_id))

    def best_holder(self, holders: list[str], standby_of: Task | None = None) -> str | None:
        """Kafka's ``findPrevMemberWithLeastLoad``: the first holder, replaced by a later one only
        when both its process and itself are strictly less loaded; for a standby, holders whose
        process already has the task are skipped."""
        best: str | None = None
        best_loads = (math.inf, math.inf)
        for member_id in holders:
            if standby_of is not None and self.holds(member_id, standby_of):
                continue
            process = self.processes[self.process_of[member_id]]
            loads = (process.load, float(self.count(member_id)))
            if best is None or (loads[0] < best_loads[0] and loads[1] < best_loads[1]):
                best, best_loads = member_id, loads
        return best


def assign(
    members: list[AssignMember],
    tasks: dict[str, int],
    stateful: set[str],
    num_standby: int,
) -> dict[str, TaskTuple]:
    """The target assignment of every member (members without tasks get an empty tuple)."""
    if not members:
        return {}
    members = sorted(members, key=lambda m: m.member_id)
    all_tasks = [(sub, p) for sub in sorted(tasks) for p in range(tasks[sub])]
    stateful_tasks = [t for t in all_tasks if t[0] in stateful]
    state = _Assignment(members, len(all_tasks), len(all_tasks) + len(stateful_tasks) * num_standby)
    active_owner: dict[Task, str] = {}
    for m in members:
        for task in m.previous.active:
            active_owner.setdefault(task, m.member_id)
    holders = _state_holders(members)

    _assign_active(state, all_tasks, active_owner, holders)
    if num_standby > 0:
        _assign_standby(state, stateful_tasks, num_standby, active_owner, holders)
    return {
        m.member_id: TaskTuple(
            frozenset(state.active[m.member_id]), frozenset(state.standby[m.member_id])
        )
        for m in members
    }


def _state_holders(members: list[AssignMember]) -> dict[Task, list[str]]:
    """Per task, the members holding its state, best first: standbys (then by reported offset,
    highest first), then members that only reported an offset for it."""
    ranked: dict[Task, list[tuple[int, int, str]]] = {}
    for m in members:
        for task in m.previous.standby:
            ranked.setdefault(task, []).append((0, -m.task_offsets.get(task, 0), m.member_id))
        for task, offset in m.task_offsets.items():
            if task not in m.previous.standby:
                ranked.setdefault(task, []).append((1, -offset, m.member_id))
    # A stable sort on (standby first, highest offset first) keeps member order among equals.
    return {
        task: [member_id for _, _, member_id in sorted(entries, key=lambda e: (e[0], e[1]))]
        for task, entries in ranked.items()
    }


def _assign_active(
    state: _Assignment,
    all_tasks: list[Task],
    active_owner: dict[Task, str],
    holders: dict[Task, list[str]],
) -> None:
    quota = state.active_quota
    total = state.total_quota
    # Range-like: partition first, as Kafka sorts before the sticky passes.
    remaining = sorted(all_tasks, key=lambda t: (t[1], t[0]))
    for sticky_pass in (1, 2):
        left: list[Task] = []
        for task in remaining:
            if sticky_pass == 1:
                owner = active_owner.get(task)
            else:
                owner = state.best_holder(holders.get(task, []))
            if owner is not None and state.count(owner) < quota.per_member:
                count = state.add(owner, task, active=True)
                quota.note(count)
                total.note(count)
            else:
                left.append(task)
        remaining = left
    for task in sorted(remaining):
        process = state.least_loaded_process()
        assert process is not None
        count = state.add(process.least_loaded_member(), task, active=True)
        quota.note(count)
        total.note(count)


def _assign_standby(
    state: _Assignment,
    stateful_tasks: list[Task],
    num_standby: int,
    active_owner: dict[Task, str],
    holders: dict[Task, list[str]],
) -> None:
    total = state.total_quota
    to_least_loaded: list[tuple[Task, int]] = []
    for task in sorted(stateful_tasks, key=lambda t: (t[1], t[0]), reverse=True):
        for copy in range(num_standby):
            owner = active_owner.get(task)
            if (
                owner is not None
                and not state.holds(owner, task)
                and state.count(owner) < total.per_member
            ):
                total.note(state.add(owner, task, active=False))
                continue
            holder = state.best_holder(holders.get(task, []), standby_of=task)
            if holder is not None and state.count(holder) < total.per_member:
                total.note(state.add(holder, task, active=False))
                continue
            to_least_loaded.append((task, num_standby - copy))
            break
    for task, copies in sorted(to_least_loaded, reverse=True):
        for placed in range(copies):
            process = state.least_loaded_process(excluding=task)
            if process is None:
                log.warning(
                    "streams_standby_not_placed",
                    task=f"{task[0]}_{task[1]}",
                    missing=copies - placed,
                    wanted=num_standby,
                )
                break
            total.note(state.add(process.least_loaded_member(), task, active=False))


def _ceil_div(tasks: int, members: int) -> int:
    return 0 if members <= 0 else -(-tasks // members)
