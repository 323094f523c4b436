"""``python -m conformance.diff`` (``make conformance-diff``): kemu against Apache Kafka 4.4.0,
request by request.

1. Starts a single-node KRaft Kafka 4.4.0 (``bench/servers.py``, the jars ``make bench``
   fetches) and a single-broker kemu (``kemu serve --brokers 1 --timing kafka``), with the same
   settings that clients see (the Kafka server's timers, share-group heartbeats every 500 ms).
2. Warms each broker up straight, not through the proxy (``warm_up`` in
   ``conformance/scenarios.py``: a topic, a transaction, a consumer group and a share group, so
   every coordinator and internal topic exists), then puts a recording proxy
   (``conformance/proxy.py``) in front of each and runs the scenarios of
   ``conformance/scenarios.py`` through it, the same clients in the same order on both.
3. Pairs the exchanges of the two runs and compares each pair's responses field by field after
   normalisation (``conformance/compare.py``); prints a per-API table and writes every
   difference, with the request and both responses as JSON, to ``--report-dir``.

Not part of ``make test``. Results and the differences kept on purpose: docs/conformance.md.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

from bench.servers import KafkaServer, KemuServer, Server, kafka_timing_overrides
from conformance.compare import compare, table
from conformance.known import KNOWN
from conformance.proxy import Exchange, ProxyThread
from conformance.scenarios import SCENARIOS, warm_up

SHARED_SETTINGS = {
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.heartbeat.interval.ms": "500",
}


class DiffKafka(KafkaServer):
    def _server_properties(self) -> str:
        extra = "".join(f"{key}={value}\n" for key, value in SHARED_SETTINGS.items())
        return super()._server_properties() + extra


def make_kemu(workdir: Path) -> KemuServer:
    """kemu with Kafka's timers (--timing kafka) and the Kafka server's settings."""
    return KemuServer(workdir, 1, tuple(kafka_timing_overrides(**SHARED_SETTINGS)), timing="kafka")


def run_side(server: Server, names: list[str], log: Path) -> list[Exchange]:
    started = time.monotonic()
    warm_up(server.bootstrap)  # straight to the broker: not recorded
    with log.open("a") as out:
        out.write(f"{server.name} warm-up: done in {time.monotonic() - started:.1f}s\n")
    with ProxyThread([("127.0.0.1", server.port)]) as proxy, log.open("a") as out:
        for name in names:
            proxy.scenario = name
            started = time.monotonic()
            try:
                SCENARIOS[name](proxy.bootstrap)
                outcome = "done"
            except Exception:
                outcome = "stopped: " + " | ".join(traceback.format_exc().splitlines()[-4:])
            out.write(f"{server.name} {name}: {outcome} in {time.monotonic() - started:.1f}s\n")
            print(f"  {server.name:5} {name:<22} {outcome[:100]}", flush=True)
        proxy.scenario = "after"
        return list(proxy.exchanges)


def write_report(report: Path, kafka: list[Exchange], kemu: list[Exchange]) -> str:
    result = compare(kafka, kemu, KNOWN)
    report.mkdir(parents=True, exist_ok=True)
    for old in report.glob("diff-*.json"):
        old.unlink()
    for number, diff in enumerate(result.diffs, 1):
        name = f"diff-{number:04d}-{diff['scenario']}-{diff['api']}.json"
        (report / name).write_text(json.dumps(diff, indent=1, sort_keys=True))
    text = table(result)
    (report / "table.txt").write_text(text + "\n")
    undecoded = [
        f"{side} {e.scenario} key {e.api_key} v{e.api_version}: {e.error}"
        for side, exchanges in (("kafka", kafka), ("kemu", kemu))
        for e in exchanges
        if e.error is not None
    ]
    (report / "undecoded.txt").write_text("\n".join(undecoded) + "\n")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--report-dir", type=Path, default=Path("conformance-diff-report"))
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument(
        "--compare-only",
        action="store_true",
        help="compare the exchanges an earlier run saved in --report-dir (exchanges.pickle)",
    )
    args = parser.parse_args(argv)
    saved = args.report_dir / "exchanges.pickle"
    if args.compare_only:
        with saved.open("rb") as f:
            kafka_saved, kemu_saved = pickle.load(f)
        print(write_report(args.report_dir, kafka_saved, kemu_saved))
        return 0
    names = [name for name in args.scenarios.split(",") if name]
    unknown = set(names) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {sorted(unknown)}")
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="kemu-diff-"))
    args.report_dir.mkdir(parents=True, exist_ok=True)
    log = args.report_dir / "run.log"
    log.write_text("")
    kafka = DiffKafka(work / "kafka", 1)
    kemu = make_kemu(work / "kemu")
    for server in (kafka, kemu):
        server.workdir.mkdir(parents=True, exist_ok=True)
    failure: list[BaseException] = []

    def start_kafka() -> None:
        try:
            kafka.start()
        except BaseException as exc:
            failure.append(exc)

    booting = threading.Thread(target=start_kafka)
    booting.start()  # Kafka boots while the scenarios run against kemu
    try:
        kemu.start()
        print(f"kemu at {kemu.bootstrap}", flush=True)
        try:
            kemu_exchanges = run_side(kemu, names, log)
        finally:
            kemu.stop()
        booting.join()
        if failure:
            raise failure[0]
        print(f"kafka at {kafka.bootstrap}", flush=True)
        kafka_exchanges = run_side(kafka, names, log)
    finally:
        booting.join()
        kafka.stop()
    with saved.open("wb") as f:
        pickle.dump((kafka_exchanges, kemu_exchanges), f)
    text = write_report(args.report_dir, kafka_exchanges, kemu_exchanges)
    print(text)
    print(f"differences and both responses: {args.report_dir}/ (work dir {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
