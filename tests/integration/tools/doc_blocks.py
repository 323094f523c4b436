"""Running the code blocks of README.md and docs/ as a user pastes them (test_doc_blocks.py).

A page is run top to bottom in a ``PageRun``: its own working directory (so ``--data-dir
./data`` and ``data/tls/ca.pem`` mean what they say), the kemu its last ``kemu serve`` line
started, and a shell environment where ``kemu`` is this venv's, ``$C`` and ``$KEMU_CONTROL``
name that kemu's control API and Kafka's ``kafka-*.sh`` tools run their main classes from the
jars ``make bench`` fetches (Kafka's scripts do the same with its distribution's libs/).

Ports: the pages use Kafka's 9092 (a broker block 9092, 9093, ...) and 9192 for the control API.
Each ``kemu serve`` line here runs on a free block instead: its ``--port`` (written or the default
9092) becomes the block's first port and a written ``--control-port 9192`` a free port; every
``127.0.0.1:PORT`` / ``localhost:PORT`` in later lines and blocks of the page is shifted by the
same offset (``:9192`` becomes the control port). Paths under ``/tmp/`` are moved into the
page's directory, so that runs side by side never share one.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kemu.testing.plugin import free_port_block
from tests import REPO_ROOT

ROOT = REPO_ROOT
BIN = Path(sys.executable).parent
LIB = ROOT / "bench" / ".cache" / "lib"
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)
FLAGS = {"not-run", "run-by", "in", "file"}
RUNNABLE = {"python", "sh"}
READY = "kemu ready "
START_TIMEOUT_S = 60.0
KAFKA_PORT, CONTROL_PORT = 9092, 9192
# Kafka's scripts and the main class each runs (bin/kafka-*.sh in Kafka 4.4.0)
KAFKA_TOOLS = {
    "kafka-topics.sh": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs.sh": "org.apache.kafka.tools.ConfigCommand",
    "kafka-acls.sh": "org.apache.kafka.tools.AclCommand",
}
# curl as the pages call it, but a 4xx/5xx answer fails the line (the pages use `curl -s`, which
# exits 0 on any status) and still prints the body
SHELL_PRELUDE = 'set -eo pipefail\ncurl() { command curl --fail-with-body --show-error "$@"; }\n'


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
    """Fenced blocks; the info string is the language, then ``flag`` or ``flag=value`` words
    (shell quoting: ``not-run="why not"``)."""
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        language, *words = shlex.split(match.group(1)) or [""]
        flags = dict(word.partition("=")[::2] for word in words)
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(page, line, language, flags, match.group(2)))
    return found


def logical_lines(source: str) -> list[str]:
    """Lines with their backslash continuations joined."""
    return source.replace("\\\n", " ").splitlines()


def split_comment(line: str) -> tuple[str, str]:
    """``command  # comment`` -> (command, comment); a ``#`` inside quotes is not one."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].rstrip(), line[index + 1 :].strip()
    return line.rstrip(), ""


def option(words: list[str], name: str) -> str | None:
    for index, word in enumerate(words):
        if word == name and index + 1 < len(words):
            return words[index + 1]
        if word.startswith(name + "="):
            return word.partition("=")[2]
    return None


def with_option(words: list[str], name: str, value: str) -> list[str]:
    """``words`` with ``name``'s value replaced, or the option appended."""
    out = list(words)
    for index, word in enumerate(out):
        if word == name:
            out[index + 1] = value
            return out
        if word.startswith(name + "="):
            out[index] = f"{name}={value}"
            return out
    return [*out, name, value]


def json_documents(text: str) -> list[Any]:
    """Every JSON value printed one after another (``curl ...; kemu ctl ...``)."""
    decoder, documents, at = json.JSONDecoder(), [], 0
    while at < len(text):
        if text[at].isspace():
            at += 1
            continue
        value, at = decoder.raw_decode(text, at)
        documents.append(value)
    return documents


def shape(value: Any) -> Any:
    """What a JSON answer is made of: its keys (a dict), or that it is a list."""
    return sorted(value) if isinstance(value, dict) else type(value).__name__


@dataclass
class Served:
    """A kemu started by a page's ``kemu serve`` line."""

    process: subprocess.Popen[str]
    first_port: int
    printed: list[str]

    @property
    def ready(self) -> str:
        return next(line for line in self.printed if line.startswith(READY))

    @property
    def bootstrap(self) -> str:
        return self.ready.split("bootstrap=")[1].split()[0]

    @property
    def control_url(self) -> str:
        found = re.search(r" control=(\S+)", self.ready)
        return found.group(1) if found else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(15)


