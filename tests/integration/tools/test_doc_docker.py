"""docs/docker.md's blocks need a Docker daemon, which this machine lacks (they are marked
``not-run`` with that reason); what can be checked without one is:

- the shell block: the image it builds is the one it runs and docker/compose.yaml names, from
  docker/Dockerfile, and every container port it or the compose file publishes is EXPOSEd;
- both Testcontainers recipes: they run that image, set only variables docker/entrypoint.sh reads,
  and those settings, run through the entry point itself outside a container, give a kemu whose
  ready line their wait strategy matches and which a client reaches at the bootstrap they build
  (the control port, which the recipes leave at the image's 9192, is a free one here);
- the Java recipe compiles against org.testcontainers:testcontainers (Maven Central), the Python
  one parses.
"""

from __future__ import annotations

import codecs
import re
import shlex
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from kemu.testing.plugin import free_port_block
from tests.integration.tools.doc_blocks import (
    BIN,
    ROOT,
    blocks,
    logical_lines,
    option,
    split_comment,
)

pytestmark = [pytest.mark.integration, pytest.mark.process]

PAGE = ROOT / "docs" / "docker.md"
DOCKERFILE = ROOT / "docker" / "Dockerfile"
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
TESTCONTAINERS = "org.testcontainers:testcontainers:1.21.4"


def found(pattern: str, text: str) -> str:
    match = re.search(pattern, text, re.M)
    assert match is not None, pattern
    return match.group(1)


def recipe(language: str) -> str:
    return next(block.source for block in blocks(PAGE) if block.language == language)


def container_ports(published: list[str]) -> set[int]:
    """``[host:]hostports:containerports`` -> the container ports (``9092-9094`` is three)."""
    ports: set[int] = set()
    for spec in published:
        first, _, last = spec.rpartition(":")[2].partition("-")
        ports.update(range(int(first), int(last or first) + 1))
    return ports


def test_the_shell_block_builds_runs_and_composes_one_image() -> None:
    dockerfile = DOCKERFILE.read_text()
    exposed = container_ports(found(r"^EXPOSE (.+)$", dockerfile).split())
    compose_text = ""
    tag = built_from = ""
    shell = next(block for block in blocks(PAGE) if block.language == "sh")
    for line in logical_lines(shell.source):
        command, _ = split_comment(line)
        if not command:
            continue
        words = shlex.split(command)
        assert words[0] == "docker", line
        if words[1] == "build":
            built_from, tag = option(words, "-f") or "", option(words, "-t") or ""
            assert ROOT / built_from == DOCKERFILE and words[-1] == ".", line
        elif words[1] == "run":
            assert words[-1] == tag, line
            published = [words[i + 1] for i, word in enumerate(words) if word == "-p"]
            assert container_ports(published) <= exposed, line
        else:
            assert words[1:2] == ["compose"], line
            compose_text = (ROOT / (option(words, "-f") or "")).read_text()
    assert f"image: {tag}:latest" in compose_text
    assert f"dockerfile: {built_from}" in compose_text
    assert container_ports(re.findall(r'^\s+- "([\d.:-]+)"', compose_text, re.M)) <= exposed


def settings_of(source: str, port: int) -> dict[str, str]:
    """The recipe's ``withEnv``/``with_env`` pairs; its port expression is ``port``."""
    settings = {}
    for name, value in re.findall(r'with_?[eE]nv\("(\w+)", ([^)]*\)?)\)', source):
        literal = re.fullmatch(r'"([^"]*)"', value.strip())
        settings[name] = literal.group(1) if literal else str(port)
    return settings


def wait_pattern(source: str) -> str:
    java = re.search(r'forLogMessage\("((?:[^"\\]|\\.)*)"', source)
    if java:
        return codecs.decode(java.group(1), "unicode_escape")
    return found(r'wait_for_logs\(\w+, "([^"]*)"\)', source)


@pytest.mark.parametrize("language", ["java", "python"])
def test_a_testcontainers_recipe_starts_kemu_through_the_entry_point(
    language: str, tmp_path: Path
) -> None:
    source = recipe(language)
    tag = found(r'"(\w+:latest)"', source)
    assert f"image: {tag}" in (ROOT / "docker" / "compose.yaml").read_text()
    port = free_port_block(1)
    settings = settings_of(source, port)
    read = set(re.findall(r'^: "\$\{(KEMU_\w+)', ENTRYPOINT.read_text(), re.M))
    assert set(settings) <= read, set(settings) - read
    env = {
        "PATH": f"{BIN}:/usr/bin:/bin",
        "PYTHONUNBUFFERED": "1",
        "KEMU_CONTROL_PORT": str(free_port_block(1)),
        **settings,
    }
    kemu = subprocess.Popen(
        ["sh", str(ENTRYPOINT)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    printed: list[str] = []
    ready = threading.Event()

    def watch() -> None:
        assert kemu.stdout is not None
        for line in kemu.stdout:
            printed.append(line)
            if re.search(wait_pattern(source), line):
                ready.set()

    threading.Thread(target=watch, daemon=True).start()
    try:
        assert ready.wait(60), printed
        bootstrap = f"localhost:{port}"  # as the recipe builds it
        metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
        assert [broker.port for broker in metadata.brokers.values()] == [port]
    finally:
        kemu.terminate()
        kemu.wait(15)


JAVA_WRAPPER = """
import java.net.ServerSocket;
import org.testcontainers.containers.FixedHostPortGenericContainer;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.wait.strategy.Wait;

class DockerRecipe {
    static int findFreePort() throws Exception {
        try (ServerSocket socket = new ServerSocket(0)) { return socket.getLocalPort(); }
    }

    static String recipe() throws Exception {
%s
        return bootstrap;
    }
}
"""
POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kemu</groupId><artifactId>docker-recipe</artifactId><version>0</version>
  <dependencies><dependency><groupId>%s</groupId><artifactId>%s</artifactId>
  <version>%s</version></dependency></dependencies>
</project>
"""


def test_the_java_recipe_compiles(tmp_path: Path) -> None:
    if not (shutil.which("mvn") and shutil.which("javac")):
        pytest.skip("no mvn/javac")
    (tmp_path / "pom.xml").write_text(POM % tuple(TESTCONTAINERS.split(":")))
    classpath = tmp_path / "classpath.txt"
    resolve = ["mvn", "-q", "-B", "dependency:build-classpath", f"-Dmdep.outputFile={classpath}"]
    ran = subprocess.run(
        [*resolve, "-o"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    if ran.returncode != 0:  # first time on this machine: Maven Central
        ran = subprocess.run(resolve, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert ran.returncode == 0, ran.stdout
    indented = "\n".join(f"        {line}" for line in recipe("java").splitlines())
    (tmp_path / "DockerRecipe.java").write_text(JAVA_WRAPPER % indented)
    compiled = subprocess.run(
        [
            "javac",
            "-nowarn",
            "-cp",
            classpath.read_text().strip(),
            "-d",
            str(tmp_path),
            str(tmp_path / "DockerRecipe.java"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert compiled.returncode == 0, compiled.stderr


def test_the_python_recipe_parses() -> None:
    compile(recipe("python"), str(PAGE), "exec")
