"""The Flink example through conformance's recording proxy, on kemu and on Apache Kafka 4.4.0:
which error codes each API answered, side by side.

    .venv/bin/python examples/flink/compare_errors.py --records 3000

Both servers are single-node (``kemu serve --brokers 1``; Kafka as ``make bench`` starts it). For
each the input is written straight to the server, then the job of ``examples/flink/run.py`` runs
with the proxy (``conformance/proxy.py``) as its bootstrap server, and every response's
``*error_code`` fields are counted by API key. A code seen on one side only is marked; such a
line is where to look for a wrong error code (Kafka's own start-up answers, such as
``NOT_COORDINATOR`` while ``__transaction_state`` is created, are timing). Prints one table.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))

from conformance.compare import to_json  # noqa: E402 - after the path above
from conformance.proxy import ProxyThread  # noqa: E402

_spec = importlib.util.spec_from_file_location("flink_run", HERE / "run.py")
assert _spec is not None and _spec.loader is not None
flink_run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(flink_run)

ErrorKey = tuple[int, str, str]  # api key, field path, error


def error_codes(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(field path, error) for every ``*error_code`` field of a response as JSON."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key.endswith("error_code") and not isinstance(item, dict | list):
                yield f"{path}.{key}", str(item)
            else:
                yield from error_codes(item, f"{path}.{key}")
    elif isinstance(value, list):
        for item in value:
            yield from error_codes(item, f"{path}[]")


def run_side(
    name: str, args: argparse.Namespace
) -> tuple[collections.Counter[ErrorKey], collections.Counter[tuple[int, int]]]:
    workdir = args.run_dir / name
    workdir.mkdir(parents=True, exist_ok=True)
    if name == "kemu":
        server = flink_run.Kemu(workdir / "kemu.log", brokers=1)
    else:
        server = flink_run.Kafka(workdir / "kafka")
    server.start()
    try:
        suffix = uuid.uuid4().hex[:6]
        names = {
            "input": f"flink-input-{suffix}",
            "output": f"flink-output-{suffix}",
            "group": f"flink-example-{suffix}",
            "prefix": f"kemu-flink-{suffix}",
        }
        flink_run.create_topics(server.bootstrap, names["input"], names["output"])
        flink_run.produce_input(server.bootstrap, names["input"], args.records)
        host, _, port = server.bootstrap.split(",")[0].rpartition(":")
        with ProxyThread([(host, int(port))]) as proxy:
            proxy.scenario = "flink"
            flink_run.run_job(args, proxy.bootstrap, names, workdir / "flink-job.log")
            exchanges = list(proxy.exchanges)
    finally:
        server.stop()
    errors: collections.Counter[ErrorKey] = collections.Counter()
    for exchange in exchanges:
        if exchange.error:
            errors[(exchange.api_key, "(not decoded)", exchange.error[:60])] += 1
            continue
        for path, code in error_codes(to_json(exchange.response)):
            errors[(exchange.api_key, path, code)] += 1
    versions = collections.Counter((e.api_key, e.api_version) for e in exchanges)
    return errors, versions


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--naming", choices=["INCREMENTING", "POOLING"], default="INCREMENTING")
    parser.add_argument("--run-dir", type=Path, default=Path("/tmp/kemu-flink-compare"))
    args = parser.parse_args()
    # The job's settings, as run.py's defaults.
    args.parallelism, args.checkpoint_ms, args.throttle_us, args.fail_after = 2, 1000, 500, 50
    args.heap, args.job_timeout = "1g", 900.0

    kemu_errors, kemu_versions = run_side("kemu", args)
    kafka_errors, kafka_versions = run_side("kafka", args)
    print(f"{'api':>4}  {'field':<44} {'error':<30} {'kemu':>6} {'kafka':>6}")
    for key in sorted(kemu_errors.keys() | kafka_errors.keys(), key=str):
        on_kemu, on_kafka = kemu_errors.get(key, 0), kafka_errors.get(key, 0)
        one_side = (on_kemu > 0) != (on_kafka > 0)
        if key[2] == "none" and not one_side:
            continue
        mark = "  <- one side only" if one_side else ""
        print(f"{key[0]:>4}  {key[1]:<44} {key[2]:<30} {on_kemu:>6} {on_kafka:>6}{mark}")
    print("requests (api, version) kemu: ", sorted(kemu_versions.items()))
    print("requests (api, version) kafka:", sorted(kafka_versions.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
