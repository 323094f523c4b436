"""The txn-share, client-share and tls phases of the benchmark: their statistics, the result line
both drivers print, the table rows and targets, the SASL_SSL listener settings (pure logic)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))  # bench/ is not an installed package

from bench.client_phases import PhaseResult, lower_ascii, parse_result, percentile
from bench.report import DEFAULT_PHASES, PHASES, Run, table, targets
from bench.run import _driver_rate, _parser
from bench.servers import KafkaServer, KemuServer, SaslSslListener
from bench.workload import Rate

# What bench/java/EosCycle.java prints (its printf), after a log line.
JAVA_OUTPUT = """\
[main] INFO something the JVM said
RESULT {"elapsed_s": 12.500000, "p50_ms": 20.125, "p99_ms": 95.000, "records": 100000, "transactions": 200}
"""  # noqa: E501


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 0.5) == 50
    assert percentile(values, 0.99) == 99
    assert percentile(values, 1.0) == 100
    assert percentile([7.0], 0.99) == 7.0
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0  # unsorted input


@pytest.mark.parametrize("fraction", [0.0, 1.5])
def test_percentile_refuses_a_fraction_outside_zero_to_one(fraction: float) -> None:
    with pytest.raises(ValueError):
        percentile([1.0], fraction)


def test_percentile_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        percentile([], 0.5)


def test_python_result_line_round_trips() -> None:
    result = PhaseResult(records=1000, transactions=4, elapsed_s=2.0, p50_ms=3.5, p99_ms=9.0)
    parsed = parse_result("noise\n" + result.line() + "\n")
    assert parsed == result
    assert parsed.records_per_s == 500
    assert parsed.mean_batch == 250


def test_java_result_line_parses_and_the_last_line_wins() -> None:
    parsed = parse_result(PhaseResult(1, 1, 1.0).line() + "\n" + JAVA_OUTPUT)
    assert parsed.records == 100000
    assert parsed.transactions == 200
    assert parsed.records_per_s == 8000
    assert parsed.p50_ms == pytest.approx(20.125)
    assert parsed.p99_ms == 95


def test_a_share_result_has_no_transactions() -> None:
    parsed = parse_result('RESULT {"records": 10, "transactions": 0, "elapsed_s": 0.5}')
    assert parsed.mean_batch == 0
    assert parsed.p99_ms == 0


def test_output_without_result_line_is_an_error() -> None:
    with pytest.raises(ValueError):
        parse_result("Exception in thread main\n")


def test_transform_lowers_ascii_only() -> None:
    assert lower_ascii(b"ABC-xyz\xc3\x89") == b"abc-xyz\xc3\x89"
    assert lower_ascii(None) == b""


def test_driver_rate_keeps_latencies_and_batch() -> None:
    rate = _driver_rate(PhaseResult(2048, 4, 2.0, 5.0, 9.0), record_size=1024)
    assert rate.records_per_s == 1024
    assert rate.mb_per_s == pytest.approx(1.0)
    assert rate.detail["mean_batch"] == 512
    assert rate.detail["p99_ms"] == 9.0


def later_run(cycle: float, client: float, java: float, tls: float) -> Run:
    return Run(
        phases=("txn-share", "client-share", "tls"),
        produce=Rate(1000.0, 1.0, {"records": 1000.0}),
        produce_cpu_s=2.0,
        consume=Rate(4000.0, 4.0),
        consume_cpu_s=1.0,
        cycle=Rate(cycle, 1.0, {"records": 1000.0, "p50_ms": 10.0, "p99_ms": 40.0}),
        cycle_cpu_s=0.5,
        client_share=Rate(client, 1.0),
        java_share=Rate(java, 1.0),
        tls_produce=Rate(tls, 1.0),
        tls_produce_cpu_s=3.0,
        tls_consume=Rate(2000.0, 2.0),
        tls_consume_cpu_s=1.5,
    )


def row(text: str, label: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"| {label} |"))
    return [cell.strip() for cell in line.strip("|").split("|")][1:]


def test_later_phases_rows_with_per_server_ratios() -> None:
    text = table(
        {
            "kafka": [later_run(cycle=500, client=300, java=400, tls=800)],
            "kemu": [later_run(cycle=1000, client=600, java=900, tls=500)],
        }
    )
    assert row(text, "txn cycle records/s") == ["500", "1,000", "2.00x"]
    assert row(text, "txn cycle p99 ms") == ["40.0", "40.0", "1.00x"]
    assert row(text, "server CPU us/record, txn cycle") == ["500.0", "500.0", "1.00x"]
    assert row(text, "kemu.client/Java share rate") == ["0.75", "0.67", "0.89x"]
    assert row(text, "SASL_SSL/PLAINTEXT produce rate") == ["0.80", "0.50", "0.62x"]
    assert row(text, "SASL_SSL/PLAINTEXT consume rate") == ["0.50", "0.50", "1.00x"]
    assert row(text, "SASL_SSL/PLAINTEXT produce CPU") == ["1.50", "1.50", "1.00x"]
    # only the later phases were asked for: no produce/consume/share rows of their own
    assert "| produce records/s |" not in text
    assert "| share records/s, 1 consumer |" not in text


def test_later_phases_targets() -> None:
    lines = targets(
        {
            "kafka": [later_run(cycle=500, client=300, java=400, tls=800)],
            "kemu": [later_run(cycle=400, client=400, java=1000, tls=500)],
        }
    )
    assert "kemu.client/Java share rate (kemu): 0.40, target >= 0.5: NOT met" in lines
    assert "txn cycle records/s: kemu/kafka 0.80x, target >= 1x: NOT met" in lines
    alone = targets({"kemu": [later_run(cycle=1, client=600, java=1000, tls=1)]})
    assert alone == ["kemu.client/Java share rate (kemu): 0.60, target >= 0.5: met"]


def test_phase_list_default_and_names() -> None:
    parser = _parser()
    assert parser.parse_args([]).phases == DEFAULT_PHASES
    asked = parser.parse_args(["--phases", "tls,txn-share"]).phases
    assert asked == ("txn-share", "tls")  # in PHASES order
    assert set(DEFAULT_PHASES) < set(PHASES)
    with pytest.raises(SystemExit):
        parser.parse_args(["--phases", "cycle"])


def listener(tmp_path: Path) -> SaslSslListener:
    return SaslSslListener(keystore=tmp_path / "ks.pem", ca=tmp_path / "ca.pem", port=9999)


def test_client_properties_for_sasl_ssl(tmp_path: Path) -> None:
    props = dict(line.split("=", 1) for line in listener(tmp_path).client_properties().splitlines())
    assert props["security.protocol"] == "SASL_SSL"
    assert props["sasl.mechanism"] == "SCRAM-SHA-512"
    assert 'username="bench" password="bench-secret";' in props["sasl.jaas.config"]
    assert props["ssl.truststore.type"] == "PEM"
    assert props["ssl.truststore.location"] == str(tmp_path / "ca.pem")


def test_kafka_gets_a_second_listener(tmp_path: Path) -> None:
    server = KafkaServer(tmp_path, partitions=1)
    server.port, server.controller_port = 9092, 9093
    server.log_dir = tmp_path / "logs"
    server.sasl_ssl = listener(tmp_path)
    props = dict(line.split("=", 1) for line in server._server_properties().splitlines())
    assert props["listeners"].endswith(",SASL_SSL://127.0.0.1:9999")
    assert props["advertised.listeners"] == ("PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9999")
    assert props["listener.security.protocol.map"].endswith(",SASL_SSL:SASL_SSL")
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert "ScramLoginModule" in props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"]
    assert props["ssl.keystore.type"] == "PEM"


def test_kemu_gets_the_same_listener(tmp_path: Path) -> None:
    server = KemuServer(tmp_path, partitions=1, overrides=("kemu.kip1289.enable=true",))
    server.port = 9092
    server.sasl_ssl = listener(tmp_path)
    command = server._command()
    overrides = [command[i + 1] for i, word in enumerate(command) if word == "--override"]
    assert "kemu.kip1289.enable=true" in overrides
    assert "listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9999" in overrides
    assert "kemu.sasl.users=bench:bench-secret" in overrides
    assert f"ssl.keystore.location={tmp_path / 'ks.pem'}" in overrides
