"""``python -m bench.first_record`` (``make bench-first-record``; ``make bench ARGS="--phases
first-record"``): what a user's test waits for on protocol timers, side by side on a real Apache
Kafka 4.4.0 on its code defaults, kemu ``--timing kafka`` and kemu ``--timing fast``.

With real clients (Java kafka-clients/kafka-streams 4.4.0: tests/java's ``FirstRecordBench``;
confluent-kafka: ``bench.first_record_client``), each timing inside its own process:

- *first record*: from subscribe to the first record already in the topic;
- *join*: from a second member's subscribe, records flowing, until it reads its first record;
- *leave*: from that member's close until the first member reads its partitions again;
- *txn*: from a new transactional producer to a read_committed consumer having the record;
- *new topic* (a KIP-848 regex subscription): from creating a topic the regex matches, after
  the member's first record, until the member reads the record written to it.

The three servers run at once (idle but for the row being measured) so that each row's three
figures are taken next to each other in time, whatever else loads the machine; a warm-up run of
the Java consumer, share and transactional rows first creates Kafka's internal topics. The
medians go into a table with the kemu/Kafka ratios, appended to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bench import java, report
from bench.servers import (
    KafkaServer,
    KemuServer,
    Server,
    has_timing_flag,
    kemu_executable,
    kemu_version,
)

ROOT = Path(__file__).resolve().parent.parent
PROBES = ROOT / "tests" / "java" / "target"
SERVERS = ("kafka", "kemu-kafka", "kemu-fast")
SERVER_TITLES = {
    "kafka": "Kafka 4.4.0",
    "kemu-kafka": "kemu `--timing kafka`",
    "kemu-fast": "kemu `--timing fast`",
}
# The kemu columns' titles when kemu serve has no --timing yet (bench/servers.py timing_arguments)
TITLES_WITHOUT_FLAG = {
    **SERVER_TITLES,
    "kemu-kafka": "kemu + Kafka's code timers",
    "kemu-fast": "kemu defaults (no `--timing`)",
}
PARTITIONS = 2
# Each wait's bound in the clients, and the whole client process's.
WAIT_S = 60.0
PROCESS_S = 240.0
# The goal of issue 20 for --timing fast: every figure at most this long ...
FAST_BOUND_S = 0.5
# ... and at most this fraction of Kafka's.
FAST_RATIO = 0.1


@dataclass(frozen=True)
class Row:
    kind: str  # classic, consumer, share, streams, regex, txn
    client: str  # java, confluent

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.client}"

    @property
    def measures(self) -> tuple[str, ...]:
        if self.kind == "regex":
            return ("first_record", "new_topic")
        return ("first_record",) if self.kind == "txn" else ("first_record", "join", "leave")

    @property
    def steady_ms(self) -> int:
        """How long both members consume before one leaves. A share group has no revocation
        step, so the first member may still hold the second's partitions until its next
        heartbeat after the join: 6 s is past Kafka's 5 s share heartbeat interval."""
        return 6000 if self.kind == "share" else 1000


ROWS = (
    Row("classic", "java"),
    Row("classic", "confluent"),
    Row("consumer", "java"),
    Row("consumer", "confluent"),
    Row("regex", "confluent"),
    Row("share", "java"),
    Row("share", "confluent"),
    Row("streams", "java"),
    Row("txn", "java"),
    Row("txn", "confluent"),
)
KIND_TITLES = {
    "classic": "classic consumer group",
    "consumer": "KIP-848 consumer group",
    "regex": "KIP-848 regex subscription",
    "share": "share group",
    "streams": "streams group (Kafka Streams)",
    "txn": "transactional produce -> read_committed",
}
MEASURE_TITLES = {
    "first_record": "first record",
    "join": "join settles",
    "leave": "leave settles",
    "new_topic": "topic created after",
}
WARM_UP = (Row("consumer", "java"), Row("share", "java"), Row("txn", "java"))

# (server, row name, measure) -> seconds, one per repetition
Figures = dict[tuple[str, str, str], list[float]]


@dataclass
class Outcome:
    figures: Figures = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def add(self, server: str, row: Row, measured: dict[str, float]) -> None:
        for measure, seconds in measured.items():
            self.figures.setdefault((server, row.name, measure), []).append(seconds)


