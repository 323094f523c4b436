"""Background duties of the broker process: log retention, log compaction and interval flushing
(and, once at start, the dead-letter writes a restart left pending).

The cleaner (``log.cleaner.enable``) goes over the partitions of every topic whose
``cleanup.policy`` has ``compact`` every ``log.cleaner.backoff.ms`` and compacts each one that is
due (``kemu.storage.compaction`` decides which and what stays), yielding to requests between
partitions. Kafka runs it in cleaner threads; here it runs on the event loop.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import structlog

from kemu.cluster.context import Runtime
from kemu.cluster.model import SHARE_STATE_TOPIC, Topic
from kemu.cluster.services import Service
from kemu.config.definitions import TopicConfig

if TYPE_CHECKING:
    from kemu.storage.compaction import CleanResult, CompactionPolicy
    from kemu.storage.recovery_points import RecoveryPoints

# the data directory's recovery points (``KemuServer`` provides them when it has a data dir)
RECOVERY_POINTS: Service[RecoveryPoints] = Service("recovery_points")

log = structlog.get_logger("kemu.housekeeping")


def start_housekeeping(runtime: Runtime) -> list[asyncio.Task[None]]:
    loop = asyncio.get_running_loop()
    tasks = [
        loop.create_task(_retention_loop(runtime)),
        loop.create_task(_flush_loop(runtime)),
        loop.create_task(_cleaner_loop(runtime)),
    ]
    if SHARE_STATE_TOPIC in runtime.cluster.topics:  # else no share partition has state yet
        tasks.append(loop.create_task(_resume_dead_letters(runtime)))
    return tasks


def apply_retention(runtime: Runtime) -> None:
    """Delete what retention lets go, and forget the producers idle for
    ``producer.id.expiration.ms`` (Kafka looks every ``producer.id.expiration.check.interval.ms``,
    10 minutes; kemu with retention, every ``log.retention.check.interval.ms``, 5)."""
    now = runtime.clock_ms()
    producer_expiration_ms = runtime.cluster.config.get_int("producer.id.expiration.ms")
    for topic in list(runtime.cluster.topics.values()):
        for partition in topic.partitions:
            partition.expire_producers(now_ms=now, expiration_ms=producer_expiration_ms)
        policy = topic.config.get("cleanup.policy") or "delete"
        if "delete" not in policy:
            continue
        retention_ms = topic.config.get_int("retention.ms")
        retention_bytes = topic.config.get_int("retention.bytes")
        for partition in topic.partitions:
            partition.log.enforce_retention(
                now_ms=now, retention_ms=retention_ms, retention_bytes=retention_bytes
            )


def compaction_policy(config: TopicConfig) -> CompactionPolicy:
    """A topic's cleaner settings from its configs (and their broker synonyms)."""
    from kemu.storage.compaction import CompactionPolicy  # with the first compacted topic

    return CompactionPolicy(
        delete_retention_ms=config.get_int("delete.retention.ms"),
        min_compaction_lag_ms=config.get_int("min.compaction.lag.ms"),
        max_compaction_lag_ms=config.get_int("max.compaction.lag.ms"),
        min_cleanable_dirty_ratio=config.get_float("min.cleanable.dirty.ratio"),
        producer_expiration_ms=config.broker.get_int("producer.id.expiration.ms"),
        segment_bytes=config.get_int("segment.bytes"),
        max_map_keys=int(
            config.broker.get_int("log.cleaner.dedupe.buffer.size")
            / 24  # Kafka's entry: a 16-byte MD5 of the key and an 8-byte offset
            * config.broker.get_float("log.cleaner.io.buffer.load.factor")
        ),
    )


def _compacted(topic: Topic) -> bool:
    return "compact" in (topic.config.get("cleanup.policy") or "")


async def clean_logs(runtime: Runtime) -> list[CleanResult]:
    """One pass of the cleaner over every compacted partition."""
    results: list[CleanResult] = []
    cluster = runtime.cluster
    for name, topic in list(cluster.topics.items()):
        if not _compacted(topic):
            continue
        policy = compaction_policy(topic.config)
        for partition in list(topic.partitions):
            if cluster.topics.get(name) is not topic:
                break  # deleted (or re-created) meanwhile
            steps = partition.cleaning(now_ms=runtime.clock_ms(), policy=policy)
            try:
                while True:
                    next(steps)
                    await asyncio.sleep(0)  # requests go on between the steps of a cleaning
            except StopIteration as done:
                if done.value is not None:
                    results.append(done.value)
            except Exception:
                log.exception("log_cleaning_failed", topic=name, partition=partition.index)
            await asyncio.sleep(0)
    return results


async def _cleaner_loop(runtime: Runtime) -> None:
    config = runtime.cluster.config
    if not config.get_bool("log.cleaner.enable"):
        return
    while True:
        await asyncio.sleep(config.get_int("log.cleaner.backoff.ms") / 1000)
        try:
            await clean_logs(runtime)
        except Exception:
            log.exception("log_cleaner_failed")


async def _resume_dead_letters(runtime: Runtime) -> None:
    """Once at start: share partitions a restart left with ARCHIVING records write their dead
    letters (KIP-1191) now rather than on their first fetch."""
    from kemu.broker.share.manager import share_partitions

    await asyncio.sleep(0)
    try:
        loaded = await share_partitions(runtime).resume_dead_letters()
        if loaded:
            log.info("dead_letters_resumed", share_partitions=loaded)
    except Exception:
        log.exception("dead_letter_resume_failed")


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
    # as Kafka's log.flush.offset.checkpoint.interval.ms (60 s): a crash rescans what was
    # appended since the last checkpoint
    checkpoint_interval = (
        runtime.cluster.config.get_int("log.flush.offset.checkpoint.interval.ms") / 1000
    )
    loop = asyncio.get_running_loop()
    next_checkpoint = loop.time() + checkpoint_interval
    while True:
        await asyncio.sleep(interval)
        for partition in list(runtime.cluster.all_partitions()):
            try:
                partition.log.flush()
            except Exception:
                log.exception("flush_failed", topic=partition.topic_name, partition=partition.index)
        if loop.time() >= next_checkpoint:
            next_checkpoint = loop.time() + checkpoint_interval
            try:
                checkpoint_recovery_points(runtime)
            except Exception:
                log.exception("recovery_point_checkpoint_failed")


def checkpoint_recovery_points(runtime: Runtime) -> None:
    """Record where each log is synced up to, after a round of flushes (Kafka's
    ``recovery-point-offset-checkpoint``): a restart scans each log from there only."""
    points = runtime.services.built(RECOVERY_POINTS)
    if points is not None:
        points.checkpoint(
            (partition.topic_name, partition.index, recovery_point)
            for partition in runtime.cluster.all_partitions()
            if (recovery_point := getattr(partition.log, "recovery_point", None)) is not None
        )
