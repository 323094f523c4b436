"""RequestContext's message builders: ``make`` per version, ``make_shared`` built once."""

from __future__ import annotations

from kemu.cluster.context import RequestContext, Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.protocol import wire
from kemu.protocol.wire import RequestHeader
from kemu.storage.log import MemoryLog

NODE = BrokerNode(1, "127.0.0.1", 19090)
FETCH = 1


def context(api_version: int) -> RequestContext:
    cluster = Cluster(
        cluster_id="context",
        nodes={1: NODE},
        config=BrokerConfig(),
        log_factory=lambda topic, index: MemoryLog(),
    )
    header = RequestHeader(FETCH, api_version, 7, "test")
    return RequestContext(NODE, Runtime(cluster=cluster), header)


def test_make_builds_the_class_of_the_request_version() -> None:
    leader = context(12).make("LeaderIdAndEpoch", leader_id=3, leader_epoch=4)
    assert type(leader) is wire.response_module(FETCH, 12).LeaderIdAndEpoch
    assert (leader.leader_id, leader.leader_epoch) == (3, 4)


def test_make_shared_builds_once_per_version_and_values() -> None:
    first = context(12).make_shared("LeaderIdAndEpoch", leader_id=-1, leader_epoch=-1)
    again = context(12).make_shared("LeaderIdAndEpoch", leader_id=-1, leader_epoch=-1)
    assert again is first
    assert first == context(12).make("LeaderIdAndEpoch", leader_id=-1, leader_epoch=-1)
    other_values = context(12).make_shared("LeaderIdAndEpoch", leader_id=2, leader_epoch=-1)
    assert other_values.leader_id == 2
    newer = context(17).make_shared("LeaderIdAndEpoch", leader_id=-1, leader_epoch=-1)
    assert type(newer) is wire.response_module(FETCH, 17).LeaderIdAndEpoch
    assert newer is not first
