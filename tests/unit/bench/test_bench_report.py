"""The benchmark's parsing of Kafka's perf-tool output and its table (pure logic)."""

from __future__ import annotations

import collections
import sys

import pytest

from tests import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))  # bench/ is not an installed package

from bench.report import Run, table, targets
from bench.share_wire import Member
from bench.workload import (
    Rate,
    ToolFailed,
    parse_console,
    parse_consumer,
    parse_producer,
    parse_share_consumer,
)

PRODUCER_OUTPUT = """\
Option --producer-props has been deprecated and will be removed in a future version.
90736 records sent, 18147.2 records/sec (17.72 MB/sec), 1221.9 ms avg latency, 1697.0 ms max latency.
500000 records sent, 34064.586456 records/sec (33.27 MB/sec), 841.80 ms avg latency, 1697.00 ms max latency, 866 ms 50th, 1400 ms 95th, 1619 ms 99th, 1690 ms 99.9th.
"""  # noqa: E501

CONSUMER_OUTPUT = """\
Warning: --messages is deprecated. Use --num-records instead.
start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-11-30 21:47:24:804, 2026-11-30 21:47:27:223, 488.2813, 201.8525, 500000, 206696.9822, 660, 1759, 277.5903, 284252.4161
"""  # noqa: E501


def test_producer_summary_is_the_last_line() -> None:
    rate = parse_producer(PRODUCER_OUTPUT)
    assert rate.records_per_s == pytest.approx(34064.586456)
    assert rate.mb_per_s == pytest.approx(33.27)
    assert rate.detail["records"] == 500000
    assert rate.detail["avg_latency_ms"] == pytest.approx(841.8)


def test_producer_without_summary_fails() -> None:
    with pytest.raises(ToolFailed):
        parse_producer("org.apache.kafka.common.errors.TimeoutException: boom\n")


def test_consumer_columns_by_name() -> None:
    rate = parse_consumer(CONSUMER_OUTPUT)
    assert rate.records_per_s == pytest.approx(206696.9822)
    assert rate.mb_per_s == pytest.approx(201.8525)
    assert rate.detail["fetch_mb_per_s"] == pytest.approx(277.5903)
    assert rate.detail["rebalance_ms"] == 660


def test_consumer_without_result_fails() -> None:
    with pytest.raises(ToolFailed):
        parse_consumer("start.time, end.time\n")


def test_console_consumer_rate_from_elapsed_time() -> None:
    rate = parse_console("Processed a total of 1000 messages\n", 2.0, 1024)
    assert rate.records_per_s == 500
    assert rate.mb_per_s == pytest.approx(1000 * 1024 / 1024 / 1024 / 2)


def test_table_shows_median_spread_and_ratio() -> None:
    def run(produce: float, ready: float) -> Run:
        return Run(
            start_to_ready_s=ready,
            produce=Rate(produce, produce / 1024),
            consume=None,
            rss_mb=100,
            peak_rss_mb=120,
        )

    text = table(
        {
            "kafka": [run(100.0, 2.0), run(300.0, 4.0)],
            "kemu": [run(400.0, 0.2), run(400.0, 0.2)],
        }
    )
    lines = text.splitlines()
    assert lines[0] == "|  | kafka | kemu | kemu/kafka |"
    produce = next(line for line in lines if line.startswith("| produce records/s"))
    assert produce == "| produce records/s | 200 (100-300) | 400 (400-400) | 2.00x |"
    consume = next(line for line in lines if line.startswith("| consume records/s"))
    assert "failed" in consume
    ready = next(line for line in lines if line.startswith("| start-to-ready"))
    assert ready.endswith("| 0.07x |")


def test_table_for_one_server_has_no_ratio() -> None:
    text = table({"kemu": [Run(start_to_ready_s=0.1)]})
    assert text.splitlines()[0] == "|  | kemu |"


def test_targets_compare_median_ratios() -> None:
    def run(produce: float, consume: float, ready: float, rss: float) -> Run:
        return Run(
            start_to_ready_s=ready,
            produce=Rate(produce, 1.0),
            consume=Rate(consume, 1.0),
            rss_mb=rss,
        )

    lines = targets({"kafka": [run(100, 100, 2.0, 700)], "kemu": [run(150, 90, 0.1, 40)]})
    assert lines == [
        "produce records/s: kemu/kafka 1.50x, target >= 1x: met",
        "consume records/s: kemu/kafka 0.90x, target >= 1x: NOT met",
        "start-to-ready s: kemu/kafka 0.05x, target <= 0.1x: met",
        "RSS after run MiB: kemu/kafka 0.06x, target <= 0.1x: met",
    ]
    assert targets({"kemu": [run(1, 1, 1, 1)]}) == []


SHARE_OUTPUT = """\
start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec, data.consumed.in.nMsg, fetch.time.ms
Share consumer 1 having client id perf-1 consumption metrics- 2026-11-30 22:51:03:309, 2026-11-30 22:51:05:371, 50.4199, 24.4520, 25038.7973, 51630, 2062
2026-11-30 22:51:03:309, 2026-11-30 22:51:05:373, 195.3125, 94.6281, 96899.2248, 200000, 2064
"""  # noqa: E501


def test_share_consumer_totals_by_column_name() -> None:
    rate = parse_share_consumer(SHARE_OUTPUT)
    assert rate.records_per_s == pytest.approx(96899.2248)
    assert rate.mb_per_s == pytest.approx(94.6281)
    assert rate.detail["records"] == 200000
    assert rate.detail["fetch_time_ms"] == 2064


def test_share_consumer_without_result_fails() -> None:
    with pytest.raises(ToolFailed):
        parse_share_consumer("start.time, end.time\n")


def share_run(one: float, four: float | None) -> Run:
    share = {1: Rate(one, one / 1024)}
    if four is not None:
        share[4] = Rate(four, four / 1024)
    return Run(
        start_to_ready_s=1.0,
        share=share,
        share_cpu_s={count: 1.0 for count in share},
        phases=("share",),
        share_consumers=(1, 4),
    )


def test_share_rows_per_consumer_count_and_only_for_the_phases_asked() -> None:
    text = table({"kafka": [share_run(100, 200)], "kemu": [share_run(300, None)]})
    labels = [line.split(" | ")[0].lstrip("| ") for line in text.splitlines()[2:]]
    assert labels[:4] == [
        "share records/s, 1 consumer",
        "share records/s, 4 consumers",
        "server CPU s, share 1 consumer",
        "server CPU s, share 4 consumers",
    ]
    assert not any(label.startswith(("produce", "consume")) for label in labels)
    four = next(line for line in text.splitlines() if "4 consumers |" in line)
    assert "failed" in four  # asked for, not measured on kemu


def test_share_targets_want_twice_kafka() -> None:
    lines = targets({"kafka": [share_run(100, 200)], "kemu": [share_run(300, 300)]})
    assert "share records/s, 1 consumer: kemu/kafka 3.00x, target >= 2x: met" in lines
    assert "share records/s, 4 consumers: kemu/kafka 1.50x, target >= 2x: NOT met" in lines
    assert not any(line.startswith(("produce", "consume")) for line in lines)


def test_window_member_takes_the_oldest_records_across_ranges() -> None:
    member = Member.__new__(Member)
    member.held = collections.deque([[0, 9], [10, 19], [20, 29]])
    member.in_flight = 30
    assert member.oldest(15) == [(0, 9), (10, 14)]
    assert list(member.held) == [[15, 19], [20, 29]]
    assert member.in_flight == 15
