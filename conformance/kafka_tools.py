"""``python -m conformance.kafka_tools``: Kafka 4.4.0's own CLI tools against kemu and a real Kafka.

The tools are run as ``bin/kafka-*.sh`` runs them: their main classes (``TopicCommand``,
``ConfigCommand``, ``LogDirsCommand``, ...) with ``java -cp bench/.cache/lib/*``, the jars
``make bench`` fetches. The same script of invocations runs against a single-node KRaft Kafka
4.4.0 and a single-broker kemu (``kemu serve --brokers 1``), each on a fresh server, the two
side by side; every invocation is one check (its exit status and one pattern in its output),
so the two pass counts compare directly. Invocations build on earlier ones (a topic is created,
then described, produced to, consumed by a group, reassigned, ...), in the same order on both.

Prints one line per check and server, then both pass counts; exits 1 if kemu fails a check
that Kafka passes. Output of every invocation and both servers' logs stay in ``--log-dir``.
Not part of ``make test``; results and known differences are in docs/conformance.md.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# Imported here, not in the per-server threads: two threads importing at once can see a
# half-initialised module.
from bench.servers import KafkaServer, kafka_timing_overrides
from kemu.testing.plugin import KemuProcess

TOOLS = "org.apache.kafka.tools."
TOOL_JVM_OPTS = ["-Xmx256M", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]
TOOL_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Check:
    """One tool invocation and what its output must show.

    ``args`` may use ``{bootstrap}``, ``{dir}`` (the target's scratch directory) and ``{node}``.
    ``expect`` is a regular expression searched in stdout + stderr; ``status`` is the exit
    status the tool must end with.
    """

    name: str
    tool: str
    args: tuple[str, ...]
    expect: str
    status: int = 0
    stdin: str | None = None
    files: dict[str, str] = field(default_factory=dict)  # written into {dir} first


@dataclass
class Result:
    check: Check
    passed: bool
    status: int
    seconds: float
    output: str


def _json(value: object) -> str:
    return json.dumps(value)


TOPIC, GROUP, SHARE_GROUP, METRICS = "tools-a", "tools-g", "tools-sg", "tools-metrics"
LINES = "".join(f"k{i}:v{i}\n" for i in range(10))
B = ("--bootstrap-server", "{bootstrap}")

CHECKS: tuple[Check, ...] = (
    # --- kafka-topics -----------------------------------------------------------------------
    Check("topics create", "TopicCommand",
          (*B, "--create", "--topic", TOPIC, "--partitions", "3", "--replication-factor", "1"),
          rf"Created topic {TOPIC}\."),
    Check("topics create again", "TopicCommand",
          (*B, "--create", "--topic", TOPIC, "--partitions", "3"),
          rf"Topic '{TOPIC}' already exists", status=1),
    Check("topics create second", "TopicCommand",
          (*B, "--create", "--topic", "tools-b", "--partitions", "1",
           "--config", "cleanup.policy=compact"), r"Created topic tools-b\."),
    Check("topics list", "TopicCommand", (*B, "--list"), rf"(?m)^{TOPIC}$"),
    Check("topics describe", "TopicCommand", (*B, "--describe", "--topic", TOPIC),
          r"PartitionCount: 3\s+ReplicationFactor: 1"),
    Check("topics describe config", "TopicCommand", (*B, "--describe", "--topic", "tools-b"),
          r"Configs: .*cleanup\.policy=compact"),
    Check("topics alter partitions", "TopicCommand",
          (*B, "--alter", "--topic", TOPIC, "--partitions", "4"), ""),
    Check("topics describe altered", "TopicCommand", (*B, "--describe", "--topic", TOPIC),
          r"PartitionCount: 4"),
    Check("topics unavailable partitions", "TopicCommand",
          (*B, "--describe", "--unavailable-partitions"), r"^$"),
    Check("topics delete", "TopicCommand", (*B, "--delete", "--topic", "tools-b"), ""),
    # --- console producer / consumer, offsets --------------------------------------------------
    Check("console producer", "ConsoleProducer",
          (*B, "--topic", TOPIC, "--property", "parse.key=true", "--property", "key.separator=:"),
          "", stdin=LINES),
    Check("console consumer group", "consumer.ConsoleConsumer",
          (*B, "--topic", TOPIC, "--group", GROUP, "--from-beginning", "--max-messages", "10",
           "--timeout-ms", "30000"), r"Processed a total of 10 messages"),
    Check("get offsets", "GetOffsetShell", (*B, "--topic", TOPIC),
          rf"(?m)^{TOPIC}:\d:\d+$"),
    Check("get offsets earliest", "GetOffsetShell", (*B, "--topic", TOPIC, "--time", "-2"),
          rf"(?m)^{TOPIC}:0:0$"),
    Check("get offsets max timestamp", "GetOffsetShell",
          (*B, "--topic", TOPIC, "--time", "-3"), rf"(?m)^{TOPIC}:0:"),
    # --- kafka-consumer-groups ------------------------------------------------------------
    Check("groups list", "consumer.group.ConsumerGroupCommand", (*B, "--list"),
          rf"(?m)^{GROUP}$"),
    Check("groups describe", "consumer.group.ConsumerGroupCommand",
          (*B, "--describe", "--group", GROUP),
          rf"{GROUP}\s+{TOPIC}\s+\d\s+\d+\s+\d+\s+0"),
    Check("groups describe state", "consumer.group.ConsumerGroupCommand",
          (*B, "--describe", "--group", GROUP, "--state"), r"Empty"),
    Check("groups reset dry run", "consumer.group.ConsumerGroupCommand",
          (*B, "--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--to-earliest",
           "--dry-run"), rf"{GROUP}\s+{TOPIC}\s+\d\s+0"),
    Check("groups reset execute", "consumer.group.ConsumerGroupCommand",
          (*B, "--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--to-earliest",
           "--execute"), rf"{GROUP}\s+{TOPIC}\s+\d\s+0"),
    Check("groups delete offsets", "consumer.group.ConsumerGroupCommand",
          (*B, "--delete-offsets", "--group", GROUP, "--topic", TOPIC), r"Successful"),
    Check("groups delete", "consumer.group.ConsumerGroupCommand",
          (*B, "--delete", "--group", GROUP),
          rf"Deletion of requested consumer groups \('{GROUP}'\) was successful"),
    Check("groups describe missing", "consumer.group.ConsumerGroupCommand",
          (*B, "--describe", "--group", "no-such-group"),
          r"GroupIdNotFoundException: Group no-such-group not found\."),
    # --- kafka-configs ------------------------------------------------------------------------
    Check("configs alter topic", "ConfigCommand",
          (*B, "--alter", "--entity-type", "topics", "--entity-name", TOPIC, "--add-config",
           "retention.ms=86400000"), rf"Completed updating config for topic {TOPIC}\."),
    Check("configs describe topic", "ConfigCommand",
          (*B, "--describe", "--entity-type", "topics", "--entity-name", TOPIC),
          r"retention\.ms=86400000"),
    Check("configs delete topic config", "ConfigCommand",
          (*B, "--alter", "--entity-type", "topics", "--entity-name", TOPIC, "--delete-config",
           "retention.ms"), rf"Completed updating config for topic {TOPIC}\."),
    Check("configs describe broker", "ConfigCommand",
          (*B, "--describe", "--entity-type", "brokers", "--entity-name", "{node}", "--all"),
          r"num\.partitions=\d+ sensitive=false"),
    Check("configs describe broker catalogue", "ConfigCommand",
          (*B, "--describe", "--entity-type", "brokers", "--entity-name", "{node}", "--all"),
          r"log\.cleaner\.backoff\.ms=15000 sensitive=false"),
    Check("configs alter broker default", "ConfigCommand",
          (*B, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
           "log.cleaner.threads=2"), r"Completed updating default config for brokers"),
    Check("configs describe broker default", "ConfigCommand",
          (*B, "--describe", "--entity-type", "brokers", "--entity-default"),
          r"log\.cleaner\.threads=2"),
    Check("configs alter read-only broker config", "ConfigCommand",
          (*B, "--alter", "--entity-type", "brokers", "--entity-name", "{node}", "--add-config",
           "process.roles=broker"), r"Cannot update these configs dynamically: \[process\.roles\]",
          status=1),
    Check("configs alter user quota", "ConfigCommand",
          (*B, "--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config",
           "producer_byte_rate=1024,consumer_byte_rate=2048"),
          r"Completed updating config for user alice\."),
    Check("configs describe user quota", "ConfigCommand",
          (*B, "--describe", "--entity-type", "users", "--entity-name", "alice"),
          r"producer_byte_rate=1024\.0"),
    Check("configs alter client quota", "ConfigCommand",
          (*B, "--alter", "--entity-type", "clients", "--entity-name", "c1", "--add-config",
           "request_percentage=50"), r"Completed updating config for client c1\."),
    Check("configs describe clients", "ConfigCommand",
          (*B, "--describe", "--entity-type", "clients"),
          r"Quota configs for client-id 'c1' are request_percentage=50\.0"),
    Check("configs alter user+client quota", "ConfigCommand",
          (*B, "--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type",
           "clients", "--entity-name", "c1", "--add-config", "producer_byte_rate=4096"),
          r"Completed updating config for user alice\."),  # sic: the tool names the user only
    Check("configs describe user+client", "ConfigCommand",
          (*B, "--describe", "--entity-type", "users", "--entity-name", "alice",
           "--entity-type", "clients", "--entity-name", "c1"), r"producer_byte_rate=4096\.0"),
    Check("configs delete user quota", "ConfigCommand",
          (*B, "--alter", "--entity-type", "users", "--entity-name", "alice",
           "--delete-config", "consumer_byte_rate"), r"Completed updating config for user"),
    Check("configs describe user after delete", "ConfigCommand",
          (*B, "--describe", "--entity-type", "users", "--entity-name", "alice"),
          r"are producer_byte_rate=1024\.0$"),
    Check("configs alter group", "ConfigCommand",
          (*B, "--alter", "--entity-type", "groups", "--entity-name", SHARE_GROUP,
           "--add-config", "share.auto.offset.reset=earliest"),
          rf"Completed updating config for group {SHARE_GROUP}\."),
    Check("configs describe group", "ConfigCommand",
          (*B, "--describe", "--entity-type", "groups", "--entity-name", SHARE_GROUP),
          r"share\.auto\.offset\.reset=earliest sensitive=false synonyms=\{"
          r"DYNAMIC_GROUP_CONFIG:share\.auto\.offset\.reset=earliest, "
          r"DEFAULT_CONFIG:share\.auto\.offset\.reset=latest\}"),
    Check("configs describe group all", "ConfigCommand",
          (*B, "--describe", "--entity-type", "groups", "--entity-name", SHARE_GROUP, "--all"),
          r"consumer\.session\.timeout\.ms=45000 sensitive=false "
          r"synonyms=\{DEFAULT_CONFIG:group\.consumer\.session\.timeout\.ms=45000\}"),
    # --- share groups ---------------------------------------------------------------------
    Check("console share consumer", "consumer.ConsoleShareConsumer",
          (*B, "--topic", TOPIC, "--group", SHARE_GROUP, "--max-messages", "10",
           "--timeout-ms", "30000"), r"Processed a total of 10 messages"),
    Check("share groups list", "consumer.group.ShareGroupCommand", (*B, "--list"),
          rf"(?m)^{SHARE_GROUP}$"),
    Check("share groups describe", "consumer.group.ShareGroupCommand",
          (*B, "--describe", "--group", SHARE_GROUP), rf"{SHARE_GROUP}\s+{TOPIC}"),
    Check("share groups describe state", "consumer.group.ShareGroupCommand",
          (*B, "--describe", "--group", SHARE_GROUP, "--state"), r"Empty"),
    Check("share groups describe missing", "consumer.group.ShareGroupCommand",
          (*B, "--describe", "--group", "no-such-share-group"),
          r"GroupIdNotFoundException: Group no-such-share-group not found\."),
    Check("share groups reset", "consumer.group.ShareGroupCommand",
          (*B, "--reset-offsets", "--group", SHARE_GROUP, "--topic", TOPIC, "--to-earliest",
           "--execute"), rf"{SHARE_GROUP}\s+{TOPIC}\s+\d\s+0"),
    Check("share groups delete", "consumer.group.ShareGroupCommand",
          (*B, "--delete", "--group", SHARE_GROUP),
          rf"Deletion of requested share groups \('{SHARE_GROUP}'\) was successful"),
    Check("groups command list", "GroupsCommand", (*B, "--list"), r"GROUP\s+TYPE\s+PROTOCOL"),
    # --- records ------------------------------------------------------------------------------
    Check("delete records", "DeleteRecordsCommand",
          (*B, "--offset-json-file", "{dir}/delete.json"),
          rf"partition: {TOPIC}-0\s+low_watermark: 0",
          files={"delete.json": _json(
              {"partitions": [{"topic": TOPIC, "partition": 0, "offset": 0}], "version": 1})}),
    # --- kafka-transactions ---------------------------------------------------------------
    Check("transactions list", "TransactionsCommand", (*B, "list"),
          r"TransactionalId\s+Coordinator\s+ProducerId\s+TransactionState"),
    Check("transactions describe-producers", "TransactionsCommand",
          (*B, "describe-producers", "--topic", TOPIC, "--partition", "0"),
          r"ProducerId\s+ProducerEpoch\s+LatestCoordinatorEpoch"),
    Check("transactions describe-producers on a replica", "TransactionsCommand",
          (*B, "describe-producers", "--topic", TOPIC, "--partition", "0",
           "--broker-id", "{node}"), r"ProducerId\s+ProducerEpoch"),
    Check("transactions find-hanging", "TransactionsCommand",
          (*B, "find-hanging", "--broker-id", "{node}"), r"Topic\s+Partition\s+ProducerId"),
    Check("transactions describe missing", "TransactionsCommand",
          (*B, "describe", "--transactional-id", "no-such-txn"),
          r"failed because the ID could not be found", status=1),
    # --- kafka-log-dirs -------------------------------------------------------------------
    Check("log dirs describe", "LogDirsCommand",
          (*B, "--describe", "--topic-list", TOPIC),
          rf'"partition":"{TOPIC}-0","size":\d+'),
    Check("log dirs describe broker", "LogDirsCommand",
          (*B, "--describe", "--broker-list", "{node}"), r'"broker":\d+,"logDirs":\[\{'),
    # --- kafka-leader-election ------------------------------------------------------------
    Check("leader election preferred", "LeaderElectionCommand",
          (*B, "--election-type", "preferred", "--all-topic-partitions"),
          r"Valid replica already elected for partitions|Successfully completed leader "
          r"election|^$"),
    Check("leader election unclean one", "LeaderElectionCommand",
          (*B, "--election-type", "unclean", "--topic", TOPIC, "--partition", "0"),
          rf"Valid replica already elected for partitions {TOPIC}-0"),
    Check("leader election unknown", "LeaderElectionCommand",
          (*B, "--election-type", "preferred", "--topic", "no-such-topic", "--partition", "0"),
          r"UnknownTopicOrPartitionException", status=1),
    # --- kafka-reassign-partitions --------------------------------------------------------
    Check("reassign generate", "reassign.ReassignPartitionsCommand",
          (*B, "--generate", "--topics-to-move-json-file", "{dir}/move.json",
           "--broker-list", "{node}"), r"Proposed partition reassignment configuration",
          files={"move.json": _json({"topics": [{"topic": TOPIC}], "version": 1})}),
    Check("reassign execute", "reassign.ReassignPartitionsCommand",
          (*B, "--execute", "--reassignment-json-file", "{dir}/reassign.json"),
          r"Successfully started partition reassignment for " + TOPIC + "-0",
          files={"reassign.json": _json({"version": 1, "partitions": [
              {"topic": TOPIC, "partition": 0, "replicas": ["{node}"], "log_dirs": ["any"]}]})}),
    Check("reassign verify", "reassign.ReassignPartitionsCommand",
          (*B, "--verify", "--reassignment-json-file", "{dir}/reassign.json"),
          rf"Reassignment of partition {TOPIC}-0 is completed"),
    Check("reassign list", "reassign.ReassignPartitionsCommand", (*B, "--list"),
          r"No partition reassignments found"),
    Check("reassign cancel", "reassign.ReassignPartitionsCommand",
          (*B, "--cancel", "--reassignment-json-file", "{dir}/reassign.json"),
          r"None of the specified partition reassignments are active"),
    # --- kafka-client-metrics -------------------------------------------------------------
    Check("client metrics alter", "ClientMetricsCommand",
          (*B, "--alter", "--name", METRICS, "--metrics", "org.apache.kafka.producer.",
           "--interval", "1000"), rf"Altered client metrics config for {METRICS}\."),
    Check("client metrics describe", "ClientMetricsCommand",
          (*B, "--describe", "--name", METRICS), r"interval\.ms=1000"),
    Check("client metrics list", "ClientMetricsCommand", (*B, "--list"), rf"(?m)^{METRICS}$"),
    Check("configs describe client-metrics", "ConfigCommand",
          (*B, "--describe", "--entity-type", "client-metrics", "--entity-name", METRICS),
          r"metrics=org\.apache\.kafka\.producer\."),
    Check("client metrics delete", "ClientMetricsCommand",
          (*B, "--delete", "--name", METRICS), rf"Deleted client metrics config for {METRICS}\."),
    Check("client metrics list after delete", "ClientMetricsCommand", (*B, "--list"), r"^$"),
    # --- cluster, features, quorum, api versions ------------------------------------------
    Check("cluster id", "ClusterTool", ("cluster-id", *B), r"Cluster ID: \S+"),
    Check("features describe", "FeatureCommand", (*B, "describe"),
          r"Feature: metadata\.version\s+SupportedMinVersion: \S+"),
    Check("features describe group.version", "FeatureCommand", (*B, "describe"),
          r"Feature: group\.version\s+SupportedMinVersion: 0\s+SupportedMaxVersion: 1\s+"
          r"FinalizedVersionLevel: 1"),
    Check("metadata quorum status", "MetadataQuorumCommand", (*B, "describe", "--status"),
          r"LeaderId:\s+\d+"),
    Check("metadata quorum replication", "MetadataQuorumCommand",
          (*B, "describe", "--replication"), r"NodeId\s+DirectoryId\s+LogEndOffset"),
    Check("broker api versions", "BrokerApiVersionsCommand", (*B,),
          r"Produce\(0\): \d+ to \d+ \[usable: \d+\]"),
)


class Target:
    """A server under test: start, bootstrap, node id, stop."""

    name = ""
    node = 1

    def start(self) -> None: ...
    def stop(self) -> None: ...
    @property
    def bootstrap(self) -> str:
        raise NotImplementedError


class KafkaTarget(Target):
    name = "kafka"

    def __init__(self, workdir: Path) -> None:
        self.server = KafkaServer(workdir, partitions=1)

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self.server.stop()

    @property
    def bootstrap(self) -> str:
        return self.server.bootstrap


class KemuTarget(Target):
    name = "kemu"

    def __init__(self, workdir: Path) -> None:
        self.process = KemuProcess(  # with the timers of the Kafka server beside it
            brokers=1,
            data_dir=workdir / "data",
            log_path=workdir / "kemu.log",
            timing="kafka",
            overrides=kafka_timing_overrides(),
        )

    def start(self) -> None:
        self.process.start(timeout=60)

    def stop(self) -> None:
        self.process.stop()

    @property
    def bootstrap(self) -> str:
        return self.process.first_broker


RUNNER_SOURCE = Path(__file__).with_name("ToolRunner.java")


def compile_runner(classes: Path) -> None:
    """Compile ToolRunner.java (one JVM running the tools one after the other) into ``classes``."""
    from bench import java

    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("javac is needed for the tool runner (or pass --fork)")
    subprocess.run(
        [javac, "-cp", f"{java.LIB_DIR}/*", "-d", str(classes), str(RUNNER_SOURCE)], check=True
    )


class Runner:
    """Runs one tool invocation: ``status, output = runner.run(main_class, args, stdin)``."""

    def __init__(self, workdir: Path, classes: Path | None) -> None:
        from bench import java

        self.workdir = workdir
        self.log4j = java.write_log4j_config(
            workdir / "log4j2.properties", workdir / "tools.log", "WARN"
        )
        self.process: subprocess.Popen[str] | None = None
        self.count = 0
        if classes is not None:
            command = java.java_command(
                "ToolRunner", [], jvm_opts=["-Xmx512M", "-XX:+UseSerialGC"], log4j=self.log4j
            )
            command[command.index("-cp") + 1] = f"{classes}:{java.LIB_DIR}/*"
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=workdir
            )

    def run(self, main_class: str, args: list[str], stdin: str) -> tuple[int, str]:
        if self.process is None:
            return self._fork(main_class, args, stdin)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.count += 1
        request = self.workdir / f"request-{self.count:02d}"
        request.write_text("\n".join([main_class, *args]) + "\n")
        request.with_suffix(".in").write_text(stdin)
        self.process.stdin.write(f"{request}\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        output = Path(f"{request}.out").read_text(errors="replace")
        if not answer.startswith("exit "):
            raise RuntimeError(f"the tool runner died running {main_class}: {output}")
        return int(answer.split()[1]), output

    def _fork(self, main_class: str, args: list[str], stdin: str) -> tuple[int, str]:
        from bench import java

        command = java.java_command(main_class, args, jvm_opts=TOOL_JVM_OPTS, log4j=self.log4j)
        try:
            done = subprocess.run(
                command,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=TOOL_TIMEOUT_S,
                cwd=self.workdir,
            )
        except subprocess.TimeoutExpired as timeout:
            return -1, f"timed out after {TOOL_TIMEOUT_S:.0f} s: {timeout}"
        return done.returncode, done.stdout + done.stderr

    def close(self) -> None:
        if self.process is not None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def run_checks(
    target: Target,
    runner: Runner,
    checks: tuple[Check, ...],
    report: Callable[[str, Result], None],
) -> list[Result]:
    workdir = runner.workdir
    values = {"bootstrap": target.bootstrap, "dir": str(workdir), "node": str(target.node)}
    results = []
    for number, check in enumerate(checks, 1):
        for filename, text in check.files.items():
            (workdir / filename).write_text(text.replace('"{node}"', str(target.node)))
        args = [arg.format(**values) for arg in check.args]
        started = time.monotonic()
        status, output = runner.run(TOOLS + check.tool, args, check.stdin or "")
        seconds = time.monotonic() - started
        passed = status == check.status and re.search(check.expect, output.strip()) is not None
        (workdir / f"{number:02d}-{_slug(check.name)}.out").write_text(
            f"$ {check.tool} {' '.join(args)}\nexit {status}\n{output}"
        )
        result = Result(check, passed, status, seconds, output)
        results.append(result)
        report(target.name, result)
    return results


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m conformance.kafka_tools", description=__doc__)
    parser.add_argument("--only", choices=("kemu", "kafka"), help="run against one server only")
    parser.add_argument("--match", default="", help="run only checks whose name has this text")
    parser.add_argument("--log-dir", type=Path, help="keep outputs here (default: a temp dir)")
    parser.add_argument("--serial", action="store_true", help="one server after the other")
    parser.add_argument(
        "--fork", action="store_true", help="a JVM per invocation, as bin/kafka-*.sh does"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from bench import java

    if shutil.which("java") is None:
        print("java is needed to run Kafka's tools", file=sys.stderr)
        return 2
    java.ensure_jars()
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="kemu-kafka-tools-"))
    checks = tuple(c for c in CHECKS if args.match in c.name)
    names = [args.only] if args.only else ["kafka", "kemu"]
    lock = threading.Lock()
    classes = None if args.fork else log_dir / "classes"
    if classes is not None:
        compile_runner(classes)

    def report(server: str, result: Result) -> None:
        with lock:
            verdict = "PASS" if result.passed else "FAIL"
            print(f"{server:5} {verdict} {result.check.name} ({result.seconds:.1f}s)", flush=True)

    outcomes: dict[str, list[Result]] = {}

    def run(name: str) -> None:
        workdir = log_dir / name
        workdir.mkdir(parents=True, exist_ok=True)
        target: Target = KafkaTarget(workdir) if name == "kafka" else KemuTarget(workdir)
        target.start()
        runner = Runner(workdir, classes)
        try:
            outcomes[name] = run_checks(target, runner, checks, report)
        finally:
            runner.close()
            target.stop()

    threads = [threading.Thread(target=run, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
        if args.serial:
            thread.join()
    for thread in threads:
        thread.join()
    print(summary(outcomes, checks))
    print(f"outputs and server logs: {log_dir}")
    kafka = outcomes.get("kafka")
    kemu = outcomes.get("kemu")
    if kemu is None:
        return 1 if kafka is None or not all(r.passed for r in kafka) else 0
    if kafka is None:
        return 0 if all(r.passed for r in kemu) else 1
    regressions = [a for a, b in zip(kemu, kafka, strict=True) if b.passed and not a.passed]
    return 1 if regressions else 0


def summary(outcomes: dict[str, list[Result]], checks: tuple[Check, ...]) -> str:
    lines = []
    for name, results in outcomes.items():
        passed = sum(r.passed for r in results)
        lines.append(f"{name}: {passed}/{len(checks)} checks pass")
    kafka, kemu = outcomes.get("kafka"), outcomes.get("kemu")
    if kafka and kemu:
        differ = [
            f"  {a.check.name}: kafka {'PASS' if b.passed else 'FAIL'}, "
            f"kemu {'PASS' if a.passed else 'FAIL'}"
            for a, b in zip(kemu, kafka, strict=True)
            if a.passed != b.passed
        ]
        if differ:
            lines.append("differences:")
            lines.extend(differ)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
