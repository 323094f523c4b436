"""conformance.kafka_tools: the check script and the pass-count summary (no JVM here)."""

import re
import sys

from tests import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))  # conformance/ is not installed

from conformance.kafka_tools import CHECKS, Check, Result, summary


def test_checks_have_unique_names_and_valid_patterns() -> None:
    names = [check.name for check in CHECKS]
    assert len(names) == len(set(names))
    for check in CHECKS:
        re.compile(check.expect)
        assert all(
            "{" not in arg or arg in {"{bootstrap}", "{node}"} or "{dir}" in arg
            for arg in check.args
        ), check.name


def test_summary_counts_and_lists_differences() -> None:
    checks = (Check("a", "T", (), ""), Check("b", "T", (), ""))
    kafka = [Result(checks[0], True, 0, 0.1, ""), Result(checks[1], True, 0, 0.1, "")]
    kemu = [Result(checks[0], True, 0, 0.1, ""), Result(checks[1], False, 1, 0.1, "")]
    text = summary({"kafka": kafka, "kemu": kemu}, checks)
    assert "kafka: 2/2 checks pass" in text
    assert "kemu: 1/2 checks pass" in text
    assert "b: kafka PASS, kemu FAIL" in text
