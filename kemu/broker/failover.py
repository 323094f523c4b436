"""Stopping and starting one virtual broker (``kemu ctl broker stop N`` / ``start N``).

The cluster model decides who leads what (``kemu/cluster/failover.py``, sans IO); this module
does the rest, as a Kafka broker failing and returning looks to its clients:

- stop: the broker's listening sockets close (a connect is refused) and its connections are cut,
  unanswered requests dropped; then every partition it led moves (new leader epoch; clients
  get NOT_LEADER_OR_FOLLOWER and find the new leader in Metadata) or goes offline;
- start: it listens again, as a follower; offline partitions it holds come back led by it and,
  when asked, a preferred-leader election gives it back the partitions it prefers.

Whatever a leadership change moves reloads from the log, through a leader listener installed at
start-up for every change (failover, ElectLeaders, a reassignment, the control plane's
``move-leader``): the group coordinator of a ``__consumer_offsets`` partition, the transaction
coordinator of a ``__transaction_state`` partition, the share coordinator of a
``__share_group_state`` partition (TX_PENDING staging and markers included), and the share
partitions of a moved source partition, which read their state again from the share
coordinator on next use. A coordinator not started yet has nothing to reload.
"""

from __future__ import annotations

from typing import Protocol

import structlog

from kemu.broker.faults import fault_table
from kemu.cluster.context import Runtime
from kemu.cluster.failover import LeaderChange, start_broker, stop_broker
from kemu.cluster.model import SHARE_STATE_TOPIC, TRANSACTION_STATE_TOPIC
from kemu.cluster.partition import Partition
from kemu.cluster.services import Service

log = structlog.get_logger("kemu.failover")

OFFSETS_TOPIC = "__consumer_offsets"


class NodeListeners(Protocol):
    """What the server offers (``KemuServer``): one broker's listening sockets."""

    def stop_listening(self, node_id: int) -> None: ...

    async def listen(self, node_id: int) -> None: ...


NODE_LISTENERS: Service[NodeListeners] = Service("node_listeners")  # provided by KemuServer
INSTALLED: Service[bool] = Service("failover_installed")


def install_failover(runtime: Runtime) -> None:
    """Reload what moves whenever a partition's leader changes (once per process)."""
    if runtime.services.built(INSTALLED):
        return
    runtime.services.provide(INSTALLED, True)
    runtime.cluster.leader_listeners.append(lambda p, previous: _moved(runtime, p, previous))


def _moved(runtime: Runtime, partition: Partition, previous: int) -> None:
    services = runtime.services
    topic, index = partition.topic_name, partition.index
    if topic == OFFSETS_TOPIC:
        from kemu.coordinator.group.service import GROUP_COORDINATOR

        groups = services.built(GROUP_COORDINATOR)
        if groups is not None:
            groups.reload_partition(index)
    elif topic == TRANSACTION_STATE_TOPIC:
        from kemu.coordinator.transaction.service import TRANSACTION_COORDINATOR

        transactions = services.built(TRANSACTION_COORDINATOR)
        if transactions is not None:
            transactions.reload_partition(index)
    elif topic == SHARE_STATE_TOPIC:
        from kemu.coordinator.share.service import SHARE_PERSISTER, ShareCoordinatorService

        share_state = services.built(SHARE_PERSISTER)
        if isinstance(share_state, ShareCoordinatorService):  # not an in-memory stand-in
            share_state.reload_partition(index)
    else:
        from kemu.broker.share.manager import SHARE_PARTITIONS

        manager = services.built(SHARE_PARTITIONS)
        if manager is not None:
            manager.reload_partition(partition.topic_id, index)
    log.debug(
        "leader_changed",
        topic=topic,
        partition=index,
        previous=previous,
        leader=partition.leader_id,
        leader_epoch=partition.leader_epoch,
    )


def _listeners(runtime: Runtime) -> NodeListeners | None:
    return runtime.services.built(NODE_LISTENERS)


def stop(runtime: Runtime, node_id: int) -> tuple[list[LeaderChange], int]:
    """Stop broker ``node_id``: (the leadership changes, the connections cut). Raises
    ``kemu.cluster.failover.FailoverError`` when it cannot (the last running broker)."""
    cluster = runtime.cluster
    if node_id in cluster.stopped:
        return [], 0
    if cluster.live_node_ids == [node_id]:
        from kemu.cluster.failover import FailoverError

        raise FailoverError("at least one broker must keep running")
    listeners = _listeners(runtime)
    if listeners is not None:
        listeners.stop_listening(node_id)
    faults = fault_table(runtime)
    faults.down.add(node_id)  # a connection accepted just before the close goes too
    cut = 0
    for connection in faults.of_node(node_id):
        connection.abort()
        cut += 1
    changes = stop_broker(cluster, node_id)
    log.info("broker_stopped", node_id=node_id, connections_closed=cut, moved=len(changes))
    return changes, cut


async def start(runtime: Runtime, node_id: int, *, elect_preferred: bool) -> list[LeaderChange]:
    """Start broker ``node_id`` again (a follower; see the module docstring)."""
    listeners = _listeners(runtime)
    if listeners is not None:
        await listeners.listen(node_id)
    fault_table(runtime).down.discard(node_id)
    changes = start_broker(runtime.cluster, node_id, elect_preferred=elect_preferred)
    log.info("broker_started", node_id=node_id, moved=len(changes))
    return changes
