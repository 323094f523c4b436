"""A retried EndTxn v5 whose answer was lost, after the transaction completed, on the wire, on kemu
and on a real Kafka 4.4.0 (bench's jars; skipped without them). One transactional id is driven
to epoch 32765 by InitProducerId (each bumps the epoch), then commits twice: an ordinary commit
(32765 -> 32766) and the one that exhausts the epoch (a new producer id at epoch 0). After each,
the producer retries with what it held. Kafka 4.4.0 answers (recorded 2026-12-06, the same on
kemu):

- the same outcome: NONE with what the lost answer carried (the epoch + 1; after the exhausting
  commit the new id at epoch 0), as often as it is retried;
- the other outcome: INVALID_TXN_STATE;
- an older epoch: PRODUCER_FENCED (of the old id after the exhaustion:
  INVALID_PRODUCER_ID_MAPPING);
- the old id at 32766 once the new id opened a transaction: INVALID_PRODUCER_ID_MAPPING;
- InitProducerId naming an older epoch once the epoch is exhausted (32766, the transaction
  complete): UNKNOWN_SERVER_ERROR, where kemu keeps PRODUCER_FENCED (``KEMU_DIFFERS``).

InitProducerId with a producer id and epoch (KIP-360) is answered as Kafka's
``prepareInitProducerIdTransit`` answers it, on another transactional id each: the epoch before
the last bump of a request that named one (an InitProducerId, or the EndTxn v5 that bumped it) is
a retry, NONE with the current epoch (and the transaction Empty); after an InitProducerId without
one (a new instance) it is fenced; over an Ongoing transaction any epoch of the current id aborts
it (CONCURRENT_TRANSACTIONS) and the fenced producer's epoch is then the last one, a retry; after
the commit that exhausted the epoch, the old id at 32766 gets
the new id at epoch 0, once.

The unit tests of the same answers: tests/unit/coordinator/transaction/test_end_txn_retry.py,
tests/unit/coordinator/transaction/test_init_producer_id_retry.py.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator

import pytest

from kemu.protocol.errors import ErrorCode
from kemu.testing.kafka import SHARE_GROUPS
from kemu.testing.wire_client import WireClient
from tests.integration.txn.wire_parity import (
    INIT_PRODUCER_ID,
    Server,
    add_partition,
    bump_epochs,
    client_with_topic,
    serve,
    until_ready,
)

pytestmark = [pytest.mark.integration, pytest.mark.parity]

END_TXN, DESCRIBE_TXNS = 26, 65
TOPIC = "end-txn-retry"
TIMEOUT = datetime.timedelta(seconds=60)
LAST_USABLE = 32766  # the last epoch a producer holds (Short.MAX_VALUE - 1)
NOT_YET = (
    ErrorCode.not_leader_or_follower,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.concurrent_transactions,
)
Answer = tuple[str, str, int]  # error, producer id ("old", "new" or "-1"), epoch
Described = tuple[str, str, int]  # state, producer id (named as in Answer), epoch

KAFKA_ANSWERS: dict[str, Answer] = {
    "commit": ("none", "old", LAST_USABLE),
    "commit retried": ("none", "old", LAST_USABLE),
    "commit retried again": ("none", "old", LAST_USABLE),
    "abort retried": ("invalid_txn_state", "-1", -1),
    "older epoch": ("producer_fenced", "-1", -1),
    "exhausted, InitProducerId at an older epoch": ("unknown_server_error", "-1", -1),
    "exhausting commit": ("none", "new", 0),
    "exhausting commit retried": ("none", "new", 0),
    "exhausting commit retried again": ("none", "new", 0),
    "exhausting abort retried": ("invalid_txn_state", "-1", -1),
    "old id older epoch": ("invalid_producer_id_mapping", "-1", -1),
    "old id after the new one's add": ("invalid_producer_id_mapping", "-1", -1),
}

# Where kemu keeps its own answer (docs/conformance.md): Kafka's is an IllegalStateException
# (``prepareIncrementProducerEpoch`` on an exhausted epoch) turned into UNKNOWN_SERVER_ERROR.
KEMU_DIFFERS: dict[str, Answer] = {
    "exhausted, InitProducerId at an older epoch": ("producer_fenced", "-1", -1),
}


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with serve(
        request,
        tmp_path_factory,
        name="end-txn-retry",
        kemu_overrides=SHARE_GROUPS.kemu_overrides(),
    ) as started:
        yield started


class Producer:
    """One transactional id on the wire; the single broker (node 1) coordinates it."""

    def __init__(self, client: WireClient) -> None:
        self.client = client
        self.transactional_id = f"tx-retry-{uuid.uuid4().hex[:8]}"
        self.old_id = -1
        self.new_id = -1  # the last answered id other than the old one

    def add(self, producer_id: int, epoch: int) -> ErrorCode:
        """AddPartitionsToTxn of the topic's partition, once the last transaction's markers are
        written (Kafka answers CONCURRENT_TRANSACTIONS until then)."""
        return ErrorCode(
            until_ready(
                lambda: add_partition(
                    self.client, TOPIC, self.transactional_id, producer_id, epoch
                ),
                lambda error: error not in NOT_YET,
            )
        )

    def end(self, producer_id: int, epoch: int, commit: bool) -> Answer:
        """EndTxn v5; the producer id named as ``old``, ``new`` (any other) or ``-1``."""
        answer = self.client.call(
            1,
            END_TXN,
            5,
            transactional_id=self.transactional_id,
            producer_id=producer_id,
            producer_epoch=epoch,
            committed=commit,
        )
        named = self.named(int(answer.producer_id))
        return ErrorCode(answer.error_code).name, named, int(answer.producer_epoch)

    def init(self, producer_id: int, epoch: int) -> Answer:
        """InitProducerId v5 naming the producer id and epoch the producer holds (KIP-360)."""
        answer = self.client.call(
            1,
            INIT_PRODUCER_ID,
            5,
            transactional_id=self.transactional_id,
            transaction_timeout=TIMEOUT,
            producer_id=producer_id,
            producer_epoch=epoch,
        )
        return (
            ErrorCode(answer.error_code).name,
            self.named(int(answer.producer_id)),
            int(answer.producer_epoch),
        )

    def named(self, producer_id: int) -> str:
        named = "-1" if producer_id == -1 else "old" if producer_id == self.old_id else "new"
        if named == "new":
            self.new_id = producer_id
        return named

    def described(self) -> Described:
        answer = self.client.call(1, DESCRIBE_TXNS, 0, transactional_ids=(self.transactional_id,))
        [found] = answer.transaction_states
        return (
            str(found.transaction_state),
            self.named(int(found.producer_id)),
            int(found.producer_epoch),
        )

    def settled(self) -> None:
        """Wait until the transaction completed (Kafka writes its markers after it answers)."""

        def state() -> str:
            answer = self.client.call(
                1, DESCRIBE_TXNS, 0, transactional_ids=(self.transactional_id,)
            )
            [found] = answer.transaction_states
            return str(found.transaction_state)

        until_ready(state, lambda found: found in ("CompleteCommit", "CompleteAbort"))


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[WireClient]:
    with client_with_topic(server, TOPIC, "end-txn-retry") as client:
        yield client


def producers_at(server: Server, client: WireClient, *epochs: int) -> list[Producer]:
    """A producer holding each of ``epochs``, its own transactional id brought there by
    InitProducerId alone (each bumps the epoch), the ids at once."""
    producers = [Producer(client) for _ in epochs]
    ids = bump_epochs(
        client,
        server.bootstrap,
        {one.transactional_id: epoch for one, epoch in zip(producers, epochs, strict=True)},
        TIMEOUT,
    )
    for one in producers:
        one.old_id = ids[one.transactional_id]
    return producers


@pytest.fixture(scope="module")
def near_exhaustion(server: Server, client: WireClient) -> dict[int, Producer]:
    """A producer at epoch 32765 and one at 32766, for the tests that exhaust the epoch, driven
    there together (some 65,000 InitProducerIds); each test takes its own."""
    epochs = (LAST_USABLE - 1, LAST_USABLE)
    return dict(zip(epochs, producers_at(server, client, *epochs), strict=True))


def test_retried_end_txn_answers_are_kafkas(
    server: Server, near_exhaustion: dict[int, Producer]
) -> None:
    epoch = LAST_USABLE - 1
    producer = near_exhaustion[epoch]
    old = producer.old_id
    answers: dict[str, Answer] = {}
    assert producer.add(old, epoch) == ErrorCode.none
    answers["commit"] = producer.end(old, epoch, commit=True)
    producer.settled()
    answers["commit retried"] = producer.end(old, epoch, commit=True)
    answers["abort retried"] = producer.end(old, epoch, commit=False)
    answers["commit retried again"] = producer.end(old, epoch, commit=True)
    answers["older epoch"] = producer.end(old, epoch - 1, commit=True)
    # the epoch is now exhausted (32766), the transaction complete
    answers["exhausted, InitProducerId at an older epoch"] = producer.init(old, epoch - 1)

    assert producer.add(old, LAST_USABLE) == ErrorCode.none
    answers["exhausting commit"] = producer.end(old, LAST_USABLE, commit=True)
    producer.settled()
    answers["exhausting commit retried"] = producer.end(old, LAST_USABLE, commit=True)
    answers["exhausting abort retried"] = producer.end(old, LAST_USABLE, commit=False)
    answers["exhausting commit retried again"] = producer.end(old, LAST_USABLE, commit=True)
    answers["old id older epoch"] = producer.end(old, LAST_USABLE - 1, commit=True)

    assert producer.add(producer.new_id, 0) == ErrorCode.none
    answers["old id after the new one's add"] = producer.end(old, LAST_USABLE, commit=True)
    expected = KAFKA_ANSWERS | (KEMU_DIFFERS if server.name == "kemu" else {})
    assert answers == expected


KAFKA_INIT_ANSWERS: dict[str, Answer | Described] = {
    "bump": ("none", "old", 1),
    "bump retried": ("none", "old", 1),
    "bump retried, described": ("Empty", "old", 1),
    "new instance": ("none", "old", 2),
    "zombie of the bump retried": ("producer_fenced", "-1", -1),
    "commit": ("none", "old", 3),
    "commit's epoch": ("none", "old", 3),
    "commit's epoch, described": ("Empty", "old", 3),
    "commit's epoch again": ("none", "old", 3),
    "older epoch": ("producer_fenced", "-1", -1),
    "ongoing, older epoch": ("concurrent_transactions", "-1", -1),
    "ongoing, older epoch, described": ("CompleteAbort", "old", 4),
    "ongoing, older epoch retried": ("producer_fenced", "-1", -1),
    "ongoing, another id": ("producer_fenced", "-1", -1),
    "the fenced producer's epoch": ("none", "old", 4),
    "the fenced producer's epoch, described": ("Empty", "old", 4),
    "after it": ("none", "old", 5),
}


def test_init_producer_id_retry_answers_are_kafkas(server: Server, client: WireClient) -> None:
    [producer] = producers_at(server, client, 0)
    old = producer.old_id
    answers: dict[str, Answer | Described] = {}
    answers["bump"] = producer.init(old, 0)
    answers["bump retried"] = producer.init(old, 0)
    answers["bump retried, described"] = producer.described()
    answers["new instance"] = producer.init(-1, -1)
    answers["zombie of the bump retried"] = producer.init(old, 1)

    assert producer.add(old, 2) == ErrorCode.none
    answers["commit"] = producer.end(old, 2, commit=True)
    producer.settled()
    answers["commit's epoch"] = producer.init(old, 2)
    answers["commit's epoch, described"] = producer.described()
    answers["commit's epoch again"] = producer.init(old, 2)
    answers["older epoch"] = producer.init(old, 1)

    assert producer.add(old, 3) == ErrorCode.none
    answers["ongoing, older epoch"] = producer.init(old, 1)
    producer.settled()
    answers["ongoing, older epoch, described"] = producer.described()
    answers["ongoing, older epoch retried"] = producer.init(old, 1)
    answers["ongoing, another id"] = producer.init(old + 1000, 0)
    answers["the fenced producer's epoch"] = producer.init(old, 3)
    answers["the fenced producer's epoch, described"] = producer.described()
    answers["after it"] = producer.init(old, 4)
    assert answers == KAFKA_INIT_ANSWERS


KAFKA_EXHAUSTED_INIT_ANSWERS: dict[str, Answer | Described] = {
    "exhausting commit": ("none", "new", 0),
    "old id at 32766": ("none", "new", 0),
    "old id at 32766, described": ("Empty", "new", 0),
    "old id at 32766 again": ("producer_fenced", "-1", -1),
    "new id": ("none", "new", 1),
}


def test_init_producer_id_after_the_exhausting_commit_is_kafkas(
    near_exhaustion: dict[int, Producer],
) -> None:
    epoch = LAST_USABLE
    producer = near_exhaustion[epoch]
    old = producer.old_id
    answers: dict[str, Answer | Described] = {}
    assert producer.add(old, epoch) == ErrorCode.none
    answers["exhausting commit"] = producer.end(old, LAST_USABLE, commit=True)
    producer.settled()
    answers["old id at 32766"] = producer.init(old, LAST_USABLE)
    answers["old id at 32766, described"] = producer.described()
    answers["old id at 32766 again"] = producer.init(old, LAST_USABLE)
    answers["new id"] = producer.init(producer.new_id, 0)
    assert answers == KAFKA_EXHAUSTED_INIT_ANSWERS
