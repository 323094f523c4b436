"""Java's KafkaShareConsumer (kafka-clients 4.4.0: ShareGroupHeartbeat, ShareFetch and
ShareAcknowledge v2) against a 3-broker kemu, through ``kemu.probe.ShareConsumerProbe``.

One JVM runs every scenario, each in its own share group (``share.auto.offset.reset=earliest``
set here through IncrementalAlterConfigs on the GROUP resource, as Kafka's own integration tests
do), and prints one JSON line per check; the tests below assert on those lines:

- implicit mode: every record delivered once across polls, nothing after commitSync; close
  releases the last poll (accepted only by a following poll or commit);
- explicit mode: RELEASE redelivers with delivery count 2, REJECT never, ACCEPT never;
- ``share.acquire.mode=record_limit``: no poll exceeds ``max.poll.records``;
- three consumers sharing one partition: each record ACCEPTed by exactly one of them;
- RENEW keeps a record's acquisition lock past its duration: no other member gets it;
- an expired acquisition lock hands the records to another member with delivery count 2; the
  first holder's late ACCEPT, of records the other completed, is skipped without an error;
- ``share.delivery.count.limit`` 2 with RELEASE: two deliveries, then archived;
- a subscription moved to another topic: the share session follows;
- ``Admin.listShareGroupOffsets``: lag 0 once everything is acknowledged.

kemu runs with ``group.share.min.record.lock.duration.ms=1000`` so that the lock-expiry group
may use a one-second lock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kemu.testing.inprocess import InProcessKemu
from tests.integration.clients.test_java_clients import ProbeRun, java_probes, run_probe  # noqa: F401  (fixture)

pytestmark = [pytest.mark.integration, pytest.mark.java]

PREFIX = "sj"
TOPIC, SINGLE, BATCHED = "share-java", "share-java-single", "share-java-batched"
PARTITIONS, RECORDS = 3, 30
SINGLE_RECORDS, BATCHED_RECORDS = 20, 60
RENEW_LOCK_MS, RENEW_EVERY_MS, RENEW_HOLD_MS = 3_000, 700, 4_500
EXPIRY_LOCK_MS = 1_000
GROUP_CONFIGS = {
    "implicit": {},
    "close": {},
    "explicit": {"errors.deadletterqueue.topic.name": "dlq.sj-explicit"},  # KIP-1191
    "limit": {},
    "batch": {},
    "shared": {},
    "renew": {"share.record.lock.duration.ms": str(RENEW_LOCK_MS)},
    "expiry": {"share.record.lock.duration.ms": str(EXPIRY_LOCK_MS)},
    "dlimit": {
        "share.delivery.count.limit": "2",
        "errors.deadletterqueue.topic.name": "dlq.sj-dlimit",
        "errors.deadletterqueue.copy.record.enable": "true",
    },
    "resubscribe": {},
}


def set_group_configs(admin: AdminClient, group: str, configs: dict[str, str]) -> None:
    entries = {"share.auto.offset.reset": "earliest", **configs}
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in entries.items()
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)


def produce(kemu: InProcessKemu) -> None:
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    dlq = {"errors.deadletterqueue.group.enable": "true"}
    created = admin.create_topics(
        [NewTopic(TOPIC, PARTITIONS, 1), NewTopic(SINGLE, 1, 1), NewTopic(BATCHED, 1, 1)]
        + [NewTopic(f"dlq.{PREFIX}-{name}", 1, 1, config=dlq) for name in ("explicit", "dlimit")]
    )
    for future in created.values():
        future.result(30)
    for name, configs in GROUP_CONFIGS.items():
        set_group_configs(admin, f"{PREFIX}-{name}", configs)
    # a linger long enough that the single topic's records share one batch
    producer = Producer({"bootstrap.servers": kemu.bootstrap, "linger.ms": 200})
    for index in range(RECORDS):
        producer.produce(TOPIC, value=b"v%d" % index, partition=index % PARTITIONS)
    for index in range(SINGLE_RECORDS):
        producer.produce(SINGLE, value=b"s%d" % index, partition=0)
    assert producer.flush(30) == 0
    for index in range(BATCHED_RECORDS):  # one batch per record
        producer.produce(BATCHED, value=b"b%d" % index, partition=0)
        assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def share_kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    log_path = tmp_path_factory.mktemp("kemu-share-java") / "kemu.log"
    kemu = InProcessKemu(
        brokers=3,
        log_path=log_path,
        overrides=["group.share.min.record.lock.duration.ms=1000"],
    )
    kemu.start()
    yield kemu
    kemu.stop()


@pytest.fixture(scope="module")
def share_run(java_probes: Path, share_kemu: InProcessKemu) -> ProbeRun:  # noqa: F811
    produce(share_kemu)
    return run_probe(
        "ShareConsumerProbe",
        share_kemu.bootstrap,
        "--prefix",
        PREFIX,
        "--topic",
        TOPIC,
        "--single-topic",
        SINGLE,
        "--batched-topic",
        BATCHED,
        "--records",
        str(RECORDS),
        "--partitions",
        str(PARTITIONS),
        "--single-records",
        str(SINGLE_RECORDS),
        "--batched-records",
        str(BATCHED_RECORDS),
        "--renew-every-ms",
        str(RENEW_EVERY_MS),
        "--renew-hold-ms",
        str(RENEW_HOLD_MS),
    )


EVERY = sorted(f"{p}:{o}" for p in range(PARTITIONS) for o in range(RECORDS // PARTITIONS))
SINGLE_ONCE = sorted(f"{o}#1" for o in range(SINGLE_RECORDS))


def offset_of(key: str) -> int:
    return int(key.split("#")[0].split(":")[-1])


def test_implicit_mode_delivers_each_record_once(share_run: ProbeRun) -> None:
    consumed = share_run.one("consume_all")
    assert sorted(consumed["records"]) == EVERY
    assert set(consumed["delivery_counts"].values()) == {1}
    assert consumed["commit_errors"] == {}
    assert share_run.one("nothing_left")["records"] == []


def test_implicit_mode_close_releases_the_last_poll(share_run: ProbeRun) -> None:
    # KafkaShareConsumer.close() sends only acknowledgements already made: in implicit mode the
    # last poll's records are not accepted, their session closes and they are released with
    # their delivery counted (Kafka 4.4.0's releaseAcquiredRecords: DeliveryCountOps.NO_OP; see
    # test_share_close_java.py); the polls before were accepted by the poll that followed them.
    consumed = share_run.one("close_all")
    assert sorted(consumed["records"]) == EVERY
    assert set(consumed["delivery_counts"].values()) == {1}
    last = consumed["last_poll"]
    assert last
    assert sorted(share_run.one("close_nothing_left")["records"]) == sorted(f"{k}#2" for k in last)


def test_explicit_accept_release_reject(share_run: ProbeRun) -> None:
    released = share_run.one("explicit_release")
    assert sorted(released["first"]) == EVERY
    assert sorted(released["second"]) == [f"{p}:0#2" for p in range(PARTITIONS)]
    assert released["commit_errors"] == {}
    # offset 1 was rejected, everything else accepted: nothing comes back
    assert share_run.one("explicit_nothing_left")["records"] == []


def test_record_limit_caps_every_poll(share_run: ProbeRun) -> None:
    limited = share_run.one("record_limit")
    assert sorted(limited["records"]) == SINGLE_ONCE
    assert max(limited["polls"]) <= 3
    assert limited["commit_errors"] == {}
    # batch_optimized hands out the whole batch despite max.poll.records (as Kafka does)
    batched = share_run.one("batch_optimized")
    assert sorted(batched["records"]) == SINGLE_ONCE
    assert max(batched["polls"]) > 3


def test_consumers_sharing_one_partition_never_get_the_same_record(share_run: ProbeRun) -> None:
    consumers = share_run.one("shared_partition")["consumers"]
    assert len(consumers) == 3
    deliveries = [record for c in consumers for record in c["records"]]
    assert sorted(deliveries, key=offset_of) == [f"{o}#1" for o in range(BATCHED_RECORDS)]
    assert all(c["commit_errors"] == {} for c in consumers)
    assert sum(1 for c in consumers if c["records"]) >= 2  # the partition really was shared


def test_renew_keeps_the_lock(share_run: ProbeRun) -> None:
    renew = share_run.one("renew")
    held = {offset_of(key) for key in renew["held"]}
    assert held
    assert renew["lock_ms"] == RENEW_LOCK_MS
    # RENEWed records come back to the application (KAFKA-20458) with their first delivery
    assert renew["rounds"] and all(round_["back"] for round_ in renew["rounds"])
    assert {offset_of(key) for key in renew["accepted"]} == held
    assert set(renew["accepted"]) == {f"{o}#1" for o in held}
    assert renew["accepted_at_ms"] > RENEW_LOCK_MS  # held well past the original lock
    assert renew["commit_errors"] == {}
    # the other member never got a record that was renewed
    assert not held & {offset_of(key) for key in renew["other"]}


def test_expired_lock_redelivers_to_another_member(share_run: ProbeRun) -> None:
    expiry = share_run.one("lock_expiry")
    assert expiry["lock_ms"] == EXPIRY_LOCK_MS
    held = {offset_of(key) for key in expiry["held"]}
    assert held and all(key.endswith("#1") for key in expiry["held"])
    other = expiry["other"]
    assert sorted(map(offset_of, other)) == list(range(SINGLE_RECORDS))
    # A's records come to B with a higher delivery count: 2, or 3 when A's background fetch,
    # parked when the locks first expired, acquired them again before B joined (a race the
    # machine's load decides, on Kafka as on kemu).
    redelivered = {offset_of(key): int(key.split("#")[1]) for key in other}
    assert all(redelivered[offset] >= 2 for offset in held), (held, other)
    assert expiry["other_commit_errors"] == {}
    # A's late ACCEPT names records B completed, all below the start offset by then: Kafka
    # 4.4.0's SharePartition.acknowledge skips such a batch, so commitSync reports no error
    # (this check run against a real Kafka 4.4.0 answered so; share/
    # test_share_acks_below_start_kafka.py compares the wire answers)
    assert expiry["late_commit_errors"] == {}


def test_delivery_limit_archives_after_the_last_release(share_run: ProbeRun) -> None:
    limited = share_run.one("delivery_limit")
    assert Counter(limited["records"]) == Counter(
        f"{o}#{count}" for o in range(SINGLE_RECORDS) for count in (1, 2)
    )
    assert limited["commit_errors"] == {}


def test_a_new_subscription_moves_the_share_session(share_run: ProbeRun) -> None:
    # The client keeps fetching the old topic until its next heartbeat brings the new
    # assignment; then its session with the old leader forgets the partition and closes.
    moved = share_run.one("resubscribe")
    assert moved["before"] and moved["commit_errors"] == {}
    old = moved["before"] + moved["after"].get(SINGLE, [])
    assert len(old) == len(set(map(offset_of, old))) and all(k.endswith("#1") for k in old)
    assert sorted(moved["after"][BATCHED], key=offset_of) == [
        f"{o}#1" for o in range(BATCHED_RECORDS)
    ]
    offsets = share_run.one("share_group_offsets")["resubscribe"]
    batched = offsets[f"{BATCHED}-0"]
    assert batched["lag"] == 0 and batched["start"] <= BATCHED_RECORDS
    single = offsets[f"{SINGLE}-0"]
    assert single["start"] >= len(moved["before"])
    assert single["start"] + single["lag"] <= SINGLE_RECORDS


def test_share_group_offsets_show_no_lag(share_run: ProbeRun) -> None:
    offsets = share_run.one("share_group_offsets")
    ends = {
        TOPIC: {f"{TOPIC}-{p}": RECORDS // PARTITIONS for p in range(PARTITIONS)},
        SINGLE: {f"{SINGLE}-0": SINGLE_RECORDS},
        BATCHED: {f"{BATCHED}-0": BATCHED_RECORDS},
    }
    topic_of = {
        "implicit": TOPIC,
        "close": TOPIC,
        "explicit": TOPIC,
        "limit": SINGLE,
        "batch": SINGLE,
        "shared": BATCHED,
        "renew": SINGLE,
        "expiry": SINGLE,
        "dlimit": SINGLE,
    }
    # Everything acknowledged: lag 0. The start offset is the persisted one, which (as Kafka
    # writes it) may stay behind the end: the last write carried the start it moved from.
    for name, topic in topic_of.items():
        assert set(offsets[name]) == set(ends[topic]), name
        for tp, end in ends[topic].items():
            assert offsets[name][tp]["lag"] == 0, (name, tp)
            assert 0 <= offsets[name][tp]["start"] <= end, (name, tp)


def dead_letters(kemu: InProcessKemu, topic: str, wanted: int) -> list[dict[str, str]]:
    """The headers (and copied value) of the records of a DLQ topic."""
    reader = Consumer(
        {
            "bootstrap.servers": kemu.bootstrap,
            "group.id": f"dlq-{topic}",
            "enable.auto.commit": False,
        }
    )
    reader.assign([TopicPartition(topic, 0, 0)])
    found: list[dict[str, str]] = []
    try:
        for _ in range(150):
            message = reader.poll(0.2)
            if message is not None and message.error() is None:
                headers = {k: (v or b"").decode() for k, v in message.headers() or []}
                found.append({**headers, "value": (message.value() or b"").decode()})
            if len(found) >= wanted:
                break
    finally:
        reader.close()
    return found


def test_rejected_and_exhausted_records_reach_the_dead_letter_queue(
    share_run: ProbeRun, share_kemu: InProcessKemu
) -> None:
    """KIP-1191 with Java's share consumer: its REJECTs (explicit group) and its records released
    up to share.delivery.count.limit (dlimit group) are in the groups' DLQ topics with Kafka's
    context headers (see test_share_dlq.py for the comparison with Kafka 4.4.0)."""
    assert share_run.one("explicit_release")["commit_errors"] == {}
    rejected = dead_letters(share_kemu, "dlq.sj-explicit", PARTITIONS)
    assert sorted((r["__dlq.errors.partition"], r["__dlq.errors.offset"]) for r in rejected) == [
        (str(p), "1") for p in range(PARTITIONS)
    ]
    assert {
        (r["__dlq.errors.topic"], r["__dlq.errors.group"], r["__dlq.errors.delivery.count"])
        for r in rejected
    } == {(TOPIC, "sj-explicit", "1")}
    assert {r["__dlq.errors.message"] for r in rejected} == {"Offset rejected by client."}
    assert {r["value"] for r in rejected} == {""}  # copy.record.enable is off
    exhausted = dead_letters(share_kemu, "dlq.sj-dlimit", SINGLE_RECORDS)
    assert sorted(int(r["__dlq.errors.offset"]) for r in exhausted) == list(range(SINGLE_RECORDS))
    assert {r["__dlq.errors.delivery.count"] for r in exhausted} == {"2"}
    assert {r["__dlq.errors.message"] for r in exhausted} == {
        "Offset delivery count exceeded the threshold."
    }
    assert sorted(r["value"] for r in exhausted) == sorted(f"s{i}" for i in range(SINGLE_RECORDS))


def test_probe_exit_status(share_run: ProbeRun) -> None:
    assert share_run.returncode == 0, [line.get("error") for line in share_run.lines]
