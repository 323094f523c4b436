"""The layout of kemu's own tests (docs/testing.md, "Where a test goes"): ``tests/`` is a package
all the way down, so that a module's name is its dotted path and basenames may repeat; and
docs/test-moves.txt, the map of the regrouping by subject, lists each old test function once."""

from __future__ import annotations

from collections import Counter

from tests import REPO_ROOT
from tests.check_test_moves import MOVES, read_moves

TESTS = REPO_ROOT / "tests"


def test_every_directory_of_python_tests_is_a_package() -> None:
    # without an __init__.py pytest imports a directory's modules by basename (its "prepend"
    # mode): two test_produce.py in different directories would then collide
    directories = {path.parent for path in TESTS.rglob("*.py")}
    missing = sorted(
        str(directory.relative_to(REPO_ROOT))
        for directory in directories
        if not (directory / "__init__.py").is_file()
    )
    assert missing == []


def test_the_map_of_moves_lists_each_old_function_once() -> None:
    stated, rows, _ = read_moves(MOVES.read_text())
    assert len(rows) == stated
    assert [key for key, n in Counter((old, fn) for old, _, fn in rows).items() if n > 1] == []
    assert all(old.startswith("tests/") and new.startswith("tests/") for old, new, _ in rows)
