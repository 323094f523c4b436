"""``python -m bench.run``: kemu vs Apache Kafka, same workload, side by side.

Prints a table (records/s and MB/s for produce and consume, share-group records/s with 1 and 4
share consumers, server CPU per phase, start-to-ready, RSS after the run, kemu/Kafka ratios) and
appends it to docs/benchmarks.md with the command, the date and the machine.
``--only kemu --no-write --profile DIR`` is the loop for tuning kemu; ``--phases share`` runs the
share phase alone (the records are still produced first, untimed in the table).

Phases asked for by name (not in the default list): ``txn-share``, the transactional cycle of
issue 9 (kemu: kemu.client share group + KIP-1289; Kafka: consumer group +
sendOffsetsToTransaction), ``client-share``, kemu.client's share consumption beside
ShareConsumerPerformance, ``tls``, produce and consume over SASL_SSL (issue 12), and
``first-record``, the first-record and rebalance-settle times of issue 20 (bench.first_record,
its own servers and table; ``--repeat``, ``--only``, ``--no-write`` and ``--note`` carry over).
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bench import java, report
from bench.client_phases import PhaseResult, parse_result
from bench.report import DEFAULT_PHASES, PHASES, Run
from bench.servers import Server, kemu_version, make_sasl_ssl, make_server
from bench.workload import MIB, Rate, Runner, Secured, ToolFailed, Workload, share_group_name

CYCLE_SINK = "bench-out"
CYCLE_GROUP = "bench-cycle"
CLIENT_SHARE_GROUP = "bench-client-share"
TLS_TOPIC = "bench-tls"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1, help="fresh server per repetition")
    parser.add_argument("--only", choices=("kemu", "kafka"), default=None)
    parser.add_argument("--skip-kafka", action="store_true", help="same as --only kemu")
    parser.add_argument(
        "--consumer",
        choices=("perf", "console"),
        default="perf",
        help="perf: ConsumerPerformance (needs consumer groups); console: ConsoleConsumer on an "
        "assigned partition, timed from outside",
    )
    parser.add_argument(
        "--producer-prop",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra producer property for both servers (repeatable)",
    )
    parser.add_argument(
        "--phases",
        type=_phase_list,
        default=DEFAULT_PHASES,
        metavar="LIST",
        help=f"comma-separated phases to report, of {','.join(PHASES)} "
        f"(default: {','.join(DEFAULT_PHASES)}); records are produced first whatever the list",
    )
    parser.add_argument(
        "--cycle-records",
        type=int,
        default=0,
        help="txn-share: records the cycle moves (default: all of --records)",
    )
    parser.add_argument(
        "--cycle-batch",
        type=int,
        default=500,
        help="txn-share: records per poll and so per transaction, both servers (default: 500)",
    )
    parser.add_argument(
        "--share-consumers",
        type=_count_list,
        default=(1, 4),
        metavar="LIST",
        help="comma-separated share consumer counts, one ShareConsumerPerformance run (and share "
        "group) each (default: 1,4)",
    )
    parser.add_argument(
        "--share-records",
        type=int,
        default=0,
        help="records each share run reads (default: all of --records)",
    )
    parser.add_argument(
        "--window-steps",
        type=int,
        default=500,
        help="share phase: ShareFetches per window in kemu's window scaling run "
        "(bench.share_wire); 0 skips it",
    )
    parser.add_argument("--no-write", action="store_true", help="do not touch docs/benchmarks.md")
    parser.add_argument(
        "--profile", type=Path, default=None, help="py-spy kemu's produce and consume into DIR"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directories")
    parser.add_argument("--note", default=None, help="a sentence to add to the docs entry")
    return parser


def _phase_list(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in PHASES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"phases are {', '.join(PHASES)}; got {text!r}")
    return tuple(name for name in PHASES if name in names)


def _count_list(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"positive counts separated by commas; got {text!r}")
    return counts


def _servers(args: argparse.Namespace) -> list[str]:
    if args.skip_kafka or args.only == "kemu":
        return ["kemu"]
    if args.only == "kafka":
        return ["kafka"]
    return ["kafka", "kemu"]


@contextlib.contextmanager
def _phase(args: argparse.Namespace, server: Server, name: str, number: int) -> Iterator[None]:
    if args.profile is None or server.name != "kemu":
        yield
        return
    from bench.profiling import recording

    output = args.profile / f"kemu-{name}-{number}.txt"
    with recording(server.pid, output):
        yield
    print(f"  profile: {output}", flush=True)


def run_once(args: argparse.Namespace, name: str, workload: Workload, number: int) -> Run:
    run = Run(phases=args.phases)
    if "share" in args.phases:
        run.share_consumers = workload.share_consumers
    root = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
    # KIP-1289's RPCs are served only when switched on; nothing else changes with it.
    kip1289 = ("kemu.kip1289.enable=true",) if "txn-share" in args.phases else ()
    server = make_server(name, root, workload.partitions, kemu_overrides=kip1289)
    if "tls" in args.phases:
        server.sasl_ssl = make_sasl_ssl(root / "tls")
    try:
        server.start()
        run.start_to_ready_s = server.start_to_ready_s
        ready = server.start_to_ready_s
        print(f"  {name}: ready in {ready:.2f}s on {server.bootstrap}", flush=True)
        runner = Runner(root, server.bootstrap, workload)
        problem = runner.create_topic()
        if problem:
            run.notes.append(problem)
        try:
            _produce_and_consume(args, server, runner, run, number)
            if "share" in args.phases:
                _share(args, server, runner, run, number)
            for phase, measure in (
                ("txn-share", _txn_cycle),
                ("client-share", _client_share),
                ("tls", _tls),
            ):
                if phase not in args.phases:
                    continue
                try:
                    measure(args, server, runner, run, number)
                except ToolFailed as failed:  # the next phase still runs
                    run.errors.append(str(failed))
                    print(f"  {name}: {failed}", flush=True)
        except ToolFailed as failed:
            run.errors.append(str(failed))
            print(f"  {name}: {failed}", flush=True)
        memory = server.memory()
        run.rss_mb, run.peak_rss_mb = memory.rss_mb, memory.peak_mb
    except RuntimeError as failed:
        run.errors.append(str(failed))
        print(f"  {name}: {failed}", flush=True)
    finally:
        server.stop()
        run.notes += server.notes
        if args.keep:
            print(f"  {name}: kept {root}", flush=True)
        else:
            _remove(root)
    return run


def _produce_and_consume(
    args: argparse.Namespace, server: Server, runner: Runner, run: Run, number: int
) -> None:
    name = server.name
    cpu = server.cpu_seconds()
    with _phase(args, server, "produce", number):
        produced = runner.produce()
    cpu_s = server.cpu_seconds() - cpu
    # Kept even when its rows are not shown: the tls phase divides by it.
    run.produce, run.produce_cpu_s = produced, cpu_s
    reported = "produce" in args.phases
    print(
        f"  {name}: produce {produced.records_per_s:,.0f} rec/s, server CPU {cpu_s:.1f}s"
        + ("" if reported else " (filling the topic, not reported)"),
        flush=True,
    )
    if "consume" not in args.phases and "tls" not in args.phases:
        return
    cpu = server.cpu_seconds()
    with _phase(args, server, "consume", number):
        run.consume = runner.consume()
    run.consume_cpu_s = server.cpu_seconds() - cpu
    print(
        f"  {name}: consume {run.consume.records_per_s:,.0f} rec/s, "
        f"server CPU {run.consume_cpu_s:.1f}s",
        flush=True,
    )


def _share(args: argparse.Namespace, server: Server, runner: Runner, run: Run, number: int) -> None:
    """One ShareConsumerPerformance run per consumer count, each in a share group of its own; a
    failed count is noted and the next one still runs."""
    for consumers in runner.workload.share_consumers:
        group = share_group_name(consumers)
        try:
            runner.prepare_share_group(group)
            cpu = server.cpu_seconds()
            with _phase(args, server, f"share{consumers}", number):
                rate = runner.share_consume(group, consumers)
            run.share_cpu_s[consumers] = server.cpu_seconds() - cpu
            run.share[consumers] = rate
            print(
                f"  {server.name}: share, {consumers} consumer(s): "
                f"{rate.records_per_s:,.0f} rec/s, server CPU {run.share_cpu_s[consumers]:.1f}s",
                flush=True,
            )
        except ToolFailed as failed:
            run.errors.append(str(failed))
            print(f"  {server.name}: {failed}", flush=True)


def _driver_rate(result: PhaseResult, record_size: int) -> Rate:
    """A kemu.client driver's (or EosCycle's) result as a table rate."""
    return Rate(
        result.records_per_s,
        result.records * record_size / MIB / result.elapsed_s if result.elapsed_s else 0.0,
        {
            "records": float(result.records),
            "transactions": float(result.transactions),
            "mean_batch": result.mean_batch,
            "p50_ms": result.p50_ms,
            "p99_ms": result.p99_ms,
        },
    )


def _parse(output: str, tool: str) -> PhaseResult:
    try:
        return parse_result(output)
    except (ValueError, KeyError) as error:
        raise ToolFailed(f"{tool}: {error}") from error


def _client_profile(
    args: argparse.Namespace, server: Server, what: str, number: int
) -> Path | None:
    directory: Path | None = args.profile
    if directory is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"client-{what}-{server.name}-{number}.prof"


def _txn_cycle(
    args: argparse.Namespace, server: Server, runner: Runner, run: Run, number: int
) -> None:
    """Issue 9's transactional cycle. kemu: kemu.client's ShareConsumer (explicit acks) and
    TransactionalProducer with KIP-1289 (TxnShareAcknowledge); Kafka has no KIP-1289, so the
    same cycle with a consumer group and sendOffsetsToTransaction (bench/java/EosCycle.java)."""
    w = runner.workload
    problem = runner.create_topic(CYCLE_SINK)
    if problem:
        run.notes.append(problem)
    if server.name == "kemu":
        runner.prepare_share_group(CYCLE_GROUP)
    cpu = server.cpu_seconds()
    with _phase(args, server, "txn-cycle", number):
        if server.name == "kemu":
            output = runner.python_driver(
                [
                    "cycle",
                    "--topic",
                    w.topic,
                    "--sink",
                    CYCLE_SINK,
                    "--group",
                    CYCLE_GROUP,
                    "--records",
                    str(w.cycle_target),
                    "--batch",
                    str(w.cycle_batch),
                ],
                profile=_client_profile(args, server, "cycle", number),
            )
        else:
            output, _ = runner.eos_cycle(CYCLE_GROUP, CYCLE_SINK, w.cycle_target, w.cycle_batch)
    run.cycle_cpu_s = server.cpu_seconds() - cpu
    result = _parse(output, "txn cycle")
    run.cycle = _driver_rate(result, w.record_size)
    print(
        f"  {server.name}: txn cycle {result.records_per_s:,.0f} rec/s, "
        f"p50 {result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f} ms, "
        f"{result.mean_batch:.0f} records/txn, server CPU {run.cycle_cpu_s:.1f}s",
        flush=True,
    )


def _client_share(
    args: argparse.Namespace, server: Server, runner: Runner, run: Run, number: int
) -> None:
    """kemu.client's ShareConsumer over the topic, beside ShareConsumerPerformance with one
    consumer on the same server (the share phase's run when there was one)."""
    w = runner.workload
    run.java_share = run.share.get(1)
    if run.java_share is None:
        group = share_group_name(1)
        runner.prepare_share_group(group)
        run.java_share = runner.share_consume(group, 1)
        print(
            f"  {server.name}: Java share, 1 consumer: {run.java_share.records_per_s:,.0f} rec/s",
            flush=True,
        )
    runner.prepare_share_group(CLIENT_SHARE_GROUP)
    cpu = server.cpu_seconds()
    with _phase(args, server, "client-share", number):
        output = runner.python_driver(
            [
                "share",
                "--topic",
                w.topic,
                "--group",
                CLIENT_SHARE_GROUP,
                "--records",
                str(w.share_target),
            ],
            profile=_client_profile(args, server, "share", number),
        )
    run.client_share_cpu_s = server.cpu_seconds() - cpu
    result = _parse(output, "kemu.client share")
    run.client_share = _driver_rate(result, w.record_size)
    print(
        f"  {server.name}: kemu.client share {result.records_per_s:,.0f} rec/s, "
        f"server CPU {run.client_share_cpu_s:.1f}s",
        flush=True,
    )


def _tls(args: argparse.Namespace, server: Server, runner: Runner, run: Run, number: int) -> None:
    """The produce and consume phases again, over the SASL_SSL listener, into another topic."""
    listener = server.sasl_ssl
    assert listener is not None
    config = runner.workdir / "sasl-ssl-client.properties"
    config.write_text(listener.client_properties())
    over = Secured(listener.bootstrap, config, TLS_TOPIC)
    problem = runner.create_topic(TLS_TOPIC)
    if problem:
        run.notes.append(problem)
    cpu = server.cpu_seconds()
    with _phase(args, server, "tls-produce", number):
        run.tls_produce = runner.produce(over)
    run.tls_produce_cpu_s = server.cpu_seconds() - cpu
    print(
        f"  {server.name}: SASL_SSL produce {run.tls_produce.records_per_s:,.0f} rec/s, "
        f"server CPU {run.tls_produce_cpu_s:.1f}s",
        flush=True,
    )
    cpu = server.cpu_seconds()
    with _phase(args, server, "tls-consume", number):
        run.tls_consume = runner.consume(over)
    run.tls_consume_cpu_s = server.cpu_seconds() - cpu
    print(
        f"  {server.name}: SASL_SSL consume {run.tls_consume.records_per_s:,.0f} rec/s, "
        f"server CPU {run.tls_consume_cpu_s:.1f}s",
        flush=True,
    )


def _window_scaling(args: argparse.Namespace) -> list[str]:
    """kemu's share-window scaling through the wire, as Markdown lines for the docs entry."""
    from bench.share_window import wire_legend, wire_table

    step = 100
    print("share window scaling (kemu, through the wire)", flush=True)
    try:
        text = wire_table(steps=args.window_steps, step=step, profile=args.profile)
    except (RuntimeError, OSError) as failed:
        print(f"  window scaling failed: {failed}", flush=True)
        return [f"Share window scaling failed: {failed}"]
    return [wire_legend(args.window_steps, step), "", text]


def _remove(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.share_records > args.records:
        parser.error("--share-records cannot be more than --records (each run reads the topic)")
    if args.cycle_records > args.records:
        parser.error("--cycle-records cannot be more than --records (the cycle reads the topic)")
    if args.cycle_batch < 1:
        parser.error("--cycle-batch must be at least 1")
    if args.consumer == "console" and args.partitions != 1:
        parser.error("--consumer console reads one assigned partition: use --partitions 1")
    workload = Workload(
        records=args.records,
        record_size=args.record_size,
        partitions=args.partitions,
        consumer=args.consumer,
        producer_props=tuple(args.producer_prop),
        share_consumers=args.share_consumers,
        share_records=args.share_records,
        cycle_records=args.cycle_records,
        cycle_batch=args.cycle_batch,
    )
    status = 0
    if "first-record" in args.phases:
        status = _first_record(args, argv)
        args.phases = tuple(phase for phase in args.phases if phase != "first-record")
        if not args.phases:
            return status
    servers = _servers(args)
    java.ensure_jars()  # the tools are Kafka's even when only kemu runs
    load_before = report.machine_facts()["load"]
    results: dict[str, list[Run]] = {name: [] for name in servers}
    for number in range(1, args.repeat + 1):
        for name in servers:
            print(f"[{number}/{args.repeat}] {name}", flush=True)
            results[name].append(run_once(args, name, workload, number))
    extra: list[str] = []
    if "share" in args.phases and "kemu" in servers and args.window_steps > 0:
        extra = _window_scaling(args)
    print()
    print(report.table(results))
    for goal in report.targets(results):
        print(f"target {goal}")
    for problem in report.problems(results):
        print(f"- {problem}")
    if not args.no_write:
        versions = {"kafka": java.KAFKA_VERSION, "kemu": kemu_version()}
        given = argv if argv is not None else sys.argv[1:]
        command = f'make bench ARGS="{shlex.join(given)}"' if given else "make bench"
        written = report.write_doc(
            results,
            command=command,
            workload=workload,
            versions=versions,
            repeat=args.repeat,
            load_before=load_before,
            note=args.note,
            extra=extra,
        )
        print(f"\nwritten to {written}")
    failed = any(run.errors for runs in results.values() for run in runs)
    return 1 if failed or status else 0


def first_record_argv(args: argparse.Namespace) -> list[str]:
    """``bench.first_record``'s arguments for this run's --repeat, --only, --no-write, --note."""
    argv = ["--repeat", str(args.repeat)]
    servers = _servers(args)
    if servers == ["kemu"]:
        argv += ["--servers", "kemu-kafka,kemu-fast"]
    elif servers == ["kafka"]:
        argv += ["--servers", "kafka"]
    if args.no_write:
        argv.append("--no-write")
    if args.note:
        argv += ["--note", args.note]
    return argv


def _first_record(args: argparse.Namespace, argv: list[str] | None) -> int:
    from bench import first_record

    given = argv if argv is not None else sys.argv[1:]
    return first_record.main(
        first_record_argv(args), command=f'make bench ARGS="{shlex.join(given)}"'
    )


if __name__ == "__main__":
    sys.exit(main())
