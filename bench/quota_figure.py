"""A producer and a consumer under client quotas, against kemu and Apache Kafka 4.4.0 side by side.

    python -m bench.quota_figure [--only kemu|kafka] [--quota 20000] [--bytes 200000]

Each server runs with ``quota.window.num=3`` and ``quota.window.size.seconds=1`` (a short
measuring window, so the figure takes seconds). A ``producer_byte_rate`` and a
``consumer_byte_rate`` quota are set for one client id with AlterClientQuotas; a confluent-kafka
producer with that client id writes ``--bytes`` as fast as it can, then a consumer with it reads
them back. Printed per server: the time taken, the rate in bytes/s and as a multiple of the quota,
and the largest throttle time librdkafka reported in its statistics (``brokers[].throttle.max``).
The same functions drive ``tests/integration/quotas/test_client_quotas_confluent.py``.
"""

from __future__ import annotations

import argparse
import json
import socket
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kemu.protocol import wire

QUOTA_WINDOW = ("quota.window.num=3", "quota.window.size.seconds=1")
ALTER_CLIENT_QUOTAS = 49


@dataclass
class Figure:
    seconds: float
    payload_bytes: int
    throttle_max_ms: int
    quota: float

    @property
    def rate(self) -> float:
        return self.payload_bytes / self.seconds

    def line(self, what: str) -> str:
        return (
            f"{what}: {self.payload_bytes} B in {self.seconds:.2f} s = {self.rate:,.0f} B/s "
            f"({self.rate / self.quota:.2f} x quota {self.quota:,.0f}), "
            f"max throttle reported {self.throttle_max_ms} ms"
        )


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    (size,) = wire.SIZE.unpack(exactly(4))
    return exactly(size)


def set_client_quota(bootstrap: str, client_id: str, quotas: dict[str, float]) -> None:
    """AlterClientQuotas v1 for one client id, on the wire (the Python clients have no call)."""
    schema = wire.request_schema(ALTER_CLIENT_QUOTAS, 1)
    module = wire.request_module(ALTER_CLIENT_QUOTAS, 1)
    entry = wire.build(
        module.EntryData,
        entity=(wire.build(module.EntityData, entity_type="client-id", entity_name=client_id),),
        ops=tuple(
            wire.build(module.OpData, key=key, value=value, remove=False)
            for key, value in quotas.items()
        ),
    )
    body = wire.build(schema, entries=(entry,), validate_only=False)
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(wire.encode_request_frame(body, 1, "quota-figure-admin"))
        _, response = wire.decode_response(ALTER_CLIENT_QUOTAS, 1, _read_frame(sock))
    errors = [e.error_message for e in response.entries if e.error_code != 0]
    if errors:
        raise RuntimeError(f"AlterClientQuotas failed: {errors}")


class _Stats:
    def __init__(self) -> None:
        self.throttle_max_ms = 0

    def __call__(self, payload: str) -> None:
        for broker in json.loads(payload).get("brokers", {}).values():
            self.throttle_max_ms = max(self.throttle_max_ms, broker["throttle"]["max"])


def produce_under_quota(
    bootstrap: str,
    topic: str,
    client_id: str,
    quota: float,
    total_bytes: int,
    batch_size: int = 16384,
) -> Figure:
    from confluent_kafka import Producer

    stats = _Stats()
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "linger.ms": 5,
            # the Java default: a batch must fit in one fetch quota window, or it is never fetched
            "batch.size": batch_size,
            "statistics.interval.ms": 200,
            "stats_cb": stats,
        }
    )
    value = b"q" * 1000
    delivered: list[int] = []
    failed: list[str] = []

    def on_delivery(error: Any, message: Any) -> None:
        if error is not None:
            failed.append(str(error))
        else:
            delivered.append(len(message.value()))

    producer.produce(topic, b"warm-up", on_delivery=on_delivery)  # metadata, topic creation
    producer.flush(60)
    delivered.clear()
    started = time.monotonic()
    for _ in range(total_bytes // len(value)):
        while True:
            try:
                producer.produce(topic, value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(300)
    seconds = time.monotonic() - started
    producer.poll(0.5)  # one more statistics callback
    if remaining or failed:
        raise RuntimeError(f"{remaining} undelivered, errors: {failed[:3]}")
    return Figure(seconds, sum(delivered), stats.throttle_max_ms, quota)


def consume_under_quota(
    bootstrap: str,
    topic: str,
    client_id: str,
    quota: float,
    total_bytes: int,
    timeout_s: float = 300,
) -> Figure:
    from confluent_kafka import Consumer

    stats = _Stats()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "group.id": f"quota-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "statistics.interval.ms": 200,
            "stats_cb": stats,
        }
    )
    consumer.subscribe([topic])
    received = 0
    started: float | None = None
    deadline = time.monotonic() + timeout_s
    while received < total_bytes and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None or message.error() is not None:
            continue
        value = message.value() or b""
        if value == b"warm-up":
            started = time.monotonic()  # the group is joined and data flows: start the clock
            continue
        received += len(value)
    seconds = time.monotonic() - (started or deadline)
    consumer.poll(0.5)
    consumer.close()
    if received < total_bytes:
        raise RuntimeError(f"consumed {received} of {total_bytes} bytes")
    return Figure(seconds, received, stats.throttle_max_ms, quota)


def run(
    server_name: str, quota: float, total_bytes: int, batch_size: int, timeout_s: float
) -> list[str]:
    from bench.servers import KafkaServer, make_server

    class QuotaKafka(KafkaServer):
        def _server_properties(self) -> str:
            return super()._server_properties() + "".join(f"{p}\n" for p in QUOTA_WINDOW)

    with tempfile.TemporaryDirectory(prefix=f"quota-{server_name}-") as directory:
        workdir = Path(directory)
        server = (
            QuotaKafka(workdir, 1)
            if server_name == "kafka"
            else make_server("kemu", workdir, 1, kemu_overrides=QUOTA_WINDOW)
        )
        server.start()
        try:
            client_id = "quota-figure"
            set_client_quota(
                server.bootstrap,
                client_id,
                {"producer_byte_rate": quota, "consumer_byte_rate": quota},
            )
            time.sleep(1.0)  # Kafka applies the quota once its metadata reaches the broker
            topic = "quota-figure"
            produced = produce_under_quota(
                server.bootstrap, topic, client_id, quota, total_bytes, batch_size
            )
            lines = [produced.line(f"{server_name} produce")]
            try:
                consumed = consume_under_quota(
                    server.bootstrap, topic, client_id, quota, total_bytes, timeout_s
                )
                lines.append(consumed.line(f"{server_name} consume"))
            except RuntimeError as error:
                lines.append(f"{server_name} consume: {error} within {timeout_s:.0f} s")
        finally:
            server.stop()
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=("kemu", "kafka"))
    parser.add_argument("--quota", type=float, default=20_000)
    parser.add_argument("--bytes", type=int, default=200_000)
    parser.add_argument("--batch-size", type=int, default=16384, help="the producer's batch.size")
    parser.add_argument("--consume-timeout", type=float, default=300)
    args = parser.parse_args()
    for name in [args.only] if args.only else ["kafka", "kemu"]:
        for line in run(name, args.quota, args.bytes, args.batch_size, args.consume_timeout):
            print(line, flush=True)


if __name__ == "__main__":
    main()
