"""Background duties of the broker process: log retention and interval flushing."""

from __future__ import annotations

import asyncio

import structlog

from kemu.cluster.context import Runtime

log = structlog.get_logger("kemu.housekeeping")


def start_housekeeping(runtime: Runtime) -> list[asyncio.Task[None]]:
    loop = asyncio.get_running_loop()
    return [
        loop.create_task(_retention_loop(runtime)),
        loop.create_task(_flush_loop(runtime)),
    ]


def apply_retention(runtime: Runtime) -> None:
    now = runtime.clock_ms()
    for topic in list(runtime.cluster.topics.values()):
        policy = topic.config.get("cleanup.policy") or "delete"
        if "delete" not in policy:
            continue
        retention_ms = topic.config.get_int("retention.ms")
        retention_bytes = topic.config.get_int("retention.bytes")
        for partition in topic.partitions:
            partition.log.enforce_retention(
                now_ms=now, retention_ms=retention_ms, retention_bytes=retention_bytes
            )


async def _retention_loop(runtime: Runtime) -> None:
    interval = runtime.cluster.config.get_int("log.retention.check.interval.ms") / 1000
    while True:
        await asyncio.sleep(interval)
        try:
            apply_retention(runtime)
        except Exception:
            log.exception("retention_failed")


async def _flush_loop(runtime: Runtime) -> None:
    configured = runtime.cluster.config.get_int("log.flush.interval.ms")
    # Kafka leaves flushing to the OS by default; kemu flushes at least once a second so that a
    # SIGKILL loses at most that much unless kemu.log.flush=always.
    interval = min(configured, 1000) / 1000
    while True:
        await asyncio.sleep(interval)
        for partition in list(runtime.cluster.all_partitions()):
            try:
                partition.log.flush()
            except Exception:
                log.exception("flush_failed", topic=partition.topic_name, partition=partition.index)
