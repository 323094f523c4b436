"""``--churn``: topics created and deleted while the workload runs, and what must hold of them.

A churner takes turns on two names (``churn-a``, ``churn-b``): CreateTopics (1-3 partitions,
replication factor 1) where the name is free, then a few records from an idempotent producer
(acks all), each naming the topic id it was written to; DeleteTopics where the name is taken.
kemu's ``topic.logs_created`` and ``topic.deleted`` crash points fire (from a stream of their
own, at ``TOPIC_POINT_RATE``) only in these runs.

After every step and at the end, of the kemu that is up (``churn_check``):
- a deletion kemu acknowledged is never undone: no topic has a deleted topic's id;
- a creation kemu acknowledged is never lost: a topic created, and whose deletion was not asked
  since, is there under its name with its id;
- of each churn topic there, every record names the topic's own id (nothing of an earlier topic
  of the name leaked into it), and every record kemu acknowledged to it is there (a topic whose
  deletion was asked and not answered included: it is whole or gone).

A request kemu did not answer proves nothing either way (it may have applied before a crash),
so an unanswered deletion counts as asked, and an unanswered creation adds nothing.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from dataclasses import dataclass, field

from kemu.client import Admin, IdempotentProducer, KafkaError
from kemu.cluster.context import Runtime
from kemu.protocol.errors import ErrorCode
from kemu.protocol.record_reader import iter_records
from kemu.testing.sim.workload import EXPECTED, Actor, _close

CHURN_TOPICS = ("churn-a", "churn-b")
TOPIC_POINT_RATE = 0.05  # a crash per topic crash point reached (kemu's are reached often)
CREATE_TOPICS, DELETE_TOPICS = 19, 20
TIMEOUT = datetime.timedelta(seconds=10)


@dataclass
class ChurnLedger:
    """What the churner knows for certain."""

    created: dict[uuid.UUID, str] = field(default_factory=dict)  # acknowledged creations
    deleting: set[uuid.UUID] = field(default_factory=set)  # deletions asked (answered or not)
    deleted: set[uuid.UUID] = field(default_factory=set)  # acknowledged deletions
    acknowledged: dict[uuid.UUID, set[bytes]] = field(default_factory=dict)  # records


def churn_value(topic_id: uuid.UUID, index: int) -> bytes:
    return f"{topic_id}:{index}".encode()


class Churner(Actor):
    kind = "churner"

    def __init__(self, *args: object, churn: ChurnLedger, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.churn = churn

    async def body(self) -> None:
        admin = Admin(self.bootstrap, client_id="kemu-sim-churner")
        producer = IdempotentProducer(self.bootstrap, request_timeout=10)
        self.clients = [admin, producer]
        try:
            await admin.cluster.start()
            while True:
                await asyncio.sleep(self.rng.uniform(0.2, 2.0))
                name = self.rng.choice(CHURN_TOPICS)
                try:
                    topic_id = await self._create(admin, name, self.rng.randint(1, 3))
                    if topic_id is None:
                        await self._delete(admin, name)
                except EXPECTED as error:
                    self.ledger.count(f"churn.error.{type(error).__name__}")
                    continue
                if topic_id is not None:
                    # a failed send ends this life: its producer, which may still hold the
                    # record, goes with it before the name can be deleted and created again
                    await self._produce(producer, name, topic_id)
        finally:
            await _close(producer)
            await _close(admin)

    async def _create(self, admin: Admin, name: str, partitions: int) -> uuid.UUID | None:
        """The new topic's id; None when the name is taken."""
        cluster = admin.cluster
        node = min(cluster.nodes)
        version = await cluster.version(CREATE_TOPICS, 7, node)
        response = await cluster.call(
            node,
            CREATE_TOPICS,
            version,
            topics=(
                cluster.nested(
                    CREATE_TOPICS,
                    version,
                    "CreatableTopic",
                    name=name,
                    num_partitions=partitions,
                    replication_factor=1,
                    assignments=(),
                    configs=(),
                ),
            ),
            timeout=TIMEOUT,
            validate_only=False,
        )
        [answer] = response.topics
        if answer.error_code == ErrorCode.topic_already_exists:
            return None
        if answer.error_code != ErrorCode.none:
            raise KafkaError(answer.error_code, f"CreateTopics {name}")
        topic_id = uuid.UUID(str(answer.topic_id))
        self.churn.created[topic_id] = name
        self.ledger.count("churn.created")
        return topic_id

    async def _delete(self, admin: Admin, name: str) -> None:
        cluster = admin.cluster
        await cluster.refresh_metadata([name])
        info = cluster.topics.get(name)
        if info is None:
            return  # kemu's metadata does not have it (yet, or any more)
        self.churn.deleting.add(info.topic_id)  # before it is sent: it may apply unanswered
        node = min(cluster.nodes)
        version = await cluster.version(DELETE_TOPICS, 6, node)
        response = await cluster.call(
            node,
            DELETE_TOPICS,
            version,
            topics=(
                cluster.nested(
                    DELETE_TOPICS, version, "DeleteTopicState", name=name, topic_id=None
                ),
            ),
            timeout=TIMEOUT,
        )
        [answer] = response.responses
        if answer.error_code == ErrorCode.unknown_topic_or_partition:
            return
        if answer.error_code != ErrorCode.none:
            raise KafkaError(answer.error_code, f"DeleteTopics {name}")
        deleted = uuid.UUID(str(answer.topic_id))
        self.churn.deleted.add(deleted)
        self.churn.deleting.add(deleted)
        self.ledger.count("churn.deleted")

    async def _produce(self, producer: IdempotentProducer, name: str, topic_id: uuid.UUID) -> None:
        acknowledged = self.churn.acknowledged.setdefault(topic_id, set())
        for index in range(self.rng.randint(1, 4)):
            value = churn_value(topic_id, index)
            await producer.send(name, value, partition=0)
            acknowledged.add(value)


def churn_check(runtime: Runtime, churn: ChurnLedger) -> list[str]:
    """What must hold of the churn topics (module docstring)."""
    found = []
    topics = runtime.cluster.topics
    for name in CHURN_TOPICS:
        topic = topics.get(name)
        if topic is not None and topic.topic_id in churn.deleted:
            found.append(f"churn: {name} is back with the id {topic.topic_id} deleted before")
    for topic_id, name in churn.created.items():
        if topic_id in churn.deleting:
            continue
        topic = topics.get(name)
        if topic is None or topic.topic_id != topic_id:
            found.append(f"churn: {name} ({topic_id}), whose creation was answered, is gone")
    for name in CHURN_TOPICS:
        topic = runtime.cluster.topics.get(name)
        if topic is None:
            continue
        mine = str(topic.topic_id).encode()
        values: set[bytes] = set()
        for partition in topic.partitions:
            end = partition.high_watermark
            for header, batch in partition.log.batches(partition.log_start_offset, end):
                if not header.is_control:
                    values |= {record.value or b"" for record in iter_records(batch)}
        strangers = sorted(v for v in values if not v.startswith(mine + b":"))
        if strangers:
            found.append(f"churn: {name} holds records of another topic, e.g. {strangers[:3]}")
        missing = sorted(churn.acknowledged.get(topic.topic_id, set()) - values)
        if missing:
            found.append(f"churn: {name} lost acknowledged records, e.g. {missing[:3]}")
    return found
