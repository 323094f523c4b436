"""The side-by-side table and the docs/benchmarks.md entry."""

from __future__ import annotations

import datetime
import functools
import os
import platform
import statistics
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.workload import Rate, Workload

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"

DOC_HEADER = """# Benchmarks: kemu vs Apache Kafka

`make bench` starts a real single-node KRaft Apache Kafka (the jars Maven fetches into
`bench/.cache/lib`, run with the heap `bin/kafka-server-start.sh` gives it) and then
`kemu serve --brokers 1`, both writing to a fresh temporary directory, and gives each the same
workload with Apache Kafka's own tools: create a topic, `ProducerPerformance` (`acks=all`,
unthrottled) then `ConsumerPerformance` over the same records, then `ShareConsumerPerformance`
with 1 and with 4 share consumers (threads of one JVM, each count in a fresh share group set to
`share.auto.offset.reset=earliest` with `ConfigCommand` first). Each server is started fresh for
every repetition.

- *start-to-ready*: from spawning the server process to its first ApiVersions answer (Kafka's
  storage format runs before and is not counted).
- *RSS after run*: resident memory of the server process once the consumer is done; *peak RSS*
  is its high-water mark (VmHWM).
- *server CPU s*: user + system CPU time the server process spent during the phase; less
  sensitive than the rates to other load on the machine.
- Rates are what the tools print: records/s and MB/s (MiB of record payload) over the whole run;
  the consumer's include the group join.
- Several figures are `median (min-max)` over the repetitions. The tools run on the same
  machine as the server, so they compete for its cores: compare the two columns, not the
  absolute numbers with other machines.

Entries are appended, newest last. Reproduce one with the command it shows.
"""


PHASES = ("produce", "consume", "share", "txn-share", "client-share", "tls", "first-record")
# What `make bench` runs without --phases. first-record (issue 20) is bench.first_record's table
# of its own, on servers of its own (Kafka on code defaults, kemu's two timing profiles). The
# three later phases are asked for by name: together
# they add minutes per server (a Python driver, another JVM per tool, a second produce and consume
# over SASL_SSL) to a run that must stay well under 20 minutes on a shared 2-core machine.
DEFAULT_PHASES = ("produce", "consume", "share")


@dataclass
class Run:
    start_to_ready_s: float | None = None
    produce: Rate | None = None
    consume: Rate | None = None
    produce_cpu_s: float | None = None  # server CPU time (user + system) during the phase
    consume_cpu_s: float | None = None
    # share consumers -> rate and server CPU of that ShareConsumerPerformance run
    share: dict[int, Rate] = field(default_factory=dict)
    share_cpu_s: dict[int, float] = field(default_factory=dict)
    # what was asked for: a phase's rows show up (as "failed" when nothing was measured) only
    # when some run asked for it
    phases: tuple[str, ...] = ("produce", "consume")
    share_consumers: tuple[int, ...] = ()
    # txn-share: the transactional cycle (kemu: share group + KIP-1289 with kemu.client; Kafka:
    # consumer group + sendOffsetsToTransaction with the Java client); detail has p50_ms, p99_ms
    cycle: Rate | None = None
    cycle_cpu_s: float | None = None
    # client-share: kemu.client's ShareConsumer, and Java's ShareConsumerPerformance (1 consumer)
    # on the same server for reference
    client_share: Rate | None = None
    client_share_cpu_s: float | None = None
    java_share: Rate | None = None
    # tls: the same produce and consume over a SASL_SSL (SCRAM-SHA-512) listener
    tls_produce: Rate | None = None
    tls_consume: Rate | None = None
    tls_produce_cpu_s: float | None = None
    tls_consume_cpu_s: float | None = None
    rss_mb: float | None = None
    peak_rss_mb: float | None = None
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def machine_facts() -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    try:
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        load = "unknown"
    java = subprocess.run(["java", "-version"], capture_output=True, text=True)
    java_version = (java.stderr.splitlines() or ["unknown"])[0]
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "memory": memory,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "java": java_version,
        "load": load,
    }


def _values(runs: list[Run], pick: Callable[[Run], float | None]) -> list[float]:
    return [value for value in (pick(run) for run in runs) if value is not None]


def _summary(values: list[float], digits: int) -> str:
    if not values:
        return "failed"
    middle = statistics.median(values)
    if len(values) == 1:
        return f"{middle:,.{digits}f}"
    return f"{middle:,.{digits}f} ({min(values):,.{digits}f}-{max(values):,.{digits}f})"


def _ratio(kemu: list[float], kafka: list[float]) -> str:
    if not kemu or not kafka or statistics.median(kafka) == 0:
        return "-"
    return f"{statistics.median(kemu) / statistics.median(kafka):.2f}x"


