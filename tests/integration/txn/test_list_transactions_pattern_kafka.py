"""ListTransactions v2's TransactionalIdPattern, on kemu beside a real Apache Kafka 4.4.0 (bench's
jars; that side skipped without java or them). Both servers get the same requests, after
InitProducerId made the same transactional ids (Empty transactions).

Kafka 4.4.0's ``TransactionStateManager.listTransactionStates`` compiles a non-empty pattern
with RE2/J (``com.google.re2j``) and keeps the ids whose whole text matches
(``Matcher.matches``); a pattern RE2/J refuses fails the request with
INVALID_REGULAR_EXPRESSION. So ``x{,2}`` is the text ``x{,2}``, ``\\pL`` a letter, a lookahead
refused; an empty pattern filters nothing.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator

import pytest

from kemu.protocol.errors import ErrorCode
from kemu.testing.wire_client import WireClient
from tests.integration.parity import kemu_or_kafka
from tests.integration.txn.wire_parity import Server, init_producer_id

pytestmark = [pytest.mark.integration, pytest.mark.parity]

LIST_TRANSACTIONS = 66
TIMEOUT = datetime.timedelta(seconds=60)


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with kemu_or_kafka(request, tmp_path_factory) as chosen:
        yield chosen


@pytest.fixture(scope="module")
def listed(server: Server) -> Iterator[tuple[str, WireClient]]:
    """A client, and the prefix of the transactional ids made: the prefix followed by
    ``x{,2}``, ``xx``, ``abc`` and ``a1``."""
    prefix = f"ltp{uuid.uuid4().hex[:8]}"
    client = WireClient(server.bootstrap, client_id="list-transactions-pattern")
    try:
        for suffix in ("x{,2}", "xx", "abc", "a1"):
            init_producer_id(client, prefix + suffix, TIMEOUT)
        yield prefix, client
    finally:
        client.close()


def list_matching(client: WireClient, pattern: str) -> tuple[ErrorCode, list[str]]:
    answer = client.call(
        1,
        LIST_TRANSACTIONS,
        2,
        state_filters=(),
        producer_id_filters=(),
        duration_filter=-1,
        transactional_id_pattern=pattern,
    )
    return ErrorCode(answer.error_code), sorted(
        state.transactional_id for state in answer.transaction_states
    )


@pytest.mark.parametrize(
    ("suffix", "expected"),
    [
        (".*", ["a1", "abc", "xx", "x{,2}"]),
        ("a", []),  # the whole id must match
        ("x{,2}", ["x{,2}"]),  # RE2/J's text, not Python's up-to-two
        ("\\pL+", ["abc", "xx"]),  # a Unicode class Python's re refuses
        ("a\\d", ["a1"]),
    ],
)
def test_the_pattern_matches_whole_ids_as_re2j_reads_it(
    listed: tuple[str, WireClient], suffix: str, expected: list[str]
) -> None:
    prefix, client = listed
    error, ids = list_matching(client, prefix + suffix)
    assert (error, [i[len(prefix) :] for i in ids if i.startswith(prefix)]) == (
        ErrorCode.none,
        expected,
    )


@pytest.mark.parametrize("pattern", ["(", "a(?=b)", "(a)\\1", "a\\Z"])
def test_a_pattern_re2j_refuses_is_an_invalid_regular_expression(
    listed: tuple[str, WireClient], pattern: str
) -> None:
    _, client = listed
    assert list_matching(client, pattern) == (ErrorCode.invalid_regular_expression, [])


def test_an_empty_pattern_filters_nothing(listed: tuple[str, WireClient]) -> None:
    prefix, client = listed
    error, ids = list_matching(client, "")
    assert error == ErrorCode.none
    assert {i for i in ids if i.startswith(prefix)} == {
        prefix + suffix for suffix in ("x{,2}", "xx", "abc", "a1")
    }
