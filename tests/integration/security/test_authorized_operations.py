"""Authorized operations without an authorizer: every operation of the resource's type, as Kafka
4.4.0 answers (DescribeCluster and DescribeTopics with confluent-kafka's admin client, Metadata
v8-v10 cluster operations raw), on a 3-broker kemu started from the CLI.

Where it came from: a difference from Kafka 4.4.0 found with librdkafka-based clients (issue 15)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import (
    TopicCollection,
)
from confluent_kafka.admin import (
    AdminClient,
)

from kemu.testing.inprocess import InProcessKemu
from tests.integration.three_brokers import (
    TIMEOUT_S,
    call,
    create_topic,
    three_brokers_in_process,
    unique,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kemu() -> Iterator[InProcessKemu]:
    yield from three_brokers_in_process()


CLUSTER_OPERATIONS = {
    "CREATE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
    "ALTER",
    "DESCRIBE",
}


TOPIC_OPERATIONS = {
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
}


def test_admin_client_sees_every_cluster_and_topic_operation(kemu: InProcessKemu) -> None:
    topic = unique("ops")
    create_topic(kemu.bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    cluster = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT_S)
    assert {op.name for op in cluster.authorized_operations} == CLUSTER_OPERATIONS
    described = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[
        topic
    ].result(TIMEOUT_S)
    assert {op.name for op in described.authorized_operations} == TOPIC_OPERATIONS


@pytest.mark.parametrize("version", [8, 10])
def test_metadata_reports_cluster_operations_up_to_v10(kemu: InProcessKemu, version: int) -> None:
    response = call(
        kemu.bootstrap.split(",")[0],
        3,
        version,
        topics=(),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=False,
    )
    assert response.cluster_authorized_operations == sum(
        1 << code for code in (5, 9, 10, 11, 12, 7, 8)
    )
