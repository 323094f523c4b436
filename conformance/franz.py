"""``python -m conformance.franz``: franz-go's own kgo tests against a kemu this starts and stops.

franz-go's test helpers (``pkg/kgo/helpers_test.go``) can aim the suite at any broker through
``KGO_SEEDS``; the share-group tests run once ShareFetch and ShareAcknowledge v2 are advertised.
The module comes from the Go module proxy: ``go mod download`` unpacks the release zip, test
files included, into the module cache, and the tests are built and run from there, so a
machine needs Go (>= 1.25, franz-go's go.mod) and the proxy, but no git clone. Nothing of
franz-go lands in this repository.

``--security`` starts kemu with PLAINTEXT, SASL_PLAINTEXT and SSL listeners (``--tls-self-signed``,
client certificates required on SSL, SCRAM users from ``kemu.sasl.users``) and hands franz-go
its SASL variables: ``KGO_TEST_SCRAM_SEEDS`` (the SASL_PLAINTEXT listener) and ``KGO_TEST_SCRAM``
(user:password:512), which TestSCRAMAuth and TestSCRAMAuthBadCredentials need. ``--tls`` also
points ``KGO_SEEDS`` at the SSL listener with ``KGO_TEST_TLS`` (CA, client certificate and key),
so every test chosen by ``--run`` connects over TLS.

``--wire-check`` puts the recording proxy of ``make conformance-diff`` (``conformance/proxy.py``)
between the tests and kemu: every request and response is decoded with kemu's codec (kio and
``kemu.protocol``), encoded again and compared with the bytes that crossed the wire; a per-API
table follows the results, and the run fails if any frame differed or did not decode.

The test binary is built before kemu starts, so compile time is not test time. Prints one line
per test result as it comes, then a table of the top-level results; the ``go test -v`` output and
kemu's log are kept in ``--log-dir``. Exits with the test binary's status.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from conformance.proxy import ProxyThread, RecordingProxy, roundtrip_table
from kemu.testing.plugin import KemuProcess

MODULE = "github.com/twmb/franz-go"
DEFAULT_VERSION = "v1.21.5"
DEFAULT_RUN = "TestShareGroup"
SCRAM_USER, SCRAM_PASSWORD = "franz", "franz-secret"
SECURITY_OVERRIDES = [
    "listeners=PLAINTEXT://:0,SASL_PLAINTEXT://:0,SSL://:0",
    f"kemu.sasl.users={SCRAM_USER}:{SCRAM_PASSWORD}",
    "listener.name.ssl.ssl.client.auth=required",
]
TIMEOUT_PREFIX = "panic: test timed out after"
RUNNING_LINE = re.compile(r"^\t\t(?P<name>\S+) \(")
RESULT_LINE = re.compile(
    r"^(?P<indent>\s*)--- (?P<verdict>PASS|FAIL|SKIP): (?P<name>\S+) \((?P<secs>[\d.]+)s\)"
)


@dataclass(frozen=True)
class Outcome:
    name: str
    verdict: str  # PASS, FAIL, SKIP, or TIMEOUT when go test's alarm fired while it ran
    seconds: float


class ResultParser:
    """Top-level test results from ``go test -v`` output, one line at a time."""

    def __init__(self) -> None:
        self._timed_out = False

    def feed(self, line: str) -> Outcome | None:
        if line.startswith(TIMEOUT_PREFIX):
            self._timed_out = True
            return None
        if self._timed_out:
            # After the alarm Go lists the tests still running, one per line: "\t\tName (5m0s)".
            running = RUNNING_LINE.match(line)
            if running is not None and "/" not in running["name"]:
                return Outcome(running["name"], "TIMEOUT", 0.0)
            return None
        match = RESULT_LINE.match(line)
        if match is None or match["indent"]:
            return None
        return Outcome(match["name"], match["verdict"], float(match["secs"]))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m conformance.franz", description=__doc__)
    parser.add_argument(
        "--version", default=DEFAULT_VERSION, help=f"franz-go module version ({DEFAULT_VERSION})"
    )
    parser.add_argument("--run", default=DEFAULT_RUN, help=f"go test -run pattern ({DEFAULT_RUN})")
    parser.add_argument("--skip", help="go test -skip pattern (Go >= 1.20)")
    parser.add_argument(
        "--records", type=int, default=20_000, help="KGO_TEST_RECORDS for the ETL tests"
    )
    parser.add_argument("--count", type=int, default=1, help="go test -count")
    parser.add_argument("--timeout", default="20m", help="go test -timeout")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument(
        "--timing",
        choices=("kafka", "fast"),
        default="kafka",
        help="kemu serve --timing: kafka (default: the suite is written against Kafka's timers)",
    )
    parser.add_argument(
        "--chaos", action="store_true", help="KGO_TEST_CHAOS=1: connections die every 0.5-1.5 s"
    )
    parser.add_argument(
        "--race", action="store_true", help="build the tests with the race detector"
    )
    parser.add_argument(
        "--restart-after",
        type=float,
        metavar="SECONDS",
        help="SIGKILL kemu this long into the run and start it again on the same data dir",
    )
    parser.add_argument(
        "--security",
        action="store_true",
        help="SASL_PLAINTEXT and SSL listeners too; KGO_TEST_SCRAM_SEEDS/KGO_TEST_SCRAM set",
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        help="with --security: KGO_SEEDS is the SSL listener, KGO_TEST_TLS its CA/cert/key",
    )
    parser.add_argument(
        "--wire-check",
        action="store_true",
        help="run through a proxy that re-encodes every request and response and compares bytes",
    )
    parser.add_argument("--client-log", default="none", help="KGO_LOG_LEVEL: none, info or debug")
    parser.add_argument(
        "--log-dir", type=Path, help="keep go test output and kemu's log here (default: a temp dir)"
    )
    parser.add_argument("--go", default="go", help="the go command")
    return parser


def download_module(go: str, version: str) -> Path:
    """The unpacked module in the Go module cache (read-only; go test builds elsewhere)."""
    listing = subprocess.run(
        [go, "mod", "download", "-json", f"{MODULE}@{version}"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),  # outside any go.mod, so no main module is consulted
    )
    return Path(json.loads(listing.stdout)["Dir"])


def build_tests(go: str, package_dir: Path, binary: Path, race: bool) -> None:
    command = [go, "test", "-c", "-o", str(binary)] + (["-race"] if race else []) + ["."]
    subprocess.run(command, check=True, cwd=package_dir)


def test_environment(
    kemu: KemuProcess, args: argparse.Namespace, proxy: RecordingProxy | None = None
) -> dict[str, str]:
    bootstrap = proxy.bootstrap if proxy is not None else kemu.bootstrap
    security: dict[str, str] = {}
    if args.security:
        security["KGO_TEST_SCRAM_SEEDS"] = kemu.listeners["SASL_PLAINTEXT"]
        security["KGO_TEST_SCRAM"] = f"{SCRAM_USER}:{SCRAM_PASSWORD}:512"
        if args.tls:
            bootstrap = kemu.listeners["SSL"]
            tls = kemu.tls
            security["KGO_TEST_TLS"] = (
                f"ca:{tls['ca']},cert:{tls['client_cert']},key:{tls['client_key']}"
            )
    env = {
        **os.environ,
        **security,
        "KGO_SEEDS": bootstrap,
        "KGO_TEST_RF": "1",
        "KGO_TEST_RECORDS": str(args.records),
        "KGO_LOG_LEVEL": args.client_log,
    }
    if args.chaos:
        env["KGO_TEST_CHAOS"] = "1"
    return env


def run_tests(
    binary: Path, package_dir: Path, env: dict[str, str], args: argparse.Namespace, log: Path
) -> tuple[int, list[Outcome]]:
    command = [
        str(binary),
        f"-test.run={args.run}",
        f"-test.count={args.count}",
        f"-test.timeout={args.timeout}",
        "-test.v",
    ] + ([f"-test.skip={args.skip}"] if args.skip else [])
    results: list[Outcome] = []
    parser = ResultParser()
    with log.open("w") as out:
        process = subprocess.Popen(
            command,
            cwd=package_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert process.stdout is not None
        for line in process.stdout:
            out.write(line)
            if RESULT_LINE.match(line) or line.startswith(TIMEOUT_PREFIX):
                print(line.rstrip(), flush=True)
            result = parser.feed(line)
            if result is not None:
                results.append(result)
        return process.wait(), results


def upstreams(bootstrap: str) -> list[tuple[str, int]]:
    """``host:port,host:port`` as (host, port) pairs, one per broker the proxy stands for."""
    pairs = [address.rsplit(":", 1) for address in bootstrap.split(",") if address]
    return [(host, int(port)) for host, port in pairs]


def summary_table(results: list[Outcome]) -> str:
    """One row per test, in first-finished order; with -count N the verdicts are tallied."""
    by_name: dict[str, list[Outcome]] = {}
    for result in results:
        by_name.setdefault(result.name, []).append(result)
    rows = ["| test | runs | result | slowest run (s) |", "|---|---|---|---|"]
    for name, runs in by_name.items():
        verdicts = [r.verdict for r in runs]
        tally = ", ".join(f"{v} {verdicts.count(v)}" for v in dict.fromkeys(verdicts))
        slowest = max(r.seconds for r in runs)
        rows.append(f"| {name} | {len(runs)} | {tally} | {slowest:.2f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if shutil.which(args.go) is None:
        print(f"{args.go!r} not found: franz-go's tests need Go >= 1.25", file=sys.stderr)
        return 2
    log_dir: Path = args.log_dir or Path(tempfile.mkdtemp(prefix="kemu-franz-"))
    log_dir.mkdir(parents=True, exist_ok=True)

    module_dir = download_module(args.go, args.version)
    package_dir = module_dir / "pkg" / "kgo"
    binary = log_dir / "kgo.test"
    print(f"franz-go {args.version} from {module_dir}; building the kgo tests", flush=True)
    build_tests(args.go, package_dir, binary, args.race)

    data_dir = log_dir / "data" if args.restart_after else None
    if args.tls and not args.security:
        print("--tls needs --security", file=sys.stderr)
        return 2
    if args.wire_check and args.tls:
        print("--wire-check reads plaintext frames: not with --tls", file=sys.stderr)
        return 2
    kemu = KemuProcess(
        brokers=args.brokers,
        data_dir=data_dir,
        log_path=log_dir / "kemu.log",
        overrides=SECURITY_OVERRIDES if args.security else [],
        extra_args=["--tls-self-signed"] if args.security else [],
        timing=args.timing,
    )
    kemu.start()
    proxy_thread = ProxyThread(upstreams(kemu.bootstrap)) if args.wire_check else None
    proxy = proxy_thread.__enter__() if proxy_thread is not None else None
    env = test_environment(kemu, args, proxy)
    seeds = env["KGO_SEEDS"]
    print(f"kemu ready, KGO_SEEDS={seeds}; running go test -run '{args.run}'", flush=True)
    restart = None
    if args.restart_after:
        restart = threading.Timer(args.restart_after, kemu.restart)
        restart.start()
    try:
        status, results = run_tests(binary, package_dir, env, args, log_dir / "go-test.log")
    finally:
        if restart is not None:
            restart.cancel()
            restart.join()
        if proxy_thread is not None:
            proxy_thread.__exit__(None, None, None)
        kemu.stop()

    print()
    print(summary_table(results))
    if proxy is not None:
        table, clean = roundtrip_table(proxy.exchanges)
        print(f"\nwire check (decoded, re-encoded, compared byte for byte):\n{table}")
        (log_dir / "wire-check.txt").write_text(table + "\n")
        if not clean:
            print("wire check: some frames differed or did not decode", flush=True)
            status = status or 1
    print(f"\ngo test exit status {status}; logs in {log_dir}")
    return status


if __name__ == "__main__":
    sys.exit(main())
