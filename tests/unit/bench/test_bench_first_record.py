"""The first-record benchmark's own logic (bench/first_record.py, bench/first_record_client.py):
the clients' lines, the table with its ratios and issue 20's goal, the rows asked for, the events
a client waits on, and the servers' timing arguments. Pure logic; the run itself is a benchmark."""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

import pytest

from tests import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))  # bench/ is not an installed package

from bench import first_record, servers
from bench.first_record import ROWS, Outcome, Row, fast_goal, misses, parse_output, ratio, table
from bench.first_record_client import Seen, client_config
from bench.run import _parser as run_parser
from bench.run import first_record_argv
from bench.servers import ASSIGN_AT_ONCE, KAFKA_CODE_TIMERS, KafkaServer, timing_arguments

SHARE_JAVA = Row("share", "java")
TXN = Row("txn", "confluent")


def test_a_clients_lines_become_seconds_and_its_error_is_kept() -> None:
    output = "\n".join(
        [
            "[main] INFO a log line",
            '{"measure":"first_record","us":5110000}',
            '{"measure":"join","us":250000}',
            "{not json",
            '{"error":{"type":"java.util.concurrent.TimeoutException","message":"leave"}}',
        ]
    )
    measured, error = parse_output(output)
    assert measured == {"first_record": 5.11, "join": 0.25}
    assert error is not None and "TimeoutException" in error
    assert parse_output('{"error": "TimeoutError: x"}') == ({}, "TimeoutError: x")


def test_ratio_is_of_medians() -> None:
    assert ratio([0.1, 0.2, 0.9], [4.0, 5.0, 6.0]) == pytest.approx(0.04)
    assert ratio([], [5.0]) is None
    assert ratio([1.0], []) is None


@pytest.mark.parametrize(
    ("fast", "kafka", "verdict"),
    [
        ([0.2, 0.3, 0.4], [5.0], "met"),
        ([0.6, 0.7, 0.8], [10.0], "NOT met (> 0.5 s)"),
        ([0.1], [0.25], "NOT met (> 0.1x Kafka)"),
        ([3.0], [3.0], "NOT met (> 0.5 s, > 0.1x Kafka)"),
        ([0.2], [], "met"),  # Kafka not run: the absolute bound alone
        ([], [5.0], "not measured"),
    ],
)
def test_the_fast_goal_is_half_a_second_and_a_tenth_of_kafka(
    fast: list[float], kafka: list[float], verdict: str
) -> None:
    assert fast_goal(fast, kafka) == verdict


def _outcome() -> Outcome:
    outcome = Outcome()
    for server, scale in (("kafka", 1.0), ("kemu-kafka", 1.02), ("kemu-fast", 0.02)):
        for number in range(3):
            outcome.add(
                server,
                SHARE_JAVA,
                {
                    "first_record": (5.0 + number) * scale,
                    "join": 5.0 * scale,
                    "leave": 4.0 if server == "kemu-fast" else 4.0 * scale,
                },
            )
    outcome.add("kafka", TXN, {"first_record": 0.30})
    outcome.add("kemu-kafka", TXN, {"first_record": 0.02})
    return outcome


def test_the_table_has_a_ratio_beside_each_kemu_column_and_the_goal() -> None:
    text = table(_outcome(), (SHARE_JAVA, TXN), first_record.SERVERS)
    lines = text.splitlines()
    assert lines[0].count("/Kafka") == 2
    assert lines[0].endswith("goal (fast) |")
    first = next(line for line in lines if "share group" in line and "first record" in line)
    cells = [cell.strip() for cell in first.strip("|").split("|")]
    # Kafka, kemu --timing kafka, its ratio, kemu --timing fast, its ratio, goal
    assert cells[3:] == ["6.00 (5.00-7.00)", "6.12 (5.10-7.14)", "1.02x", "0.12 (0.10-0.14)",
                         "0.02x", "met"]  # fmt: skip
    leave = next(line for line in lines if "leave settles" in line)
    assert leave.rstrip(" |").endswith("NOT met (> 0.5 s, > 0.1x Kafka)")
    # one row for a transaction, and a server that failed shows as such
    txn = [line for line in lines if "transactional" in line]
    assert len(txn) == 1 and "round trip" in txn[0]
    assert "| failed | - | NOT met" not in txn[0] and "failed" in txn[0]


def test_without_kafka_there_are_no_ratios() -> None:
    text = table(_outcome(), (SHARE_JAVA,), ("kemu-kafka", "kemu-fast"))
    assert "/Kafka" not in text
    assert "goal (fast)" in text


def test_misses_name_the_row_and_the_measure() -> None:
    found = misses(_outcome(), (SHARE_JAVA, TXN))
    assert found == [
        "share-java leave: NOT met (> 0.5 s, > 0.1x Kafka)",
        "txn-confluent first_record: not measured",
    ]


