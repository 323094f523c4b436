"""``python -m kemu.protocol.codegen``: the checked-in schema modules are what it writes from the
message JSONs in the tree, and what it writes is what kio would read and write."""

from __future__ import annotations

import dataclasses

import pytest

from kemu.protocol import codegen, codegen_views, wire


@pytest.mark.parametrize("target", codegen.TARGETS, ids=lambda target: target.module)
def test_the_checked_in_module_is_what_the_generator_writes(target: codegen.Target) -> None:
    checked_in = (codegen.PROTOCOL / target.module).read_text()
    assert codegen.generate(target) == checked_in, (
        f"kemu/protocol/{target.module} is stale: run python -m kemu.protocol.codegen"
    )


def test_check_mode_reports_nothing_stale() -> None:
    assert codegen.main(["--check"]) == 0


def test_a_field_gets_kio_s_name_type_and_default() -> None:
    request = wire.request_schema(28, 6)  # TxnOffsetCommit v6, generated from Kafka 4.4.0's JSON
    fields = {field.name: field for field in dataclasses.fields(request)}
    # GenerationIdOrMemberEpoch keeps kio's name; its JSON default is -1
    assert fields["generation_id"].default == -1
    assert fields["group_instance_id"].default is None
    response = wire.response_schema(42, 3)
    throttle = {field.name: field for field in dataclasses.fields(response)}["throttle_time"]
    assert throttle.metadata == {"kafka_type": "timedelta_i32"}


def test_versions_and_struct_fields_follow_the_json() -> None:
    module = wire.request_module(28, 6)
    topic = {field.name for field in dataclasses.fields(module.TxnOffsetCommitRequestTopic)}
    assert topic == {"topic_id", "partitions"}  # Name is versions 0-5 only


def test_in_versions_reads_kafka_version_ranges() -> None:
    assert codegen.in_versions("3+", 6) and not codegen.in_versions("3+", 2)
    assert codegen.in_versions("0-5", 5) and not codegen.in_versions("0-5", 6)
    assert codegen.in_versions("1", 1) and not codegen.in_versions("none", 0)
    assert codegen.snake("GenerationIdOrMemberEpoch") == "generation_id_or_member_epoch"


def test_the_checked_in_request_views_are_what_the_generator_writes() -> None:
    """``python -m kemu.protocol.codegen_views`` after a handler's versions or a schema change."""
    assert codegen_views.main(["--check"]) == 0


def test_a_view_holds_the_union_of_the_served_versions_fields() -> None:
    view = (codegen_views.VIEWS / "txn_offset_commit.py").read_text()
    assert "def topic_id(self) -> UUID | None: ...  # only v6" in view
    assert "def name(self) -> TopicName: ...  # only v0-v5" in view
    assert codegen_views.version_note([0, 1, 2, 5]) == "only v0-v2, v5"
