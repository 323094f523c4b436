"""Share-state RPC handlers (keys 83-87) through the real wire, in-process: requests are built
with kio's schemas, encoded, decoded, answered by the registered handler on a chosen broker, and
the response encoded and decoded again."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kemu.broker.handlers import REGISTRY, load_handlers
from kemu.coordinator.share.keys import kafka_uuid
from kemu.coordinator.share.persister import SharePartitionKey
from kemu.coordinator.share.service import share_coordinator
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.testing.harness import HandlerHarness

INITIALIZE, READ, WRITE, DELETE, SUMMARY = 83, 84, 85, 86, 87


class Broker(HandlerHarness):
    def __init__(self) -> None:
        super().__init__(
            config={"share.coordinator.state.topic.num.partitions": "3"},
            cluster_id="share-rpc",
            first_port=19291,
        )
        self.topic_id = self.cluster.create_topic("orders", 2, 1).topic_id

    def coordinator(self, group: str, partition: int = 0) -> int:
        service = share_coordinator(self.runtime)
        key = SharePartitionKey(group, self.topic_id, partition)
        state = service.topic().partitions[service.partition_for(key)]
        return state.leader_id

    def topics(
        self,
        api_key: int,
        version: int,
        topic_class: str,
        partitions: list[dict[str, Any]],
        topic_id: uuid.UUID | None = None,
    ) -> tuple[Any, ...]:
        module = wire.request_module(api_key, version)
        parts = []
        for fields in partitions:
            fields = dict(fields)
            batches = fields.pop("state_batches", ())
            if batches:
                fields["state_batches"] = tuple(
                    wire.build(
                        module.StateBatch,
                        first_offset=f,
                        last_offset=last,
                        delivery_state=s,
                        delivery_count=c,
                    )
                    for f, last, s, c in batches
                )
            parts.append(wire.build(module.PartitionData, **fields))
        return (
            wire.build(
                getattr(module, topic_class),
                topic_id=topic_id or self.topic_id,
                partitions=tuple(parts),
            ),
        )

    def initialize(self, group: str, node: int, state_epoch: int = 0, start: int = 0) -> Any:
        return self.send_now(
            INITIALIZE,
            0,
            node,
            group_id=group,
            topics=self.topics(
                INITIALIZE,
                0,
                "InitializeStateData",
                [{"partition": 0, "state_epoch": state_epoch, "start_offset": start}],
            ),
        )

    def write(self, group: str, node: int, version: int = 1, **partition: Any) -> Any:
        fields = {"partition": 0, "state_epoch": 0, "leader_epoch": 0, "start_offset": 0}
        fields.update(partition)
        return self.send_now(
            WRITE,
            version,
            node,
            group_id=group,
            topics=self.topics(WRITE, version, "WriteStateData", [fields]),
        )

    def read(self, group: str, node: int, leader_epoch: int = 0) -> Any:
        return self.send_now(
            READ,
            0,
            node,
            group_id=group,
            topics=self.topics(
                READ, 0, "ReadStateData", [{"partition": 0, "leader_epoch": leader_epoch}]
            ),
        )

    def summary(self, group: str, node: int, version: int = 1) -> Any:
        return self.send_now(
            SUMMARY,
            version,
            node,
            group_id=group,
            topics=self.topics(
                SUMMARY, version, "ReadStateSummaryData", [{"partition": 0, "leader_epoch": 0}]
            ),
        )

    def delete(self, group: str, node: int) -> Any:
        return self.send_now(
            DELETE,
            0,
            node,
            group_id=group,
            topics=self.topics(DELETE, 0, "DeleteStateData", [{"partition": 0}]),
        )


def only(response: Any) -> Any:
    [topic] = response.results
    [partition] = topic.partitions
    return partition


@pytest.fixture
def broker() -> Broker:
    return Broker()


def test_handlers_are_registered_with_kafkas_versions() -> None:
    load_handlers()
    served = {key: (REGISTRY[key].min_version, REGISTRY[key].max_version) for key in range(83, 88)}
    assert served == {83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0), 87: (0, 1)}


def test_full_round_trip_on_the_coordinator(broker: Broker) -> None:
    node = broker.coordinator("g1")
    assert only(broker.initialize("g1", node, state_epoch=2, start=5)).error_code == ErrorCode.none
    written = only(
        broker.write(
            "g1",
            node,
            state_epoch=2,
            start_offset=5,
            delivery_complete_count=1,
            state_batches=[(5, 5, 2, 1), (6, 9, 0, 1)],
        )
    )
    assert (written.error_code, written.error_message) == (ErrorCode.none, None)
    read = only(broker.read("g1", node))
    assert (read.error_code, read.state_epoch, read.start_offset) == (ErrorCode.none, 2, 5)
    assert [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in read.state_batches
    ] == [(5, 5, 2, 1), (6, 9, 0, 1)]
    summary = only(broker.summary("g1", node))
    assert (
        summary.state_epoch,
        summary.leader_epoch,
        summary.start_offset,
        summary.delivery_complete_count,
    ) == (2, 0, 5, 1)
    summary_v0 = only(broker.summary("g1", node, version=0))
    assert (summary_v0.error_code, summary_v0.start_offset) == (ErrorCode.none, 5)
    assert only(broker.delete("g1", node)).error_code == ErrorCode.none
    gone = only(broker.read("g1", node))
    assert (gone.error_code, gone.error_message) == (
        ErrorCode.invalid_request,
        "Read operation on uninitialized share partition not allowed.",
    )


def test_other_brokers_answer_not_coordinator(broker: Broker) -> None:
    node = broker.coordinator("g1")
    other = node % 3 + 1
    for response, operation in (
        (broker.initialize("g1", other), "initialize share group state"),
        (broker.write("g1", other), "write share group state"),
        (broker.read("g1", other), "read share group state"),
        (broker.summary("g1", other), "read share group state summary"),
        (broker.delete("g1", other), "delete share group state"),
    ):
        result = only(response)
        assert result.error_code == ErrorCode.not_coordinator
        assert (
            result.error_message == f"Unable to {operation}: This is not the correct coordinator."
        )
    assert only(broker.summary("g1", other)).delivery_complete_count == -1


def test_write_v0_has_no_delivery_complete_count(broker: Broker) -> None:
    node = broker.coordinator("g2")
    broker.initialize("g2", node)
    assert only(broker.write("g2", node, version=0, state_batches=[(0, 0, 2, 1)])).error_code == (
        ErrorCode.none
    )
    assert only(broker.summary("g2", node)).delivery_complete_count == 0  # kept from initialize


def test_errors_per_partition(broker: Broker) -> None:
    node = broker.coordinator("g3")
    uninitialized = only(broker.write("g3", node))
    assert (uninitialized.error_code, uninitialized.error_message) == (
        ErrorCode.invalid_request,
        "Write operation on uninitialized share partition not allowed.",
    )
    broker.initialize("g3", node, state_epoch=3)
    fenced = only(broker.write("g3", node, state_epoch=2))
    assert fenced.error_code == ErrorCode.fenced_state_epoch
    assert only(broker.read("g3", node, leader_epoch=4)).error_code == ErrorCode.none
    assert only(broker.read("g3", node, leader_epoch=3)).error_code == ErrorCode.fenced_leader_epoch
    assert only(broker.write("g3", node, state_epoch=3, leader_epoch=3)).error_code == (
        ErrorCode.fenced_leader_epoch
    )
    missing = uuid.uuid4()
    service = share_coordinator(broker.runtime)
    missing_node = service.coordinator_node(f"g3:{kafka_uuid(missing)}:0")
    assert missing_node is not None
    unknown = broker.send_now(
        INITIALIZE,
        0,
        missing_node.node_id,
        group_id="g3",
        topics=broker.topics(
            INITIALIZE,
            0,
            "InitializeStateData",
            [{"partition": 0, "state_epoch": 0, "start_offset": 0}],
            topic_id=missing,
        ),
    )
    assert (only(unknown).error_code, only(unknown).error_message) == (
        ErrorCode.unknown_topic_or_partition,
        "This server does not host this topic-partition.",
    )


def test_empty_group_or_partitions_get_an_empty_answer(broker: Broker) -> None:
    node = broker.coordinator("g1")
    assert broker.read("", node).results == ()
    empty = broker.send_now(
        READ, 0, node, group_id="g1", topics=broker.topics(READ, 0, "ReadStateData", [])
    )
    assert empty.results == ()
    assert broker.send_now(WRITE, 1, node, group_id="g1", topics=()).results == ()


def test_a_null_topic_id_is_an_invalid_request_not_a_crash() -> None:
    broker = Broker()
    module = wire.request_module(WRITE, 1)
    partition = wire.build(
        module.PartitionData, partition=0, state_epoch=0, leader_epoch=0, start_offset=0
    )
    topic = wire.build(module.WriteStateData, topic_id=uuid.UUID(int=0), partitions=(partition,))
    answer = broker.send_now(WRITE, 1, 1, group_id="g", topics=(topic,))
    (result,) = answer.results
    assert result.partitions[0].error_code == ErrorCode.invalid_request
