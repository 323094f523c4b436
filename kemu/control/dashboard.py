"""The live dashboard's data: ``GET /state``, a JSON snapshot of brokers, topics, groups (members
with their partitions, lag), share partitions (their records from log start to high watermark),
consumer-group lag and open transactions, which the page (``page.py``, served at ``/`` and
``/dashboard``) polls once a second.

A share partition is sent as its offsets (log start, SPSO, SPEO, LSO, high watermark), its lag
and its in-flight spans, each ``[first, last, state, delivery count, owner member, lock
deadline, staging]`` (``staging``: for TX_PENDING, the transaction and the states its commit and
abort give; else null); the page draws the records below SPSO as done, the spans by state and
[SPEO, high watermark) as the backlog.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.share import admin
from kemu.broker.share.partition import SharePartitionCore
from kemu.broker.stats import request_stats
from kemu.cluster.context import Runtime
from kemu.control.lag import ShareLag, consumer_lags, group_service, share_windows
from kemu.control.verbs import Control
from kemu.coordinator.group.classic.model import ClassicGroup
from kemu.coordinator.group.consumer.group import ConsumerGroup
from kemu.coordinator.group.consumer.protocol import decode_assignment
from kemu.coordinator.group.share.group import ShareGroup

STATE_COLOURS = {
    "AVAILABLE": "#43a047",
    "ACQUIRED": "#1e88e5",
    "TX_PENDING": "#fb8c00",
    "ACKNOWLEDGED": "#90a4ae",
    "ARCHIVING": "#8e24aa",
    "ARCHIVED": "#546e7a",
}
# the parts of a share partition's bar outside its in-flight window: records below SPSO
# (finished), and the backlog [SPEO, high watermark) drawn as stripes of two colours
REGION_COLOURS = {
    "DONE": "#cfd8dc",
    "BACKLOG": "#fff3d6",
    "BACKLOG_STRIPE": "#f2d49b",
}


def snapshot(runtime: Runtime, control: Control) -> dict[str, Any]:
    cluster = runtime.cluster
    topics = [
        {
            "name": name,
            "internal": name.startswith("__"),
            "partitions": [
                {
                    "partition": p.index,
                    "leader": p.leader_id,
                    "leader_epoch": p.leader_epoch,
                    "log_start_offset": p.log_start_offset,
                    "high_watermark": p.high_watermark,
                    "log_end_offset": p.high_watermark,
                    "last_stable_offset": p.last_stable_offset,
                }
                for p in topic.partitions
            ],
        }
        for name, topic in sorted(cluster.topics.items())
    ]
    transactions = control.transactions()
    windows = share_windows(runtime)
    consumers = consumer_lags(runtime)
    lag_of: dict[str, int] = {}
    for group, lag in [(s.group, s.lag) for s, _ in windows] + [
        (c.group, c.lag) for c in consumers
    ]:
        lag_of[group] = lag_of.get(group, 0) + lag
    stats = request_stats(runtime)
    return {
        "now_ms": runtime.clock_ms(),
        "clock": "virtual" if runtime.clock.virtual else "real",
        "brokers": control.brokers(),
        "topics": topics,
        "groups": _groups(runtime, lag_of),
        "share_partitions": [
            _share_partition(runtime, share, core, transactions) for share, core in windows
        ],
        "consumer_lag": [
            {
                "group": c.group,
                "topic": c.topic,
                "partition": c.partition,
                "committed_offset": c.committed_offset,
                "log_end_offset": c.log_end_offset,
                "lag": c.lag,
            }
            for c in consumers
        ],
        "transactions": transactions,
        "requests_total": sum(stats.requests.values()),
        "colours": STATE_COLOURS,
        "region_colours": REGION_COLOURS,
    }


def _groups(runtime: Runtime, lag_of: dict[str, int]) -> list[dict[str, Any]]:
    registry = getattr(group_service(runtime), "registry", None)
    if registry is None:
        return []
    names = runtime.cluster.topics_by_id
    groups = []
    for group in registry:
        members = []
        for member in getattr(group, "members", {}).values():
            members.append(
                {
                    "member_id": member.member_id,
                    "client_id": getattr(member, "client_id", ""),
                    "client_host": getattr(member, "client_host", ""),
                    "partitions": sorted(_partitions(group, member, names)),
                }
            )
        state = getattr(group, "state_name", None)
        groups.append(
            {
                "group": group.group_id,
                "type": getattr(group, "group_type", type(group).__name__),
                "state": state() if callable(state) else state,
                "members": sorted(members, key=lambda m: (m["client_id"], m["member_id"])),
                "lag": lag_of.get(group.group_id),
            }
        )
    return sorted(groups, key=lambda g: g["group"])


def _partitions(group: Any, member: Any, names: dict[Any, Any]) -> list[tuple[str, int]]:
    """A member's assigned partitions as (topic name, index)."""
    if isinstance(group, ShareGroup | ConsumerGroup):
        found = []
        for topic_id, index in member.assigned:
            topic = names.get(topic_id)
            found.append((topic.name if topic is not None else str(topic_id), index))
        return found
    if isinstance(group, ClassicGroup) and group.protocol_type == "consumer":
        assigned = decode_assignment(member.assignment) if member.assignment else {}
        return [(topic, index) for topic, indexes in assigned.items() for index in indexes]
    return []  # a streams member is assigned tasks, not partitions


def _share_partition(
    runtime: Runtime,
    share: ShareLag,
    core: SharePartitionCore,
    transactions: list[dict[str, Any]],
) -> dict[str, Any]:
    partition = runtime.cluster.partition(share.topic, share.partition)
    assert partition is not None  # share_lags lists existing partitions only
    return {
        "group": share.group,
        "topic": share.topic,
        "partition": share.partition,
        "log_start_offset": partition.log_start_offset,
        "high_watermark": share.high_watermark,
        "last_stable_offset": partition.last_stable_offset,
        "start_offset": share.start_offset,
        "end_offset": share.end_offset,
        "delivery_complete_count": share.delivery_complete_count,
        "lag": share.lag,
        "backlog": share.backlog,
        "spans": _spans(core, transactions),
    }


def _spans(core: SharePartitionCore, transactions: list[dict[str, Any]]) -> list[list[Any]]:
    by_producer = {t["producer_id"]: t["transactional_id"] for t in transactions}
    spans = []
    for span in core.window._spans.spans:
        described = admin.describe_span(span)
        staging = None
        if "staged_producer_id" in described:
            producer_id = described["staged_producer_id"]
            staging = {
                "transactional_id": by_producer.get(producer_id),
                "producer_id": producer_id,
                "producer_epoch": described["staged_producer_epoch"],
                "on_commit": described["staged_commit_state"],
                "on_abort": described["staged_abort_state"],
            }
        spans.append(
            [
                max(span.first, core.start),
                span.last,
                span.state.name,
                span.delivery_count,
                described.get("member_id"),
                described.get("lock_deadline_ms"),
                staging,
            ]
        )
    return spans
