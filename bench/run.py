"""``python -m bench.run``: kemu vs Apache Kafka, same workload, side by side.

Prints a table (records/s and MB/s for produce and consume, start-to-ready, RSS after the run,
kemu/Kafka ratios) and appends it to docs/benchmarks.md with the command, the date and the
machine. ``--only kemu --no-write --profile DIR`` is the loop for tuning kemu.
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
from bench.report import Run
from bench.servers import Server, kemu_version, make_server
from bench.workload import Runner, ToolFailed, Workload


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
    parser.add_argument("--no-write", action="store_true", help="do not touch docs/benchmarks.md")
    parser.add_argument(
        "--profile", type=Path, default=None, help="py-spy kemu's produce and consume into DIR"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directories")
    parser.add_argument("--note", default=None, help="a sentence to add to the docs entry")
    return parser


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
    run = Run()
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
            cpu = server.cpu_seconds()
            with _phase(args, server, "produce", number):
                run.produce = runner.produce()
            run.produce_cpu_s = server.cpu_seconds() - cpu
            print(
                f"  {name}: produce {run.produce.records_per_s:,.0f} rec/s, "
                f"server CPU {run.produce_cpu_s:.1f}s",
                flush=True,
            )
            cpu = server.cpu_seconds()
            with _phase(args, server, "consume", number):
                run.consume = runner.consume()
            run.consume_cpu_s = server.cpu_seconds() - cpu
            print(
                f"  {name}: consume {run.consume.records_per_s:,.0f} rec/s, "
                f"server CPU {run.consume_cpu_s:.1f}s",
                flush=True,
            )
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


def _remove(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.consumer == "console" and args.partitions != 1:
        parser.error("--consumer console reads one assigned partition: use --partitions 1")
    workload = Workload(
        records=args.records,
        record_size=args.record_size,
        partitions=args.partitions,
        consumer=args.consumer,
        producer_props=tuple(args.producer_prop),
    )
    servers = _servers(args)
    java.ensure_jars()  # the tools are Kafka's even when only kemu runs
    load_before = report.machine_facts()["load"]
    results: dict[str, list[Run]] = {name: [] for name in servers}
    for number in range(1, args.repeat + 1):
        for name in servers:
            print(f"[{number}/{args.repeat}] {name}", flush=True)
            results[name].append(run_once(args, name, workload, number))
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
        )
        print(f"\nwritten to {written}")
    failed = any(run.errors for runs in results.values() for run in runs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
