"""The pages' long commands (benchmarks, soaks, conformance runs, make targets that serve or
take minutes), checked without their minutes (test_doc_blocks.py).

- ``make TARGET [VAR=...]``: the target is in the Makefile and ``make -n`` expands it; the
  command it would run is then checked as below.
- ``.venv/bin/python -m MODULE ARGS`` / ``.venv/bin/python SCRIPT ARGS`` (also behind ``nice`` or
  ``VAR=value``): ``--help`` answers and names every ``--option`` of ARGS; where SHORTER gives
  a smaller size, the command runs with it (so it runs, not only parses).
- ``.venv/bin/kemu SUBCOMMAND ARGS``: ``kemu SUBCOMMAND --help`` names every option.
- ``.venv/bin/pytest PATHS``: the paths exist (the tests themselves run in ``make test``).
- ``git ...`` runs in the checkout (a shallow clone lacks the commits: only parsed there).
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys
from typing import TYPE_CHECKING

from tests import REPO_ROOT as ROOT

if TYPE_CHECKING:
    from tests.integration.tools.doc_blocks import PageRun

# module (or script, as a module name) -> {option: at most this in the shortened run}; modules
# in neither table are checked by --help only (they need Kafka, Go, Flink or Spark, or `make
# test` runs their short mode in a test of their own: the soak, the eos-crash harness), as is a
# line run against Kafka (`--server kafka`, `--against kafka`)
SHORTER: dict[str, dict[str, int]] = {
    "bench.fuzz": {"--frames": 40, "--sasl": 20, "--records": 8},
    "bench.start_figure": {"--runs": 1},
    "bench.restart_figure": {"--transactions": 5, "--share-updates": 40, "--runs": 1},
}
# options the shortened run sets whether the page gives them or not
SHORTER_SET: dict[str, dict[str, str]] = {
    # the default 1,000 partitions need 1,000 commits; --restart-only checks what was committed
    "bench.restart_figure": {"--partitions": "4", "--commits": "40"},
    "bench.connections": {
        "--seconds": "1",
        "--rate": "50",
        "--idle": "20",
        "--active": "2",
        "--many": "30",
        "--rounds": "1",
        "--warmup-seconds": "0",
        "--settle-seconds": "0.2",
    },
}
TIMEOUT_S = 300


def assignments(words: list[str]) -> dict[str, str]:
    """The ``VAR=value`` assignments in front of a command."""
    found = {}
    for word in words:
        if not re.match(r"^[A-Z_]+=", word):
            break
        found[word.partition("=")[0]] = word.partition("=")[2]
    return found


def program(words: list[str]) -> list[str]:
    """The command without ``VAR=value`` assignments and ``nice -n N`` in front."""
    while words and re.match(r"^[A-Z_]+=", words[0]):
        words = words[1:]
    if words[:1] == ["nice"]:
        words = words[3:] if words[1:2] == ["-n"] else words[1:]
    return words


def is_long_command(words: list[str]) -> bool:
    words = program(words)
    return bool(words) and (words[0] in ("make", "git") or words[0].startswith(".venv/bin/"))


def check_long_command(run: PageRun, where: str, command: str) -> None:
    localized = run.localize(command)
    env = assignments(shlex.split(localized))
    words = program(shlex.split(localized))
    if words[0] == "make":
        check_make(where, words)
    elif words[0] == "git":
        if run_here(["git", "rev-parse", "--is-shallow-repository"]).strip() == "true":
            # A shallow clone (as a CI checkout may be) lacks the commits these lines name: check
            # that the line parses rather than skip the page, which KEMU_REQUIRE_ALL would fail.
            parsed = subprocess.run(["bash", "-n", "-c", localized], capture_output=True, text=True)
            assert parsed.returncode == 0, (where, parsed.stderr)
            return
        ran = subprocess.run(
            ["bash", "-c", f"set -eo pipefail\n{localized}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        assert ran.returncode == 0, (where, ran.stderr)
    else:
        check_venv_command(where, words, shorten=True, env=env)


def run_here(command: list[str]) -> str:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60).stdout


def check_make(where: str, words: list[str]) -> None:
    target = next(word for word in words[1:] if "=" not in word)
    assigned = [word for word in words[1:] if "=" in word]
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"{where}: no target {target}"
    # not the flags of a `make test` this runs under (its jobserver, its variables)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    dry = subprocess.run(
        ["make", "-n", target, *assigned],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dry.returncode == 0, (where, dry.stderr)
    lines = dry.stdout.replace("\\\n", " ").splitlines()
    recipe = [line for line in lines if line.startswith(".venv/bin/")]
    assert recipe, (where, dry.stdout)
    check_venv_command(where, shlex.split(recipe[-1]), shorten=False)


@functools.cache
def help_text(*command: str) -> str:
    helped = subprocess.run(
        [*command, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert helped.returncode == 0, (command, helped.stderr)
    return helped.stdout


def check_venv_command(
    where: str, words: list[str], *, shorten: bool, env: dict[str, str] | None = None
) -> None:
    tool = words[0].removeprefix(".venv/bin/")
    executable = str((ROOT / words[0]) if (ROOT / words[0]).exists() else words[0])
    if tool == "pytest":
        paths = [word for word in words[1:] if not word.startswith("-") and "/" in word]
        paths += [word for word in words[1:] if word == "tests"]
        for path in paths:
            assert (ROOT / path).exists(), f"{where}: no {path}"
        return
    if tool.startswith("python"):
        executable = sys.executable
        split = 3 if words[1] == "-m" else 2
        target, arguments = words[1:split], words[split:]
        name = target[-1].removesuffix(".py").replace("/", ".")
    else:  # an entry point: kemu SUBCOMMAND
        target, arguments, name = words[1:2], words[2:], tool
    helped = help_text(executable, *target)
    for flag in {word.partition("=")[0] for word in arguments if word.startswith("--")}:
        assert re.search(rf"(?<![\w-]){re.escape(flag)}\b", helped), (
            f"{where}: {name} has no {flag}"
        )
    sizes = SHORTER.get(name, {}) if name in SHORTER or name in SHORTER_SET else None
    against_kafka = {"--server", "--against"} & set(arguments) and "kafka" in arguments
    if shorten and sizes is not None and not against_kafka:  # a Kafka JVM: --help only
        shortened = list(arguments)
        for index, word in enumerate(shortened[:-1]):
            if word in sizes:
                shortened[index + 1] = str(min(int(shortened[index + 1]), sizes[word]))
        for option, value in SHORTER_SET.get(name, {}).items():
            if option in shortened:
                shortened[shortened.index(option) + 1] = value
            else:
                shortened += [option, value]
        ran = subprocess.run(
            [executable, *target, *shortened],
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        assert ran.returncode == 0, (where, shortened, ran.stdout[-2000:], ran.stderr[-2000:])