def test_rows_are_chosen_by_name_or_kind_in_table_order() -> None:
    chosen = first_record._rows("txn,share-java")
    assert [row.name for row in chosen] == ["share-java", "txn-java", "txn-confluent"]
    assert first_record._rows(",".join(row.name for row in ROWS)) == ROWS
    with pytest.raises(argparse.ArgumentTypeError):
        first_record._rows("share-go")
    with pytest.raises(argparse.ArgumentTypeError):
        first_record._servers("kemu")


def test_a_share_group_consumes_past_its_heartbeat_interval_before_a_leave() -> None:
    assert Row("share", "confluent").steady_ms > 5000  # Kafka's group.share.heartbeat.interval.ms
    assert Row("consumer", "java").steady_ms < Row("share", "java").steady_ms
    assert TXN.measures == ("first_record",)


def test_the_regex_row_times_its_first_record_and_a_topic_created_after() -> None:
    regex = Row("regex", "confluent")
    assert regex in ROWS
    assert regex.measures == ("first_record", "new_topic")
    assert first_record.MEASURE_TITLES["new_topic"]


def test_client_commands_carry_the_row_and_the_names() -> None:
    java = first_record.client_command(SHARE_JAVA, "127.0.0.1:9092", "fr-1-share-java")
    assert "kemu.probe.FirstRecordBench" in java
    assert java[java.index("--kind") + 1] == "share"
    assert java[java.index("--steady-ms") + 1] == "6000"
    python = first_record.client_command(TXN, "127.0.0.1:9092", "t", only_first=True)
    assert python[1:3] == ["-m", "bench.first_record_client"]
    assert "--only-first" in python


def test_client_configs_reach_both_clients_and_are_parsed_as_pairs() -> None:
    setting = "heartbeat.interval.ms=100,session.timeout.ms=10000"
    for row in (SHARE_JAVA, Row("classic", "confluent")):
        command = first_record.client_command(row, "127.0.0.1:9092", "c", client_config=setting)
        assert command[command.index("--client-config") + 1] == setting
    plain = first_record.client_command(TXN, "127.0.0.1:9092", "t")
    assert "--client-config" not in plain
    assert client_config(setting) == {
        "heartbeat.interval.ms": "100",
        "session.timeout.ms": "10000",
    }
    assert client_config("") == {}
    with pytest.raises(ValueError, match="key=value"):
        client_config("heartbeat.interval.ms")


def test_seen_waits_for_a_record_after_a_time_and_of_every_wanted_partition() -> None:
    seen = Seen()
    seen.record(1, 0, 100)
    seen.record(1, 1, 200)
    seen.record(2, 1, 150)
    assert seen.reached(1, None, 0) == 100
    assert seen.reached(1, None, 150) == 200
    assert seen.reached(1, {0, 1}, 0) == 200
    assert seen.reached(1, {0}, 150) is None  # partition 0's record came before
    assert seen.reached(3, None, 0) is None
    assert seen.partitions(2) == {1}


def test_seen_wakes_a_waiter_when_the_event_arrives() -> None:
    seen = Seen()
    order: list[str] = []
    started = threading.Event()

    def waiter() -> None:
        started.set()
        seen.wait(1, {0}, 0, 30.0, "partition 0")
        order.append("woken")

    thread = threading.Thread(target=waiter)
    thread.start()
    started.wait()
    order.append("recorded")
    seen.record(1, 0, 1)
    thread.join(30)
    assert order == ["recorded", "woken"]
    with pytest.raises(TimeoutError):
        seen.wait(1, {5}, 0, 0.0, "partition 5")


def test_timing_is_the_flag_when_kemu_has_it_else_overrides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(servers, "has_timing_flag", lambda executable: True)
    assert timing_arguments("kafka", ["kemu"]) == ["--timing", "kafka"]
    monkeypatch.setattr(servers, "has_timing_flag", lambda executable: False)
    assert timing_arguments("fast", ["kemu"]) == []
    overrides = timing_arguments("kafka", ["kemu"])
    assert overrides[::2] == ["--override"] * len(KAFKA_CODE_TIMERS)
    assert "group.initial.rebalance.delay.ms=3000" in overrides
    with pytest.raises(ValueError):
        timing_arguments("slow", ["kemu"])


def test_kafka_on_code_defaults_leaves_the_group_timers_alone(tmp_path: Path) -> None:
    code = KafkaServer(tmp_path, partitions=2, code_defaults=True)
    code.controller_port, code.log_dir = 1, tmp_path
    shipped = KafkaServer(tmp_path, partitions=2)
    shipped.controller_port, shipped.log_dir = 1, tmp_path
    for name in ASSIGN_AT_ONCE:
        assert name not in code._server_properties()
        assert f"{name}=0" in shipped._server_properties()


def test_make_bench_hands_its_options_to_the_first_record_phase() -> None:
    args = run_parser().parse_args(["--phases", "first-record", "--only", "kemu", "--repeat", "2"])
    assert args.phases == ("first-record",)
    assert first_record_argv(args) == ["--repeat", "2", "--servers", "kemu-kafka,kemu-fast"]
    args = run_parser().parse_args(["--phases", "first-record", "--no-write", "--note", "x"])
    assert first_record_argv(args) == ["--repeat", "1", "--no-write", "--note", "x"]
