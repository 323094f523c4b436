"""Connection quotas against kemu and Apache Kafka 4.4.0 side by side.

    python -m bench.connection_quota_figure [--only kemu|kafka] [--connections 6]

Each server runs with ``quota.window.num=2`` and ``quota.window.size.seconds=1`` (a rate is then
measured over at least one second, so the scenario takes seconds). The limits are set as an
operator sets them, with Kafka's own ``kafka-configs`` (``org.apache.kafka.tools.ConfigCommand``:
IncrementalAlterConfigs on the broker default, AlterClientQuotas on the default IP entity), then
``--connections`` sockets are opened one after the other from 127.0.0.1, each sending an
ApiVersions request at once, and each one's fate is printed: answered after N ms, or closed
unanswered after N ms.

1. ``max.connections.per.ip=3``: the connections past the third are closed at once.
2. ``max.connection.creation.rate=2``: the acceptor takes the connections one by one, waiting
   the throttle time before each one over the rate: answers come later and later.
3. ``connection_creation_rate=2`` for the default IP entity: the connections over the rate are
   never read and are closed after their throttle time.

Then ``real_clients_under_ip_rate``: confluent-kafka producers started together under that IP
rate each deliver a message, after reconnecting where their first connection was throttled.
``tests/integration/quotas/test_connection_quotas_clients.py`` runs the same on kemu and on Kafka.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import selectors
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kemu.protocol import wire
from kemu.testing.kafka import TEST_TOOL_JVM_OPTS

ROOT = Path(__file__).resolve().parent.parent
LIB = ROOT / "bench" / ".cache" / "lib"
QUOTA_WINDOW = ("quota.window.num=2", "quota.window.size.seconds=1")
SETTLE_S = 2.5  # more than quota.window.num x quota.window.size.seconds: rates start afresh
API_VERSIONS = 18


@dataclass(frozen=True)
class Fate:
    answered: bool
    after_ms: int  # from the connect

    def __str__(self) -> str:
        return f"{'answered' if self.answered else 'closed'} {self.after_ms} ms"


# Kafka's ConfigCommand run in one JVM for a whole scenario, one invocation per stdin line
# (tab-separated arguments), each answered by a "### exit N" line: a JVM start per command was
# most of the scenario's time.
DRIVER = """
import java.io.*;
import java.util.*;
import org.apache.kafka.common.utils.internals.Exit;
import org.apache.kafka.tools.ConfigCommand;

public class ConfigCommands {
    public static void main(String[] args) throws Exception {
        Exit.setExitProcedure((code, message) -> {
            throw new IllegalStateException("exit " + code);
        });
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            List<String> command = new ArrayList<>(List.of("--bootstrap-server", args[0]));
            command.addAll(Arrays.asList(line.split("\t")));
            String outcome = "### exit 0";
            try {
                ConfigCommand.main(command.toArray(new String[0]));
            } catch (IllegalStateException e) {
                outcome = "### " + e.getMessage();
            } catch (Exception e) {
                outcome = "### exit -1 " + e;
            }
            System.out.println(outcome);
            System.out.flush();
        }
    }
}
"""


def _driver_classes() -> Path:
    """The compiled driver, once per machine and driver source (javac costs a JVM start)."""
    digest = hashlib.sha256(DRIVER.encode()).hexdigest()[:12]
    classes = Path(tempfile.gettempdir()) / f"kemu-config-commands-{digest}"
    if (classes / "ConfigCommands.class").exists():
        return classes
    building = Path(tempfile.mkdtemp(prefix="kemu-config-commands-"))
    (building / "ConfigCommands.java").write_text(DRIVER)
    subprocess.run(
        ["javac", "-cp", f"{LIB}/*", "-d", str(building), str(building / "ConfigCommands.java")],
        check=True,
        capture_output=True,
    )
    with contextlib.suppress(OSError):  # another process has just put its own copy there
        building.rename(classes)
    return classes if classes.exists() else building


class ConfigTool:
    """``kafka-configs --bootstrap-server B ARGS`` with Kafka 4.4.0's own tool
    (``org.apache.kafka.tools.ConfigCommand``), each call one invocation in a JVM kept for the
    scenario; ``close`` ends it."""

    def __init__(self, bootstrap: str) -> None:
        self.errors = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed by close()
        self.process = subprocess.Popen(
            [
                *("java", *TEST_TOOL_JVM_OPTS, "-cp", f"{_driver_classes()}:{LIB}/*"),
                *("ConfigCommands", bootstrap),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            text=True,
        )

    def __call__(self, *args: str) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("\t".join(args) + "\n")
        self.process.stdin.flush()
        output = []
        for line in self.process.stdout:
            if line.startswith("### "):
                if line.strip() == "### exit 0":
                    return
                break
            output.append(line)
        else:
            line = "### the tool's JVM ended"
        self.errors.seek(0)
        raise RuntimeError(
            f"kafka-configs {' '.join(args)}: {line[4:]}{''.join(output)}{self.errors.read()}"
        )

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.errors.close()


def open_connections(bootstrap: str, count: int, wait_s: float = 6.0) -> list[Fate | None]:
    """``count`` connections opened in turn, each sending ApiVersions v0; what became of each
    (None: still waiting after ``wait_s``)."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    frame = wire.encode_request_frame(wire.build(wire.request_schema(API_VERSIONS, 0)), 1, "cq")
    selector = selectors.DefaultSelector()
    started: dict[int, float] = {}
    fates: list[Fate | None] = [None] * count
    sockets: dict[int, socket.socket] = {}
    for index in range(count):
        sock = socket.create_connection((host, int(port)), timeout=5)
        started[index] = time.monotonic()
        sock.sendall(frame)
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, index)
        sockets[index] = sock
    deadline = time.monotonic() + wait_s
    while any(fate is None for fate in fates) and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=0.05):
            index = key.data
            sock = sockets[index]
            try:
                data = sock.recv(65536)
            except OSError:
                data = b""
            after = round((time.monotonic() - started[index]) * 1000)
            fates[index] = Fate(bool(data), after)
            selector.unregister(sock)
    for sock in sockets.values():
        sock.close()
    selector.close()
    return fates


