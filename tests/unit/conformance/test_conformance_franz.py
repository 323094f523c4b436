"""conformance.franz: reading go test -v output into the results table."""

import sys

from tests import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))  # conformance/ is not installed

from conformance.franz import Outcome, ResultParser, summary_table

PASSING_RUN = """\
=== RUN   TestShareGroupETL
=== PAUSE TestShareGroupETL
    share_test.go:377: level 1: 19921 unique keys
--- PASS: TestShareGroupETL (1.98s)
--- FAIL: TestGroupETL (5.02s)
    --- FAIL: TestGroupETL/range (5.01s)
--- SKIP: TestSCRAMAuth (0.00s)
--- PASS: TestShareGroupETL (2.50s)
FAIL
"""

TIMED_OUT_RUN = """\
=== RUN   TestTxnEtl
--- PASS: TestShareGroup (0.02s)
panic: test timed out after 5m0s
\trunning tests:
\t\tTestTxnEtl (5m0s)
\t\tTestTxnEtl/range (5m0s)

goroutine 1 [chan receive, 4 minutes]:
testing.tRunner.func1()
\t\t/usr/local/go/src/testing/testing.go:1993 +0x445
"""


def results_of(output: str) -> list[Outcome]:
    parser = ResultParser()
    return [r for line in output.splitlines(keepends=True) if (r := parser.feed(line))]


def test_top_level_results_only() -> None:
    assert results_of(PASSING_RUN) == [
        Outcome("TestShareGroupETL", "PASS", 1.98),
        Outcome("TestGroupETL", "FAIL", 5.02),
        Outcome("TestSCRAMAuth", "SKIP", 0.0),
        Outcome("TestShareGroupETL", "PASS", 2.5),
    ]


def test_tests_running_at_the_alarm_are_timeouts() -> None:
    assert results_of(TIMED_OUT_RUN) == [
        Outcome("TestShareGroup", "PASS", 0.02),
        Outcome("TestTxnEtl", "TIMEOUT", 0.0),
    ]


def test_repeated_runs_are_tallied() -> None:
    table = summary_table(results_of(PASSING_RUN)).splitlines()
    assert table[2] == "| TestShareGroupETL | 2 | PASS 2 | 2.50 |"
    assert table[3] == "| TestGroupETL | 1 | FAIL 1 | 5.02 |"


def test_security_environment_names_the_sasl_and_tls_listeners() -> None:
    from types import SimpleNamespace
    from typing import Any

    from conformance.franz import _parser, test_environment

    kemu: Any = SimpleNamespace(
        bootstrap="h:1",
        listeners={"PLAINTEXT": "h:1", "SASL_PLAINTEXT": "h:2", "SSL": "h:3"},
        tls={"ca": "/ca.pem", "client_cert": "/c.pem", "client_key": "/c.key"},
    )
    plain = test_environment(kemu, _parser().parse_args([]))
    assert plain["KGO_SEEDS"] == "h:1" and "KGO_TEST_SCRAM" not in plain
    sasl = test_environment(kemu, _parser().parse_args(["--security"]))
    assert (sasl["KGO_SEEDS"], sasl["KGO_TEST_SCRAM_SEEDS"]) == ("h:1", "h:2")
    assert sasl["KGO_TEST_SCRAM"] == "franz:franz-secret:512"
    tls = test_environment(kemu, _parser().parse_args(["--security", "--tls"]))
    assert tls["KGO_SEEDS"] == "h:3"
    assert tls["KGO_TEST_TLS"] == "ca:/ca.pem,cert:/c.pem,key:/c.key"
