"""One-line documentation for configs, returned by DescribeConfigs v3+ (include_documentation).

Written for kemu in its own words; a ``ConfigDef.doc`` in ``definitions.py`` wins over these.
"""

from __future__ import annotations

TOPIC_DOCS: dict[str, str] = {
    "cleanup.policy": "How old log segments are removed: 'delete' by time or size, 'compact' "
    "to keep the latest value per key, or both.",
    "compression.type": "Compression of the topic's data on the broker; 'producer' keeps "
    "whatever codec the producer used.",
    "compression.gzip.level": "Level used when the broker compresses with gzip.",
    "compression.lz4.level": "Level used when the broker compresses with lz4.",
    "compression.zstd.level": "Level used when the broker compresses with zstd.",
    "delete.retention.ms": "How long delete tombstones are kept on compacted topics.",
    "file.delete.delay.ms": "Delay before a deleted segment's files are removed.",
    "flush.messages": "Force an fsync after this many messages.",
    "flush.ms": "Force an fsync after this much time.",
    "follower.replication.throttled.replicas": "Replicas whose follower replication is throttled.",
    "index.interval.bytes": "Bytes between entries of the offset index.",
    "leader.replication.throttled.replicas": "Replicas whose leader-side replication is throttled.",
    "local.retention.bytes": "Local size limit for tiered topics (-2 means retention.bytes).",
    "local.retention.ms": "Local time limit for tiered topics (-2 means retention.ms).",
    "max.compaction.lag.ms": "Longest time a message may stay uncompacted.",
    "max.message.bytes": "Largest record batch the topic accepts.",
    "message.timestamp.after.max.ms": "How far ahead of the broker's clock a CreateTime "
    "timestamp may be.",
    "message.timestamp.before.max.ms": "How far behind the broker's clock a CreateTime "
    "timestamp may be.",
    "message.timestamp.type": "Whether record timestamps are the producer's (CreateTime) or "
    "the broker's append time (LogAppendTime).",
    "min.cleanable.dirty.ratio": "Share of the log that must be uncompacted before the cleaner "
    "runs.",
    "min.compaction.lag.ms": "Shortest time a message stays uncompacted.",
    "min.insync.replicas": "Replicas that must acknowledge an acks=all write.",
    "preallocate": "Preallocate segment files.",
    "remote.log.copy.disable": "Stop copying segments to tiered storage.",
    "remote.log.delete.on.disable": "Delete tiered data when tiering is switched off.",
    "remote.storage.enable": "Keep older segments in tiered storage.",
    "retention.bytes": "Largest size a partition may grow to before old segments are deleted "
    "(-1: no limit).",
    "retention.ms": "How long data is kept before it is deleted (-1: no limit).",
    "segment.bytes": "Size at which a new log segment is rolled.",
    "segment.index.bytes": "Size of a segment's offset index.",
    "segment.jitter.ms": "Random jitter subtracted from segment.ms.",
    "segment.ms": "Age at which a new log segment is rolled.",
    "unclean.leader.election.enable": "Allow replicas outside the ISR to become leader.",
}

BROKER_DOCS: dict[str, str] = {
    "node.id": "The id of this node in the cluster.",
    "broker.id": "The id of this broker (the same as node.id).",
    "process.roles": "The roles this node plays: broker, controller or both.",
    "auto.create.topics.enable": "Create topics that clients ask metadata for when they do not "
    "exist.",
    "num.partitions": "Partitions of a topic created without an explicit count.",
    "default.replication.factor": "Replication factor of a topic created without an explicit one.",
    "offsets.topic.num.partitions": "Partitions of __consumer_offsets.",
    "offsets.topic.replication.factor": "Replication factor of __consumer_offsets.",
    "transaction.state.log.num.partitions": "Partitions of __transaction_state.",
    "transaction.state.log.replication.factor": "Replication factor of __transaction_state.",
    "message.max.bytes": "Largest record batch the broker accepts (topic max.message.bytes "
    "default).",
    "socket.request.max.bytes": "Largest request the broker reads from a socket.",
    "delete.topic.enable": "Whether topics can be deleted.",
    "log.retention.ms": "How long data is kept before it is deleted.",
    "log.retention.minutes": "How long data is kept, in minutes (log.retention.ms wins).",
    "log.retention.hours": "How long data is kept, in hours (log.retention.ms and "
    "log.retention.minutes win).",
    "log.retention.bytes": "Largest size of a partition before old segments are deleted.",
    "log.retention.check.interval.ms": "How often retention is enforced.",
    "log.segment.bytes": "Size at which a new log segment is rolled.",
    "log.roll.ms": "Age at which a new log segment is rolled.",
    "log.roll.hours": "Age at which a new log segment is rolled, in hours (log.roll.ms wins).",
    "log.roll.jitter.ms": "Largest random jitter subtracted from a segment's roll time.",
    "log.roll.jitter.hours": "Largest random jitter subtracted from a segment's roll time, in "
    "hours (log.roll.jitter.ms wins).",
    "log.flush.scheduler.interval.ms": "How often logs are checked for a flush; the flush "
    "interval when log.flush.interval.ms is not set.",
    "log.cleanup.policy": "Default cleanup policy of topics.",
    "log.message.timestamp.type": "Default message.timestamp.type of topics.",
    "log.dirs": "Directories holding the logs.",
    "compression.type": "Default compression.type of topics.",
    "min.insync.replicas": "Default min.insync.replicas of topics.",
    "group.initial.rebalance.delay.ms": "Delay before the first rebalance of a new classic group.",
    "group.min.session.timeout.ms": "Smallest session timeout a consumer may ask for.",
    "group.max.session.timeout.ms": "Largest session timeout a consumer may ask for.",
    "group.share.enable": "Whether share groups are enabled.",
    "group.share.record.lock.duration.ms": "How long a share consumer holds a record before "
    "it is released.",
    "group.share.delivery.count.limit": "Deliveries of a record before it is archived.",
    "transaction.max.timeout.ms": "Largest transaction timeout a producer may ask for.",
    "producer.id.expiration.ms": "How long an idle producer id's state is kept.",
    "listeners": "The addresses this broker listens on.",
    "advertised.listeners": "The addresses this broker gives to clients.",
}
