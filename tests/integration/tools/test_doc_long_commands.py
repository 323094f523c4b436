"""The pages of benchmarks, soaks, conformance runs and examples, run as written: their long
commands dry-run and shortened (long_commands.py); a module of its own so that it runs beside
test_doc_blocks.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import REPO_ROOT as ROOT
from tests.integration.tools.test_doc_blocks import LONG_COMMAND_PAGES, run_as_written

pytestmark = [pytest.mark.integration, pytest.mark.process]


@pytest.mark.parametrize(
    "page", LONG_COMMAND_PAGES, ids=[p.relative_to(ROOT).as_posix() for p in LONG_COMMAND_PAGES]
)
def test_the_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    run_as_written(page, tmp_path)
