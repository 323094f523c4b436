"""The streams assignor on the wire, kemu beside a real Apache Kafka 4.4.0: the same raw
StreamsGroupHeartbeat sequence (three members of a stateful topology, one of them reporting task
offsets) against both, and the targets StreamsGroupDescribe shows compared. Kafka 4.4.0's sticky
assignor hands a task nobody keeps to the member that reported offsets for it, and assigns no
warm-up tasks.

kemu always runs; Kafka 4.4.0 (from bench/.cache/lib) only with ``--heavy`` (it takes a minute
to start), as ``make test-streams`` gives.
"""

from __future__ import annotations

import datetime
import socket
import struct
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.testing.inprocess import InProcessKemu
from tests import REPO_ROOT
from tests.integration.parity import kafka_timing_overrides, nested

pytestmark = [pytest.mark.integration]

ROOT = REPO_ROOT
KAFKA_JAR = ROOT / "bench" / ".cache" / "lib" / "kafka_2.13-4.4.0.jar"
WAIT_S = 60.0  # a bound for failing, not a measurement
HEARTBEAT, DESCRIBE, FIND_COORDINATOR, CREATE_TOPICS = 88, 89, 10, 19
RETRIABLE = (
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
)


# On both: no initial delay and no assignment interval, so each heartbeat's new group epoch
# gets its target at once (Kafka's defaults delay a new group's first assignment by 3 s and
# compute at most one target a second; kemu follows them, docs/conformance.md).
ASSIGN_AT_ONCE = {
    "group.streams.initial.rebalance.delay.ms": "0",
    "group.streams.assignment.interval.ms": "0",
}