def parse_output(output: str) -> tuple[dict[str, float], str | None]:
    """A client's JSON lines as {measure: seconds}, and its error line's text (if any)."""
    measured: dict[str, float] = {}
    error: str | None = None
    for line in output.splitlines():
        if not line.startswith("{"):
            continue
        try:
            fields = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "error" in fields:
            error = (
                json.dumps(fields["error"])
                if not isinstance(fields["error"], str)
                else fields["error"]
            )
        elif "measure" in fields and "us" in fields:
            measured[str(fields["measure"])] = int(fields["us"]) / 1e6
    return measured, error


def client_command(
    row: Row, bootstrap: str, name: str, *, only_first: bool = False, client_config: str = ""
) -> list[str]:
    common = [
        "--bootstrap", bootstrap, "--kind", row.kind, "--topic", name, "--group", name,
        "--partitions", str(PARTITIONS), "--steady-ms", str(row.steady_ms),
    ]  # fmt: skip
    if client_config:
        common += ["--client-config", client_config]
    if row.client == "java":
        classpath = f"{PROBES / 'classes'}{os.pathsep}{PROBES / 'lib' / '*'}"
        extra = ["--timeout-ms", str(int(WAIT_S * 1000))]
        if only_first:
            extra += ["--only-first", "true"]
        return ["java", "-cp", classpath, "kemu.probe.FirstRecordBench", *common, *extra]
    extra = ["--timeout", str(WAIT_S)] + (["--only-first"] if only_first else [])
    return [sys.executable, "-m", "bench.first_record_client", *common, *extra]


def run_client(
    row: Row,
    bootstrap: str,
    name: str,
    log: Path,
    *,
    only_first: bool = False,
    client_config: str = "",
) -> tuple[dict[str, float], str | None]:
    command = client_command(
        row, bootstrap, name, only_first=only_first, client_config=client_config
    )
    with log.open("w") as err:
        try:
            done = subprocess.run(
                command, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT, timeout=PROCESS_S
            )
        except subprocess.TimeoutExpired:
            return {}, f"no answer in {PROCESS_S:.0f} s (stderr: {log})"
    measured, error = parse_output(done.stdout)
    if error is None and done.returncode != 0:
        error = f"exit code {done.returncode} (stderr: {log})"
    missing = [m for m in row.measures if m not in measured]
    if error is None and missing and not only_first:
        error = f"no figure for {', '.join(missing)} (stderr: {log})"
    return measured, error


# ---- the table


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def cell(values: list[float]) -> str:
    """``median (min-max)`` in seconds, or ``failed``."""
    if not values:
        return "failed"
    middle = statistics.median(values)
    if len(values) == 1:
        return f"{middle:.2f}"
    return f"{middle:.2f} ({min(values):.2f}-{max(values):.2f})"


def ratio(kemu: list[float], kafka: list[float]) -> float | None:
    top, bottom = median(kemu), median(kafka)
    if top is None or bottom is None or bottom <= 0:
        return None
    return top / bottom


def fast_goal(fast: list[float], kafka: list[float]) -> str:
    """Issue 20's goal for a --timing fast figure: <= 0.5 s and <= 0.1x Kafka's."""
    value = median(fast)
    if value is None:
        return "not measured"
    misses = []
    if value > FAST_BOUND_S:
        misses.append(f"> {FAST_BOUND_S:g} s")
    share = ratio(fast, kafka)
    if share is not None and share > FAST_RATIO:
        misses.append(f"> {FAST_RATIO:g}x Kafka")
    return "met" if not misses else "NOT met (" + ", ".join(misses) + ")"


def _ratio_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def server_titles() -> dict[str, str]:
    flag = has_timing_flag(tuple(kemu_executable()))
    return SERVER_TITLES if flag else TITLES_WITHOUT_FLAG


def table(
    outcome: Outcome,
    rows: tuple[Row, ...],
    servers: tuple[str, ...],
    titles: dict[str, str] = SERVER_TITLES,
) -> str:
    figures = outcome.figures
    header = ["group type", "client", "measure"]
    for server in servers:
        header.append(titles[server] + " s")
        if server != "kafka" and "kafka" in servers:
            header.append("/Kafka")
    if "kemu-fast" in servers:
        header.append("goal (fast)")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        for measure in row.measures:
            kafka = figures.get(("kafka", row.name, measure), [])
            title = "round trip" if row.kind == "txn" else MEASURE_TITLES[measure]
            cells = [KIND_TITLES[row.kind], _client_title(row.client), title]
            for server in servers:
                values = figures.get((server, row.name, measure), [])
                cells.append(cell(values))
                if server != "kafka" and "kafka" in servers:
                    cells.append(_ratio_text(ratio(values, kafka)))
            if "kemu-fast" in servers:
                cells.append(fast_goal(figures.get(("kemu-fast", row.name, measure), []), kafka))
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _client_title(client: str) -> str:
    if client == "java":
        return f"Java {java.KAFKA_VERSION}"
    from importlib.metadata import version

    return f"confluent-kafka {version('confluent-kafka')}"


