"""KIP-848 SubscribedTopicRegex read as Kafka 4.4.0 reads it, RE2J's syntax (``consumer/
topic_regex.py``): each pattern of ``re2j_1_8_patterns.tsv`` compiles, or not, with RE2J's
description, as re2j 1.8 answered a Java program compiling them; a heartbeat bringing a regex
RE2J refuses gets INVALID_REGULAR_EXPRESSION with Kafka's message, one RE2J takes and Python's
``re`` does not is taken, and one both take is read as RE2J reads it
(tests/integration/groups/test_topic_regex_kafka.py shows these beside Kafka)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kemu.coordinator.group.consumer.regexes import matches, resolve
from kemu.coordinator.group.consumer.topic_regex import InvalidTopicRegex, compile_topic_regex
from kemu.coordinator.group.errors import GroupError
from kemu.protocol.errors import ErrorCode
from tests.unit.coordinator.group.consumer.test_consumer_group import REBALANCE_MS, Harness

CORPUS = Path(__file__).with_name("re2j_1_8_patterns.tsv")
# RE2J takes nested counted repetitions multiplying past 1000; RE2 does not (topic_regex.py).
KNOWN_GAPS = {"(a{999}){999}", "((a{100}){100}){100}", "(?:a{1000}){2}", "(a|b{500}){3}"}


def re2j_answers() -> list[tuple[str, str]]:
    """(pattern, "OK" or RE2J's description) for each line of the corpus."""
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    return [(pattern, answer) for pattern, answer in (line.split("\t") for line in lines)]


def kemu_answer(pattern: str) -> str:
    try:
        compile_topic_regex(pattern)
    except InvalidTopicRegex as refused:
        return refused.description
    return "OK"


def test_patterns_compile_as_re2j_compiles_them() -> None:
    answers = re2j_answers()
    assert len(answers) > 100
    differ = [
        (pattern, wanted, kemu_answer(pattern))
        for pattern, wanted in answers
        if pattern not in KNOWN_GAPS and kemu_answer(pattern) != wanted
    ]
    assert differ == []


@pytest.mark.xfail(strict=True, reason="RE2 refuses nested repetitions past 1000; RE2J does not")
def test_nested_repetitions_past_1000_compile() -> None:
    assert all(kemu_answer(pattern) == "OK" for pattern in sorted(KNOWN_GAPS))


def test_matching_is_of_whole_names_as_re2j_reads_them() -> None:
    assert matches(r"rx-\pL+", "rx-abc") and not matches(r"rx-\pL+", "rx-1")
    assert matches(r"\Qa.b\E", "a.b") and not matches(r"\Qa.b\E", "axb")
    assert matches(r"rx-[^.]*\z", "rx-1") and not matches("rx-", "rx-1")
    # Python's re reads x{,2} as up to two x; RE2J as the text itself
    assert not matches("rx-x{,2}", "rx-xx") and matches("rx-x{,2}", "rx-x{,2}")
    assert not matches(r"(a)\1", "aa")  # refused: matches nothing
    resolved = resolve([r"t-\pN", "t-x{,2}"], ["t-1", "t-x", "t-xx"], 5)
    assert {regex: found.topics for regex, found in resolved.items()} == {
        r"t-\pN": frozenset({"t-1"}),
        "t-x{,2}": frozenset(),
    }


def join_with(harness: Harness, member: str, regex: str) -> object:
    return harness.beat(
        member, 0, frozenset(), rebalance_timeout_ms=REBALANCE_MS, subscribed_topic_regex=regex
    )


@pytest.mark.parametrize(
    ("regex", "description"),
    [
        (r"rx-(a)\1", "invalid escape sequence"),
        ("rx-(?=a).*", "invalid or unsupported Perl syntax"),
        ("rx-(?<=a).*", "invalid named capture"),
        ("rx-a++", "invalid nested repetition operator"),
        (r"rx-\Z", "invalid escape sequence"),
        (r"rx-\C", "invalid escape sequence"),
        ("rx-)", "regexp/syntax: internal error"),
    ],
)
def test_a_regex_re2j_refuses_is_answered_as_kafka_does(regex: str, description: str) -> None:
    harness = Harness()
    with pytest.raises(GroupError) as refused:
        join_with(harness, "m", regex)
    assert refused.value.code == ErrorCode.invalid_regular_expression
    assert str(refused.value.message) == (
        f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {description}."
    )
    assert harness.coordinator.group("g") is None  # nothing of the join kept


def test_a_regex_python_refuses_is_taken() -> None:
    harness = Harness()
    for member, regex in (("a", r"\pL"), ("b", r"t\z"), ("c", r"\Qt\E")):  # a group of 3
        join_with(harness, member, regex)
    join_with(harness, "c", "(?U)t+")  # c changes its regex
    assert set(harness.group.subscribed_regexes()) == {r"\pL", r"t\z", "(?U)t+"}


def test_the_regex_is_checked_after_the_member() -> None:
    """As Kafka, whose heartbeat checks the regex after the member and its epoch: an unknown
    member bringing a bad regex is answered UNKNOWN_MEMBER_ID."""
    harness = Harness()
    harness.join("m")
    with pytest.raises(GroupError) as unknown:
        harness.beat("ghost", 3, subscribed_topic_regex="(?=a)")
    assert unknown.value.code == ErrorCode.unknown_member_id
