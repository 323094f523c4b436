"""DescribeLogDirs (key 35), v1-v5 (``kafka-log-dirs.sh --describe``).

One log directory per broker, as a Kafka with one ``log.dirs`` entry: with ``--data-dir`` its
absolute path, and the volume's total and usable bytes (v4); in memory the virtual directory
``kemu:memory`` with total and usable bytes -1 (unknown, as Kafka reports an offline volume's).
Every partition this broker is a replica of is listed (kemu keeps one copy, which every replica
reports), with the size of its log in bytes (segments as written, or the batches held in memory)
and offset lag 0: a replica is always caught up. ``topics`` null describes every topic; named
topics or partitions the broker does not host are left out, as Kafka leaves them out.

Omissions: no future logs (AlterReplicaLogDirs is not served), so ``is_future_key`` is false;
no directory is ever cordoned (v5 ``is_cordoned`` false).

Without DESCRIBE on the cluster the answer lists no log dirs, with CLUSTER_AUTHORIZATION_FAILED
(v3+), as Kafka's.
"""

from __future__ import annotations

import shutil
from typing import Any

from kemu.broker.authorization import CLUSTER_NAME, AclOperation, ResourceType, authorize
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.cluster.model import Topic
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.describe_log_dirs import DescribeLogDirsRequestView

API_KEY = 35
MEMORY_LOG_DIR = "kemu:memory"


def log_dir_path(ctx: RequestContext) -> str:
    data_dir = ctx.cluster.data_dir
    return str(data_dir.resolve()) if data_dir is not None else MEMORY_LOG_DIR


@handler(API_KEY, 1, 5)
def handle(ctx: RequestContext, request: DescribeLogDirsRequestView) -> Any:
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        # Kafka answers no log dirs, and the error where the version has a field for it
        return ctx.respond(error_code=ErrorCode.cluster_authorization_failed, results=())
    cluster = ctx.cluster
    wanted: list[tuple[Topic, list[int] | None]]
    if request.topics is None:
        wanted = [(topic, None) for topic in cluster.topics.values()]
    else:
        wanted = [
            (cluster.topics[t.topic], list(t.partitions))
            for t in request.topics
            if t.topic in cluster.topics
        ]
    node = ctx.node.node_id
    topics = []
    for topic, indexes in wanted:
        chosen = (
            topic.partitions
            if indexes is None
            else [topic.partitions[i] for i in indexes if 0 <= i < len(topic.partitions)]
        )
        partitions = tuple(
            ctx.make(
                "DescribeLogDirsPartition",
                partition_index=p.index,
                partition_size=p.log.size_bytes,
                offset_lag=0,
                is_future_key=False,
            )
            for p in chosen
            if node in p.replicas
        )
        if partitions:
            topics.append(ctx.make("DescribeLogDirsTopic", name=topic.name, partitions=partitions))
    total, usable = -1, -1
    if cluster.data_dir is not None:
        usage = shutil.disk_usage(cluster.data_dir)
        total, usable = usage.total, usage.free
    result = ctx.make(
        "DescribeLogDirsResult",
        error_code=ErrorCode.none,
        log_dir=log_dir_path(ctx),
        topics=tuple(topics),
        total_bytes=total,
        usable_bytes=usable,
    )
    return ctx.respond(error_code=ErrorCode.none, results=(result,))
