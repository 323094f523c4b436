"""Fault rules (kemu/broker/faults.py): parsing refuses impossible rules, matching looks at what
a request touches (topics by name or id, partitions, groups, transactional ids, client id,
broker), counts, fractions and deadlines (on the runtime's clock) use rules up."""

from __future__ import annotations

from typing import Any

import pytest

from kemu.broker.faults import FaultTable, RuleError, touches
from kemu.cluster.clock import VirtualClock
from kemu.cluster.context import Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.protocol import wire
from kemu.protocol.wire import DecodedRequest, RequestHeader
from kemu.storage.log import MemoryLog


def runtime() -> Runtime:
    nodes = {i: BrokerNode(i, "127.0.0.1", 19090 + i) for i in (1, 2, 3)}
    cluster = Cluster(
        cluster_id="unit",
        nodes=nodes,
        config=BrokerConfig({}),
        log_factory=lambda topic, index: MemoryLog(),
    )
    cluster.create_topic("orders", 3, 1)
    cluster.create_topic("other", 1, 1)
    return Runtime(cluster=cluster, clock=VirtualClock(start_ms=0))


def nested(api_key: int, version: int, cls_name: str, /, **fields: Any) -> Any:
    return wire.build(getattr(wire.request_module(api_key, version), cls_name), **fields)


def request(api_key: int, version: int, client_id: str = "app", **fields: Any) -> DecodedRequest:
    schema = wire.request_schema(api_key, version)
    return DecodedRequest(
        RequestHeader(api_key, version, 1, client_id), wire.build(schema, **fields), schema
    )


def produce(topic: str, partition: int, client_id: str = "app") -> DecodedRequest:
    data = nested(
        0, 9, "TopicProduceData", name=topic,
        partition_data=(nested(0, 9, "PartitionProduceData", index=partition),),
    )  # fmt: skip
    return request(0, 9, client_id, acks=-1, timeout=1000, topic_data=(data,))


def test_touches_names_ids_groups_and_transactional_ids() -> None:
    rt = runtime()
    assert touches(produce("orders", 2).body, rt).partitions == {("orders", 2)}
    topic_id = rt.cluster.topics["orders"].topic_id
    fetch = request(
        1, 13,
        topics=(nested(1, 13, "FetchTopic", topic_id=topic_id,
                       partitions=(nested(1, 13, "FetchPartition", partition=1),)),),
    )  # fmt: skip
    touched = touches(fetch.body, rt)
    assert touched.topics == {"orders"} and touched.partitions == {("orders", 1)}
    assert touches(request(15, 5, groups=("g1", "g2")).body, rt).groups == {"g1", "g2"}
    init = request(22, 4, transactional_id="tx", transaction_timeout=1000)
    assert touches(init.body, rt).transactional_ids == {"tx"}


def test_matching_filters_and_counts() -> None:
    rt = runtime()
    table = FaultTable(rt)
    rule = table.add(
        {"api": "produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": 2, "topic": "orders",
         "partition": 1, "client_id": "app", "broker": 2}
    )  # fmt: skip
    rules = table.by_key[0]
    assert table.match(rules, 2, produce("orders", 0)) is None
    assert table.match(rules, 2, produce("other", 0)) is None
    assert table.match(rules, 1, produce("orders", 1)) is None  # another broker
    assert table.match(rules, 2, produce("orders", 1, client_id="x")) is None
    assert table.match(rules, 2, produce("orders", 1)) is rule
    assert table.match(rules, 2, produce("orders", 1)) is rule
    assert rule.fired == 2 and table.by_key == {}  # used up: the key is gone from the index


def test_deadline_on_the_runtime_clock_and_fraction() -> None:
    rt = runtime()
    table = FaultTable(rt)
    table.add({"api": "produce", "error_code": 6, "count": None, "ttl_ms": 1000})
    assert table.match(table.by_key[0], 1, produce("orders", 0)) is not None
    assert isinstance(rt.clock, VirtualClock)
    rt.clock.advance(1000)
    assert table.rules() == []
    half = table.add({"api": "produce", "error_code": 6, "count": None, "fraction": 0.5})
    table.random.seed(1)
    hits = sum(table.match(table.by_key[0], 1, produce("orders", 0)) is half for _ in range(200))
    assert 50 < hits < 150


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"api": "nope", "error_code": 6}, "unknown API"),
        ({"api_key": 999, "error_code": 6}, "unknown API key"),
        ({"api": "produce", "error_code": 12345}, "unknown error code"),
        ({"api": "produce", "error_code": 0}, "not an error"),
        ({"api": "produce", "kind": "latency", "latency_ms": 0}, "latency_ms"),
        ({"api": "produce", "error_code": 6, "count": 0}, "count"),
        ({"api": "produce", "error_code": 6, "topic": "orders", "partition": 3}, "no partition"),
        ({"api": "produce", "error_code": 6, "group": ""}, "non-empty"),
        ([], "JSON object"),
    ],
)
def test_impossible_rules_are_refused(spec: Any, message: str) -> None:
    table = FaultTable(runtime())
    with pytest.raises(RuleError, match=message):
        table.add(spec)
    assert table.by_key == {}


def test_a_list_is_installed_whole_or_not_at_all() -> None:
    table = FaultTable(runtime())
    with pytest.raises(RuleError):
        table.add_all([{"api": "produce", "error_code": 6}, {"api": "fetch"}])
    assert table.rules() == []
    added = table.add_all([{"api": "produce", "error_code": 6}, {"api": "fetch", "error": 6}])
    assert [r.id for r in added] == [1, 2] and len(table.rules()) == 2


def test_a_thousand_rules_are_indexed_by_api_key() -> None:
    table = FaultTable(runtime())
    table.add_all([{"api": "fetch", "error_code": 6, "client_id": f"c{i}"} for i in range(1000)])
    assert set(table.by_key) == {1}
    assert table.by_key.get(0) is None  # a Produce request costs one failed dict lookup


def test_rules_for_other_clients_are_not_walked_and_order_is_kept() -> None:
    table = FaultTable(runtime())
    table.add_all([{"api": "produce", "error_code": 6, "client_id": f"c{i}"} for i in range(1000)])
    first = table.add({"api": "produce", "error_code": 7, "count": 1})  # any client
    mine = table.add({"api": "produce", "error_code": 8, "count": 1, "client_id": "app"})
    rules = table.by_key[0]
    assert table._candidates(rules, "app") == [first, mine]  # 2 of 1,002 rules
    assert table.match(rules, 1, produce("orders", 0)) is first  # the earlier one first
    assert table.match(rules, 1, produce("orders", 0)) is mine
    assert table.match(rules, 1, produce("orders", 0)) is None
    assert table.match(rules, 1, produce("orders", 0, client_id="c7")).client_id == "c7"


def test_a_delay_without_kind_is_a_latency_rule_not_a_question_about_errors() -> None:
    table = FaultTable(runtime())
    slow = table.add({"api": "produce", "latency_ms": 500})
    assert (slow.kind, slow.latency_ms, slow.error_code) == ("latency", 500, 0)
    # an error named beside the delay keeps it an error rule that also waits
    late_error = table.add({"api": "produce", "latency_ms": 500, "error": 6})
    assert (late_error.kind, late_error.error_code) == ("error", 6)
    with pytest.raises(RuleError, match="for a delay alone give latency_ms"):
        table.add({"api": "produce"})
