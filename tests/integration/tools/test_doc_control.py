"""docs/control.md's blocks, run as written against the cluster its examples name
(control_scene.py); a module of its own so that it runs beside test_doc_blocks.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.tools.test_doc_blocks import CONTROL_PAGE, run_as_written

pytestmark = [pytest.mark.integration, pytest.mark.process]


def test_the_control_page_runs_as_written(tmp_path: Path) -> None:
    run_as_written(CONTROL_PAGE, tmp_path)