def start_kemu(
    command: list[str], cwd: Path, env: dict[str, str], log: Path
) -> tuple[subprocess.Popen[str], list[str]]:
    """Run ``command`` until its ready line, with the lines it printed (raises if it exits)."""
    with open(log, "a") as stderr:
        process = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
    printed: list[str] = []
    ready = threading.Event()

    def watch() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            printed.append(line.rstrip("\n"))
            if line.startswith(READY):
                ready.set()

    threading.Thread(target=watch, daemon=True).start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready.wait(0.05):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            process.wait(15)
            raise RuntimeError(f"{shlex.join(command)} not ready: {printed} {log.read_text()}")
    return process, printed


@dataclass
class PageRun:
    """One page's blocks run in order against the kemu its serve lines start."""

    page: Path
    workdir: Path
    before_block: Callable[[PageRun, Block], None] = lambda run, block: None
    kemu: Served | None = None
    outputs: dict[int, str] = field(default_factory=dict)
    unchecked: list[str] = field(default_factory=list)  # lines this machine cannot run

    def __post_init__(self) -> None:
        self.tools = self.workdir / "bin"
        self.tools.mkdir(parents=True, exist_ok=True)
        (self.workdir / "tmp").mkdir(exist_ok=True)
        if (LIB / "kafka-tools-4.4.0.jar").exists():
            for script, main in KAFKA_TOOLS.items():
                shim = self.tools / script
                shim.write_text(f'#!/bin/sh\nexec java -cp "{LIB}/*" {main} "$@"\n')
                shim.chmod(0o755)

    # --- where things are -------------------------------------------------------------------

    def localize(self, text: str) -> str:
        """The page's ports and /tmp paths, as this run has them (module docstring)."""
        text = re.sub(r"(?<![\w./])/tmp/", f"{self.workdir}/tmp/", text)
        if self.kemu is None:
            return text
        served = self.kemu
        control = served.control_url.rpartition(":")[2]

        def port(match: re.Match[str]) -> str:
            number = int(match.group(2))
            if number == CONTROL_PORT and control:
                return f"{match.group(1)}:{control}"
            if KAFKA_PORT <= number < CONTROL_PORT:
                return f"{match.group(1)}:{served.first_port + number - KAFKA_PORT}"
            return match.group(0)

        return re.sub(r"\b(127\.0\.0\.1|localhost):(\d{4})\b", port, text)

    def env(self) -> dict[str, str]:
        path = os.pathsep.join([str(self.tools), str(BIN), os.environ.get("PATH", "")])
        env = {**os.environ, "PATH": path, "PYTHONUNBUFFERED": "1"}
        if self.kemu is not None and self.kemu.control_url:
            env["C"] = env["KEMU_CONTROL"] = self.kemu.control_url
        return env

    # --- blocks -----------------------------------------------------------------------------

    def run(self, block: Block) -> str:
        self.before_block(self, block)
        if "file" in block.flags:
            (self.workdir / block.flags["file"]).write_text(self.localize(block.source))
            output = ""
        elif "in" in block.flags:
            output = self.run_fragment(block)
        elif block.language == "python":
            output = self.run_python(block)
        else:
            output = "".join(self.run_sh_line(block, line) for line in self.sh_lines(block))
        self.outputs[block.line] = output
        return output

    def sh_lines(self, block: Block) -> list[str]:
        return [line for line in logical_lines(block.source) if line.strip()]

    def run_fragment(self, block: Block) -> str:
        """A piece of a module (a table row): evaluated in that module's namespace."""
        code = (
            "import importlib, sys, textwrap\n"
            "namespace = vars(importlib.import_module(sys.argv[1]))\n"
            "print(eval(textwrap.dedent(sys.argv[2]).strip(), namespace))\n"
        )
        return self.python(block, [sys.executable, "-c", code, block.flags["in"], block.source])

    def run_python(self, block: Block) -> str:
        source = self.localize(block.source)
        script = self.workdir / f"test_block_{block.line}.py"
        script.write_text(source)
        if re.search(r"^def test_", source, re.M):
            # a user's test file: the plugin is found through its entry point
            command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(script)]
        else:
            command = [sys.executable, str(script)]
        return self.python(block, command)

    def python(self, block: Block, command: list[str]) -> str:
        ran = subprocess.run(
            command, cwd=self.workdir, env=self.env(), capture_output=True, text=True, timeout=300
        )
        assert ran.returncode == 0, (block.where, ran.stdout, ran.stderr)
        return ran.stdout

    def run_sh_line(self, block: Block, line: str) -> str:
        command, comment = split_comment(line)
        where = f"{block.where}: {line.strip()!r}"
        if not command:
            if comment.startswith(READY.strip()) or comment.startswith("kemu "):
                self.check_printed(where, comment)
            return ""
        words = shlex.split(command)
        if words[:2] == ["kemu", "serve"]:
            self.serve(words[2:])
            return ""
        from tests.integration.tools.long_commands import check_long_command, is_long_command

        if is_long_command(words):
            check_long_command(self, where, command)
            return ""
        if any(word in KAFKA_TOOLS for word in words) and not (self.tools / words[0]).exists():
            self.unchecked.append(f"{where}: no Kafka jars in {LIB} (make bench fetches them)")
            return ""
        ran = subprocess.run(
            ["bash", "-c", SHELL_PRELUDE + self.localize(command)],
            cwd=self.workdir,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert ran.returncode == 0, (where, ran.stdout, ran.stderr)
        self.check_output(where, command, comment, ran.stdout)
        return ran.stdout

    # --- kemu serve -------------------------------------------------------------------------

    def serve(self, arguments: list[str]) -> None:
        """Stop the page's kemu, start this one on free ports (module docstring)."""
        self.stop()
        brokers = int(option(arguments, "--brokers") or 1)
        listeners = option([a for a in arguments if a.startswith("listeners=")], "listeners")
        blocks_needed = brokers * max(1, len((listeners or "x").split(",")))
        for attempt in range(3):
            first = free_port_block(blocks_needed)
            words = with_option(arguments, "--port", str(first))
            if option(words, "--control-port") == str(CONTROL_PORT):
                words = with_option(words, "--control-port", str(free_port_block(1)))
            command = [str(BIN / "kemu"), "serve", *words]
            try:
                process, printed = start_kemu(
                    command, self.workdir, self.env(), self.workdir / "kemu.log"
                )
            except RuntimeError:
                if attempt == 2:
                    raise
                continue
            self.kemu = Served(process, first, printed)
            return

    def check_printed(self, where: str, comment: str) -> None:
        """A ``# kemu ...`` line under a serve line is what it prints: the same kind of line
        (``kemu ready``, ``kemu listener NAME``, ``kemu tls``) with the same keys, and the same
        bootstrap and control addresses once the ports are this run's."""
        assert self.kemu is not None, f"{where}: shown output without a kemu serve line"
        head = " ".join(comment.split()[:3] if comment.startswith("kemu listener") else [])
        kind = head or " ".join(comment.split()[:2])
        found = [line for line in self.kemu.printed if line.startswith(kind + " ")]
        assert found, (where, self.kemu.printed)
        shown = dict(item.partition("=")[::2] for item in comment.split() if "=" in item)
        printed = dict(item.partition("=")[::2] for item in found[0].split() if "=" in item)
        assert set(shown) <= set(printed), (where, found[0])
        for key in ("bootstrap", "control"):
            if key in shown:
                assert printed[key] == self.localize(shown[key]), (where, found[0])

    def check_output(self, where: str, command: str, comment: str, output: str) -> None:
        """``curl`` and ``kemu ctl`` answer JSON (``/metrics``: Prometheus text); an answer
        shown in the trailing comment has the keys shown; ``curl X; kemu ctl Y`` on one line
        are the two spellings of one verb and answer the same keys."""
        calls = [part.split() for part in command.split(";") if part.strip()]
        if not all(c[0] == "curl" or c[:2] == ["kemu", "ctl"] for c in calls):
            return
        if any(call[-1].endswith("/metrics") for call in calls):
            assert "# TYPE kemu_fault_rules gauge" in output, (where, output[:300])
            return
        answers = json_documents(output)
        assert len(answers) == len(calls), (where, output)
        if len(answers) == 2:
            assert shape(answers[0]) == shape(answers[1]), (where, output)
        if comment.startswith("{"):
            shown = json.loads(comment.replace("[...]", "[]"))
            assert set(shown) <= set(answers[-1]), (where, answers[-1])

    def stop(self) -> None:
        if self.kemu is not None:
            self.kemu.stop()
            self.kemu = None
