"""``python -m bench.client_phases``: the two kemu.client workloads of ``make bench``, each run
as a process of its own (as the Java tools are), printing one ``RESULT {json}`` line.

- ``cycle``: the transactional share cycle of KIP-1289 (issue 9): poll a batch from a share
  group (explicit acknowledgement), produce each record transformed to the sink topic, hand the
  batch's ACCEPTs to the transaction (``send_share_acknowledgements_to_transaction``), commit.
  The Java side of the comparison is ``bench/java/EosCycle.java`` (a consumer group and
  ``sendOffsetsToTransaction`` against Apache Kafka), which prints the same line.
- ``share``: plain share consumption (implicit acknowledgement) of ``--records`` records, timed
  like ShareConsumerPerformance: from before the join to the last record.

A cycle's latency runs from the moment its poll returned records to the end of its commit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

RESULT_PREFIX = "RESULT "


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in 0..1] of ``values``: the smallest value with at
    least that fraction of the values at or below it; what HdrHistogram-style reports print."""
    if not values:
        raise ValueError("no values")
    if not 0 < fraction <= 1:
        raise ValueError("fraction is in (0, 1]")
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class PhaseResult:
    """What a driver reports: records handled, transactions (0 without), seconds, latencies."""

    records: int
    transactions: int
    elapsed_s: float
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    client_cpu_s: float = 0.0  # CPU time (user + system) of the driving process, when known

    @property
    def records_per_s(self) -> float:
        return self.records / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def mean_batch(self) -> float:
        return self.records / self.transactions if self.transactions else 0.0

    def line(self) -> str:
        return RESULT_PREFIX + json.dumps(asdict(self), sort_keys=True)


def parse_result(output: str) -> PhaseResult:
    """The last ``RESULT {json}`` line of a driver's output (Python or Java)."""
    lines = [line for line in output.splitlines() if line.startswith(RESULT_PREFIX)]
    if not lines:
        raise ValueError("no RESULT line in the output")
    fields = json.loads(lines[-1][len(RESULT_PREFIX) :])
    return PhaseResult(
        records=int(fields["records"]),
        transactions=int(fields["transactions"]),
        elapsed_s=float(fields["elapsed_s"]),
        p50_ms=float(fields.get("p50_ms", 0.0)),
        p99_ms=float(fields.get("p99_ms", 0.0)),
        client_cpu_s=float(fields.get("client_cpu_s", 0.0)),
    )


def lower_ascii(value: bytes | None) -> bytes:
    """The cycle's transform (EosCycle.java does the same): ProducerPerformance's payload is
    upper-case letters, written back lower-cased."""
    return (value or b"").lower()


async def share_cycle(
    bootstrap: str,
    source: str,
    sink: str,
    group: str,
    records: int,
    batch: int,
    timeout_s: float,
) -> PhaseResult:
    from kemu.client import AcknowledgeType, ShareConsumer, TransactionalProducer

    consumer = ShareConsumer(
        bootstrap,
        group,
        acknowledgement_mode="explicit",
        max_poll_records=batch,
        client_id="bench-cycle",
        # Exactly ``batch`` records per poll, as the Java consumer group's max.poll.records
        # gives; batch_optimized would hand out the rest of a log batch as a small next poll.
        acquire_mode="record_limit",
    )
    producer = TransactionalProducer(bootstrap, f"{group}-cycle", client_id="bench-cycle")
    latencies: list[float] = []
    done = 0
    cpu = time.process_time()
    started = time.perf_counter()
    deadline = started + timeout_s
    try:
        await consumer.subscribe([source])
        await producer.init_transactions()
        while done < records and time.perf_counter() < deadline:
            polled = await consumer.poll(timeout=1.0)
            if not polled:
                continue
            cycle_start = time.perf_counter()
            producer.begin_transaction()
            await producer.send_many(sink, [(r.key, lower_ascii(r.value)) for r in polled])
            for record in polled:
                consumer.acknowledge(record, AcknowledgeType.ACCEPT)
            await producer.send_share_acknowledgements_to_transaction(
                consumer.acknowledgements_for_transaction(), consumer.share_group_metadata()
            )
            await producer.commit_transaction()
            latencies.append((time.perf_counter() - cycle_start) * 1000)
            done += len(polled)
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu
    finally:
        await consumer.close()
        await producer.close()
    return PhaseResult(
        records=done,
        transactions=len(latencies),
        elapsed_s=elapsed,
        p50_ms=percentile(latencies, 0.5) if latencies else 0.0,
        p99_ms=percentile(latencies, 0.99) if latencies else 0.0,
        client_cpu_s=cpu,
    )


async def share_consume(
    bootstrap: str, topic: str, group: str, records: int, timeout_s: float
) -> PhaseResult:
    from kemu.client import ShareConsumer

    consumer = ShareConsumer(bootstrap, group, client_id="bench-share")
    done = 0
    cpu = time.process_time()
    started = time.perf_counter()
    deadline = started + timeout_s
    try:
        await consumer.subscribe([topic])
        while done < records and time.perf_counter() < deadline:
            done += len(await consumer.poll(timeout=1.0))
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu
        await consumer.commit()  # the last poll's records, accepted (implicit mode)
    finally:
        await consumer.close()
    return PhaseResult(records=done, transactions=0, elapsed_s=elapsed, client_cpu_s=cpu)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.client_phases", description=__doc__)
    parser.add_argument("workload", choices=("cycle", "share"))
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", default="bench", help="the source topic")
    parser.add_argument("--sink", default="bench-out", help="cycle: the topic written to")
    parser.add_argument("--group", required=True, help="the share group")
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--batch", type=int, default=500, help="cycle: records per transaction")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before giving up")
    parser.add_argument("--cprofile", default=None, help="write a cProfile of the run to this file")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.workload == "cycle":
        work = share_cycle(
            args.bootstrap,
            args.topic,
            args.sink,
            args.group,
            args.records,
            args.batch,
            args.timeout,
        )
    else:
        work = share_consume(args.bootstrap, args.topic, args.group, args.records, args.timeout)
    if args.cprofile:
        import cProfile

        profiler = cProfile.Profile()
        result = profiler.runcall(asyncio.run, work)
        profiler.dump_stats(args.cprofile)
    else:
        result = asyncio.run(work)
    print(result.line(), flush=True)
    if result.records < args.records:
        print(f"only {result.records} of {args.records} records before the timeout", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
