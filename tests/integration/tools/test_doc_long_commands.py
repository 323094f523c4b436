"""The pages of benchmarks, soaks, conformance runs and examples, run as written: their long
commands dry-run and shortened (long_commands.py); a module of its own so that it runs beside
test_doc_blocks.py. docs/reliability.md runs a
test per section (BY_SECTION), its sections sharing nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import REPO_ROOT as ROOT
from tests.integration.tools.test_doc_blocks import LONG_COMMAND_PARTS, run_as_written

pytestmark = [pytest.mark.integration, pytest.mark.process]


def part_id(page: Path, section: str | None) -> str:
    name = page.relative_to(ROOT).as_posix()
    if section is None:
        return name
    return f"{name}#{re.sub(r'[^a-z0-9]+', '-', section.lower()).strip('-')}"


@pytest.mark.parametrize(
    ("page", "section"),
    LONG_COMMAND_PARTS,
    ids=[part_id(page, section) for page, section in LONG_COMMAND_PARTS],
)
def test_the_page_runs_as_written(page: Path, section: str | None, tmp_path: Path) -> None:
    run_as_written(page, tmp_path, section)
