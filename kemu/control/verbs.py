"""What the control plane does, independent of HTTP: each verb takes plain values, checks all of
them before changing anything, and returns JSON-able data or raises ``ControlError``.

Verbs touch the broker through the same services requests use (fault table, share-partition
actors, group and transaction coordinators, the clock), always on the event loop's thread.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import structlog

from kemu.broker import failover
from kemu.broker.faults import RuleError, fault_table
from kemu.broker.share import admin
from kemu.broker.share.manager import share_partitions
from kemu.broker.share.states import RecordState
from kemu.cluster.clock import VirtualClock
from kemu.cluster.context import Runtime
from kemu.cluster.failover import FailoverError, LeaderChange
from kemu.cluster.partition import Partition
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.group.share.group import ShareGroup
from kemu.coordinator.transaction.coordinator import STATE_NAMES, TxnState

if TYPE_CHECKING:
    from kemu.coordinator.transaction.service import TransactionService

log = structlog.get_logger("kemu.control")

MAX_ADVANCE_MS = 10 * 365 * 24 * 3600 * 1000  # ten years


class ControlError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def bad_request(message: str) -> ControlError:
    return ControlError(400, message)


def not_found(message: str) -> ControlError:
    return ControlError(404, message)


_DURATION = re.compile(r"(\d+)(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(value: Any) -> int:
    """Milliseconds from an integer (ms) or a string such as ``"15m"``, ``"1h30m"``, ``"250ms"``."""
    if isinstance(value, int) and not isinstance(value, bool):
        total = value
    elif isinstance(value, str):
        text = value.replace(" ", "")
        pieces = _DURATION.findall(text)
        if not text or "".join(n + u for n, u in pieces) != text:
            raise bad_request(f"not a duration: {value!r} (e.g. 60s, 15m, 1h30m, 250ms)")
        total = sum(int(n) * _UNIT_MS[u] for n, u in pieces)
    else:
        raise bad_request("a duration is milliseconds or a string such as '60s' or '15m'")
    if not 0 <= total <= MAX_ADVANCE_MS:
        raise bad_request(f"duration {total} ms is out of range [0, {MAX_ADVANCE_MS}]")
    return total


class Control:
    """The verbs over one process's runtime."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.faults = fault_table(runtime)

    # --- cluster -------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        clock = self.runtime.clock
        return {
            "ok": True,
            "cluster_id": self.runtime.cluster.cluster_id,
            "brokers": sorted(self.runtime.cluster.nodes),
            "clock": "virtual" if clock.virtual else "real",
            "now_ms": clock.now_ms(),
        }

    def brokers(self) -> list[dict[str, Any]]:
        return [
            {
                "node_id": node.node_id,
                "host": node.host,
                "port": node.port,
                "down": node.node_id in self.faults.down,
                "stopped": node.node_id in self.runtime.cluster.stopped,
                "connections": len(self.faults.of_node(node.node_id)),
            }
            for node in sorted(self.runtime.cluster.nodes.values(), key=lambda n: n.node_id)
        ]

    def _node(self, node_id: Any) -> int:
        node = _as_int(node_id, "broker")
        if node not in self.runtime.cluster.nodes:
            raise not_found(f"no broker {node} (brokers: {sorted(self.runtime.cluster.nodes)})")
        return node

    def broker_down(self, node_id: Any) -> dict[str, Any]:
        """Connections to the broker close and new ones are closed as soon as accepted."""
        node = self._node(node_id)
        if len(self.faults.down | {node}) == len(self.runtime.cluster.nodes):
            raise ControlError(409, "at least one broker must stay up")
        self.faults.down.add(node)
        closed = 0
        for connection in self.faults.of_node(node):
            connection.abort()
            closed += 1
        log.info("broker_down", node_id=node, connections_closed=closed)
        return {"node_id": node, "down": True, "connections_closed": closed}

    def broker_stop(self, node_id: Any) -> dict[str, Any]:
        """Stop a virtual broker (``kemu/broker/failover.py``): its port refuses, its
        connections close, the partitions it led move to another replica with a new leader
        epoch (or go offline), and the coordinators it hosted load their state elsewhere."""
        node = self._node(node_id)
        try:
            changes, cut = failover.stop(self.runtime, node)
        except FailoverError as error:
            raise ControlError(409, str(error)) from None
        return {
            "node_id": node,
            "stopped": True,
            "connections_closed": cut,
            "moved": [_change(c) for c in changes],
        }

    async def broker_start(self, node_id: Any, body: dict[str, Any]) -> dict[str, Any]:
        """Start a stopped broker as a follower; ``elect_preferred`` gives it back the
        partitions it is the first replica of."""
        node = self._node(node_id)
        _only(body, {"elect_preferred"})
        elect = body.get("elect_preferred", False)
        if not isinstance(elect, bool):
            raise bad_request("elect_preferred is true or false")
        from kemu.broker.server import ListenError

        try:
            changes = await failover.start(self.runtime, node, elect_preferred=elect)
        except (OSError, ListenError) as error:
            raise ControlError(409, f"broker {node} cannot listen again: {error}") from None
        return {"node_id": node, "stopped": False, "moved": [_change(c) for c in changes]}

    def broker_up(self, node_id: Any) -> dict[str, Any]:
        node = self._node(node_id)
        self.faults.down.discard(node)
        log.info("broker_up", node_id=node)
        return {"node_id": node, "down": False}

    def _partition(self, topic: Any, index: Any) -> Partition:
        if not isinstance(topic, str) or topic not in self.runtime.cluster.topics:
            raise not_found(f"unknown topic {topic!r}")
        number = _as_int(index, "partition")
        partition = self.runtime.cluster.partition(topic, number)
        if partition is None:
            raise not_found(f"topic {topic!r} has no partition {number}")
        return partition

    def move_leader(self, topic: Any, index: Any, body: dict[str, Any]) -> dict[str, Any]:
        """The partition's leader becomes ``broker`` with a new leader epoch: requests to the old
        leader get NOT_LEADER_OR_FOLLOWER and clients refresh their metadata."""
        partition = self._partition(topic, index)
        _only(body, {"broker"})
        node = self._node(body.get("broker"))
        previous = partition.leader_id
        cluster = self.runtime.cluster
        if node not in partition.replicas:
            cluster.reassign(partition, [node, *partition.replicas])
        cluster.move_leader(partition, node)  # new epoch, long polls woken, persisted
        log.info(
            "leader_moved",
            topic=partition.topic_name,
            partition=partition.index,
            leader=node,
            previous=previous,
            leader_epoch=partition.leader_epoch,
        )
        return {
            "topic": partition.topic_name,
            "partition": partition.index,
            "leader": node,
            "previous_leader": previous,
            "leader_epoch": partition.leader_epoch,
        }

    # --- faults --------------------------------------------------------------------------------

    def list_faults(self) -> list[dict[str, Any]]:
        return [rule.describe() for rule in self.faults.rules()]

    def add_fault(self, body: Any) -> dict[str, Any]:
        try:
            return self.faults.add(body).describe()
        except RuleError as error:
            raise bad_request(str(error)) from None

    def add_faults(self, body: list[Any]) -> list[dict[str, Any]]:
        try:
            return [rule.describe() for rule in self.faults.add_all(body)]
        except RuleError as error:
            raise bad_request(str(error)) from None

    def install_faults(self, body: Any) -> dict[str, Any] | list[dict[str, Any]]:
        """A rule, or a list of rules: all or nothing, every rule checked before any is
        installed."""
        return self.add_faults(body) if isinstance(body, list) else self.add_fault(body)

    def clear_faults(self) -> dict[str, Any]:
        removed = self.faults.clear()
        log.info("fault_rules_cleared", removed=removed)
        return {"removed": removed}

    def delete_fault(self, rule_id: Any) -> dict[str, Any]:
        number = _as_int(rule_id, "rule id")
        if not self.faults.remove(number):
            raise not_found(f"no fault rule {number}")
        return {"removed": 1}

    # --- share groups --------------------------------------------------------------------------

    def _share_actor(self, group: Any, topic: Any, index: Any) -> tuple[Any, Partition]:
        partition = self._partition(topic, index)
        if not isinstance(group, str) or not group:
            raise bad_request("a share group id is a non-empty string")
        self._share_group(group)
        actor = share_partitions(self.runtime).actor(group, partition.topic_id, partition.index)
        return actor, partition

    def _share_group(self, group: str) -> ShareGroup:
        try:
            return group_coordinator(self.runtime).share.describe(group)
        except GroupError as error:
            raise not_found(error.message or f"share group {group!r} not found") from None

    async def share_dump(self, group: Any, topic: Any, index: Any) -> dict[str, Any]:
        actor, partition = self._share_actor(group, topic, index)
        result = await self._run(actor, partition, lambda core: (admin.dump(core), None))
        return {"group": group, "topic": topic, "partition": partition.index, **result}

    async def expire_locks(
        self, group: Any, topic: Any, index: Any, body: dict[str, Any]
    ) -> dict[str, Any]:
        _only(body, {"member_id"})
        member = body.get("member_id")
        if member is not None and (not isinstance(member, str) or not member):
            raise bad_request("member_id is a non-empty string")
        actor, partition = self._share_actor(group, topic, index)
        now = self.runtime.clock_ms()
        expired = await self._run(
            actor, partition, lambda core: admin.expire_locks(core, member, now)
        )
        log.info("share_locks_expired", group=group, topic=topic, partition=index, records=expired)
        return {"expired_records": expired}

    async def set_range(
        self, group: Any, topic: Any, index: Any, body: dict[str, Any], target: RecordState
    ) -> dict[str, Any]:
        _only(body, {"first_offset", "last_offset"})
        first = _as_int(body.get("first_offset"), "first_offset")
        last = _as_int(body.get("last_offset", first), "last_offset")
        actor, partition = self._share_actor(group, topic, index)
        moved = await self._run(
            actor, partition, lambda core: admin.set_range(core, first, last, target)
        )
        log.info(
            "share_records_moved",
            group=group,
            topic=topic,
            partition=index,
            first=first,
            last=last,
            state=target.name,
            records=moved,
        )
        return {"moved_records": moved, "state": target.name}

    async def release(
        self, group: Any, topic: Any, index: Any, body: dict[str, Any]
    ) -> dict[str, Any]:
        return await self.set_range(group, topic, index, body, RecordState.AVAILABLE)

    async def archive(
        self, group: Any, topic: Any, index: Any, body: dict[str, Any]
    ) -> dict[str, Any]:
        return await self.set_range(group, topic, index, body, RecordState.ARCHIVED)

    async def _run(self, actor: Any, partition: Partition, action: Any) -> Any:
        try:
            return await admin.run(actor, partition, action)
        except admin.AdminError as error:
            raise ControlError(409, str(error)) from None

    async def kick(self, group: Any, member: Any) -> dict[str, Any]:
        if not isinstance(group, str) or not isinstance(member, str):
            raise bad_request("group and member id are strings")
        self._share_group(group)
        try:
            await group_coordinator(self.runtime).remove_share_member(
                group, member, "removed by the kemu control plane"
            )
        except GroupError as error:
            raise not_found(error.message or f"no member {member!r} in {group!r}") from None
        return {"group": group, "member_id": member, "removed": True}

    def share_groups(self) -> list[dict[str, Any]]:
        coordinator = group_coordinator(self.runtime)
        groups = []
        for group in coordinator.share._share_groups():
            groups.append(
                {
                    "group": group.group_id,
                    "group_epoch": group.group_epoch,
                    "members": [
                        {
                            "member_id": member.member_id,
                            "assigned": self._assignment(member.assigned),
                        }
                        for member in group.members.values()
                    ],
                }
            )
        return groups

    # --- transactions --------------------------------------------------------------------------

    def transactions(self) -> list[dict[str, Any]]:
        from kemu.coordinator.transaction.service import transaction_coordinator

        service = transaction_coordinator(self.runtime)
        staged = self._staged_share_records()
        found = []
        for meta in service.coordinator.transactions.values():
            if meta.state not in (
                TxnState.ONGOING,
                TxnState.PREPARE_COMMIT,
                TxnState.PREPARE_ABORT,
            ):
                continue
            # TxnOffsetCommit offsets wait in __consumer_offsets, by producer id
            pending = group_coordinator(self.runtime).offset_manager.pending.of_producer(
                meta.producer_id
            )
            marker_status, pending_markers = _markers_outstanding(service, meta.transactional_id)
            found.append(
                {
                    "transactional_id": meta.transactional_id,
                    "producer_id": meta.producer_id,
                    "producer_epoch": meta.producer_epoch,
                    "state": STATE_NAMES[meta.state],
                    "timeout_ms": meta.timeout_ms,
                    "start_ms": meta.start_ms,
                    "deadline_ms": meta.start_ms + meta.timeout_ms if meta.start_ms >= 0 else None,
                    "partitions": sorted([t, p] for t, p in meta.partitions),
                    "share_partitions": sorted(
                        [group, self._topic_name(topic_id), index]
                        for group, topic_id, index in meta.share_partitions
                    ),
                    "pending_offsets": {
                        group: sorted([t, p, commit.offset] for (t, p), commit in offsets.items())
                        for group, offsets in pending.items()
                    },
                    "staged_share_records": staged.get(meta.producer_id, []),
                    "marker_status": marker_status,
                    "pending_markers": pending_markers,
                }
            )
        return found

    def _assignment(self, assigned: Any) -> list[dict[str, Any]]:
        """A member's partitions, each topic by name beside its id."""
        named = sorted((self._topic_name(t), p, str(t)) for t, p in assigned)
        return [{"topic": name, "topic_id": tid, "partition": p} for name, p, tid in named]

    def _topic_name(self, topic_id: Any) -> str:
        topic = self.runtime.cluster.topics_by_id.get(topic_id)
        return str(topic.name) if topic is not None else str(topic_id)

    def _staged_share_records(self) -> dict[int, list[dict[str, Any]]]:
        """TX_PENDING records in the loaded share partitions, by producer id."""
        by_producer: dict[int, list[dict[str, Any]]] = {}
        cluster = self.runtime.cluster
        for key, actor in share_partitions(self.runtime).actors.items():
            core = actor.core
            if core is None:
                continue
            topic = cluster.topics_by_id.get(key.topic_id)
            for span in core.window._spans.spans:
                if span.state is RecordState.TX_PENDING:
                    by_producer.setdefault(span.staged_pid, []).append(
                        {
                            "group": key.group_id,
                            "topic": topic.name if topic else str(key.topic_id),
                            "partition": key.partition,
                            **admin.describe_span(span),
                        }
                    )
        return by_producer

    def abort_transaction(self, transactional_id: Any) -> dict[str, Any]:
        return self.resolve_transaction(transactional_id, commit=False)

    def commit_transaction(self, transactional_id: Any) -> dict[str, Any]:
        return self.resolve_transaction(transactional_id, commit=True)

    def resolve_transaction(self, transactional_id: Any, commit: bool) -> dict[str, Any]:
        from kemu.coordinator.transaction.service import transaction_coordinator

        if not isinstance(transactional_id, str) or not transactional_id:
            raise bad_request("a transactional id is a non-empty string")
        service = transaction_coordinator(self.runtime)
        if transactional_id not in service.coordinator.transactions:
            raise not_found(f"unknown transactional id {transactional_id!r}")
        outcome = service.resolve_now(transactional_id, commit)
        if outcome is None:
            state = service.coordinator.transactions[transactional_id].state
            raise ControlError(
                409, f"transaction {transactional_id!r} is {STATE_NAMES[state]}, not Ongoing"
            )
        if outcome.error.value != 0:
            raise ControlError(500, f"the transaction could not be ended: {outcome.error.name}")
        return {
            "transactional_id": transactional_id,
            "result": "committed" if commit else "aborted",
            "producer_id": outcome.producer_id,
            "producer_epoch": outcome.producer_epoch,
        }

    # --- clock ---------------------------------------------------------------------------------

    def clock(self) -> dict[str, Any]:
        clock = self.runtime.clock
        answer: dict[str, Any] = {
            "kind": "virtual" if clock.virtual else "real",
            "now_ms": clock.now_ms(),
        }
        if isinstance(clock, VirtualClock):
            answer["pending_timers"] = clock.pending()
        return answer

    def advance(self, body: dict[str, Any]) -> dict[str, Any]:
        _only(body, {"ms", "duration"})
        clock = self.runtime.clock
        if not isinstance(clock, VirtualClock):
            raise ControlError(409, "the clock is real: start kemu with --clock virtual")
        if ("ms" in body) == ("duration" in body):
            raise bad_request("give one of ms (milliseconds) or duration (e.g. '15m')")
        delta = parse_duration_ms(body["ms"] if "ms" in body else body["duration"])
        before = clock.now_ms()
        fired = clock.advance(delta)
        log.info("clock_advanced", by_ms=delta, now_ms=clock.now_ms(), timers_fired=fired)
        return {"from_ms": before, "now_ms": clock.now_ms(), "timers_fired": fired}