Pick = Callable[[Run], float | None]


@dataclass(frozen=True)
class RowDef:
    phase: str | None  # shown when some run asked for this phase; None: always
    label: str  # share rows: "{n}" becomes each share consumer count
    pick: Callable[[Run, int], float | None]  # (run, share consumer count)
    digits: int


def _share_rate(run: Run, consumers: int) -> float | None:
    return _records_per_s(run.share.get(consumers))


def _records_per_s(rate: Rate | None) -> float | None:
    return rate.records_per_s if rate else None


def _mb_per_s(rate: Rate | None) -> float | None:
    return rate.mb_per_s if rate else None


def _detail(rate: Rate | None, name: str) -> float | None:
    return rate.detail.get(name) if rate else None


def _quotient(top: float | None, bottom: float | None) -> float | None:
    """``top / bottom`` when both were measured (a ratio of two figures of one server)."""
    if top is None or bottom is None or bottom == 0:
        return None
    return top / bottom


def _per_record_us(cpu_s: float | None, rate: Rate | None) -> float | None:
    records = _detail(rate, "records")
    return _quotient(cpu_s, records / 1e6 if records else None)


ROWS: list[RowDef] = [
    RowDef("produce", "produce records/s", lambda r, _: _records_per_s(r.produce), 0),
    RowDef("produce", "produce MB/s", lambda r, _: _mb_per_s(r.produce), 1),
    RowDef("consume", "consume records/s", lambda r, _: _records_per_s(r.consume), 0),
    RowDef("consume", "consume MB/s", lambda r, _: _mb_per_s(r.consume), 1),
    RowDef("share", "share records/s, {n}", _share_rate, 0),
    RowDef("produce", "server CPU s, produce", lambda r, _: r.produce_cpu_s, 1),
    RowDef("consume", "server CPU s, consume", lambda r, _: r.consume_cpu_s, 1),
    RowDef("share", "server CPU s, share {n}", lambda r, n: r.share_cpu_s.get(n), 1),
    RowDef("txn-share", "txn cycle records/s", lambda r, _: _records_per_s(r.cycle), 0),
    RowDef("txn-share", "txn cycle p50 ms", lambda r, _: _detail(r.cycle, "p50_ms"), 1),
    RowDef("txn-share", "txn cycle p99 ms", lambda r, _: _detail(r.cycle, "p99_ms"), 1),
    RowDef("txn-share", "txn cycle records/txn", lambda r, _: _detail(r.cycle, "mean_batch"), 0),
    RowDef("txn-share", "server CPU s, txn cycle", lambda r, _: r.cycle_cpu_s, 1),
    RowDef(
        "txn-share",
        "server CPU us/record, txn cycle",
        lambda r, _: _per_record_us(r.cycle_cpu_s, r.cycle),
        1,
    ),
    RowDef(
        "client-share",
        "kemu.client share records/s",
        lambda r, _: _records_per_s(r.client_share),
        0,
    ),
    RowDef(
        "client-share",
        "Java share records/s, 1 consumer",
        lambda r, _: _records_per_s(r.java_share),
        0,
    ),
    RowDef(
        "client-share",
        "kemu.client/Java share rate",
        lambda r, _: _quotient(_records_per_s(r.client_share), _records_per_s(r.java_share)),
        2,
    ),
    RowDef("client-share", "server CPU s, kemu.client share", lambda r, _: r.client_share_cpu_s, 1),
    RowDef("tls", "SASL_SSL produce records/s", lambda r, _: _records_per_s(r.tls_produce), 0),
    RowDef("tls", "SASL_SSL consume records/s", lambda r, _: _records_per_s(r.tls_consume), 0),
    RowDef(
        "tls",
        "SASL_SSL/PLAINTEXT produce rate",
        lambda r, _: _quotient(_records_per_s(r.tls_produce), _records_per_s(r.produce)),
        2,
    ),
    RowDef(
        "tls",
        "SASL_SSL/PLAINTEXT consume rate",
        lambda r, _: _quotient(_records_per_s(r.tls_consume), _records_per_s(r.consume)),
        2,
    ),
    RowDef("tls", "server CPU s, PLAINTEXT produce", lambda r, _: r.produce_cpu_s, 1),
    RowDef("tls", "server CPU s, SASL_SSL produce", lambda r, _: r.tls_produce_cpu_s, 1),
    RowDef("tls", "server CPU s, PLAINTEXT consume", lambda r, _: r.consume_cpu_s, 1),
    RowDef("tls", "server CPU s, SASL_SSL consume", lambda r, _: r.tls_consume_cpu_s, 1),
    RowDef(
        "tls",
        "SASL_SSL/PLAINTEXT produce CPU",
        lambda r, _: _quotient(r.tls_produce_cpu_s, r.produce_cpu_s),
        2,
    ),
    RowDef(
        "tls",
        "SASL_SSL/PLAINTEXT consume CPU",
        lambda r, _: _quotient(r.tls_consume_cpu_s, r.consume_cpu_s),
        2,
    ),
    RowDef(None, "start-to-ready s", lambda r, _: r.start_to_ready_s, 2),
    RowDef(None, "RSS after run MiB", lambda r, _: r.rss_mb, 0),
    RowDef(None, "peak RSS MiB", lambda r, _: r.peak_rss_mb, 0),
]


