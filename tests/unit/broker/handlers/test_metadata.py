"""Metadata through the real wire (``test_admin_handlers.Broker``): the authorized operations
it answers, and topics asked for by a null name or by id in v10-v11.

Where they came from: without an authorizer Kafka answers every supported operation; kemu used
to leave them out (found comparing with Kafka 4.4.0, issue 15). The null name and the topic id
are a regression test for what ``bench.fuzz`` found."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kemu.broker.authorization import OMITTED, SUPPORTED_OPERATIONS, ResourceType, bit_field
from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_admin_handlers import Broker

# --- authorized operations (Kafka without an authorizer: every supported operation) -----------

METADATA = 3
CLUSTER_BITS = sum(1 << code for code in (5, 7, 8, 9, 10, 11, 12))
TOPIC_BITS = sum(1 << code for code in (3, 4, 5, 6, 7, 8, 10, 11))
GROUP_BITS = sum(1 << code for code in (3, 6, 8, 10, 11))


def test_supported_operations_are_kafkas() -> None:
    assert bit_field(SUPPORTED_OPERATIONS[ResourceType.CLUSTER]) == CLUSTER_BITS
    assert bit_field(SUPPORTED_OPERATIONS[ResourceType.TOPIC]) == TOPIC_BITS
    assert bit_field(SUPPORTED_OPERATIONS[ResourceType.GROUP]) == GROUP_BITS
    assert bit_field(SUPPORTED_OPERATIONS[ResourceType.TRANSACTIONAL_ID]) == (1 << 8) | (1 << 4)


def metadata(broker: Broker, version: int, names: tuple[str, ...], **fields: Any) -> Any:
    topics = tuple(broker.nested(METADATA, version, "MetadataRequestTopic", name=n) for n in names)
    return broker.send(
        broker.request(METADATA, version, topics=topics, allow_auto_topic_creation=False, **fields)
    )


@pytest.mark.parametrize("version", [8, 9, 10])
def test_metadata_cluster_operations_up_to_v10(version: int) -> None:
    broker = Broker()
    asked = metadata(broker, version, (), include_cluster_authorized_operations=True)
    assert asked.cluster_authorized_operations == CLUSTER_BITS
    unasked = metadata(broker, version, (), include_cluster_authorized_operations=False)
    assert unasked.cluster_authorized_operations == OMITTED


@pytest.mark.parametrize("version", [8, 11, 12])
def test_metadata_topic_operations_for_found_and_unknown_names(version: int) -> None:
    broker = Broker()
    broker.create("t")
    extra = {"include_cluster_authorized_operations": False} if version <= 10 else {}
    response = metadata(
        broker, version, ("t", "missing"), include_topic_authorized_operations=True, **extra
    )
    found, missing = response.topics
    assert (found.error_code, found.topic_authorized_operations) == (ErrorCode.none, TOPIC_BITS)
    assert missing.error_code is ErrorCode.unknown_topic_or_partition
    assert missing.topic_authorized_operations == TOPIC_BITS  # as Kafka: the name is a resource
    plain = metadata(broker, version, ("t",), include_topic_authorized_operations=False, **extra)
    assert plain.topics[0].topic_authorized_operations == OMITTED


ZERO_UUID = uuid.UUID(int=0)


def test_metadata_v10_v11_with_a_null_name_or_a_topic_id_is_an_invalid_request() -> None:
    # found by bench.fuzz: kemu answered with a null topic name, which v10/v11 cannot encode
    # (handler_failed)
    broker = Broker()
    broker.create("t")
    topic_id = broker.cluster.topics["t"].topic_id
    for version in (10, 11):
        for name, wanted_id in ((None, ZERO_UUID), ("t", topic_id), (None, topic_id)):
            entry = broker.nested(METADATA, version, "MetadataRequestTopic", name=name)
            entry = type(entry)(name=name, topic_id=wanted_id)
            response = broker.send(
                broker.request(METADATA, version, topics=(entry,), allow_auto_topic_creation=False)
            )
            assert [(t.name, t.error_code) for t in response.topics] == [
                (name or "", ErrorCode.invalid_request)
            ]
            assert response.brokers == ()
        # names alone are served as before
        entry = broker.nested(METADATA, version, "MetadataRequestTopic", name="t")
        response = broker.send(broker.request(METADATA, version, topics=(entry,)))
        assert [(t.name, t.error_code) for t in response.topics] == [("t", ErrorCode.none)]
