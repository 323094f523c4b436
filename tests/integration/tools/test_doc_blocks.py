"""Every code block of README.md and the docs is run by a test, so none can go stale.

Each page runs top to bottom in its own directory (``doc_blocks.PageRun``: ports and /tmp paths
are this run's, ``kafka-*.sh`` are Kafka's tool classes). A fenced block's info string is its
language, then flags:

- no flag (``python``, ``sh``): run. A ``kemu serve`` line starts that kemu (stopping the page's
  previous one), waits for its ready line and checks the ``# kemu ...`` lines shown under it;
  other lines run in bash, ``curl`` failing on an error status; ``curl`` and ``kemu ctl`` must
  answer JSON with the keys a trailing ``# {...}`` shows. A block naming ``make serve``'s
  addresses before any serve line runs against a kemu started as ``make serve`` starts it.
  Long commands (make targets, benchmarks, soaks) are dry-run and run shortened
  (``long_commands.py``). A python block is run in a subprocess, by pytest if it defines
  ``test_*`` functions (a user's test file, the plugin found through its entry point).
- ``file=NAME``: written to NAME in the page's directory (a properties file the next block uses).
- ``in=MODULE``: a fragment of MODULE (a table row), evaluated in its namespace.
- ``run-by=PATH``: run by that test file, which reads this page.
- ``not-run="why"``: cannot run here; the reason is required and what can be checked is
  (``tests/integration/tools/test_doc_docker.py``).

Blocks without a language (program output, layouts) are not code.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.tools.control_scene import ControlScene
from tests.integration.tools.doc_blocks import FLAGS, ROOT, RUNNABLE, Block, PageRun, blocks

pytestmark = [pytest.mark.integration, pytest.mark.process]

PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "examples" / "README.md",
    ROOT / "ARCHITECTURE.md",
]
MAKE_SERVE = [
    "kemu",
    "serve",
    "--brokers",
    "3",
    "--port",
    "9092",
    "--control-port",
    "9192",
    "--kip1289",
]
NEEDS_MAKE_SERVE = re.compile(r"127\.0\.0\.1:9092|kemu ctl|\$C\b|kafka-\w+\.sh")
NOT_RUN_CHECKED_BY = {"docs/docker.md"}  # test_doc_docker.py


def every_block() -> Iterator[Block]:
    for page in PAGES:
        yield from blocks(page)


def to_run(page: Path) -> list[Block]:
    return [
        block
        for block in blocks(page)
        if "not-run" not in block.flags
        and "run-by" not in block.flags
        and (block.language in RUNNABLE or "file" in block.flags)
    ]


def test_every_code_block_is_run_or_says_why_not() -> None:
    unmarked = []
    for block in every_block():
        assert set(block.flags) <= FLAGS, (block.where, block.flags)
        page = block.page.relative_to(ROOT).as_posix()
        if "run-by" in block.flags:
            runner = ROOT / block.flags["run-by"]
            assert runner.is_file(), (block.where, runner)
            assert page in runner.read_text(), f"{runner} does not read {page}"
        elif "not-run" in block.flags:
            assert block.flags["not-run"].strip(), f"{block.where}: not-run needs its reason"
            assert page in NOT_RUN_CHECKED_BY, f"{block.where}: nothing checks it"
        elif block.language and block.language not in RUNNABLE and "file" not in block.flags:
            unmarked.append(f"{block.where} ({block.language})")
    assert unmarked == [], "make these python/sh blocks run here, or say why not"
    assert to_run(ROOT / "README.md"), "the README's quick start is run here"


def run_page(
    page: Path,
    tmp_path: Path,
    scene: ControlScene | None = None,
    section: str | None = None,
) -> PageRun:
    """Run the page's blocks in order (only those under the ``## section`` heading if given)."""
    run = PageRun(page, tmp_path, before_block=scene or (lambda run, block: None))
    chosen = to_run(page) if section is None else sections(page)[section]
    try:
        for block in chosen:
            if (
                run.kemu is None
                and NEEDS_MAKE_SERVE.search(block.source)
                and not re.search(r"^kemu serve", block.source, re.M)
            ):
                run.serve(MAKE_SERVE[2:])
            run.run(block)
    finally:
        if scene is not None:
            scene.close()
        run.stop()
    return run