def _consumers(count: int) -> str:
    return f"{count} consumer{'' if count == 1 else 's'}"


def rows(results: dict[str, list[Run]]) -> list[tuple[str, Pick, int]]:
    """The table's rows for the phases the runs asked for, share rows once per consumer count."""
    runs = [run for group in results.values() for run in group]
    asked = {phase for run in runs for phase in run.phases}
    counts = sorted({count for run in runs for count in (*run.share_consumers, *run.share)})
    chosen: list[tuple[str, Pick, int]] = []
    for row in ROWS:
        if row.phase is not None and row.phase not in asked:
            continue
        for count in counts if "{n}" in row.label else [0]:
            label = row.label.replace("{n}", _consumers(count))
            chosen.append((label, functools.partial(_pick, row, count), row.digits))
    return chosen


def _pick(row: RowDef, count: int, run: Run) -> float | None:
    return row.pick(run, count)


def table(results: dict[str, list[Run]]) -> str:
    """A Markdown table, one column per server (and a ratio when both ran)."""
    servers = [name for name in ("kafka", "kemu") if name in results]
    both = len(servers) == 2
    header = ["", *servers] + (["kemu/kafka"] if both else [])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label, pick, digits in rows(results):
        cells = [label]
        columns = {name: _values(results[name], pick) for name in servers}
        cells += [_summary(columns[name], digits) for name in servers]
        if both:
            cells.append(_ratio(columns["kemu"], columns["kafka"]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# The issues' targets, as kemu/Kafka ratios of medians: (row label, at least?, bound).
TARGETS: list[tuple[str, bool, float]] = [
    ("produce records/s", True, 1.0),
    ("consume records/s", True, 1.0),
    ("start-to-ready s", False, 0.1),
    ("RSS after run MiB", False, 0.1),
    # issue 9: kemu's share cycle at least as fast as Kafka's consumer-group EOS cycle
    ("txn cycle records/s", True, 1.0),
]
SHARE_TARGET = 2.0  # issue 3: at least twice Kafka's share-consume rate, whatever the count
# Targets on one server's own figure: (row label, server, at least?, bound). Issue 9: kemu.client
# within 2x of Java's ShareConsumerPerformance on kemu.
SERVER_TARGETS: list[tuple[str, str, bool, float]] = [
    ("kemu.client/Java share rate", "kemu", True, 0.5),
]


def targets(results: dict[str, list[Run]]) -> list[str]:
    """One line per target whose row is in the table: the measured ratio and whether it is met."""
    picks = {label: pick for label, pick, _ in rows(results)}
    lines = _server_targets(results, picks)
    if "kemu" not in results or "kafka" not in results:
        return lines
    wanted = [goal for goal in TARGETS if goal[0] in picks]
    wanted += [(label, True, SHARE_TARGET) for label in picks if label.startswith("share rec")]
    for label, at_least, bound in wanted:
        kemu = _values(results["kemu"], picks[label])
        kafka = _values(results["kafka"], picks[label])
        if not kemu or not kafka or statistics.median(kafka) == 0:
            lines.append(f"{label}: not measured")
            continue
        ratio = statistics.median(kemu) / statistics.median(kafka)
        met = ratio >= bound if at_least else ratio <= bound
        bound_text = f"{'>=' if at_least else '<='} {bound:g}x"
        lines.append(
            f"{label}: kemu/kafka {ratio:.2f}x, target {bound_text}: {'met' if met else 'NOT met'}"
        )
    return lines


def _server_targets(results: dict[str, list[Run]], picks: dict[str, Pick]) -> list[str]:
    lines: list[str] = []
    for label, server, at_least, bound in SERVER_TARGETS:
        if label not in picks or server not in results:
            continue
        values = _values(results[server], picks[label])
        if not values:
            lines.append(f"{label} ({server}): not measured")
            continue
        value = statistics.median(values)
        met = value >= bound if at_least else value <= bound
        lines.append(
            f"{label} ({server}): {value:.2f}, target {'>=' if at_least else '<='} {bound:g}: "
            f"{'met' if met else 'NOT met'}"
        )
    return lines


def problems(results: dict[str, list[Run]]) -> list[str]:
    found: list[str] = []
    for name, runs in results.items():
        for number, run in enumerate(runs, 1):
            found += [f"{name} run {number}: {text}" for text in run.errors]
            for note in run.notes:
                line = f"{name}: {note}"
                if line not in found:
                    found.append(line)
    return found


def write_doc(
    results: dict[str, list[Run]],
    *,
    command: str,
    workload: Workload,
    versions: dict[str, str],
    repeat: int,
    load_before: str,
    note: str | None = None,
    extra: list[str] | None = None,
) -> Path:
    """Append an entry; ``extra`` (Markdown lines) goes after the table and its note."""
    facts = machine_facts()
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    consumer = (
        "ConsumerPerformance"
        if workload.consumer == "perf"
        else "ConsoleConsumer (assigned partition 0, timed from JVM start)"
    )
    asked = {phase for runs in results.values() for run in runs for phase in run.phases}
    if "consume" not in asked:
        consumer = "none"
    share = (
        f"; share: ShareConsumerPerformance, {workload.share_target:,} records per run with "
        + " and ".join(str(count) for count in workload.share_consumers)
        + " consumer(s)"
        if "share" in asked
        else ""
    )
    share += _later_phases(asked, workload)
    lines = [
        "",
        f"## {now}",
        "",
        f"Command: `{command}`",
        "",
        f"- Machine: {facts['nproc']} CPUs ({facts['cpu']}), {facts['memory']}, {facts['os']}; "
        f"load average {load_before} before the run, {facts['load']} after",
        f"- Versions: Apache Kafka {versions.get('kafka', '-')}, kemu {versions.get('kemu', '-')}, "
        f"Python {facts['python']}, {facts['java']}",
        f"- Workload: {workload.records:,} records of {workload.record_size} bytes, "
        f"{workload.partitions} partition(s), acks=all"
        + (f" {' '.join(workload.producer_props)}" if workload.producer_props else "")
        + f"; consumer: {consumer}{share}; {repeat} repetition(s)",
        "",
        table(results),
    ]
    if note:
        lines += ["", note]
    if extra:
        lines += ["", *extra]
    goals = targets(results)
    if goals:
        lines += ["", "Targets:", "", *[f"- {goal}" for goal in goals]]
    notes = problems(results)
    if notes:
        lines += ["", "Notes:", "", *[f"- {note}" for note in notes]]
    return append_entry(lines)


def _later_phases(asked: set[str], workload: Workload) -> str:
    """The Workload line's words for the txn-share, client-share and tls phases."""
    parts = []
    if "txn-share" in asked:
        parts.append(
            f"txn cycle: {workload.cycle_target:,} records in transactions of "
            f"{workload.cycle_batch} (kemu: kemu.client share group, record_limit polls, "
            "KIP-1289 TxnShareAcknowledge; Kafka: Java consumer group, polls queued to the "
            "batch, sendOffsetsToTransaction, bench/java/EosCycle.java)"
        )
    if "client-share" in asked:
        parts.append(
            f"client share: kemu.client ShareConsumer (implicit acks) over "
            f"{workload.share_target:,} records, beside ShareConsumerPerformance with 1 consumer"
        )
    if "tls" in asked:
        parts.append(
            "tls: ProducerPerformance and ConsumerPerformance again over a SASL_SSL listener "
            "(SCRAM-SHA-512, TLS with an EC P-256 certificate) into a second topic"
        )
    return "".join(f"; {part}" for part in parts)


def write_section(
    title: str, command: str, sections: list[str], *, note: str | None = None
) -> Path:
    """Append a kemu-only entry (e.g. the share window scaling) with the machine it ran on."""
    facts = machine_facts()
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "",
        f"## {now}: {title}",
        "",
        f"Command: `{command}`",
        "",
        f"- Machine: {facts['nproc']} CPUs ({facts['cpu']}), {facts['memory']}, {facts['os']}; "
        f"load average {facts['load']} after the run",
        f"- Versions: kemu {_kemu_version()}, Python {facts['python']}",
        "",
        *sections,
    ]
    if note:
        lines += ["", note]
    return append_entry(lines)


def _kemu_version() -> str:
    from bench.servers import kemu_version

    return kemu_version()


def append_entry(lines: list[str]) -> Path:
    """Append Markdown lines (an entry) to docs/benchmarks.md, made with its header if new."""
    DOC.parent.mkdir(parents=True, exist_ok=True)
    existing = DOC.read_text() if DOC.exists() else DOC_HEADER
    DOC.write_text(existing.rstrip("\n") + "\n" + "\n".join(lines) + "\n")
    return DOC
