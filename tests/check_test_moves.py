"""Checks docs/test-moves.txt, the map of where each test function went when tests/ was regrouped
by subject: every old function appears exactly once, as many as the file says, and each is
collected today where the map says it went.

    .venv/bin/python -m tests.check_test_moves            # the map against today's collection
    .venv/bin/python -m tests.check_test_moves --before F # also: F (``pytest --collect-only -q``
                                                          # at the old commit) has nothing unmapped

Exit status 1 names what does not hold. A function a later commit removes or renames is noted
on its line of the map (``    test_x  # gone in <commit>: why``) and then listed, not failed;
``--allow-gone`` lists every function not collected instead of failing.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests import REPO_ROOT

MOVES = REPO_ROOT / "docs" / "test-moves.txt"


def function_of(node_id: str) -> tuple[str, str]:
    """``path::Class::test[case]`` -> (path, ``Class::test``): a function's cases are one."""
    path, _, rest = node_id.partition("::")
    return path, re.sub(r"\[.*$", "", rest)


def read_moves(text: str) -> tuple[int, list[tuple[str, str, str]], dict[tuple[str, str], str]]:
    """The count the file states, its (old module, new module, function) rows, and the notes on
    functions gone since, by (old module, function)."""
    stated, pair = -1, ("", "")
    rows: list[tuple[str, str, str]] = []
    notes: dict[tuple[str, str], str] = {}
    for line in text.splitlines():
        if line.startswith("# functions:"):
            stated = int(line.split(":")[1])
        elif line.startswith("#") or not line.strip():
            continue
        elif line.startswith("    "):
            function, _, note = line.strip().partition("  # ")
            rows.append((*pair, function))
            if note:
                notes[(pair[0], function)] = note
        else:
            old, arrow, new = line.partition(" -> ")
            if not arrow:
                raise SystemExit(f"{MOVES}: not 'OLD -> NEW': {line!r}")
            pair = (old, new)
    return stated, rows, notes


def collected_functions(args: list[str]) -> set[tuple[str, str]]:
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "--heavy", *args]
    out = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    return {function_of(line) for line in out.stdout.splitlines() if "::" in line}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="collect-only output of the old commit")
    parser.add_argument("--allow-gone", action="store_true", help="list, not fail, on gone ones")
    options = parser.parse_args()
    stated, rows, notes = read_moves(MOVES.read_text())
    problems: list[str] = []
    twice = [key for key, n in Counter((old, fn) for old, _, fn in rows).items() if n > 1]
    problems += [f"mapped twice: {old}::{fn}" for old, fn in twice]
    if stated != len(rows):
        problems.append(f"the file states {stated} functions and lists {len(rows)}")
    if options.before is not None:
        old_ones = {
            function_of(line.strip())
            for line in options.before.read_text().splitlines()
            if "::" in line
        }
        mapped = {(old, fn) for old, _, fn in rows}
        problems += [f"not mapped: {p}::{fn}" for p, fn in sorted(old_ones - mapped)]
        extra = sorted(mapped - old_ones)
        problems += [f"mapped but not in --before: {p}::{fn}" for p, fn in extra]
    now = collected_functions(["tests"])
    missing = [(old, new, fn) for old, new, fn in rows if (new, fn) not in now]
    noted = [f"{new}::{fn}: {notes[(old, fn)]}" for old, new, fn in missing if (old, fn) in notes]
    gone = [f"{new}::{fn} (was {old})" for old, new, fn in missing if (old, fn) not in notes]
    print(f"{len(rows)} functions mapped; {len(rows) - len(missing)} collected where the map says;")
    print(f"{len(now)} test functions collected today")
    if noted:
        print("gone since, as noted:\n  " + "\n  ".join(noted))
    if gone:
        print("not collected today:\n  " + "\n  ".join(gone))
        if not options.allow_gone:
            problems.append(f"{len(gone)} mapped functions not collected today")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