def misses(outcome: Outcome, rows: tuple[Row, ...]) -> list[str]:
    """The --timing fast figures that miss the goal, one line each."""
    found = []
    for row in rows:
        for measure in row.measures:
            fast = outcome.figures.get(("kemu-fast", row.name, measure), [])
            kafka = outcome.figures.get(("kafka", row.name, measure), [])
            verdict = fast_goal(fast, kafka)
            if verdict != "met":
                found.append(f"{row.name} {measure}: {verdict}")
    return found


# ---- running


def make_servers(
    root: Path, servers: tuple[str, ...], kemu_overrides: tuple[str, ...] = ()
) -> dict[str, Server]:
    made: dict[str, Server] = {}
    for name in servers:
        workdir = root / name
        workdir.mkdir(parents=True)
        if name == "kafka":
            made[name] = KafkaServer(
                workdir, PARTITIONS, code_defaults=True, features=("streams.version=1",)
            )
        else:
            made[name] = KemuServer(
                workdir, PARTITIONS, kemu_overrides, timing=name.removeprefix("kemu-")
            )
    return made


def measure(
    servers: dict[str, Server],
    rows: tuple[Row, ...],
    repeat: int,
    logs: Path,
    client_config: str = "",
) -> Outcome:
    outcome = Outcome()
    for server_name, server in servers.items():
        for row in WARM_UP:
            name = f"warm-up-{row.name}"
            _, error = run_client(
                row, server.bootstrap, name, logs / f"{server_name}-{name}.log", only_first=True
            )
            if error:
                outcome.errors.append(f"{server_name} warm-up {row.name}: {error}")
    for number in range(1, repeat + 1):
        for row in rows:
            for server_name, server in servers.items():
                name = f"fr-{number}-{row.name}"
                log = logs / f"{server_name}-{name}.log"
                measured, error = run_client(
                    row, server.bootstrap, name, log, client_config=client_config
                )
                outcome.add(server_name, row, measured)
                shown = ", ".join(f"{m} {s:.2f}s" for m, s in measured.items())
                print(f"[{number}/{repeat}] {server_name:10} {row.name:18} {shown}", flush=True)
                if error:
                    outcome.errors.append(f"{server_name} run {number} {row.name}: {error}")
                    print(f"  {error}", flush=True)
    return outcome


def _rows(text: str) -> tuple[Row, ...]:
    names = {name.strip() for name in text.split(",") if name.strip()}
    unknown = names - {row.name for row in ROWS} - {row.kind for row in ROWS}
    if unknown or not names:
        choices = ", ".join(row.name for row in ROWS)
        raise argparse.ArgumentTypeError(f"rows (or kinds) of {choices}; got {text!r}")
    return tuple(row for row in ROWS if row.name in names or row.kind in names)


def _servers(text: str) -> tuple[str, ...]:
    names = {name.strip() for name in text.split(",") if name.strip()}
    if not names or names - set(SERVERS):
        raise argparse.ArgumentTypeError(f"servers of {', '.join(SERVERS)}; got {text!r}")
    return tuple(name for name in SERVERS if name in names)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.first_record", description=__doc__)
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of every row")
    parser.add_argument(
        "--rows",
        type=_rows,
        default=ROWS,
        metavar="LIST",
        help="rows (kind-client) or kinds, comma-separated (default: all)",
    )
    parser.add_argument(
        "--servers",
        type=_servers,
        default=SERVERS,
        metavar="LIST",
        help=f"of {','.join(SERVERS)} (default: all)",
    )
    parser.add_argument(
        "--client-config",
        default="",
        metavar="KEY=VALUE,...",
        help="client configs set on every group member (e.g. heartbeat.interval.ms=100)",
    )
    parser.add_argument(
        "--kemu-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker property for both kemu servers, over their profile (repeatable; e.g. "
        "group.consumer.heartbeat.interval.ms=50 to try a timer)",
    )
    parser.add_argument("--no-write", action="store_true", help="do not touch docs/benchmarks.md")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--note", default=None, help="a sentence to add to the docs entry")
    return parser