def _as_int(value: Any, name: str) -> int:
    if isinstance(value, bool):
        raise bad_request(f"{name} must be an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
        return int(value)
    raise bad_request(f"{name} must be an integer, not {value!r}")


def _only(body: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise bad_request(
            f"unknown fields: {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})"
        )


def _change(change: LeaderChange) -> dict[str, Any]:
    return {
        "topic": change.topic,
        "partition": change.partition,
        "previous": change.previous,
        "leader": change.leader,
    }


def _markers_outstanding(
    service: TransactionService, transactional_id: str
) -> tuple[str | None, list[list[Any]]]:
    """What is left of a prepared transaction's markers, and the partitions whose marker is not
    written yet. ``retrying``: some failed to write (a disk error), written again on the
    coordinator's timer; ``completing``: all written, the COMPLETE record failed to write and is
    written again; ``cancelled``: a partition refused one (INVALID_PRODUCER_EPOCH), as Kafka's
    coordinator nothing is written again until the transaction's ``__transaction_state``
    partition is loaded again; None: nothing outstanding."""
    retried = service.pending_markers.get(transactional_id)
    if retried is not None:
        status = "retrying" if retried.partitions else "completing"
        return status, sorted([t, p] for t, p in retried.partitions)
    cancelled = service.cancelled_markers.get(transactional_id)
    if cancelled is not None:
        return "cancelled", sorted([t, p] for t, p in cancelled.partitions)
    return None, []
