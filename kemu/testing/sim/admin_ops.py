"""The simulation's operator: admin requests that reach share-group and transaction state while
the workload runs.

Every 0.2-3 virtual seconds one of:
- ``kafka-transactions.sh abort`` on an output partition: DescribeProducers on its leader, and
  for an open transaction found there a WriteTxnMarkers ABORT to that one data partition (the
  marker a tool writes; the share acknowledgements staged in the same transaction live in
  ``__share_group_state``, which it does not reach, so they must stay TX_PENDING until the
  transaction itself ends). The output that transaction wrote to that partition is aborted: the
  end check excuses exactly those values (``Ledger.tool_aborted`` x ``Ledger.pipe_sends``),
  unless kemu answered the marker with an error;
- IncrementalAlterConfigs on a share group: ``share.record.lock.duration.ms`` of either group,
  ``share.auto.offset.reset`` of the reader group;
- CreatePartitions: one more (empty) partition of ``input``, up to six, which every group
  subscribed to it rebalances onto;
- DeleteShareGroupOffsets of the reader group on ``input`` (refused while it has members):
  once it may have applied, records the reader accepted may legitimately come again, so its
  "accepted, never delivered again" ledger starts afresh, and the group's share-partition start
  offsets may go back (the oracle leaves the group alone while the request is in flight, and
  learns its start offsets afresh after).
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from kemu.client import Admin
from kemu.client.errors import KafkaError
from kemu.protocol.errors import ErrorCode
from kemu.testing.sim.workload import (
    EXPECTED,
    INPUT,
    OUTPUT,
    PIPE_GROUP,
    READER_GROUP,
    Actor,
    _close,
)

DESCRIBE_PRODUCERS, WRITE_TXN_MARKERS, DELETE_SHARE_GROUP_OFFSETS = 61, 27, 92
CREATE_PARTITIONS = 37
ABORT = False  # WriteTxnMarkers' TransactionResult
OPERATIONS = ("abort", "abort", "abort", "config", "delete_offsets", "partitions")
MAX_INPUT_PARTITIONS = 6


class Operator(Actor):
    kind = "admin"

    async def body(self) -> None:
        admin = Admin(self.bootstrap, client_id="kemu-sim-operator")
        self.clients = [admin]
        if self.ledger.resetting:  # a deletion its last life left in flight may have applied
            self.ledger.reset |= self.ledger.resetting
            self.ledger.forget_accepted()
        try:
            await admin.cluster.start()
            await admin.cluster.topic(OUTPUT)
            while True:
                await asyncio.sleep(self.rng.uniform(0.2, 3.0))
                operation = self.rng.choice(OPERATIONS)
                try:
                    if operation == "abort":
                        await self._abort_a_transaction(admin)
                    elif operation == "config":
                        await self._alter_config(admin)
                    elif operation == "partitions":
                        await self._add_input_partition(admin)
                    else:
                        await self._delete_reader_offsets(admin)
                except EXPECTED as error:
                    self.ledger.count(f"admin.{operation}.error.{type(error).__name__}")
        finally:
            await _close(admin)

    async def _abort_a_transaction(self, admin: Admin) -> None:
        """What ``kafka-transactions.sh abort --topic output --partition P --start-offset O``
        sends, for an open transaction of one output partition."""
        partition = self.rng.randrange(3)
        cluster = admin.cluster
        node = await cluster.leader(OUTPUT, partition)
        version = await cluster.version(DESCRIBE_PRODUCERS, 0, node)
        described = await cluster.call(
            node,
            DESCRIBE_PRODUCERS,
            version,
            topics=(
                cluster.nested(
                    DESCRIBE_PRODUCERS,
                    version,
                    "TopicRequest",
                    name=OUTPUT,
                    partition_indexes=(partition,),
                ),
            ),
        )
        [answer] = described.topics[0].partitions
        if answer.error_code != ErrorCode.none:
            raise KafkaError(answer.error_code, "DescribeProducers")
        open_ones = sorted(
            (int(p.producer_id), int(p.producer_epoch), int(p.coordinator_epoch))
            for p in answer.active_producers
            if p.current_txn_start_offset >= 0
        )
        if not open_ones:
            self.ledger.count("admin.abort.nothing_open")
            return
        producer_id, epoch, coordinator_epoch = self.rng.choice(open_ones)
        # noted before it is sent: a marker whose answer is lost may still have been written;
        # one kemu refused was not (unless an earlier abort of the same key was)
        key = (producer_id, epoch, partition)
        first = key not in self.ledger.tool_aborted
        self.ledger.tool_aborted.add(key)
        version = await cluster.version(WRITE_TXN_MARKERS, 1, node)
        response = await cluster.call(
            node,
            WRITE_TXN_MARKERS,
            version,
            markers=(
                cluster.nested(
                    WRITE_TXN_MARKERS,
                    version,
                    "WritableTxnMarker",
                    producer_id=producer_id,
                    producer_epoch=epoch,
                    transaction_result=ABORT,
                    coordinator_epoch=coordinator_epoch,
                    topics=(
                        cluster.nested(
                            WRITE_TXN_MARKERS,
                            version,
                            "WritableTxnMarkerTopic",
                            name=OUTPUT,
                            partition_indexes=(partition,),
                        ),
                    ),
                ),
            ),
        )
        errors = [
            p.error_code
            for marker in response.markers
            for topic in marker.topics
            for p in topic.partitions
            if p.error_code != ErrorCode.none
        ]
        if errors and first:
            self.ledger.tool_aborted.discard(key)
        self.ledger.count("admin.abort.refused" if errors else "admin.abort.written")

    async def _alter_config(self, admin: Admin) -> None:
        if self.rng.random() < 0.5:
            group = self.rng.choice((PIPE_GROUP, READER_GROUP))
            lock_ms = self.rng.choice((1_500, 2_000, 3_000))  # world.py's bounds
            configs = {"share.record.lock.duration.ms": str(lock_ms)}
        else:
            group = READER_GROUP
            configs = {"share.auto.offset.reset": self.rng.choice(("earliest", "latest"))}
        await admin.set_group_configs(group, configs)
        self.ledger.count("admin.config")

    async def _add_input_partition(self, admin: Admin) -> None:
        """``kafka-topics.sh --alter --partitions``: one more partition of ``input`` (up to
        MAX_INPUT_PARTITIONS). The producers keep to the first three, so the new ones stay
        empty; every group subscribed to ``input`` rebalances onto them."""
        cluster = admin.cluster
        await cluster.refresh_metadata([INPUT])
        if INPUT not in cluster.topics:  # the answer had an error for it (a fault rule)
            self.ledger.count("admin.partitions.unknown")
            return
        count = len(cluster.topics[INPUT].leaders) + 1
        if count > MAX_INPUT_PARTITIONS:
            self.ledger.count("admin.partitions.enough")
            return
        node = cluster.topics[INPUT].leaders[0]
        version = await cluster.version(CREATE_PARTITIONS, 3, node)
        response = await cluster.call(
            node,
            CREATE_PARTITIONS,
            version,
            topics=(
                cluster.nested(
                    CREATE_PARTITIONS,
                    version,
                    "CreatePartitionsTopic",
                    name=INPUT,
                    count=count,
                    assignments=None,
                ),
            ),
            timeout=datetime.timedelta(seconds=10),
            validate_only=False,
        )
        [result] = response.results
        self.ledger.count(f"admin.partitions.{ErrorCode(int(result.error_code)).name.lower()}")

    async def _delete_reader_offsets(self, admin: Admin) -> None:
        """While the request is in flight the reader's accepted records may come again and the
        group's start offsets go back; once kemu refused it, neither may (the accepted records
        of before are remembered again), once it applied or its answer was lost, both, and so
        may the records of an ACCEPT sent before its answer came, whenever that ACCEPT's
        confirmation comes: the share-partition leader may have applied it just before the
        coordinator applied the deletion (seed 67 found the oracle missing that)."""
        cluster = admin.cluster
        node = await cluster.coordinator(0, READER_GROUP)
        version = await cluster.version(DELETE_SHARE_GROUP_OFFSETS, 0, node)
        accepted = dict(self.ledger.accepted)
        self.ledger.accepted.clear()
        self.ledger.resetting.add(READER_GROUP)
        refused = False
        try:
            response = await self._delete_offsets(admin, node, version)
            refused = response.error_code != ErrorCode.none
        finally:
            self.ledger.resetting.discard(READER_GROUP)
            if refused:
                for where, confirmed in accepted.items():
                    self.ledger.accepted.setdefault(where, confirmed)
            else:
                # the ACCEPTs confirmed meanwhile too, and those sent before now
                self.ledger.forget_accepted()
                self.ledger.reset.add(READER_GROUP)
        if refused:
            self.ledger.count(f"admin.delete_offsets.{response.error_code.name.lower()}")
        else:
            self.ledger.count("admin.delete_offsets.done")

    async def _delete_offsets(self, admin: Admin, node: int, version: int) -> Any:
        cluster = admin.cluster
        return await cluster.call(
            node,
            DELETE_SHARE_GROUP_OFFSETS,
            version,
            group_id=READER_GROUP,
            topics=(
                cluster.nested(
                    DELETE_SHARE_GROUP_OFFSETS,
                    version,
                    "DeleteShareGroupOffsetsRequestTopic",
                    topic_name=INPUT,
                ),
            ),
        )
