"""``python -m bench.run``: kemu vs Apache Kafka, same workload, side by side.

Prints a table (records/s and MB/s for produce and consume, share-group records/s with 1 and 4
share consumers, server CPU per phase, start-to-ready, RSS after the run, kemu/Kafka ratios) and
appends it to docs/benchmarks.md with the command, the date and the machine.
``--only kemu --no-write --profile DIR`` is the loop for tuning kemu; ``--phases share`` runs the
share phase alone (the records are still produced first, untimed in the table).
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
from bench.report import PHASES, Run
from bench.servers import Server, kemu_version, make_server
from bench.workload import Runner, ToolFailed, Workload, share_group_name


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
        default=PHASES,
        metavar="LIST",
        help="comma-separated phases to report, in order: produce,consume,share (default: all); "
        "records are produced first whatever the list",
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
    server = make_server(name, root, workload.partitions)
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
    reported = "produce" in args.phases
    if reported:
        run.produce, run.produce_cpu_s = produced, cpu_s
    print(
        f"  {name}: produce {produced.records_per_s:,.0f} rec/s, server CPU {cpu_s:.1f}s"
        + ("" if reported else " (filling the topic, not reported)"),
        flush=True,
    )
    if "consume" not in args.phases:
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
    )
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
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
