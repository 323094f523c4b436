"""The streams group task assignor, after Kafka's ``StickyTaskAssignor``. Sans-IO.

Tasks are (subtopology id, partition). Members belong to processes (``process_id``: one Kafka
Streams instance may run several members, one per stream thread).

* Active tasks: every task goes to one member. A task stays with the member that had it in the
  previous target assignment while that member is below its fair share (the number of tasks over
  the number of members, rounded up); the rest go, in task order, to the least loaded process and
  within it to the least loaded member (ties by member id), so assignments are balanced and
  sticky across rebalances.
* Standby tasks: ``num_standby`` copies of each stateful task, each on a process other than the
  active's and than the other copies' (fewer when there are not enough processes), preferring the
  members that had the standby before, else the least loaded.
* No warm-up tasks (Kafka moves a task only when its new owner has caught up; kemu moves at once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Task = tuple[str, int]
Tasks = frozenset[Task]


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
    previous: TaskTuple = EMPTY


def assign(
    members: list[AssignMember],
    tasks: dict[str, int],
    stateful: set[str],
    num_standby: int,
) -> dict[str, TaskTuple]:
    """The target assignment of every member (members without tasks get an empty tuple)."""
    if not members:
        return {}
    all_tasks = sorted((sub, p) for sub, n in tasks.items() for p in range(n))
    by_id = {m.member_id: m for m in members}
    active: dict[str, set[Task]] = {m.member_id: set() for m in members}
    process_load: dict[str, int] = {}
    for m in members:
        process_load.setdefault(m.process_id, 0)
    fair = math.ceil(len(all_tasks) / len(members)) if all_tasks else 0
    previous_owner: dict[Task, str] = {}
    for m in sorted(members, key=lambda m: m.member_id):
        for task in m.previous.active:
            previous_owner.setdefault(task, m.member_id)
    unassigned: list[Task] = []
    for task in all_tasks:
        owner = previous_owner.get(task)
        if owner is not None and len(active[owner]) < fair:
            active[owner].add(task)
            process_load[by_id[owner].process_id] += 1
        else:
            unassigned.append(task)
    for task in unassigned:
        member_id = _least_loaded(members, active, process_load, exclude_processes=set())
        assert member_id is not None
        active[member_id].add(task)
        process_load[by_id[member_id].process_id] += 1

    standby: dict[str, set[Task]] = {m.member_id: set() for m in members}
    if num_standby > 0:
        active_process = {
            task: by_id[member_id].process_id
            for member_id, owned in active.items()
            for task in owned
        }
        load = {m: len(active[m]) for m in active}
        for task in all_tasks:
            if task[0] not in stateful:
                continue
            used = {active_process[task]}
            previous = sorted(
                m.member_id
                for m in members
                if task in m.previous.standby and m.process_id not in used
            )
            for _ in range(num_standby):
                pick = next((p for p in previous if by_id[p].process_id not in used), None)
                if pick is None:
                    pick = _least_loaded_by(members, load, used)
                if pick is None:
                    break
                standby[pick].add(task)
                load[pick] += 1
                used.add(by_id[pick].process_id)
    return {
        m.member_id: TaskTuple(frozenset(active[m.member_id]), frozenset(standby[m.member_id]))
        for m in members
    }


def _least_loaded(
    members: list[AssignMember],
    active: dict[str, set[Task]],
    process_load: dict[str, int],
    exclude_processes: set[str],
) -> str | None:
    # The process with the fewest tasks per member, then its member with the fewest tasks.
    sizes: dict[str, int] = {}
    for m in members:
        sizes[m.process_id] = sizes.get(m.process_id, 0) + 1
    candidates = [m for m in members if m.process_id not in exclude_processes]
    if not candidates:
        return None
    best = min(
        candidates,
        key=lambda m: (
            process_load[m.process_id] / sizes[m.process_id],
            m.process_id,
            len(active[m.member_id]),
            m.member_id,
        ),
    )
    return best.member_id


def _least_loaded_by(
    members: list[AssignMember], load: dict[str, int], exclude_processes: set[str]
) -> str | None:
    candidates = [m for m in members if m.process_id not in exclude_processes]
    if not candidates:
        return None
    return min(candidates, key=lambda m: (load[m.member_id], m.member_id)).member_id