def sections(page: Path) -> dict[str, list[Block]]:
    """The page's blocks to run, by the ``## `` heading they stand under, in page order."""
    every = blocks(page)
    inside = {
        number
        for block in every
        for number in range(block.line, block.line + block.source.count("\n") + 2)
    }
    headings = [
        (number, line[3:].strip())
        for number, line in enumerate(page.read_text().splitlines(), start=1)
        if line.startswith("## ") and number not in inside
    ]
    found: dict[str, list[Block]] = {}
    for block in to_run(page):
        heading = [title for number, title in headings if number < block.line][-1:]
        found.setdefault(heading[0] if heading else "", []).append(block)
    return found


# Pages run by a module of their own, so that make test's workers run them side by side:
# test_doc_control.py (control.md and its scene) and test_doc_long_commands.py (the pages of
# benchmarks, soaks and conformance runs).
CONTROL_PAGE = ROOT / "docs" / "control.md"
LONG_COMMAND_PAGES = [
    ROOT / "docs" / name
    for name in ("benchmarks.md", "conformance.md", "eos-crash.md", "examples.md", "reliability.md")
] + [ROOT / "examples" / "README.md"]
OTHER_PAGES = [
    page
    for page in PAGES[1:]
    if to_run(page) and page != CONTROL_PAGE and page not in LONG_COMMAND_PAGES
]


# Long-command pages whose sections share nothing (no kemu, no file): a test id per section, so
# that make test's workers run the sections side by side rather than one after the other.
BY_SECTION = [ROOT / "docs" / "reliability.md"]
LONG_COMMAND_PARTS: list[tuple[Path, str | None]] = [
    (page, section)
    for page in LONG_COMMAND_PAGES
    for section in (list(sections(page)) if page in BY_SECTION else [None])
]


def run_as_written(page: Path, tmp_path: Path, section: str | None = None) -> None:
    scene = ControlScene() if page == CONTROL_PAGE else None
    run = run_page(page, tmp_path, scene, section)
    if run.unchecked:
        pytest.skip("; ".join(run.unchecked))


def test_every_page_is_run_by_one_module() -> None:
    ran = {*OTHER_PAGES, CONTROL_PAGE, *LONG_COMMAND_PAGES}
    assert {page for page in PAGES[1:] if to_run(page)} <= ran


@pytest.mark.parametrize(
    "page", OTHER_PAGES, ids=[p.relative_to(ROOT).as_posix() for p in OTHER_PAGES]
)
def test_the_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    run_as_written(page, tmp_path)


def test_the_readme_runs_as_written(tmp_path: Path) -> None:
    run = run_page(ROOT / "README.md", tmp_path)
    printed = "".join(run.outputs.values())
    # the quick start: produce, consume, the share group from earliest, the KIP-1289 transaction
    assert "consumed [b'order-0', b'order-1', b'order-2']" in printed, printed
    assert re.search(r"shipped \[b'ORDER-\d'", printed), printed
    assert "1 passed" in printed  # the pytest-plugin snippet
    assert '"topic": "orders"' in printed  # kemu ctl share-groups, names beside ids


def test_the_readme_fits_one_screen() -> None:
    """What a newcomer reads first: at most 100 lines; the rest belongs in docs/."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 100


def test_the_pictures_the_pages_show_exist_and_stay_small() -> None:
    """Every ``![...](path)`` of README.md and the docs names a file of the repository, under
    200 KB (the dashboard screenshots, ``tests/integration/control/test_control_dashboard.py``)."""
    shown = []
    for page in PAGES:
        for path in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", page.read_text()):
            picture = (page.parent / path).resolve()
            assert picture.is_file(), f"{page.relative_to(ROOT)} shows a missing {path}"
            assert picture.stat().st_size < 200_000, f"{path}: {picture.stat().st_size} bytes"
            shown.append(picture.name)
    assert "dashboard.png" in shown