@pytest.fixture(
    scope="module",
    params=["kemu", pytest.param("kafka", marks=[pytest.mark.heavy, pytest.mark.parity])],
)
def bootstrap(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if request.param == "kemu":
        kemu = InProcessKemu(
            brokers=3,
            log_path=tmp_path_factory.mktemp("kemu") / "kemu.log",
            timing="kafka",
            overrides=kafka_timing_overrides(**ASSIGN_AT_ONCE),
        )
        kemu.start()
        yield kemu.bootstrap
        kemu.stop()
        return
    if not KAFKA_JAR.exists():
        pytest.skip("needs Kafka's jars in bench/.cache/lib (make bench fetches them)")
    sys.path.insert(0, str(ROOT))
    from bench.servers import KafkaServer

    class StreamsKafka(KafkaServer):
        def _server_properties(self) -> str:
            extra = "".join(f"{name}={value}\n" for name, value in ASSIGN_AT_ONCE.items())
            return super()._server_properties() + extra

        def _tool(self, main_class: str, args: list[str]) -> str:
            if args and args[0] == "format":
                args = [*args, "--feature", "streams.version=1"]
            return super()._tool(main_class, args)

    server = StreamsKafka(tmp_path_factory.mktemp("kafka-streams-assignor"), partitions=1)
    server.start()
    yield server.bootstrap
    server.stop()


def call(address: str, api_key: int, version: int, **fields: Any) -> Any:
    host, port = address.rsplit(":", 1)
    body = wire.build(wire.request_schema(api_key, version), **fields)
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:
        sock.sendall(wire.encode_request_frame(body, 7, "streams-assignor"))
        size = struct.unpack(">i", _read(sock, 4))[0]
        _, response = wire.decode_response(api_key, version, _read(sock, size))
    return response


def _read(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def coordinator(bootstrap: str, group: str) -> str:
    address = bootstrap.split(",")[0]
    deadline = time.monotonic() + WAIT_S
    while True:
        answer = call(address, FIND_COORDINATOR, 6, key_type=0, coordinator_keys=(group,))
        found = answer.coordinators[0]
        if found.error_code == ErrorCode.none:
            return f"{found.host}:{found.port}"
        assert time.monotonic() < deadline, found
        time.sleep(0.2)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    topic = nested(CREATE_TOPICS, 7, "CreatableTopic", name=name, num_partitions=partitions,
                   replication_factor=1, assignments=(), configs=())  # fmt: skip
    answer = call(bootstrap.split(",")[0], CREATE_TOPICS, 7, topics=(topic,),
                  timeout=datetime.timedelta(seconds=30), validate_only=False)  # fmt: skip
    assert answer.topics[0].error_code in (ErrorCode.none, ErrorCode.topic_already_exists), answer


class Member:
    def __init__(self, address: str, group: str, member_id: str, process_id: str) -> None:
        self.address, self.group = address, group
        self.member_id, self.process_id = member_id, process_id
        self.epoch = 0
        self.owned: dict[str, tuple[int, ...]] = {}

    def beat(self, **fields: Any) -> Any:
        joining = self.epoch == 0
        values: dict[str, Any] = {
            "group_id": self.group,
            "member_id": self.member_id,
            "member_epoch": self.epoch,
            "endpoint_information_epoch": 0,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": datetime.timedelta(milliseconds=30_000 if joining else -1),
            "topology": topology() if joining else None,
            "process_id": self.process_id if joining else None,
            "user_endpoint": None,
            "client_tags": () if joining else None,
            "active_tasks": self._task_ids(),
            "standby_tasks": (),
            "warmup_tasks": (),
            "task_offsets": None,
            "task_end_offsets": None,
            "shutdown_application": False,
        }
        values.update(fields)
        deadline = time.monotonic() + WAIT_S
        answer = call(self.address, HEARTBEAT, 0, **values)
        while answer.error_code in RETRIABLE and time.monotonic() < deadline:
            time.sleep(0.2)  # a new __consumer_offsets partition is still loading
            answer = call(self.address, HEARTBEAT, 0, **values)
        assert answer.error_code == ErrorCode.none, answer
        self.epoch = answer.member_epoch
        if answer.active_tasks is not None:
            self.owned = {t.subtopology_id: tuple(t.partitions) for t in answer.active_tasks}
        return answer

    def _task_ids(self) -> tuple[Any, ...]:
        return tuple(
            nested(HEARTBEAT, 0, "TaskIds", subtopology_id=sub, partitions=parts)
            for sub, parts in sorted(self.owned.items())
        )


def topology() -> Any:
    changelog = nested(HEARTBEAT, 0, "TopicInfo", name="wa-store-changelog", partitions=0,
                       replication_factor=0, topic_configs=())  # fmt: skip
    sub = nested(
        HEARTBEAT, 0, "Subtopology", subtopology_id="0", source_topics=("wa-in",),
        source_topic_regex=(), state_changelog_topics=(changelog,), repartition_sink_topics=(),
        repartition_source_topics=(), copartition_groups=(),
    )  # fmt: skip
    return nested(HEARTBEAT, 0, "Topology", epoch=0, subtopologies=(sub,))


def targets(address: str, group: str) -> dict[str, Any]:
    answer = call(address, DESCRIBE, 0, group_ids=(group,), include_authorized_operations=False)
    (described,) = answer.groups
    assert described.error_code == ErrorCode.none, described

    def tasks(ids: Any) -> set[tuple[str, int]]:
        return {(t.subtopology_id, p) for t in ids for p in t.partitions}

    return {
        member.process_id: {
            "active": tasks(member.target_assignment.active_tasks),
            "standby": tasks(member.target_assignment.standby_tasks),
            "warmup": tasks(member.target_assignment.warmup_tasks),
            "offsets": {(o.subtopology_id, o.partition, o.offset) for o in member.task_offsets},
        }
        for member in described.members
    }


def test_a_task_nobody_keeps_goes_to_the_member_reporting_its_state(bootstrap: str) -> None:
    group = "wa-app"
    create_topic(bootstrap, "wa-in", 4)
    address = coordinator(bootstrap, group)
    a = Member(address, group, "member-a", "process-a")
    deadline = time.monotonic() + WAIT_S
    while sum(len(p) for p in a.owned.values()) < 4:  # the changelog is created, then tasks
        a.beat()
        assert time.monotonic() < deadline, "a never got its tasks"
        time.sleep(0.2)
    # b reports state for task 0_3, c nothing; both join while a still owns all four tasks.
    b = Member(address, group, "member-b", "process-b")
    offset = nested(HEARTBEAT, 0, "TaskOffset", subtopology_id="0", partition=3, offset=42)
    b.beat(task_offsets=(offset,), task_end_offsets=(offset,))
    c = Member(address, group, "member-c", "process-c")
    c.beat()
    seen = targets(address, group)
    assert seen["process-a"]["active"] == {("0", 0), ("0", 1)}
    assert seen["process-b"]["active"] == {("0", 3)}  # by its reported offset
    assert seen["process-c"]["active"] == {("0", 2)}
    assert seen["process-b"]["offsets"] == {("0", 3, 42)}
    assert all(not member["warmup"] and not member["standby"] for member in seen.values())


def test_answers_to_bad_heartbeats_are_kafkas(bootstrap: str) -> None:
    """Refused heartbeats get Kafka's code and message in a response otherwise at its defaults
    (member id "", status empty, v1's AcceptableRecoveryLag -1); a v0 answer leaves the legacy
    int32 AcceptableRecoveryLag 0, as Kafka 4.4.0 fills only v1's int64 one."""
    group = "bad-app"
    create_topic(bootstrap, "wa-in", 4)
    address = coordinator(bootstrap, group)
    a = Member(address, group, "member-bad", "process-bad")
    deadline = time.monotonic() + WAIT_S
    while sum(len(p) for p in a.owned.values()) < 4:
        a.beat()
        assert time.monotonic() < deadline, "no tasks"
        time.sleep(0.2)

    def raw(version: int = 0, **fields: Any) -> Any:
        values: dict[str, Any] = {
            "group_id": group, "member_id": a.member_id, "member_epoch": a.epoch,
            "endpoint_information_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout": datetime.timedelta(milliseconds=-1), "topology": None,
            "process_id": None, "user_endpoint": None, "client_tags": None,
            "active_tasks": a._task_ids(), "standby_tasks": (), "warmup_tasks": (),
            "task_offsets": None, "task_end_offsets": None, "shutdown_application": False,
        }  # fmt: skip
        values.update(fields)
        return call(address, HEARTBEAT, version, **values)

    steady = raw()
    assert (steady.error_code, steady.acceptable_recovery_lag, steady.status) == (
        ErrorCode.none, 0, ()
    )  # fmt: skip
    assert raw(1).acceptable_recovery_lag == 10_000
    duplicate = nested(HEARTBEAT, 0, "TaskOffset", subtopology_id="0", partition=0, offset=1)
    cases = [
        (raw(member_epoch=a.epoch + 5), ErrorCode.fenced_member_epoch,
         f"The streams group member has a greater member epoch ({a.epoch + 5}) than the one "
         f"known by the group coordinator ({a.epoch}). The member must abandon all its "
         "partitions and rejoin."),
        (raw(member_id="ghost", member_epoch=3), ErrorCode.unknown_member_id,
         f"Member ghost is not a member of group {group}."),
        (raw(warmup_tasks=None), ErrorCode.invalid_request,
         "If one task-type is non-null, all must be non-null."),
        (raw(task_offsets=(duplicate, duplicate)), ErrorCode.invalid_request,
         "Task offsets contain a duplicate entry for subtopology 0 and partition 0."),
    ]  # fmt: skip
    for answer, code, message in cases:
        assert (answer.error_code, answer.error_message) == (code, message)
        assert (answer.member_id, answer.member_epoch, answer.status) == ("", 0, ())
    fenced_v1 = raw(1, member_epoch=a.epoch + 5)
    assert (fenced_v1.error_code, fenced_v1.acceptable_recovery_lag) == (
        ErrorCode.fenced_member_epoch, -1
    )  # fmt: skip
    assert raw().member_epoch == a.epoch  # none of it changed the member
