"""``python -m bench.first_record_client``: the confluent-kafka side of ``make bench-first-record``
(bench/first_record.py), the same figures as tests/java's ``FirstRecordBench`` prints, measured
inside this process with ``time.monotonic_ns``.

``--kind classic|consumer|share``: records are written to every partition of a fresh topic first
(untimed), then

- ``first_record``: member 1 subscribes; until its first record;
- ``join``: with a producer writing to every partition every 20 ms, member 2 subscribes; until
  member 2's first record (it has partitions, so the rebalance is done);
- ``leave``: after ``--steady-ms`` of both consuming, member 2 closes (and leaves); from the close
  until member 1 has read a record of every partition member 2 had.

``--client-config key=value,...`` sets client configs on every group member (e.g.
``heartbeat.interval.ms=100``).

``--kind regex``: a KIP-848 member subscribed with a regex (resolved by the group coordinator)
matching the topic; ``first_record`` as above, then

- ``new_topic``: a topic the regex matches is created and a record written to it; from the
  creation until the member reads that record.

``--kind txn``: a read_committed consumer assigned partition 0 waits at its end; a new
transactional producer runs init_transactions, one produce and commit_transaction; from the
producer's creation until the consumer has the record.

Prints one JSON line per figure, ``{"measure": name, "us": microseconds}``, and ``{"error": ...}``
(exit code 1) when a wait times out.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

PRODUCE_EVERY_S = 0.02
POLL_S = 0.1
KINDS = ("classic", "consumer", "share", "regex", "txn")


class Seen:
    """When each member read a record of which partition (monotonic ns); waits on those events."""

    def __init__(self) -> None:
        self._events: dict[int, list[tuple[int, int]]] = {}
        self._changed = threading.Condition()

    def record(self, member: int, partition: int, at_ns: int) -> None:
        with self._changed:
            self._events.setdefault(member, []).append((partition, at_ns))
            self._changed.notify_all()

    def partitions(self, member: int) -> set[int]:
        with self._changed:
            return {partition for partition, _ in self._events.get(member, [])}

    def reached(self, member: int, wanted: Collection[int] | None, after_ns: int) -> int | None:
        """The time by which ``member`` had read, at or after ``after_ns``, a record of every
        partition in ``wanted`` (any partition when None); None while it has not."""
        with self._changed:
            missing = None if wanted is None else set(wanted)
            for partition, at_ns in self._events.get(member, []):
                if at_ns < after_ns:
                    continue
                if missing is None:
                    return at_ns
                missing.discard(partition)
                if not missing:
                    return at_ns
            return None

    def wait(
        self,
        member: int,
        wanted: Collection[int] | None,
        after_ns: int,
        timeout_s: float,
        what: str,
    ) -> int:
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while (found := self.reached(member, wanted, after_ns)) is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"timed out waiting for {what}")
                self._changed.wait(left)
            return found


class Member:
    """One consumer polled by a thread of its own (the clients are single-threaded)."""

    def __init__(
        self,
        index: int,
        seen: Seen,
        make: Callable[[], Any],
        poll: Callable[[Any], list[Any]],
        topics: list[str] | None,
    ) -> None:
        self.index = index
        self.seen = seen
        self._make = make
        self._poll = poll
        self._topics = topics
        self._running = threading.Event()
        self._running.set()
        self._ready = threading.Event()
        self.started_ns = 0
        self.closed_ns = 0
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name=f"member-{index}", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait()

    def _loop(self) -> None:
        try:
            client = self._make()  # the client's own setup is not the broker's to answer for
            self.started_ns = time.monotonic_ns()
            self._ready.set()
            if self._topics is not None:
                client.subscribe(self._topics)
            while self._running.is_set():
                messages = self._poll(client)
                now = time.monotonic_ns()
                for message in messages:
                    if message.error() is None:
                        self.seen.record(self.index, message.partition(), now)
            self.closed_ns = time.monotonic_ns()
            client.close()
        except BaseException as error:  # reported by close()
            self.failure = error
        finally:
            self._ready.set()

    def close(self) -> None:
        self._running.clear()
        self._thread.join()
        if self.failure is not None:
            raise self.failure


def _consumer_poll(client: Any) -> list[Any]:
    message = client.poll(POLL_S)
    return [] if message is None else [message]


def _share_poll(client: Any) -> list[Any]:
    return list(client.poll(POLL_S))


def value(partition: int, n: int) -> bytes:
    return f"p{partition}:{n}".encode()


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.seen = Seen()
        self.base = {"bootstrap.servers": args.bootstrap}

    def emit(self, measure: str, nanos: int) -> None:
        print(json.dumps({"measure": measure, "us": nanos // 1000}), flush=True)

    def setup(self) -> None:
        from confluent_kafka import Producer
        from confluent_kafka.admin import (
            AdminClient,
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            NewTopic,
            ResourceType,
        )

        a = self.args
        admin = AdminClient(self.base)
        for future in admin.create_topics([NewTopic(a.topic, a.partitions, 1)]).values():
            future.result(30)
        if a.kind == "share":
            earliest = ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
            resource = ConfigResource(ResourceType.GROUP, a.group, incremental_configs=[earliest])
            for future in admin.incremental_alter_configs([resource]).values():
                future.result(30)
        producer = Producer(self.base)
        for partition in range(a.partitions):
            for n in range(a.records):
                producer.produce(a.topic, value(partition, n), partition=partition)
        if producer.flush(30) != 0:
            raise RuntimeError("the records were not all written")

    def member(self, index: int) -> Member:
        from confluent_kafka import Consumer, ShareConsumer

        a = self.args
        config = {**self.base, "group.id": a.group, "client.id": f"first-record-{index}"}
        config |= client_config(a.client_config)
        if a.kind == "share":
            return Member(index, self.seen, lambda: ShareConsumer(config), _share_poll, [a.topic])
        protocol = "consumer" if a.kind == "regex" else a.kind
        config |= {"group.protocol": protocol, "auto.offset.reset": "earliest"}
        topics = [f"^{a.topic}(-new)?$"] if a.kind == "regex" else [a.topic]
        return Member(index, self.seen, lambda: Consumer(config), _consumer_poll, topics)

    def regex_times(self) -> None:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic

        a = self.args
        member = self.member(1)
        member.start()
        try:
            at = self.seen.wait(1, None, 0, a.timeout, "member 1's first record")
            self.emit("first_record", at - member.started_ns)
            # the new topic has one partition more than the first, and its record is written
            # there: a record of that partition can only be the new topic's
            new_partition = a.partitions
            created = time.monotonic_ns()
            admin = AdminClient(self.base)
            topic = NewTopic(f"{a.topic}-new", new_partition + 1, 1)
            for future in admin.create_topics([topic]).values():
                future.result(30)
            producer = Producer(self.base)
            producer.produce(topic.topic, value(new_partition, 0), partition=new_partition)
            if producer.flush(30) != 0:
                raise RuntimeError("the new topic's record was not written")
            at = self.seen.wait(1, [new_partition], created, a.timeout, "the new topic's record")
            self.emit("new_topic", at - created)
        finally:
            member.close()

    def group_times(self) -> None:
        a = self.args
        first = self.member(1)
        first.start()
        at = self.seen.wait(1, None, 0, a.timeout, "member 1's first record")
        self.emit("first_record", at - first.started_ns)
        if a.only_first:
            first.close()
            return
        producing = threading.Event()
        producing.set()
        writer = threading.Thread(target=self._keep_producing, args=(producing,), daemon=True)
        writer.start()
        try:
            second = self.member(2)
            second.start()
            at = self.seen.wait(2, None, 0, a.timeout, "member 2's first record")
            self.emit("join", at - second.started_ns)
            time.sleep(a.steady_ms / 1000)
            given = self.seen.partitions(2)
            second.close()
            at = self.seen.wait(
                1, given, second.closed_ns, a.timeout, f"member 1 reading {sorted(given)} again"
            )
            self.emit("leave", at - second.closed_ns)
        finally:
            producing.clear()
            writer.join()
            first.close()

    def _keep_producing(self, producing: threading.Event) -> None:
        from confluent_kafka import Producer

        producer = Producer({**self.base, "linger.ms": 0})
        n = 0
        while producing.is_set():
            for partition in range(self.args.partitions):
                producer.produce(self.args.topic, value(partition, n), partition=partition)
            producer.poll(0)
            n += 1
            time.sleep(PRODUCE_EVERY_S)
        producer.flush(10)

    def transaction_round_trip(self) -> None:
        from confluent_kafka import Consumer, Producer, TopicPartition

        a = self.args
        config = {
            **self.base,
            "group.id": f"{a.group}-reader",  # librdkafka wants one; nothing joins or commits
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }

        def make() -> Any:
            consumer = Consumer(config)
            # A concrete offset: OFFSET_END would be resolved at the first fetch, which may come
            # after the commit and so start past the record.
            _, end = consumer.get_watermark_offsets(TopicPartition(a.topic, 0), a.timeout)
            consumer.assign([TopicPartition(a.topic, 0, end)])
            return consumer

        reader = Member(1, self.seen, make, _consumer_poll, None)
        reader.start()
        try:
            created = time.monotonic_ns()
            producer = Producer({**self.base, "transactional.id": f"{a.group}-txn"})
            producer.init_transactions(a.timeout)
            initialised = time.monotonic_ns()
            producer.begin_transaction()
            producer.produce(a.topic, value(0, -1), partition=0)
            producer.commit_transaction(a.timeout)
            committed = time.monotonic_ns()
            at = self.seen.wait(1, None, created, a.timeout, "the committed record")
            self.emit("init", initialised - created)
            self.emit("commit", committed - initialised)
            self.emit("visible", at - committed)
            self.emit("first_record", at - created)
        finally:
            reader.close()


def client_config(text: str) -> dict[str, str]:
    """``key=value,...`` as a dict (the empty string: none)."""
    config: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        key, equals, value = entry.partition("=")
        if not equals or not key.strip():
            raise ValueError(f"--client-config is key=value,...; got {entry!r}")
        config[key.strip()] = value.strip()
    return config


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.first_record_client", description=__doc__
    )
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--kind", choices=KINDS, required=True)
    parser.add_argument("--topic", default="first-record")
    parser.add_argument("--group", default="first-record")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--records", type=int, default=10, help="written to each partition first")
    parser.add_argument("--steady-ms", type=int, default=1000, help="both members, before a leave")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds, for each wait")
    parser.add_argument("--only-first", action="store_true", help="first_record alone")
    parser.add_argument(
        "--client-config", default="", help="key=value,... set on every group member"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    bench = Bench(args)
    try:
        bench.setup()
        if args.kind == "txn":
            bench.transaction_round_trip()
        elif args.kind == "regex":
            bench.regex_times()
        else:
            bench.group_times()
    except Exception as error:
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