def main(argv: list[str] | None = None, *, command: str | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.repeat < 1:
        _parser().error("--repeat must be at least 1")
    built = (PROBES / "classes" / "kemu" / "probe" / "FirstRecordBench.class").exists()
    if not built and any(row.client == "java" for row in args.rows):
        print("tests/java is not built: run `make java` first", file=sys.stderr)
        return 2
    if "kafka" in args.servers:
        java.ensure_jars()
    load_before = report.machine_facts()["load"]
    started = datetime.datetime.now(datetime.UTC)
    root = Path(tempfile.mkdtemp(prefix="bench-first-record-"))
    logs = root / "logs"
    logs.mkdir()
    servers = make_servers(root, args.servers, tuple(args.kemu_override))
    outcome = Outcome()
    try:
        for name, server in servers.items():
            server.start()
            print(f"{name}: ready in {server.start_to_ready_s:.2f}s on {server.bootstrap}")
        outcome = measure(servers, args.rows, args.repeat, logs, args.client_config)
    except RuntimeError as failed:
        outcome.errors.append(str(failed))
        print(failed, flush=True)
    finally:
        for server in servers.values():
            server.stop()
    text = table(outcome, args.rows, args.servers, server_titles())
    print()
    print(text)
    for line in misses(outcome, args.rows) if "kemu-fast" in args.servers else []:
        print(f"goal missed: {line}")
    for error in outcome.errors:
        print(f"- {error}")
    if not args.no_write:
        given = argv if argv is not None else sys.argv[1:]
        if command is None:
            command = "make bench-first-record" + (f' ARGS="{shlex.join(given)}"' if given else "")
        written = write_doc(outcome, args, command=command, started=started, load=load_before)
        print(f"\nwritten to {written}")
    if args.keep:
        print(f"kept {root}")
    else:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    return 1 if outcome.errors else 0


def write_doc(
    outcome: Outcome,
    args: argparse.Namespace,
    *,
    command: str,
    started: datetime.datetime,
    load: str,
) -> Path:
    facts = report.machine_facts()
    timing = (
        "kemu's `--timing` flag"
        if has_timing_flag(tuple(kemu_executable()))
        else "kemu without a `--timing` flag: `fast` ran on `kemu serve`'s defaults, `kafka` on "
        "`--override`s of Kafka's code timers (bench/servers.py KAFKA_CODE_TIMERS)"
    )
    lines = [
        "",
        f"## {started.strftime('%Y-%m-%d %H:%M UTC')}: first record and rebalance settle times",
        "",
        f"Command: `{command}`",
        "",
        f"- Machine: {facts['nproc']} CPUs ({facts['cpu']}), {facts['memory']}, {facts['os']}; "
        f"load average {load} before the run, {facts['load']} after",
        f"- Versions: Apache Kafka {java.KAFKA_VERSION} (code defaults: no server.properties "
        f"timers, so group.initial.rebalance.delay.ms=3000), kemu {kemu_version()} ({timing}), "
        f"Python {facts['python']}, {facts['java']}",
        f"- {args.repeat} repetition(s) per row; each cell is `median (min-max)` in seconds, "
        "measured inside the client process; topics of 2 partitions, fresh topic and group per "
        "run; a share group's `share.auto.offset.reset=earliest` is set before it subscribes"
        + (
            f"; every group member's client sets `{args.client_config}`"
            if args.client_config
            else ""
        )
        + (
            "; kemu ran with "
            + ", ".join(f"`--override {override}`" for override in args.kemu_override)
            if args.kemu_override
            else ""
        ),
        "",
        table(outcome, args.rows, args.servers, server_titles()),
    ]
    if args.note:
        lines += ["", args.note]
    found = misses(outcome, args.rows) if "kemu-fast" in args.servers else []
    if found:
        lines += ["", "Goal (`--timing fast` <= 0.5 s and <= 0.1x Kafka) missed by:", ""]
        lines += [f"- {line}" for line in found]
    if outcome.errors:
        lines += ["", "Errors:", "", *[f"- {error}" for error in outcome.errors]]
    return report.append_entry(lines)


if __name__ == "__main__":
    sys.exit(main())
