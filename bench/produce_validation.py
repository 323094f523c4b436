"""``python -m bench.produce_validation``: what validating a produced batch's records costs.

Produce v9 requests carrying one batch (written by aiokafka's record builder, as a client
writes it) go through the Produce handler in process (decode, handle, append to an in-memory
log, encode the answer), and the process CPU time per request is measured for each
``kemu.produce.validate.records``: ``none`` (the batch stored unread, as before the
validation), ``lengths`` (the default: the records' lengths walked) and ``full`` (every field
of every record parsed, as on a compacted topic), in interleaved rounds, best of ``--repeat``.
Numbers are machine-dependent; the ratios are what matter.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from typing import Any

from kemu.broker.handlers import REGISTRY, load_handlers
from kemu.cluster.context import RequestContext, Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.protocol import wire
from kemu.storage.log import MemoryLog

SHAPES = (  # codec, records per batch, value bytes
    (0, 1, 100),
    (0, 16, 1000),
    (0, 130, 100),
    (3, 130, 100),
    (4, 16, 1000),
)
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def client_batch(codec: int, count: int, size: int) -> bytes:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    writer = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 22,
    )
    for index in range(count):
        writer.append(
            index,
            timestamp=1_700_000_000_000 + index,
            key=b"key-%d" % index,
            value=bytes(size),
            headers=[],
        )
    return bytes(writer.build())


def round_of(batch: bytes, requests: int, mode: str) -> float:
    """CPU seconds per request for ``requests`` Produce requests of ``batch`` with
    ``kemu.produce.validate.records=mode``."""
    load_handlers()
    cluster = Cluster(
        cluster_id="bench",
        nodes={1: BrokerNode(1, "127.0.0.1", 19092)},
        config=BrokerConfig({"kemu.produce.validate.records": mode}),
        log_factory=lambda topic, index: MemoryLog(),
    )
    runtime = Runtime(cluster=cluster)
    cluster.create_topic("plain", 1, 1)
    module = sys.modules[wire.request_schema(0, 9).__module__]
    partition = wire.build(module.PartitionProduceData, index=0, records=batch)
    body = wire.build(
        wire.request_schema(0, 9),
        acks=1,
        timeout=datetime.timedelta(seconds=1),
        topic_data=(
            wire.build(module.TopicProduceData, name="plain", partition_data=(partition,)),
        ),
    )
    frame = wire.encode_request_frame(body, 7)[4:]
    started = time.process_time()
    for _ in range(requests):
        decoded = wire.decode_request(frame)
        context = RequestContext(cluster.nodes[1], runtime, decoded.header)
        answer: Any = REGISTRY[0].function(context, decoded.body)
        wire.encode_response_frame(0, 9, 7, answer)
    return (time.process_time() - started) / requests


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.produce_validation", description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    modes = ("none", "lengths", "full")
    for codec, count, size in SHAPES:
        batch = client_batch(codec, count, size)
        best = dict.fromkeys(modes, float("inf"))
        round_of(batch, args.requests // 4, "full")  # warm-up: lazy imports, first allocations
        for index in range(args.repeat):
            for mode in modes[index % 3 :] + modes[: index % 3]:
                best[mode] = min(best[mode], round_of(batch, args.requests, mode))
        print(
            f"{CODEC_NAMES[codec]:>5}, {count:3d} records of {size:4d} B "
            f"({len(batch):6d} B batch): "
            + ", ".join(
                f"{mode} {best[mode] * 1e6:6.1f} us ({best[mode] / best['none']:.2f}x)"
                for mode in modes
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