def real_clients_under_ip_rate(bootstrap: str, clients: int = 4) -> tuple[int, int]:
    """confluent-kafka producers created together, one message each: (messages delivered,
    broker disconnects reported). Under a per-IP connection_creation_rate some first connections
    are closed unanswered; librdkafka reconnects and every message is still delivered."""
    from confluent_kafka import Producer

    disconnects: list[str] = []
    delivered: list[bool] = []

    def on_error(error: object) -> None:
        disconnects.append(str(error))

    producers = [
        Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": f"cq-{index}",
                "error_cb": on_error,
                "reconnect.backoff.ms": 100,
                "reconnect.backoff.max.ms": 1000,
                "message.timeout.ms": 60_000,
            }
        )
        for index in range(clients)
    ]
    for producer in producers:
        producer.produce(
            "connection-quota",
            b"x",
            on_delivery=lambda error, _m: delivered.append(error is None),
        )
    deadline = time.monotonic() + 60
    while len(delivered) < clients and time.monotonic() < deadline:
        for producer in producers:
            producer.poll(0.05)
    for producer in producers:
        producer.flush(5)
    return sum(delivered), len(disconnects)


def scenario(bootstrap: str, connections: int, with_clients: bool = True) -> list[str]:
    tool = ConfigTool(bootstrap)
    try:
        return _scenario(bootstrap, connections, with_clients, tool)
    finally:
        tool.close()


def _scenario(
    bootstrap: str, connections: int, with_clients: bool, config_command: ConfigTool
) -> list[str]:
    lines: list[str] = []

    def phase(name: str, *configure: str, undo: tuple[str, ...]) -> None:
        # the tool's own connections count: its limit's window starts afresh before the test's
        # connections, and the tool's next connection comes after theirs has passed
        config_command("--alter", *configure)
        time.sleep(SETTLE_S)
        fates = open_connections(bootstrap, connections)
        lines.append(f"{name}: " + ", ".join(str(f) if f else "waiting" for f in fates))
        time.sleep(SETTLE_S)
        config_command("--alter", *undo)
        # (no wait after a limit is lifted: the next phase waits after setting its own)

    brokers = ("--entity-type", "brokers", "--entity-default")
    ips = ("--entity-type", "ips", "--entity-default")
    phase(
        "max.connections.per.ip=3",
        *brokers,
        "--add-config",
        "max.connections.per.ip=3",
        undo=(*brokers, "--delete-config", "max.connections.per.ip"),
    )
    phase(
        "max.connection.creation.rate=2",
        *brokers,
        "--add-config",
        "max.connection.creation.rate=2",
        undo=(*brokers, "--delete-config", "max.connection.creation.rate"),
    )
    phase(
        "ip connection_creation_rate=2",
        *ips,
        "--add-config",
        "connection_creation_rate=2",
        undo=(*ips, "--add-config", "connection_creation_rate=2"),  # kept for the clients
    )
    if with_clients:
        time.sleep(SETTLE_S)  # the tool's connection has passed the IP rate's window
        delivered, disconnects = real_clients_under_ip_rate(bootstrap)
        lines.append(
            f"4 confluent-kafka producers under it: {delivered} delivered, "
            f"{disconnects} disconnects reported"
        )
    return lines


def run(server_name: str, connections: int) -> list[str]:
    from bench.servers import KafkaServer, make_server

    class WindowKafka(KafkaServer):
        def _server_properties(self) -> str:
            return super()._server_properties() + "".join(f"{p}\n" for p in QUOTA_WINDOW)

    with tempfile.TemporaryDirectory(prefix=f"connection-quota-{server_name}-") as directory:
        workdir = Path(directory)
        server = (
            WindowKafka(workdir, 1)
            if server_name == "kafka"
            else make_server("kemu", workdir, 1, kemu_overrides=QUOTA_WINDOW)
        )
        server.start()
        try:
            return [f"{server_name} {line}" for line in scenario(server.bootstrap, connections)]
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=("kemu", "kafka"))
    parser.add_argument("--connections", type=int, default=6)
    args = parser.parse_args()
    for name in [args.only] if args.only else ["kafka", "kemu"]:
        for line in run(name, args.connections):
            print(line, flush=True)


if __name__ == "__main__":
    main()
