"""Every code block of README.md and the docs is run by a test or says why not, so none can go
stale.

A fenced block's info string is its language, then flags:

- no flag (``python``, ``sh``): run here, in page order, against a kemu started as ``make serve``
  starts it (3 brokers, the control API, ``--kip1289``), with ``127.0.0.1:9092`` read as that
  kemu's bootstrap and ``KEMU_CONTROL`` set to its control API. A python block defining
  ``test_*`` functions is run by pytest (as a user's test file, the plugin found through its
  entry point); other python blocks are executed; an ``sh`` block runs line by line.
- ``not-run``: shown, not run (long-running make targets, clusters with other settings,
  recipes that need Docker or another language's toolchain).
- ``run-by=PATH``: run by that test file, which reads this page.

Blocks without a language (program output, layouts) are not code.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kemu.testing.plugin import KemuProcess
from tests import REPO_ROOT

pytestmark = pytest.mark.integration

ROOT = REPO_ROOT
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "examples" / "README.md",
    ROOT / "ARCHITECTURE.md",
]
RUNNABLE = {"python", "sh"}
FLAGS = {"not-run", "run-by"}
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)
MAKE_SERVE_BOOTSTRAP = "127.0.0.1:9092"


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    flags: dict[str, str]
    source: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        language, *words = match.group(1).split() or [""]
        flags = dict(word.partition("=")[::2] for word in words) if words else {}
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(page, line, language, flags, match.group(2)))
    return found


def every_block() -> Iterator[Block]:
    for page in PAGES:
        yield from blocks(page)


def to_run(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.language in RUNNABLE and not b.flags]


def test_every_code_block_is_run_or_says_why_not() -> None:
    unmarked = []
    for block in every_block():
        assert set(block.flags) <= FLAGS, (block.where, block.flags)
        if "run-by" in block.flags:
            runner = ROOT / block.flags["run-by"]
            assert runner.is_file(), (block.where, runner)
            page = block.page.relative_to(ROOT).as_posix()
            assert page in runner.read_text(), f"{runner} does not read {page}"
        elif block.language and not block.flags and block.language not in RUNNABLE:
            unmarked.append(f"{block.where} ({block.language})")
    assert unmarked == [], "mark these not-run, or make them python/sh blocks run here"
    assert to_run(ROOT / "README.md"), "the README's quick start is run here"


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KemuProcess]:
    """As ``make serve`` starts it, on free ports (``--timing fast``, its default)."""
    process = KemuProcess(
        brokers=3,
        with_control=True,
        extra_args=["--kip1289"],
        log_path=tmp_path_factory.mktemp("doc-blocks") / "kemu.log",
    ).start()
    yield process
    process.stop()


def run_python(block: Block, kemu: KemuProcess, tmp_path: Path) -> str:
    source = block.source.replace(MAKE_SERVE_BOOTSTRAP, kemu.bootstrap)
    if re.search(r"^def test_", source, re.M):
        test_file = tmp_path / f"test_doc_block_{block.line}.py"
        test_file.write_text(source)
        ran = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
        assert ran.returncode == 0, (block.where, ran.stdout, ran.stderr)
        return ran.stdout
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        # a fresh namespace, as a new Python shell would have
        exec(compile(source, block.where, "exec"), {"__name__": "__main__"})
    return printed.getvalue()


def run_sh(block: Block, kemu: KemuProcess) -> str:
    kemu_command = [sys.executable, "-m", "kemu.cli"]
    environment = {**os.environ, "KEMU_CONTROL": kemu.control_url}
    output = []
    for line in block.source.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        # what a user runs beside make serve's kemu; starting one of its own never returns
        assert words[0] == "kemu" and words[1:2] != ["serve"], (
            f"{block.where}: {line!r} cannot run here: mark the block not-run"
        )
        ran = subprocess.run(
            [*kemu_command, *words[1:]],
            capture_output=True,
            text=True,
            timeout=60,
            env=environment,
        )
        assert ran.returncode == 0, (block.where, line, ran.stderr)
        output.append(ran.stdout)
    return "".join(output)


def test_the_readme_runs_as_written(kemu: KemuProcess, tmp_path: Path) -> None:
    outputs = {}
    for block in to_run(ROOT / "README.md"):
        if block.language == "python":
            outputs[block.line] = run_python(block, kemu, tmp_path)
        else:
            outputs[block.line] = run_sh(block, kemu)
    printed = "".join(outputs.values())
    # the quick start: produce, consume, the share group from earliest, the KIP-1289 transaction
    assert "consumed [b'order-0', b'order-1', b'order-2']" in printed, printed
    assert re.search(r"shipped \[b'ORDER-\d'", printed), printed
    assert "1 passed" in printed  # the pytest-plugin snippet
    assert '"topic": "orders"' in printed  # kemu ctl share-groups, names beside ids


def test_pages_other_than_the_readme_have_no_unrun_blocks_left() -> None:
    """This file runs the README's blocks; a runnable block added elsewhere must be run by a
    test of its own (``run-by=``) or marked ``not-run`` until one runs it."""
    others = [b.where for page in PAGES[1:] for b in to_run(page)]
    assert others == []


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
