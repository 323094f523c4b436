"""``python -m bench.fuzz_records_kafka``: the record fuzzer's batches sent to Apache Kafka 4.4.0
and to kemu, answer by answer.

``--batches N`` batches are made by ``bench.fuzz_records.make_batch`` from ``--seed`` (no
decompression bombs: Kafka holds them whole), each to one of the fuzzer's three topics (plain,
compacted, LogAppendTime) on a fresh connection with Produce v9 (acks=1), on a one-node KRaft
Kafka (``bench/servers.py``, jars in ``bench/.cache``) and on ``kemu serve --brokers 1``. Prints
how many answers agree (CORRUPT_MESSAGE from kemu counts as agreeing with Kafka's
UNKNOWN_SERVER_ERROR for a payload neither can decompress: Kafka's "Failed to decompress record
stream" is a KafkaException without an error code), then each difference with the fuzzer's
mutation and both error messages.
"""

from __future__ import annotations

import argparse
import datetime
import random
import socket
import struct
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.fuzz_records import TOPICS, _schema_class, client_verdict, make_batch
from bench.servers import HOST, KafkaServer, KemuServer, Server
from kemu.protocol import wire

Answer = tuple[int | str, str]  # error code (or "closed"), error message


def _call(sock: socket.socket, api_key: int, version: int, body: Any) -> Any:
    sock.sendall(wire.encode_request_frame(body, 1, "fuzz-records-kafka"))
    size = struct.unpack(">i", _read(sock, 4))[0]
    return wire.decode_response(api_key, version, _read(sock, size))[1]


def _read(sock: socket.socket, count: int) -> bytes:
    out = b""
    while len(out) < count:
        chunk = sock.recv(count - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def create_topics(port: int) -> None:
    with socket.create_connection((HOST, port), timeout=30) as sock:
        for name, configs in TOPICS.items():
            entries = tuple(
                wire.build(_schema_class(19, 5, "CreatableTopicConfig"), name=key, value=value)
                for key, value in configs.items()
            )
            topic = wire.build(
                _schema_class(19, 5, "CreatableTopic"),
                name=name,
                num_partitions=1,
                replication_factor=1,
                assignments=(),
                configs=entries,
            )
            _call(
                sock,
                19,
                5,
                wire.build(
                    wire.request_schema(19, 5),
                    topics=(topic,),
                    timeout=datetime.timedelta(seconds=30),
                    validate_only=False,
                ),
            )
    time.sleep(2)  # Kafka's partitions get their leader


def produce(port: int, topic: str, batch: bytes) -> Answer:
    try:
        with socket.create_connection((HOST, port), timeout=30) as sock:
            partition = wire.build(
                _schema_class(0, 9, "PartitionProduceData"), index=0, records=batch
            )
            data = wire.build(
                _schema_class(0, 9, "TopicProduceData"), name=topic, partition_data=(partition,)
            )
            body = wire.build(
                wire.request_schema(0, 9),
                transactional_id=None,
                acks=1,
                timeout=datetime.timedelta(seconds=10),
                topic_data=(data,),
            )
            answer = _call(sock, 0, 9, body).responses[0].partition_responses[0]
            return int(answer.error_code), answer.error_message or ""
    except (OSError, ConnectionError) as error:
        return "closed", str(error)


def answers(server: Server, batches: list[tuple[str, str, bytes]]) -> list[Answer]:
    server.start()
    try:
        create_topics(server.port)
        return [produce(server.port, topic, batch) for topic, _mutation, batch in batches]
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz_records_kafka", description=__doc__)
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    batches: list[tuple[str, str, bytes]] = []
    for _ in range(args.batches):
        made = make_batch(rng, int(time.time() * 1000))
        batches.append((rng.choice(tuple(TOPICS)), made.mutation, made.batch))
    with tempfile.TemporaryDirectory(prefix="kemu-fuzz-kafka-") as work:
        kafka_dir, kemu_dir = Path(work) / "kafka", Path(work) / "kemu"
        kafka_dir.mkdir()
        kemu_dir.mkdir()
        kafka = answers(KafkaServer(kafka_dir, 1), batches)
        kemu = answers(KemuServer(kemu_dir, 1), batches)
    agree = 0
    differences: Counter[tuple[str, str, str]] = Counter()
    for (topic, mutation, batch), theirs, ours in zip(batches, kafka, kemu, strict=True):
        if theirs[0] == ours[0] or (theirs[0] == -1 and ours[0] == 2):
            agree += 1
            continue
        differences[(mutation, str(theirs[0]), str(ours[0]))] += 1
        print(
            f"{mutation} on {topic} ({client_verdict(batch)} for kafka-python): "
            f"kafka {theirs[0]} {theirs[1][:80]!r} | kemu {ours[0]} {ours[1][:80]!r}"
        )
    print(f"{agree} of {len(batches)} answers agree")
    for (mutation, theirs_code, ours_code), count in differences.most_common():
        print(f"  {count} x {mutation}: kafka {theirs_code}, kemu {ours_code}")


if __name__ == "__main__":
    sys.exit(main())
