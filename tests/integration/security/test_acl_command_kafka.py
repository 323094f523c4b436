"""``kafka-acls.sh`` (Kafka 4.4.0's AclCommand, which drives the Java Admin's createAcls,
describeAcls and deleteAcls) on one scenario against kemu and a real Kafka 4.4.0, side by side:
the tool's output must match, command by command, up to the order of lines within a block (both
servers keep ACLs in sets). Both run StandardAuthorizer semantics with ``User:ANONYMOUS`` a super
user on PLAINTEXT. Skipped without java/javac or the jars ``make bench`` fetches into
bench/.cache/lib. docs/conformance.md lists what differs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kemu.testing.kafka import KafkaConfig
from kemu.testing.plugin import KemuProcess
from tests import REPO_ROOT
from tests.integration.parity import kafka_timing_overrides

pytestmark = [pytest.mark.integration, pytest.mark.parity]
ROOT = REPO_ROOT
LIB = ROOT / "bench" / ".cache" / "lib"
TOOLS_JAR = LIB / "kafka-tools-4.4.0.jar"
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER = {
    "authorizer.class.name": STANDARD,
    "super.users": "User:ANONYMOUS",  # the tool's PLAINTEXT principal (and Kafka's own)
}

# One AclCommand invocation a line (arguments split on spaces), run in order in one JVM.
SCENARIO = [
    "--add --allow-principal User:alice --operation Read --operation Write --topic orders",
    "--add --allow-principal User:bob --operation All --group app- "
    "--resource-pattern-type prefixed",
    "--add --deny-principal User:mallory --operation Describe --cluster",
    "--add --allow-principal User:alice --allow-host 10.0.0.1 --operation Describe --topic *",
    "--add --allow-principal User:carol --producer --topic logs --transactional-id tx-1",
    "--add --allow-principal User:carol --producer --topic logs --idempotent",
    "--add --allow-principal User:dave --consumer --topic logs --group readers",
    "--add --allow-principal User:erin --operation Read --topic logs- "
    "--resource-pattern-type prefixed",
    "--add --allow-principal User:alice --operation Read --topic orders",  # again: no change
    "--add --allow-principal User:alice --operation Describe --delegation-token tok-1",
    "--add --allow-principal User:alice --operation CreateTokens --user-principal User:bob",
    "--add --deny-principal User:* --deny-host 10.0.0.9 --operation Write --topic orders",
    "--list",
    "--list --topic orders",
    "--list --topic logs-eu --resource-pattern-type match",
    "--list --group app- --resource-pattern-type prefixed",
    "--list --cluster",
    "--list --transactional-id tx-1",
    "--list --principal User:alice",
    "--list --topic nothing-here",
    "--list --delegation-token tok-1",
    "--list --user-principal User:bob",
    "--remove --allow-principal User:alice --operation Write --topic orders --force",
    "--remove --group app- --resource-pattern-type prefixed --force",
    "--remove --topic logs- --resource-pattern-type any --force",
    "--remove --allow-principal User:nobody --operation Read --topic orders --force",
    "--list",
    "--remove --cluster --force",
    "--list --cluster",
]

DRIVER = """
import java.nio.file.*;
import java.util.*;
import org.apache.kafka.common.utils.internals.Exit;
import org.apache.kafka.tools.AclCommand;

public class AclScenario {
    public static void main(String[] args) throws Exception {
        Exit.setExitProcedure((code, message) -> {
            throw new IllegalStateException("exit " + code);
        });
        for (String line : Files.readAllLines(Paths.get(args[1]))) {
            List<String> command = new ArrayList<>(List.of("--bootstrap-server", args[0]));
            command.addAll(Arrays.asList(line.split(" ")));
            System.out.println("### " + line);
            System.out.flush();
            try {
                AclCommand.main(command.toArray(new String[0]));
            } catch (IllegalStateException e) {
                System.out.println(e.getMessage());
            }
            System.out.flush();
        }
    }
}
"""


Output = list[tuple[str, list[list[str]]]]


def run_scenario(bootstrap: str, workdir: Path) -> Output:
    """AclCommand's output per command, in order, as blocks (split on blank lines) of sorted
    lines; the raw output is kept in ``workdir/acls.out``."""
    source = workdir / "AclScenario.java"
    source.write_text(DRIVER)
    commands = workdir / "commands.txt"
    commands.write_text("\n".join(SCENARIO) + "\n")
    classpath = f"{LIB}/*"
    if not (workdir / "AclScenario.class").exists():
        subprocess.run(
            ["javac", "-cp", classpath, "-d", str(workdir), str(source)],
            check=True,
            capture_output=True,
        )
    log4j = workdir / "log4j2.properties"
    log4j.write_text("rootLogger.level=ERROR\n")
    done = subprocess.run(
        [
            "java",
            "-Xmx256M",
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            f"{workdir}:{classpath}",
            "AclScenario",
            bootstrap,
            str(commands),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    (workdir / "acls.out").write_text(done.stdout + done.stderr)
    assert done.returncode == 0, done.stderr
    outputs: list[tuple[str, list[str]]] = []
    for line in done.stdout.splitlines():
        if line.startswith("### "):
            outputs.append((line[4:], []))
        elif outputs:
            outputs[-1][1].append(line)
    return [(command, _blocks(lines)) for command, lines in outputs]


def _blocks(lines: list[str]) -> list[list[str]]:
    blocks: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            blocks[-1].append(line.strip())
        elif blocks[-1]:
            blocks.append([])
    # a block is a header then its (unordered) ACL lines; blocks are in resource order
    return sorted([block[:1] + sorted(block[1:]) for block in blocks if block])


@pytest.fixture(scope="module")
def kafka_output(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Output:
    if shutil.which("javac") is None or not TOOLS_JAR.exists():
        pytest.skip("needs javac and Kafka's jars in bench/.cache/lib (make bench fetches them)")
    kafka = request.getfixturevalue("kafka_server")(KafkaConfig("kafka-acl", AUTHORIZER))
    return run_scenario(kafka.bootstrap, tmp_path_factory.mktemp("acl-kafka"))


def test_kafka_acls_sh_answers_as_on_kafka(kafka_output: Output, tmp_path: Path) -> None:
    kemu = KemuProcess(
        brokers=1,
        data_dir=tmp_path / "data",
        log_path=tmp_path / "kemu.log",
        timing="kafka",
        overrides=kafka_timing_overrides(**AUTHORIZER),
    ).start()
    try:
        mine = run_scenario(kemu.first_broker, tmp_path)
    finally:
        kemu.stop()
    assert [command for command, _ in mine] == SCENARIO
    assert [command for command, _ in kafka_output] == SCENARIO
    listed = SCENARIO.index("--list")
    assert len(kafka_output[listed][1]) > 5  # the scenario did something on Kafka
    differences = {
        f"{index}: {command}": {"kafka": kafka_output[index][1], "kemu": blocks}
        for index, (command, blocks) in enumerate(mine)
        if kafka_output[index][1] != blocks
    }
    assert differences == {}
