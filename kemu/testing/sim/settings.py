"""The topics and the groups' settings of a run: made at the first boot only, and checked at
every later one (written once and synced by kemu, they must survive a power loss; making them
again at every boot would hide their loss)."""

from __future__ import annotations

from typing import Any

from kemu.testing.sim.workload import (
    DLQ,
    INPUT,
    OUTPUT,
    PIPE_DELIVERY_LIMIT,
    PIPE_GROUP,
    PLAIN,
    READER_GROUP,
)

TOPICS = (INPUT, OUTPUT, PLAIN, DLQ)
_COMMON = {"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"}
# A record the pipelines' group archives at its delivery limit goes to the DLQ, with its value:
# the end check finds it there (exactly_once.py).
GROUP_SETTINGS = {
    READER_GROUP: _COMMON,
    PIPE_GROUP: _COMMON
    | {
        "share.delivery.count.limit": str(PIPE_DELIVERY_LIMIT),
        "errors.deadletterqueue.topic.name": DLQ,
        "errors.deadletterqueue.copy.record.enable": "true",
    },
}
OPERATOR_SETS = frozenset({"share.auto.offset.reset"})  # any value of it may stand (admin_ops)


def prepare(server: Any) -> None:
    """The first boot's topics and groups' settings."""
    from kemu.coordinator.group.config import group_config_store

    for topic in TOPICS:
        configs = {"errors.deadletterqueue.group.enable": "true"} if topic == DLQ else None
        server.cluster.create_topic(topic, 3, 1, configs)
    store = group_config_store(server.runtime)
    for group, overrides in GROUP_SETTINGS.items():
        store.set_overrides(group, overrides)


def lost_settings(server: Any) -> list[str]:
    """What a restarted kemu lost of the first boot's topics and groups' settings."""
    from kemu.coordinator.group.config import group_config_store

    lost = [
        f"kemu lost the topic {topic} across a restart"
        for topic in TOPICS
        if topic not in server.cluster.topics
    ]
    store = group_config_store(server.runtime)
    for group, overrides in GROUP_SETTINGS.items():
        held = store.get_overrides(group)
        for name, value in overrides.items():
            if name not in held or (name not in OPERATOR_SETS and held[name] != value):
                lost.append(
                    f"kemu lost group {group}'s {name}={value} across a restart "
                    f"(holds {held.get(name)!r})"
                )
    return lost
