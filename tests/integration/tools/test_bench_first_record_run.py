"""A short run of the first-record benchmark (bench/first_record.py) against kemu alone: a classic
group and a transactional round trip with confluent-kafka, one repetition, nothing written. It
shows the phase's machinery works end to end (servers, client processes, their figures, the
table); the figures themselves are the benchmark's, not asserted here."""

from __future__ import annotations

import sys

import pytest

from tests import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))  # bench/ is not an installed package

from bench import first_record

pytestmark = [pytest.mark.integration, pytest.mark.process]  # kemu serve as a process


def test_a_short_run_on_kemu_measures_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    status = first_record.main(
        [
            "--servers",
            "kemu-fast",
            "--rows",
            "classic-confluent,txn-confluent",
            "--repeat",
            "1",
            "--no-write",
        ]
    )
    printed = capsys.readouterr().out
    assert status == 0, printed
    rows = [
        line for line in printed.splitlines() if line.startswith("| ") and "group type" not in line
    ]
    measures = [[cell.strip() for cell in line.strip("|").split("|")][2] for line in rows]
    assert measures == ["first record", "join settles", "leave settles", "round trip"]
    for line in rows:
        figure = line.strip("|").split("|")[3].strip()
        assert float(figure) > 0, line
